"""Part (a) of benchmarks.scheduler: an event-driven model of engines under three schedulers.

static:      even split, every turn and every tool phase waits for all (the baseline).
worst_case:  dynamic, a trajectory reserves prompt + max response on the most free engine
             at its first turn, pinned, released at its end (SPEC §4 as first written).
per_turn:    dynamic, a trajectory holds its context plus, while a turn runs, up to
             `turn_reserve` tokens (rollout.scheduler with kv_reservation: per_turn).
Engines behave like SGLang whatever the scheduler: a request waits when the running rows
leave no KV room, and when the running rows outgrow the cache the newest is retracted and
recomputed later. A decode step costs step_base_s + step_per_kv_token_s x KV tokens in
the batch; a prefill stalls the batch for its tokens / prefill_tokens_per_s.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field


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


@dataclass
class SimEngine:
    capacity: int
    rows: dict[int, list[int]] = field(default_factory=dict)  # trajectory -> [tokens left this turn, context]
    waiting: list[int] = field(default_factory=list)  # requests waiting for KV room inside the engine
    t_last: float = 0.0
    step_s: float = 0.0
    busy_s: float = 0.0
    version: int = 0
    retractions: int = 0
    # scheduler side (dynamic): reserved tokens, turns holding a reservation, pinned turns waiting
    reserved: int = 0
    running: int = 0
    turn_queue: deque = field(default_factory=deque)
    in_flight: int = 0  # trajectories pinned here and not finished
    in_flight_area: float = 0.0  # integral of in_flight over time
    in_flight_peak: int = 0
    t_count: float = 0.0


@dataclass(frozen=True)
class CostModel:
    step_base_s: float
    step_per_kv_token_s: float
    prefill_tokens_per_s: float


class Simulation:
    """Event-driven: an engine's batch advances in runs of equal steps between composition changes."""

    def __init__(
        self, plans: list[Plan], engines: int, capacity: int, max_response: int, mode: str, cost: CostModel,
        turn_reserve: int = 2048,
    ) -> None:
        self.plans, self.max_response, self.mode, self.cost = plans, max_response, mode, cost
        self.turn_reserve = turn_reserve
        self.engines = [SimEngine(capacity) for _ in range(engines)]
        self.events: list[tuple[float, int, str, int, int]] = []
        self.turn = [0] * len(plans)
        self.context = [p.prompt_tokens for p in plans]
        self.generated = [0] * len(plans)  # response tokens so far, feedback included
        self.holding = [0] * len(plans)  # tokens reserved by each trajectory
        self.pinned = [-1] * len(plans)
        self.now, self.seq, self.done = 0.0, 0, 0
        self.queue: deque[int] = deque()

    def push(self, t: float, kind: str, a: int, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, a, b))

    # ------------------------------------------------------------ engines (SGLang-like)
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
        if kv + self.context[k] > e.capacity and e.rows:
            e.waiting.append(k)  # SGLang admission: wait until the running rows leave room
            return
        stall = prefill_tokens / self.cost.prefill_tokens_per_s  # prefill holds the whole batch
        e.t_last = max(e.t_last, self.now) + stall
        e.busy_s += stall
        e.rows[k] = [self.plans[k].turn_tokens[self.turn[k]], self.context[k]]
        self.reschedule(engine)

    def reschedule(self, engine: int) -> None:
        e = self.engines[engine]
        e.version += 1
        if not e.rows:
            return
        kv, n = sum(r[1] for r in e.rows.values()), len(e.rows)
        e.step_s = self.cost.step_base_s + self.cost.step_per_kv_token_s * kv
        steps = min(r[0] for r in e.rows.values())
        if kv + n * steps > e.capacity:
            steps = max(1, (e.capacity - kv) // n)  # the batch outgrows the cache: an overflow event
        self.push(e.t_last + steps * e.step_s, "engine", engine, e.version)

    def on_engine(self, engine: int, version: int) -> None:
        e = self.engines[engine]
        if version != e.version:
            return
        self.advance(e)
        for k in [k for k, r in e.rows.items() if r[0] <= 0]:
            self.context[k] = e.rows.pop(k)[1]
            self.generated[k] += self.plans[k].turn_tokens[self.turn[k]]
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

    # ------------------------------------------------------------ trajectories
    def turn_done(self, k: int) -> None:
        plan = self.plans[k]
        last = self.turn[k] == len(plan.turn_tokens) - 1
        if self.mode == "per_turn":  # keep the context, give back the turn's allowance
            e = self.engines[self.pinned[k]]
            e.reserved += self.context[k] - self.holding[k]
            self.holding[k] = self.context[k]
            e.running -= 1
        if last:
            self.finish(k)
        if self.mode != "static":
            if not last:
                self.push(self.now + plan.tool_s[self.turn[k]], "tool", k)
            self.wake(self.pinned[k])
        else:
            self.barrier_left -= 1
            if self.barrier_left == 0:
                self.static_tools()

    def on_tool(self, k: int) -> None:
        feedback = self.plans[k].feedback_tokens[self.turn[k]]
        self.context[k] += feedback
        self.generated[k] += feedback
        self.turn[k] += 1
        if self.mode == "worst_case":
            self.join(k, self.pinned[k], feedback)
        elif self.mode == "per_turn":
            self.engines[self.pinned[k]].turn_queue.append(k)
            self.wake(self.pinned[k])
        else:
            self.barrier_left -= 1
            if self.barrier_left == 0:
                self.static_turn()

    def allowance(self, k: int) -> int:
        return min(self.max_response - self.generated[k], self.turn_reserve)

    def count(self, e: SimEngine, delta: int) -> None:
        e.in_flight_area += e.in_flight * (self.now - e.t_count)
        e.t_count = self.now
        e.in_flight += delta
        e.in_flight_peak = max(e.in_flight_peak, e.in_flight)

    def finish(self, k: int) -> None:
        self.done += 1
        if self.mode == "static":
            return
        e = self.engines[self.pinned[k]]
        e.reserved -= self.holding[k]
        if self.mode == "worst_case":
            e.running -= 1
        self.count(e, -1)

    def wake(self, engine: int) -> None:
        """Start pinned turns that fit (or run alone), then admit new trajectories."""
        e = self.engines[engine]
        while e.turn_queue:
            k = e.turn_queue[0]
            extra = self.context[k] + self.allowance(k) - self.holding[k]
            if e.reserved + extra > e.capacity and e.running > 0:
                break
            e.turn_queue.popleft()
            e.reserved += extra
            self.holding[k] += extra
            e.running += 1
            self.join(k, engine, self.plans[k].feedback_tokens[self.turn[k] - 1])
        self.admit()

    def admit(self) -> None:
        while self.queue:
            k = self.queue[0]
            need = self.context[k] + (self.max_response if self.mode == "worst_case" else self.allowance(k))
            fits = [
                i
                for i, e in enumerate(self.engines)
                if not e.turn_queue and (e.reserved + need <= e.capacity or e.reserved == 0)
            ]
            if not fits:
                return
            best = max(fits, key=lambda i: (self.engines[i].capacity - self.engines[i].reserved, -i))
            self.queue.popleft()
            e = self.engines[best]
            e.reserved += need
            e.running += 1
            self.holding[k] = need
            self.pinned[k] = best
            self.count(e, +1)
            self.join(k, best, self.context[k])

    def static_turn(self) -> None:
        self.active = [k for k in self.active if self.turn[k] < len(self.plans[k].turn_tokens)]
        self.barrier_left = len(self.active)
        for k in self.active:
            first = self.turn[k] == 0
            self.join(k, self.pinned[k], self.context[k] if first else self.plans[k].feedback_tokens[self.turn[k] - 1])

    def static_tools(self) -> None:
        calling = [k for k in self.active if self.turn[k] < len(self.plans[k].turn_tokens) - 1]
        self.active = calling
        self.barrier_left = len(calling)
        for k in calling:
            self.push(self.now + self.plans[k].tool_s[self.turn[k]], "tool", k)

    def run(self) -> dict:
        n, e = len(self.plans), len(self.engines)
        if self.mode == "static":
            chunk = -(-n // e)
            self.pinned = [k // chunk for k in range(n)]
            self.active = list(range(n))
            self.static_turn()
        else:
            self.queue = deque(range(n))
            self.admit()
        while self.events:
            self.now, _, kind, a, b = heapq.heappop(self.events)
            if kind == "engine":
                self.on_engine(a, b)
            else:
                self.on_tool(a)
        assert self.done == n, (self.done, n)
        for eng in self.engines:
            self.count(eng, 0)
        return {
            "makespan_s": self.now,
            "idle": sum(1 - eng.busy_s / self.now for eng in self.engines) / e,
            "retractions": sum(eng.retractions for eng in self.engines),
            "in_flight_peak": max(eng.in_flight_peak for eng in self.engines),
            "in_flight_mean": sum(eng.in_flight_area for eng in self.engines) / (e * self.now),
        }


def run_simulation(args) -> list[str]:
    cost = CostModel(args.step_base_s, args.step_per_kv_token_s, args.prefill_tokens_per_s)
    lines = [
        "(a) SIMULATED  engines with KV capacity and a decode cost model",
        f"    {args.sim_per_engine} trajectories per engine, KV {args.sim_kv_tokens} tokens/engine, median "
        f"{args.sim_median_tokens:g} generated tokens, up to {args.sim_max_turns} turns, tool latency mean 0.3 s; "
        f"step = {args.step_base_s} s + {args.step_per_kv_token_s:g} s x KV tokens; per-turn allowance "
        f"{args.sim_turn_reserve} tokens",
        "    max resp | engines | makespan static / worst-case / per-turn | per-turn speedup vs worst, static "
        "| in flight/engine worst, per-turn | idle static / worst / per-turn | retractions",
    ]
    for max_response in args.sim_max_response:
        for engines in args.sim_engines:
            plans = make_plans(
                engines * args.sim_per_engine,
                args.seed,
                max_turns=args.sim_max_turns,
                max_response=max_response,
                median_tokens=args.sim_median_tokens,
                prompt=400,
            )
            out = {
                mode: Simulation(
                    plans, engines, args.sim_kv_tokens, max_response, mode, cost, args.sim_turn_reserve
                ).run()
                for mode in ("static", "worst_case", "per_turn")
            }
            s, w, p = out["static"], out["worst_case"], out["per_turn"]
            makespans = f"{s['makespan_s']:6.1f} / {w['makespan_s']:6.1f} / {p['makespan_s']:6.1f} s"
            speedups = f"{w['makespan_s'] / p['makespan_s']:4.2f}x, {s['makespan_s'] / p['makespan_s']:4.2f}x"
            flight = ", ".join(f"{r['in_flight_mean']:4.1f} ({r['in_flight_peak']:2d})" for r in (w, p))
            idle = f"{s['idle']:5.1%} / {w['idle']:5.1%} / {p['idle']:5.1%}"
            retract = f"{s['retractions']} / {w['retractions']} / {p['retractions']}"
            lines.append(
                f"    {max_response:8d} | {engines:7d} | {makespans:>39s} | {speedups:>33s} | {flight:>32s} "
                f"| {idle:>29s} | {retract}"
            )
    lines.append("    in flight/engine: time-mean (peak) of trajectories pinned to an engine and not finished")
    return lines
