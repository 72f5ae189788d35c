"""Rollout scheduling benchmark (issue 4, SPEC §4, paper 3.2): static vs dynamic.

    OMP_NUM_THREADS=1 python -m benchmarks.scheduler            # all three parts, ~2 min on 2 cores
    python -m benchmarks.scheduler --only sim --sim-engines 4 8 64
    python -m benchmarks.scheduler --only real --real-trajectories 48

(a) SIMULATED: engines with a KV capacity and a decode cost model, long-tailed response
    lengths, multi-turn tool calls (~0.3 s each); makespan and engine idle share.
(b) MEASURED: the real scheduler, agent loop and hf engines with the tiny model on this
    machine; both schedulers roll out the same trajectories (same seeds, scripted turn
    lengths and tool calls, tool latency from a seeded stub; asserted identical).
(c) MEASURED: hf engine decode tokens/s on the tiny model.
Over 400 lines: one command runs and reports all three parts, which share the workload plans.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny models run many times faster (NOTES.md)

import argparse  # noqa: E402
import asyncio  # noqa: E402
import heapq  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field, replace  # noqa: E402
from pathlib import Path  # noqa: E402

from assets.paths import asset_paths  # noqa: E402
from configs.rollout import RolloutConfig  # noqa: E402
from rollout.engines.base import SamplingParams, build_engines  # noqa: E402
from rollout.prompt import ChatFormat, tool_call_text  # noqa: E402
from rollout.runtime import RolloutRuntime, trajectory_seed  # noqa: E402
from sandbox.types import SandboxResult  # noqa: E402

# ---------------------------------------------------------------- workload (shared)


@dataclass
class Plan:
    """One trajectory's script: generated tokens per assistant turn, feedback tokens and tool latency per call."""

    prompt_tokens: int
    turn_tokens: list[int]
    feedback_tokens: list[int]  # one per turn but the last
    tool_s: list[float]  # one per turn but the last


