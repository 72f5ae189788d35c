"""Rollout scheduling benchmark (issue 4, SPEC §4, paper 3.2): static vs dynamic.

    OMP_NUM_THREADS=1 python -m benchmarks.scheduler            # all three parts, under 2 min on 2 cores
    python -m benchmarks.scheduler --only sim --sim-engines 4 8 64
    python -m benchmarks.scheduler --only real --real-repeats 5

(a) SIMULATED (benchmarks/scheduler_sim.py): engines with a KV capacity and a decode cost
    model, long-tailed response lengths, multi-turn tool calls (~0.3 s each); static vs
    dynamic with worst-case and per-turn KV reservations: makespan, trajectories in flight,
    engine idle share, retractions.
(b) MEASURED: the real runtime, schedulers, agent loop and hf engines with the tiny model
    on this machine, each comparison repeated with its spread: static vs dynamic, and
    worst-case vs per-turn reservation at the evaluation budget. The runs roll out the
    same plans (seeds, turn lengths, tool calls; tool latency from a seeded stub); the
    trajectories' shapes are asserted equal, token ids are not (see _compare).
(c) MEASURED: hf engine decode tokens/s on the tiny model.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny models run many times faster (NOTES.md)

import argparse  # noqa: E402
import asyncio  # noqa: E402
import logging  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402
from pathlib import Path  # noqa: E402

from assets.paths import asset_paths  # noqa: E402
from benchmarks.scheduler_sim import Plan, make_plans, run_simulation  # noqa: E402
from configs.rollout import RolloutConfig  # noqa: E402
from rollout.engines.base import SamplingParams, build_engines  # noqa: E402
from rollout.groups import Problem  # noqa: E402
from rollout.prompt import ChatFormat, tool_call_text  # noqa: E402
from rollout.runtime import RolloutRuntime, trajectory_seed  # noqa: E402
from sandbox.types import SandboxResult, VerifyResult  # noqa: E402

# ---------------------------------------------------------------- (b) real run, (c) tokens/s


def tool_key(seed: int, turn: int) -> str:
    return f"print('{seed}:{turn}')"


class PlannedEngine:
    """Wraps a real hf engine: decodes exactly the planned number of tokens per turn (real compute),
    then ends the turn with a tool call (or the answer) so the agent loop follows the plan.
    Logs (trajectory seed, start, end) of every request, to count trajectories in flight."""

    def __init__(self, inner, fmt, plans: dict[int, Plan], log: list, index: int) -> None:
        self.inner, self.fmt, self.plans, self.log, self.index = inner, fmt, plans, log, index
        self.answer = fmt.encode("<answer> \\boxed{1} </answer>") + [fmt.end_of_turn_id]
        # A random model emits <tool_call> or <|im_end|> now and then: keep its tokens but not those.
        self.reserved = set(fmt.tokenizer.added_tokens_decoder)
        self.filler = fmt.encode(" a")[-1]

    async def generate(self, prompt_ids, params):
        start = time.perf_counter()
        base = max(s for s in self.plans if s <= params.seed)  # trajectory seed; turn k sends seed + k
        plan, turn = self.plans[base], params.seed - base
        call = self.fmt.encode(tool_call_text(tool_key(base, turn))) + [self.fmt.end_of_turn_id]
        suffix = self.answer if turn == len(plan.turn_tokens) - 1 else call
        n = min(params.max_new_tokens, max(plan.turn_tokens[turn], len(suffix) + 1))
        inner = replace(params, max_new_tokens=n, stop_token_ids=(), ignore_eos=True)
        result = await self.inner.generate(prompt_ids, inner)
        ids = [self.filler if t in self.reserved else t for t in result.output_ids[: n - len(suffix)]] + suffix
        self.log.append((self.index, base, start, time.perf_counter()))
        return type(result)(ids, result.logprobs[: len(ids)], "stop", ids[-1])

    def kv_capacity_tokens(self) -> int:
        return self.inner.kv_capacity_tokens()


@dataclass
class RealRun:
    makespan_s: float
    idle: float  # 1 - decode time / (engines x makespan)
    tokens: int
    in_flight_mean: float  # trajectories between their first request and their last answer, per engine
    in_flight_peak: int  # most at once on one engine
    shapes: list[tuple]  # per trajectory: turns, tool calls, tokens per span of the loss mask
    ids: list[list[int]]


def _in_flight(log: list[tuple[int, int, float, float]], engines: int, makespan: float) -> tuple[float, int]:
    spans: dict[int, list] = {}
    for engine, seed, start, end in log:
        span = spans.setdefault(seed, [engine, start, end])
        span[1], span[2] = min(span[1], start), max(span[2], end)
    mean = sum(b - a for _, a, b in spans.values()) / (engines * makespan)
    peak = max(sum(e == f and a <= t < b for e, a, b in spans.values()) for f, t, _ in spans.values())
    return mean, peak


def _shape(t) -> tuple:
    spans, run, last = [], 0, None
    for m in t.loss_mask:
        if m != last and last is not None:
            spans.append((last, run))
            run = 0
        run, last = run + 1, m
    spans.append((last, run))
    return t.num_turns, len(t.tool_calls), t.finish_reason, tuple(spans)


async def run_real_once(args, assets, fmt, *, scheduler: str, reservation: str) -> RealRun:
    """One rollout of the planned trajectories on hf engines with the tiny model."""
    cfg = RolloutConfig(
        scheduler=scheduler,
        kv_reservation=reservation,
        hf_engines=args.real_engines,
        hf_kv_capacity_tokens=args.real_kv_tokens,
    )
    n = args.real_trajectories
    # Turn lengths come from a short plan (a long-tailed 2,000-token turn would dominate a
    # CPU run); the response budget is the evaluation's, which is what the reservation sees.
    plans = make_plans(n, args.seed, max_turns=4, max_response=1024, median_tokens=args.real_median_tokens, prompt=0)
    by_seed = {trajectory_seed(args.seed, i, 0): plan for i, plan in enumerate(plans)}
    log: list[tuple[int, int, float, float]] = []
    engines = [PlannedEngine(e, fmt, by_seed, log, k) for k, e in enumerate(build_engines(cfg, assets.model))]
    latencies = {tool_key(s, k): p.tool_s[k] for s, p in by_seed.items() for k in range(len(p.tool_s))}
    runtime = RolloutRuntime(cfg, fmt, engines, PerCallTools(latencies))
    settings = cfg.sampling(1.0, args.real_max_response, max_turns=4, seed=args.seed)
    groups = await runtime.sample_and_score([Problem(f"problem {i}", "0") for i in range(n)], 1, settings)
    makespan = groups.rollout_s  # generation and tool calls; the planned answers need no verification
    busy = [e.inner.stats.busy_s for e in engines]
    for e in engines:
        await e.inner.aclose()
    flat = [t for g in groups for t in g]
    assert not groups.failed, dict(groups.failures)
    mean, peak = _in_flight(log, len(engines), makespan)
    return RealRun(
        makespan,
        1 - sum(busy) / (len(busy) * makespan),
        sum(t.generated_tokens for t in flat),
        mean,
        peak,
        [_shape(t) for t in flat],
        [t.response_ids for t in flat],
    )


SETTINGS = {
    "static": {"scheduler": "static", "reservation": "per_turn"},
    "worst-case": {"scheduler": "dynamic", "reservation": "worst_case"},
    "per-turn": {"scheduler": "dynamic", "reservation": "per_turn"},
}


def _spread(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.2f}x (runs {min(ratios):.2f}-{max(ratios):.2f}x)"


async def run_real(args, assets) -> list[str]:
    from transformers import AutoTokenizer

    fmt = ChatFormat(AutoTokenizer.from_pretrained(assets.tokenizer))
    n, e, reps = args.real_trajectories, args.real_engines, args.real_repeats
    runs: dict[str, list[RealRun]] = {name: [] for name in SETTINGS}
    for _ in range(reps):  # alternate, so load changes on the shared machine hit every setting alike
        for name, setting in SETTINGS.items():
            runs[name].append(await run_real_once(args, assets, fmt, **setting))
    all_runs = [r for rs in runs.values() for r in rs]
    # Token ids are not compared: a row's float results depend on its batch neighbours, so a
    # sampled token can flip between runs. What each trajectory did (turns, calls, span
    # lengths, finish) follows the plan and must not depend on the scheduler.
    assert len({tuple(r.shapes) for r in all_runs}) == 1, "the settings rolled out different trajectory shapes"
    same_ids = min(sum(x == y for x, y in zip(all_runs[0].ids, r.ids, strict=True)) for r in all_runs)
    med = statistics.median
    lines = [
        f"(b) MEASURED  {e} hf engines x tiny model, {n} trajectories (same seeds and turn plans, up to 4 turns), "
        f"response budget {args.real_max_response} (evaluation), KV budget {args.real_kv_tokens} tokens/engine, "
        f"tool latency stub mean 0.3 s; {reps} alternating runs of each setting (shared machine: noisy)",
        "    setting    | makespan (median, runs)  | engine idle | in flight/engine mean (peak)",
    ]
    for name, rs in runs.items():
        times = sorted(r.makespan_s for r in rs)
        lines.append(
            f"    {name:10s} | {med(times):5.1f} s ({times[0]:.1f}-{times[-1]:.1f} s) "
            f"| {med(r.idle for r in rs):10.0%} "
            f"| {med(r.in_flight_mean for r in rs):4.1f} ({max(r.in_flight_peak for r in rs)})"
        )
    turn = runs["per-turn"]
    for name in ("static", "worst-case"):
        ratios = [a.makespan_s / b.makespan_s for a, b in zip(runs[name], turn, strict=True)]
        lines.append(f"    makespan {name} / per-turn: {_spread(ratios)}")
    lines.append(
        f"    {all_runs[0].tokens} generated tokens per run; trajectory shapes (turns, calls, span lengths, finish) "
        f"equal in every run (asserted); token-identical in all runs: {same_ids}/{n} (batch composition changes "
        "float results, so a sampled token can flip)"
    )
    return lines


class PerCallTools:
    """Stub sandbox: each call sleeps its planned latency (keyed by trajectory seed and turn)."""

    def __init__(self, latency: dict[str, float]) -> None:
        self.latency = latency

    async def run_batch(self, calls):
        delays = [self.latency[c.code] for c in calls]
        await asyncio.sleep(max(delays))
        return [SandboxResult(status="ok", feedback="1") for _ in calls]

    async def verify_batch(self, pairs):
        return [VerifyResult(score=0.0, status="ok") for _ in pairs]  # planned turns never answer right


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
    parser.add_argument("--sim-engines", type=int, nargs="*", default=[4, 64])
    parser.add_argument("--sim-per-engine", type=int, default=64)
    parser.add_argument("--sim-kv-tokens", type=int, default=262144)  # ~45 GB KV of Qwen3-14B on an 80 GB GPU
    parser.add_argument("--sim-max-response", type=int, nargs="*", default=[8192, 30000])  # RL, evaluation
    parser.add_argument("--sim-turn-reserve", type=int, default=RolloutConfig().kv_turn_reserve_tokens)
    parser.add_argument("--sim-median-tokens", type=float, default=1500)
    parser.add_argument("--sim-max-turns", type=int, default=10)
    parser.add_argument("--step-base-s", type=float, default=0.012)  # 14B weights read once per step
    parser.add_argument("--step-per-kv-token-s", type=float, default=5.5e-8)  # 164 KB/token at ~3 TB/s
    parser.add_argument("--prefill-tokens-per-s", type=float, default=20000)
    parser.add_argument("--real-engines", type=int, default=2)
    parser.add_argument("--real-trajectories", type=int, default=24)
    parser.add_argument("--real-max-response", type=int, default=30000)
    parser.add_argument("--real-median-tokens", type=float, default=60)
    parser.add_argument("--real-kv-tokens", type=int, default=RolloutConfig().hf_kv_capacity_tokens)
    parser.add_argument("--real-repeats", type=int, default=3)
    parser.add_argument("--tps-batches", type=int, nargs="*", default=[1, 64])
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
    from orchestrator.runner import run_stage
    from orchestrator.stages import get_stage
    from orchestrator.store import ArtifactStore

    store = ArtifactStore(root)
    return asset_paths(store.local_path(run_stage(get_stage("assets"), PipelineConfig(), {}, store)))


if __name__ == "__main__":
    main()
