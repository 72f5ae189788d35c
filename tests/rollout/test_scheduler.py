"""KV-aware dynamic scheduling and the static baseline (SPEC §4)."""

from __future__ import annotations

import asyncio
import time

import pytest

from configs.rollout import RolloutConfig
from rollout.agent_loop import AgentState, TurnLimits
from rollout.prompt import tool_call_text
from rollout.scheduler import KVBudget, get_scheduler, run_dynamic, run_static
from rollout.trajectory import Trajectory

ANSWER = "<answer> \\boxed{1} </answer>"


def _states(fmt, n: int, limits: TurnLimits) -> list[AgentState]:
    prompt = fmt.prompt_ids("p")
    return [AgentState(Trajectory(i, 0, list(prompt), seed=1000 * i), fmt, limits) for i in range(n)]


def _script(turns_of: dict[int, int]):
    """Trajectory with seed s makes turns_of[s] - 1 calls, then answers."""
    return lambda seed, turn: tool_call_text(f"print({seed})") if turn < turns_of[seed] - 1 else ANSWER


async def test_budget_picks_most_free_waits_when_full_and_releases():
    budget = KVBudget([100, 150])
    assert await budget.acquire(60) == 1  # most free first
    assert await budget.acquire(60) == 0
    assert await budget.acquire(60) == 1
    assert budget.free == [40, 30]
    waiter = asyncio.create_task(budget.acquire(50))
    await asyncio.sleep(0.01)
    assert not waiter.done()  # no engine has 50 free: wait
    await budget.release(1, 60)
    assert await asyncio.wait_for(waiter, 1) == 1 and budget.free == [40, 40]


async def test_budget_is_first_come_first_served_and_caps_oversized_needs():
    budget = KVBudget([100])
    await budget.acquire(90)
    big = asyncio.create_task(budget.acquire(80))
    await asyncio.sleep(0.01)
    small = asyncio.create_task(budget.acquire(5))  # would fit now, but waits behind `big`
    await asyncio.sleep(0.01)
    assert not small.done()
    await budget.release(0, 90)
    await asyncio.wait_for(asyncio.gather(big, small), 1)
    assert budget.free == [15]
    await budget.release(0, 80)
    await budget.release(0, 5)
    assert await budget.acquire(10_000) == 0 and budget.free == [-9_900]  # larger than any engine: runs alone
    later = asyncio.create_task(budget.acquire(1))
    await asyncio.sleep(0.01)
    assert not later.done()  # nothing joins it
    await budget.release(0, 10_000)
    assert await asyncio.wait_for(later, 1) == 0


async def test_dynamic_pins_each_trajectory_and_respects_capacity(small_fmt, scripted):
    limits = TurnLimits(max_turns=4, max_response_tokens=200)
    states = _states(small_fmt, 6, limits)
    need = len(states[0].trajectory.prompt_ids) + 200
    turns_of = {1000 * i: 1 + i % 3 for i in range(6)}
    engines = [scripted.engine(small_fmt, _script(turns_of), capacity=need, delay_s=0.01) for _ in range(2)]
    done: list[int] = []
    cfg = RolloutConfig(kv_reservation="worst_case")
    await run_dynamic(states, engines, scripted.sandbox(delay_s=lambda c: 0.02), lambda t: done.append(t.seed), cfg)
    assert sorted(done) == sorted(turns_of)
    for k, engine in enumerate(engines):
        served = {seed for seed, *_ in engine.log}
        assert served == {s.trajectory.seed for s in states if s.trajectory.engine_index == k}  # pinned
        spans = sorted(
            (min(a for s, _, a, _ in engine.log if s == x), max(b for s, _, _, b in engine.log if s == x))
            for x in served
        )
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end  # capacity holds one trajectory: they never overlap on an engine
    assert all(s.trajectory.num_turns == turns_of[s.trajectory.seed] for s in states)
    assert max(s.trajectory.timings.queue_s for s in states) > 0  # some waited for room


