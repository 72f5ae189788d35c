"""Placing trajectories on engines (SPEC §4, paper 3.2). `rollout.scheduler` picks one by name.

static:  trajectories split evenly across engines in contiguous chunks; each turn every
         trajectory generates, then every trajectory's tools run, and the next turn starts
         only when all are done (the synchronous baseline).
dynamic: each trajectory reserves `prompt + max response` tokens of KV capacity on the
         engine with the most free budget at its first turn and stays pinned there (its
         prefix stays cached); it waits when no engine has room and releases at its end.
         One coroutine per trajectory: a trajectory awaiting its tool blocks no one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from rollout.agent_loop import AgentState, ToolRunner, run_agent, run_tool_calls
from rollout.engines.base import Engine
from rollout.trajectory import Trajectory

log = logging.getLogger(__name__)

OnDone = Callable[[Trajectory], None]
Scheduler = Callable[[Sequence[AgentState], Sequence[Engine], ToolRunner, OnDone], Awaitable[None]]


class KVBudget:
    """Token reservations against each engine's KV capacity, granted first come first served."""

    def __init__(self, capacities: Sequence[int]) -> None:
        if not capacities:
            raise ValueError("no engines to schedule on")
        self.capacity = list(capacities)
        self.free = list(capacities)
        self._cond = asyncio.Condition()
        self._waiting: deque[object] = deque()
        self.peak_waiting = 0  # most trajectories ever waiting for room (a sign engines are full)
        self._warned = False

    def clamp(self, tokens: int) -> int:
        """A need larger than the largest engine is capped to it, so it can run alone there."""
        largest = max(self.capacity)
        if tokens > largest and not self._warned:
            log.warning("a trajectory needs %d KV tokens, the largest engine holds %d: reserving all", tokens, largest)
            self._warned = True
        return min(tokens, largest)

    async def acquire(self, tokens: int) -> int:
        """Reserve `tokens` on the engine with the most free budget; returns its index."""
        tokens = self.clamp(tokens)
        ticket = object()
        async with self._cond:
            self._waiting.append(ticket)
            self.peak_waiting = max(self.peak_waiting, len(self._waiting))
            try:
                await self._cond.wait_for(lambda: self._waiting[0] is ticket and max(self.free) >= tokens)
            finally:
                self._waiting.remove(ticket)
                self._cond.notify_all()  # the next in line may fit too
            engine = max(range(len(self.free)), key=lambda i: (self.free[i], -i))
            self.free[engine] -= tokens
            return engine

    async def release(self, engine: int, tokens: int) -> None:
        async with self._cond:
            self.free[engine] += self.clamp(tokens)
            self._cond.notify_all()


async def run_dynamic(
    states: Sequence[AgentState], engines: Sequence[Engine], sandbox: ToolRunner, on_done: OnDone
) -> None:
    budget = KVBudget([e.kv_capacity_tokens() for e in engines])

    async def one(state: AgentState) -> None:
        t = state.trajectory
        need = len(t.prompt_ids) + state.limits.max_response_tokens
        start = time.perf_counter()
        engine = await budget.acquire(need)
        t.timings.queue_s += time.perf_counter() - start
        t.engine_index = engine
        try:
            await run_agent(state, engines[engine], sandbox)
        finally:
            await budget.release(engine, need)
        on_done(t)

    await asyncio.gather(*(one(s) for s in states))
    log.info("dynamic scheduling: at most %d trajectories waited for KV room", budget.peak_waiting)


async def _timed_barrier(jobs: list[tuple[AgentState, Awaitable]], field: str) -> list:
    """Await all jobs; each state's own wait counts as `field`, the rest of the barrier as queue_s."""
    ends: list[float] = [0.0] * len(jobs)
    start = time.perf_counter()

    async def job(k: int, aw: Awaitable):
        result = await aw
        ends[k] = time.perf_counter()
        return result

    results = await asyncio.gather(*(job(k, aw) for k, (_, aw) in enumerate(jobs)))
    barrier = time.perf_counter()
    for k, (state, _) in enumerate(jobs):
        timings = state.trajectory.timings
        setattr(timings, field, getattr(timings, field) + ends[k] - start)
        timings.queue_s += barrier - ends[k]
    return results


async def run_static(
    states: Sequence[AgentState], engines: Sequence[Engine], sandbox: ToolRunner, on_done: OnDone
) -> None:
    chunk = -(-len(states) // len(engines))  # ceil: contiguous, so a problem's samples share an engine
    for k, state in enumerate(states):
        state.trajectory.engine_index = k // chunk
    start = time.perf_counter()
    active = [s for s in states if not s.done]
    while active:
        requests = [(s, engines[s.trajectory.engine_index].generate(*s.next_request())) for s in active]
        for state, result in zip(active, await _timed_barrier(requests, "generation_s"), strict=True):
            state.add_generation(result)
        calling = [s for s in active if s.pending_calls]
        tools = [(s, run_tool_calls(sandbox, s.pending_calls)) for s in calling]
        for state, results in zip(calling, await _timed_barrier(tools, "tool_s"), strict=True):
            state.add_feedback(results)
        for state in active:
            if state.done:
                state.trajectory.timings.total_s = time.perf_counter() - start
                on_done(state.trajectory)
        active = [s for s in active if not s.done]


SCHEDULERS: dict[str, Scheduler] = {"dynamic": run_dynamic, "static": run_static}


def get_scheduler(name: str) -> Scheduler:
    try:
        return SCHEDULERS[name]
    except KeyError:
        raise ValueError(f"unknown rollout.scheduler {name!r}; allowed: {sorted(SCHEDULERS)}") from None