def make_plans(
    n: int, seed: int, *, max_turns: int, max_response: int, median_tokens: float, prompt: int
) -> list[Plan]:
    """Long-tailed lengths: lognormal total (sigma 1), 1 + geometric turns, lognormal tool latency (mean 0.3 s)."""
    rng = random.Random(seed)
    plans = []
    for _ in range(n):
        turns = 1
        while turns < max_turns and rng.random() < 0.6:
            turns += 1
        total = min(max_response // 2, max(turns * 8, int(rng.lognormvariate(math.log(median_tokens), 1.0))))
        cuts = sorted(rng.random() for _ in range(turns - 1))
        shares = [b - a for a, b in zip([0.0, *cuts], [*cuts, 1.0], strict=True)]
        plans.append(
            Plan(
                prompt_tokens=prompt + rng.randint(-prompt // 4, prompt // 4),
                turn_tokens=[max(8, int(total * s)) for s in shares],
                feedback_tokens=[rng.randint(20, 120) for _ in range(turns - 1)],
                tool_s=[rng.lognormvariate(math.log(0.3) - 0.125, 0.5) for _ in range(turns - 1)],
            )
        )
    return plans


# ---------------------------------------------------------------- (a) simulation


@dataclass
class SimEngine:
    capacity: int
    rows: dict[int, list[int]] = field(default_factory=dict)  # trajectory -> [tokens left this turn, context]
    waiting: list[int] = field(default_factory=list)  # static: requests waiting for KV room
    t_last: float = 0.0
    step_s: float = 0.0
    busy_s: float = 0.0
    version: int = 0
    retractions: int = 0


class Simulation:
    """Event-driven: an engine's batch advances in runs of equal steps between composition changes."""

    def __init__(self, plans: list[Plan], engines: int, capacity: int, max_response: int, args) -> None:
        self.plans, self.max_response, self.args = plans, max_response, args
        self.engines = [SimEngine(capacity) for _ in range(engines)]
        self.events: list[tuple[float, int, str, int, int]] = []
        self.turn = [0] * len(plans)
        self.context = [p.prompt_tokens for p in plans]
        self.pinned = [-1] * len(plans)
        self.now, self.seq, self.done = 0.0, 0, 0

    def push(self, t: float, kind: str, a: int, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, a, b))

    def step_time(self, e: SimEngine) -> float:
        kv = sum(ctx for _, ctx in e.rows.values())
        return self.args.step_base_s + self.args.step_per_kv_token_s * kv

    def advance(self, e: SimEngine) -> None:
        if e.rows:
            steps = min(int((self.now - e.t_last) / e.step_s + 1e-9), min(r[0] for r in e.rows.values()))
            for r in e.rows.values():
                r[0] -= steps
                r[1] += steps
            e.busy_s += steps * e.step_s
            e.t_last += steps * e.step_s
        else:
            e.t_last = self.now

    def join(self, k: int, engine: int, prefill_tokens: int) -> None:
        e = self.engines[engine]
        self.advance(e)
        kv = sum(ctx for _, ctx in e.rows.values())
        if self.args.scheduler == "static" and kv + self.context[k] > e.capacity and e.rows:
            e.waiting.append(k)  # SGLang-like admission: wait until the running rows leave room
            return
        stall = prefill_tokens / self.args.prefill_tokens_per_s  # prefill holds the whole batch
        e.t_last = max(e.t_last, self.now) + stall
        e.busy_s += stall
        e.rows[k] = [self.plans[k].turn_tokens[self.turn[k]], self.context[k]]
        self.reschedule(engine)

    def reschedule(self, engine: int) -> None:
        e = self.engines[engine]
        e.version += 1
        if not e.rows:
            return
        e.step_s = self.step_time(e)
        steps = min(r[0] for r in e.rows.values())
        kv, n = sum(r[1] for r in e.rows.values()), len(e.rows)
        if self.args.scheduler == "static" and kv + n * steps > e.capacity:
            steps = max(1, (e.capacity - kv) // n)  # the batch outgrows the cache: an overflow event
        self.push(e.t_last + steps * e.step_s, "engine", engine, e.version)

    def on_engine(self, engine: int, version: int) -> None:
        e = self.engines[engine]
        if version != e.version:
            return
        self.advance(e)
        for k in [k for k, r in e.rows.items() if r[0] <= 0]:
            self.context[k] = e.rows.pop(k)[1]
            self.turn_done(k)
        kv = sum(r[1] for r in e.rows.values())
        while e.rows and kv > e.capacity:  # SGLang retracts the newest request and recomputes it later
            k = next(reversed(e.rows))
            e.rows.pop(k)
            e.waiting.insert(0, k)
            e.retractions += 1
            kv = sum(r[1] for r in e.rows.values())
        while e.waiting and kv + self.context[e.waiting[0]] <= e.capacity:
            k = e.waiting.pop(0)
            self.join(k, engine, self.context[k])  # recompute: its cached prefix is gone
            kv = sum(r[1] for r in e.rows.values())
        self.reschedule(engine)

    def turn_done(self, k: int) -> None:
        plan = self.plans[k]
        last = self.turn[k] == len(plan.turn_tokens) - 1
        if last:
            self.finish(k)
        if self.args.scheduler == "dynamic":
            if not last:
                self.push(self.now + plan.tool_s[self.turn[k]], "tool", k)
        else:
            self.barrier_left -= 1
            if self.barrier_left == 0:
                self.static_tools()

    def on_tool(self, k: int) -> None:
        self.context[k] += self.plans[k].feedback_tokens[self.turn[k]]
        self.turn[k] += 1
        if self.args.scheduler == "dynamic":
            self.join(k, self.pinned[k], self.plans[k].feedback_tokens[self.turn[k] - 1])
        else:
            self.barrier_left -= 1
            if self.barrier_left == 0:
                self.static_turn()

    def finish(self, k: int) -> None:
        self.done += 1
        if self.args.scheduler == "dynamic":
            self.free[self.pinned[k]] += self.need[k]
            self.admit()

    # dynamic: reserve prompt + max response on the engine with the most free budget, FIFO
    def admit(self) -> None:
        while self.queue:
            k = self.queue[0]
            best = max(range(len(self.free)), key=lambda i: (self.free[i], -i))
            if self.free[best] < self.need[k]:
                return
            self.queue.pop(0)
            self.free[best] -= self.need[k]
            self.pinned[k] = best
            self.join(k, best, self.context[k])

    # static: even split, every turn waits for all
    def static_turn(self) -> None:
        self.active = [k for k in self.active if self.turn[k] < len(self.plans[k].turn_tokens)]
        self.barrier_left = len(self.active)
        for k in self.active:
            self.join(
                k,
                self.pinned[k],
                self.context[k] if self.turn[k] == 0 else self.plans[k].feedback_tokens[self.turn[k] - 1],
            )

    def static_tools(self) -> None:
        calling = [k for k in self.active if self.turn[k] < len(self.plans[k].turn_tokens) - 1]
        self.active = calling
        self.barrier_left = len(calling)
        for k in calling:
            self.push(self.now + self.plans[k].tool_s[self.turn[k]], "tool", k)

    def run(self) -> dict:
        n, e = len(self.plans), len(self.engines)
        if self.args.scheduler == "dynamic":
            self.need = [p.prompt_tokens + self.max_response for p in self.plans]
            self.free = [eng.capacity for eng in self.engines]
            self.queue = list(range(n))
            self.admit()
        else:
            chunk = -(-n // e)
            self.pinned = [k // chunk for k in range(n)]
            self.active = list(range(n))
            self.static_turn()
        while self.events:
            self.now, _, kind, a, b = heapq.heappop(self.events)
            if kind == "engine":
                self.on_engine(a, b)
            else:
                self.on_tool(a)
        assert self.done == n, (self.done, n)
        idle = sum(1 - eng.busy_s / self.now for eng in self.engines) / e
        return {"makespan_s": self.now, "idle": idle, "retractions": sum(eng.retractions for eng in self.engines)}


def run_simulation(args) -> list[str]:
    lines = [
        "(a) SIMULATED  static vs dynamic, engines with KV capacity and a decode cost model",
        f"    {args.sim_per_engine} trajectories per engine, KV {args.sim_kv_tokens} tokens/engine, max response "
        f"{args.sim_max_response}, median {args.sim_median_tokens} generated tokens, up to {args.sim_max_turns} "
        f"turns, tool latency mean 0.3 s; step = {args.step_base_s} s + {args.step_per_kv_token_s:g} s x KV tokens",
        "    engines | static makespan | dynamic makespan | speedup | static idle | dynamic idle | retractions",
    ]
    for engines in args.sim_engines:
        plans = make_plans(
            engines * args.sim_per_engine,
            args.seed,
            max_turns=args.sim_max_turns,
            max_response=args.sim_max_response,
            median_tokens=args.sim_median_tokens,
            prompt=400,
        )
        out = {}
        for name in ("static", "dynamic"):
            out[name] = Simulation(
                plans, engines, args.sim_kv_tokens, args.sim_max_response, replace_ns(args, scheduler=name)
            ).run()
        s, d = out["static"], out["dynamic"]
        lines.append(
            f"    {engines:7d} | {s['makespan_s']:13.1f} s | {d['makespan_s']:14.1f} s | "
            f"{s['makespan_s'] / d['makespan_s']:6.2f}x | {s['idle']:10.1%} | {d['idle']:11.1%} | "
            f"{s['retractions']}"
        )
    return lines


def replace_ns(ns: argparse.Namespace, **changes) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(ns), **changes})


# ---------------------------------------------------------------- (b) real run, (c) tokens/s


def tool_key(seed: int, turn: int) -> str:
    return f"print('{seed}:{turn}')"


class PlannedEngine:
    """Wraps a real hf engine: decodes exactly the planned number of tokens per turn (real compute),
    then ends the turn with a tool call (or the answer) so the agent loop follows the plan."""

    def __init__(self, inner, fmt, plans: dict[int, Plan]) -> None:
        self.inner, self.fmt, self.plans = inner, fmt, plans
        self.answer = fmt.encode("<answer> \\boxed{1} </answer>") + [fmt.end_of_turn_id]
        # A random model emits <tool_call> or <|im_end|> now and then: keep its tokens but not those.
        self.reserved = set(fmt.tokenizer.added_tokens_decoder)
        self.filler = fmt.encode(" a")[-1]

    async def generate(self, prompt_ids, params):
        base = max(s for s in self.plans if s <= params.seed)  # trajectory seed; turn k sends seed + k
        plan, turn = self.plans[base], params.seed - base
        call = self.fmt.encode(tool_call_text(tool_key(base, turn))) + [self.fmt.end_of_turn_id]
        suffix = self.answer if turn == len(plan.turn_tokens) - 1 else call
        n = min(params.max_new_tokens, max(plan.turn_tokens[turn], len(suffix) + 1))
        result = await self.inner.generate(prompt_ids, replace(params, max_new_tokens=n, stop_token_ids=()))
        ids = [self.filler if t in self.reserved else t for t in result.output_ids[: n - len(suffix)]] + suffix
        return type(result)(ids, result.logprobs[: len(ids)], "stop")

    def kv_capacity_tokens(self) -> int:
        return self.inner.kv_capacity_tokens()


async def run_real_once(args, assets, fmt, batching: str, scheduler: str):
    """One rollout of the planned trajectories; returns (makespan s, engine idle share, tokens, response ids)."""
    cfg = RolloutConfig(
        scheduler=scheduler,
        hf_engines=args.real_engines,
        hf_batching=batching,
        hf_kv_capacity_tokens=args.real_kv_tokens,
    )
    n = args.real_trajectories
    plans = make_plans(
        n, args.seed, max_turns=4, max_response=args.real_max_response, median_tokens=args.real_median_tokens, prompt=0
    )
    by_seed = {trajectory_seed(args.seed, i, 0): plan for i, plan in enumerate(plans)}
    engines = [PlannedEngine(e, fmt, by_seed) for e in build_engines(cfg, assets.model)]
    latencies = {tool_key(s, k): p.tool_s[k] for s, p in by_seed.items() for k in range(len(p.tool_s))}
    runtime = RolloutRuntime(cfg, fmt, engines, PerCallTools(latencies))
    start = time.perf_counter()
    groups = await runtime.rollout([f"problem {i}" for i in range(n)], 1, 4, args.real_max_response, 1.0, args.seed)
    makespan = time.perf_counter() - start
    busy = [e.inner.stats.busy_s for e in engines]
    for e in engines:
        await e.inner.aclose()
    trajectories = [t for g in groups for t in g]
    idle = 1 - sum(busy) / (len(busy) * makespan)
    return makespan, idle, sum(t.generated_tokens for t in trajectories), [t.response_ids for t in trajectories]


async def run_real(args, assets) -> list[str]:
    from transformers import AutoTokenizer

    fmt = ChatFormat(AutoTokenizer.from_pretrained(assets.tokenizer))
    lines = [
        f"(b) MEASURED  static vs dynamic on this machine: {args.real_engines} hf engines x tiny model, "
        f"{args.real_trajectories} trajectories (same seeds and turn plans), tool latency stub mean 0.3 s, "
        f"best of {args.real_repeats} alternating runs (the machine is shared: runs are noisy)",
        "    batching   | static makespan | dynamic makespan | speedup | static idle | dynamic idle | tokens",
    ]
    for batching in args.real_batching:
        best: dict[str, tuple] = {}
        for _ in range(args.real_repeats):
            for name in ("static", "dynamic"):
                run = await run_real_once(args, assets, fmt, batching, name)
                if name not in best or run[0] < best[name][0]:
                    best[name] = run
        (s, si, tok, s_ids), (d, di, _, d_ids) = best["static"], best["dynamic"]
        assert s_ids == d_ids, "schedulers produced different trajectories"
        lines.append(
            f"    {batching:10s} | {s:13.1f} s | {d:14.1f} s | {s / d:6.2f}x | {si:10.1%} | {di:11.1%} | {tok}"
        )
    lines.append("    identical trajectories under both schedulers: yes (asserted)")
    return lines


class PerCallTools:
    """Stub sandbox: each call sleeps its planned latency (keyed by trajectory seed and turn)."""

    def __init__(self, latency: dict[str, float]) -> None:
        self.latency = latency

    async def run_batch(self, calls):
        delays = [self.latency[c.code] for c in calls]
        await asyncio.sleep(max(delays))
        return [SandboxResult(status="ok", feedback="1") for _ in calls]


def tokens_per_second(args, assets) -> list[str]:
    import torch

    from rollout.engines.decode_batch import decode_batch
    from rollout.engines.hf import load_model

    torch.set_num_threads(1)
    model = load_model(assets.model, "float32")
    lines = [
        f"(c) MEASURED  hf engine decode, tiny model, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
        f"prompt 64 + {args.tps_new_tokens} new tokens per row"
    ]
    for batch in args.tps_batches:
        prompts = [[random.Random(i).randrange(100, 4000) for _ in range(64)] for i in range(batch)]
        params = [SamplingParams(args.tps_new_tokens, seed=i) for i in range(batch)]
        decode_batch(model, prompts[:1], params[:1], 0)  # warm-up
        start = time.perf_counter()
        decode_batch(model, prompts, params, 0)
        elapsed = time.perf_counter() - start
        lines.append(f"    batch {batch:3d}: {batch * args.tps_new_tokens / elapsed:8.0f} tokens/s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["sim", "real", "tps"], nargs="*", default=["sim", "real", "tps"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sim-engines", type=int, nargs="*", default=[4, 8, 64])
    parser.add_argument("--sim-per-engine", type=int, default=64)
    parser.add_argument("--sim-kv-tokens", type=int, default=262144)  # ~45 GB KV of Qwen3-14B on an 80 GB GPU
    parser.add_argument("--sim-max-response", type=int, default=8192)
    parser.add_argument("--sim-median-tokens", type=float, default=1500)
    parser.add_argument("--sim-max-turns", type=int, default=10)
    parser.add_argument("--step-base-s", type=float, default=0.012)  # 14B weights read once per step
    parser.add_argument("--step-per-kv-token-s", type=float, default=5.5e-8)  # 164 KB/token at ~3 TB/s
    parser.add_argument("--prefill-tokens-per-s", type=float, default=20000)
    parser.add_argument("--real-engines", type=int, default=2)
    parser.add_argument("--real-trajectories", type=int, default=32)
    parser.add_argument("--real-max-response", type=int, default=1024)
    parser.add_argument("--real-median-tokens", type=float, default=60)
    parser.add_argument("--real-kv-tokens", type=int, default=65536)
    parser.add_argument("--real-batching", nargs="*", default=["continuous", "padded"])
    parser.add_argument("--real-repeats", type=int, default=2)
    parser.add_argument("--tps-batches", type=int, nargs="*", default=[1, 8, 32, 64])
    parser.add_argument("--tps-new-tokens", type=int, default=128)
    parser.add_argument("--assets-dir", default=str(Path(".rstar/test-cache")), help="artifact store with assets")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    lines: list[str] = []
    if "sim" in args.only:
        lines += run_simulation(args)
    if {"real", "tps"} & set(args.only):
        assets = find_assets(args.assets_dir)
        if "real" in args.only:
            lines += asyncio.run(run_real(args, assets))
        if "tps" in args.only:
            lines += tokens_per_second(args, assets)
    print("\n".join(lines))  # noqa: T201 - a benchmark's report is its output


def find_assets(root: str):
    """The tiny model and tokenizer: built (or reused) through the artifact store, like the tests."""
    from configs.schema import PipelineConfig
    from pipeline.runner import run_stage
    from pipeline.stages import get_stage
    from pipeline.store import ArtifactStore

    store = ArtifactStore(root)
    return asset_paths(store.local_path(run_stage(get_stage("assets"), PipelineConfig(), {}, store)))


if __name__ == "__main__":
    main()