async def test_dynamic_tool_calls_do_not_block_other_trajectories(small_fmt, scripted):
    """Trajectory 0 waits 0.5 s on its tool; trajectory 1 finishes 3 turns meanwhile."""
    limits = TurnLimits(max_turns=5, max_response_tokens=400)
    states = _states(small_fmt, 2, limits)
    engine = scripted.engine(small_fmt, _script({0: 2, 1000: 3}))
    sandbox = scripted.sandbox(delay_s=lambda c: 0.5 if c.code == "print(0)" else 0.0)
    finished: list[tuple[int, float]] = []
    start = time.perf_counter()
    await run_dynamic(states, [engine], sandbox, lambda t: finished.append((t.seed, time.perf_counter() - start)))
    assert [seed for seed, _ in finished] == [1000, 0]
    assert finished[0][1] < 0.4


async def test_static_splits_evenly_and_waits_for_every_trajectory_each_turn(small_fmt, scripted):
    limits = TurnLimits(max_turns=5, max_response_tokens=400)
    states = _states(small_fmt, 4, limits)
    engines = [scripted.engine(small_fmt, _script({0: 2, 1000: 3, 2000: 2, 3000: 3})) for _ in range(2)]
    sandbox = scripted.sandbox(delay_s=lambda c: 0.3 if c.code == "print(0)" else 0.0)
    await run_static(states, engines, sandbox, lambda t: None)
    assert [s.trajectory.engine_index for s in states] == [0, 0, 1, 1]
    second_turn_starts = [a for e in engines for _, turn, a, _ in e.log if turn == 1]
    first_turn_ends = [b for e in engines for _, turn, _, b in e.log if turn == 0]
    assert min(second_turn_starts) >= max(first_turn_ends) + 0.29  # everyone waited for the slow tool
    assert states[1].trajectory.timings.queue_s >= 0.29


@pytest.mark.parametrize("name", ["static", "dynamic"])
async def test_schedulers_give_the_same_trajectories(small_fmt, scripted, name):
    limits = TurnLimits(max_turns=3, max_response_tokens=300)
    states = _states(small_fmt, 5, limits)
    engines = [scripted.engine(small_fmt, _script({1000 * i: 1 + i % 3 for i in range(5)})) for _ in range(2)]
    await get_scheduler(name)(states, engines, scripted.sandbox(), lambda t: None)
    assert [s.trajectory.num_turns for s in states] == [1, 2, 3, 1, 2]
    assert all(s.trajectory.finish_reason == "stop" for s in states)
    with pytest.raises(ValueError, match="allowed"):
        get_scheduler("round_robin")


async def test_pinned_turn_waits_for_room_on_its_engine_unless_nothing_runs_there():
    budget = KVBudget([100, 100])
    assert await budget.acquire(90, 0) == 0
    waiting = asyncio.create_task(budget.acquire(20, 0))  # engine 1 is empty, but the turn is pinned to 0
    await asyncio.sleep(0.01)
    assert not waiting.done()
    new = asyncio.create_task(budget.acquire(20))  # a new trajectory goes to the engine with room
    assert await asyncio.wait_for(new, 1) == 1
    await budget.release(0, 0)  # the running turn ends but keeps its 90-token context
    assert await asyncio.wait_for(waiting, 1) == 0  # nothing else runs on 0: it goes, over-subscribed
    assert budget.reserved == [110, 20] and budget.running == [1, 1]


@pytest.mark.parametrize("reservation, most", [("worst_case", 2), ("per_turn", 8)])
async def test_per_turn_reservations_fit_more_trajectories_than_worst_case(small_fmt, scripted, reservation, most):
    """Evaluation budget 30K on a default 64K engine: worst case fits two trajectories at a time."""
    limits = TurnLimits(max_turns=4, max_response_tokens=30_000)
    states = _states(small_fmt, 8, limits)
    engine = scripted.engine(small_fmt, _script({1000 * i: 3 for i in range(8)}), capacity=65_536, delay_s=0.02)
    cfg = RolloutConfig(kv_reservation=reservation, kv_turn_reserve_tokens=2048)
    await run_dynamic(states, [engine], scripted.sandbox(delay_s=lambda c: 0.01), lambda t: None, cfg)
    started = {seed: min(a for s, _, a, _ in engine.log if s == seed) for seed, *_ in engine.log}
    ended = {seed: max(b for s, _, _, b in engine.log if s == seed) for seed, *_ in engine.log}
    in_flight = max(sum(started[x] <= started[y] < ended[x] for x in started) for y in started)
    assert in_flight == most
    assert all(s.trajectory.num_turns == 3 and s.trajectory.finish_reason == "stop" for s in states)
