"""Placing trajectories on engines (SPEC §4, paper 3.2). `rollout.scheduler` picks one by name.

static:  trajectories split evenly across engines in contiguous chunks; each turn every
         trajectory generates, then every trajectory's tools run, and the next turn starts
         only when all are done (the synchronous baseline).
dynamic: one coroutine per trajectory (a trajectory awaiting its tool blocks no one),
         placed at its first turn on the engine with the most free KV budget and pinned
         there (its prefix stays cached). `rollout.kv_reservation` says what it holds:
           per_turn (default): its current context, plus up to `kv_turn_reserve_tokens`
             while a turn runs; the reservation grows with the context turn by turn.
           worst_case: prompt + max_response from its first turn to its end (SPEC §4 as
             first written). With the evaluation budget of 30K response tokens this fits
             two trajectories on a 64K-token engine, however short they turn out.
         A new trajectory waits (first come, first served) until an engine has room; a
         pinned turn waits for room on its engine, except that it always runs when nothing
         else runs there, so turns never wait on each other forever. A turn longer than its
         allowance over-subscribes its engine until the turn ends (SGLang then retracts or
         evicts; the hf engine's cache simply grows).
Engine errors: a failed turn is retried up to `rollout.engine_max_attempts` times with
doubling backoff, moved to another engine where there is one (the failed engine gets no
new trajectories for `engine_cooldown_s`); after the last attempt the trajectory is
recorded as failed (agent_loop.TurnFailed) and the others go on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from configs.rollout import RolloutConfig
from rollout.agent_loop import AgentState, ToolRunner, TurnFailed, run_agent, run_tool_calls
from rollout.engines.base import Engine, EngineError, GenerationResult, SamplingParams
from rollout.trajectory import Trajectory

log = logging.getLogger(__name__)

OnDone = Callable[[Trajectory], None]
Scheduler = Callable[[Sequence[AgentState], Sequence[Engine], ToolRunner, OnDone, RolloutConfig], Awaitable[None]]


@dataclass
class _Ticket:
    tokens: int
    engine: int | None  # None: a new trajectory, any engine; k: a pinned turn on engine k
    avoid: frozenset[int] = frozenset()


@dataclass
class KVBudget:
    """Token reservations against each engine's KV capacity, and who waits for them."""

    capacity: list[int]
    cooldown_s: float = 0.0
    reserved: list[int] = field(init=False)
    running: list[int] = field(init=False)  # turns holding a reservation now, per engine
    peak_waiting: int = 0  # most requests ever waiting for room (a sign engines are full)
    peak_reserved: list[int] = field(init=False)

    def __post_init__(self) -> None:
        if not self.capacity:
            raise ValueError("no engines to schedule on")
        n = len(self.capacity)
        self.reserved, self.running, self.peak_reserved = [0] * n, [0] * n, [0] * n
        self._failed_at = [-float("inf")] * n
        self._waiting: list[_Ticket] = []
        self._cond = asyncio.Condition()

    @property
    def free(self) -> list[int]:
        return [c - r for c, r in zip(self.capacity, self.reserved, strict=True)]

    def mark_failed(self, engine: int) -> None:
        self._failed_at[engine] = time.monotonic()

    def _grant(self, ticket: _Ticket) -> int | None:
        """The engine this ticket may take now, or None; earlier tickets keep their turn."""
        earlier = self._waiting[: self._waiting.index(ticket)]
        if ticket.engine is not None:
            k = ticket.engine
            if any(w.engine == k for w in earlier):
                return None
            fits = self.reserved[k] + ticket.tokens <= self.capacity[k]
            return k if fits or self.running[k] == 0 else None
        if any(w.engine is None for w in earlier):
            return None
        # Wait for an engine that did not fail lately (and, for a retry, is not the one that
        # just failed) rather than go to one that did; only when there is none, take any.
        now = time.monotonic()
        engines = range(len(self.capacity))
        untried = [k for k in engines if k not in ticket.avoid]
        allowed = [k for k in untried if now - self._failed_at[k] >= self.cooldown_s] or untried or list(engines)
        pinned_waits = {w.engine for w in self._waiting if w.engine is not None}  # continuing turns first
        fitting = [
            k
            for k in allowed
            if k not in pinned_waits
            and (self.reserved[k] + ticket.tokens <= self.capacity[k] or self.reserved[k] == 0)
        ]
        return max(fitting, key=lambda k: (self.free[k], -k)) if fitting else None

    async def acquire(
        self, tokens: int, engine: int | None = None, *, avoid: frozenset[int] = frozenset(), first: bool = False
    ) -> int:
        """Reserve `tokens` on `engine` (a pinned turn) or on the best engine (None); returns it.

        `first`: go ahead of every new trajectory waiting (a trajectory moved after an error).
        """
        ticket = _Ticket(tokens, engine, avoid)
        async with self._cond:
            if first:
                self._waiting.insert(0, ticket)
            else:
                self._waiting.append(ticket)
            self.peak_waiting = max(self.peak_waiting, len(self._waiting))
            try:
                await self._cond.wait_for(lambda: self._grant(ticket) is not None)
                k = self._grant(ticket)
            finally:
                self._waiting.remove(ticket)
                self._cond.notify_all()  # the next in line may fit too
            self.reserved[k] += tokens
            self.running[k] += 1
            self.peak_reserved[k] = max(self.peak_reserved[k], self.reserved[k])
            return k

    async def release(self, engine: int, tokens: int, *, turn_ended: bool = True) -> None:
        async with self._cond:
            self.reserved[engine] -= tokens
            if turn_ended:
                self.running[engine] -= 1
            self._cond.notify_all()


class Placement:
    """One trajectory's engine and reservation; its turns go through `generate`."""

    def __init__(self, state: AgentState, engines: Sequence[Engine], budget: KVBudget, cfg: RolloutConfig) -> None:
        self.state, self.engines, self.budget, self.cfg = state, engines, budget, cfg
        self.engine: int | None = None
        self.held = 0  # tokens reserved on self.engine
        self.in_turn = False

    def _turn_need(self, context: int, max_new: int) -> int:
        if self.cfg.kv_reservation == "worst_case":
            return len(self.state.trajectory.prompt_ids) + self.state.limits.max_response_tokens
        return context + min(max_new, self.cfg.kv_turn_reserve_tokens)

    async def _begin_turn(self, context: int, max_new: int, avoid: frozenset[int]) -> int:
        t = self.state.trajectory
        need = self._turn_need(context, max_new)
        start = time.perf_counter()
        if self.engine is None:
            self.engine = await self.budget.acquire(need, avoid=avoid, first=bool(avoid))
            self.held = need
        elif self.cfg.kv_reservation == "per_turn" or not self.in_turn:
            await self.budget.acquire(max(0, need - self.held), self.engine)
            self.held = max(self.held, need)
        self.in_turn = True
        t.timings.queue_s += time.perf_counter() - start
        t.engine_index = self.engine
        return self.engine

    async def _end_turn(self, keep: int) -> None:
        """Per turn: keep only `keep` tokens (the context); worst case: keep everything."""
        if self.engine is None or not self.in_turn or self.cfg.kv_reservation == "worst_case":
            return
        await self.budget.release(self.engine, self.held - keep)
        self.held, self.in_turn = keep, False

    async def release(self) -> None:
        if self.engine is not None:
            await self.budget.release(self.engine, self.held, turn_ended=self.in_turn)
        self.engine, self.held, self.in_turn = None, 0, False

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        tried: set[int] = set()
        for attempt in range(1, self.cfg.engine_max_attempts + 1):
            engine = await self._begin_turn(len(prompt_ids), params.max_new_tokens, frozenset(tried))
            try:
                result = await self.engines[engine].generate(prompt_ids, params)
            except Exception as exc:  # noqa: BLE001 - every engine failure is retried or recorded, never raised
                reason = _describe(exc, engine)
                self.state.trajectory.engine_attempts += 1
                self.budget.mark_failed(engine)
                tried.add(engine)
                if len(tried) < len(self.engines):
                    await self.release()  # the next attempt goes to another engine
                else:
                    await self._end_turn(len(prompt_ids))  # stay pinned; give back the turn's allowance
                if not getattr(exc, "retryable", True) or attempt == self.cfg.engine_max_attempts:
                    raise TurnFailed(f"{reason} (attempt {attempt} of {self.cfg.engine_max_attempts})") from exc
                log.info("retrying a turn after %s", reason)
                if len(tried) == len(self.engines):
                    tried.clear()  # every engine failed once: any may take the next try
                await asyncio.sleep(self.cfg.engine_retry_backoff_s * 2 ** (attempt - 1))
                continue
            await self._end_turn(len(prompt_ids) + len(result.output_ids))
            return result
        raise AssertionError("unreachable")


def _describe(exc: BaseException, engine: int) -> str:
    kind = "engine error" if isinstance(exc, EngineError) else type(exc).__name__
    return f"engine {engine}: {kind}: {exc}"


async def run_dynamic(
    states: Sequence[AgentState],
    engines: Sequence[Engine],
    sandbox: ToolRunner,
    on_done: OnDone,
    cfg: RolloutConfig | None = None,
) -> None:
    cfg = cfg or RolloutConfig()
    budget = KVBudget([e.kv_capacity_tokens() for e in engines], cooldown_s=cfg.engine_cooldown_s)

    async def one(state: AgentState) -> None:
        placement = Placement(state, engines, budget, cfg)
        try:
            await run_agent(state, placement, sandbox)
        finally:
            await placement.release()
        on_done(state.trajectory)

    # A task group: cancelling the rollout (or a bug in one trajectory) cancels every
    # trajectory and with it every request in flight.
    async with asyncio.TaskGroup() as group:
        for state in states:
            group.create_task(one(state))
    log.info(
        "dynamic scheduling (%s): at most %d requests waited for KV room", cfg.kv_reservation, budget.peak_waiting
    )


async def _timed_barrier(jobs: list[tuple[AgentState, Awaitable]], field_name: str) -> list:
    """Await all jobs; each state's own wait counts as `field_name`, the rest of the barrier as queue_s."""
    ends: list[float] = [0.0] * len(jobs)
    start = time.perf_counter()

    async def job(k: int, aw: Awaitable):
        result = await aw
        ends[k] = time.perf_counter()
        return result

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(job(k, aw)) for k, (_, aw) in enumerate(jobs)]
    barrier = time.perf_counter()
    for k, (state, _) in enumerate(jobs):
        timings = state.trajectory.timings
        setattr(timings, field_name, getattr(timings, field_name) + ends[k] - start)
        timings.queue_s += barrier - ends[k]
    return [task.result() for task in tasks]


async def _static_turn(state: AgentState, engines: Sequence[Engine], cfg: RolloutConfig) -> GenerationResult | None:
    """One turn on the trajectory's engine, retried on the next engines; None when it failed."""
    t = state.trajectory
    prompt, params = state.next_request()
    for attempt in range(1, cfg.engine_max_attempts + 1):
        engine = t.engine_index
        try:
            return await engines[engine].generate(prompt, params)
        except Exception as exc:  # noqa: BLE001 - recorded on the trajectory, the barrier goes on
            t.engine_attempts += 1
            reason = _describe(exc, engine)
            if not getattr(exc, "retryable", True) or attempt == cfg.engine_max_attempts:
                state.fail(f"{reason} (attempt {attempt} of {cfg.engine_max_attempts})")
                log.warning("trajectory %d/%d failed: %s", t.problem_index, t.sample_index, t.failure)
                return None
            t.engine_index = (engine + 1) % len(engines)
            await asyncio.sleep(cfg.engine_retry_backoff_s * 2 ** (attempt - 1))
    return None


async def run_static(
    states: Sequence[AgentState],
    engines: Sequence[Engine],
    sandbox: ToolRunner,
    on_done: OnDone,
    cfg: RolloutConfig | None = None,
) -> None:
    cfg = cfg or RolloutConfig()
    chunk = -(-len(states) // len(engines))  # ceil: contiguous, so a problem's samples share an engine
    for k, state in enumerate(states):
        state.trajectory.engine_index = k // chunk
    start = time.perf_counter()
    active = [s for s in states if not s.done]
    while active:
        requests = [(s, _static_turn(s, engines, cfg)) for s in active]
        for state, result in zip(active, await _timed_barrier(requests, "generation_s"), strict=True):
            if result is not None:
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
