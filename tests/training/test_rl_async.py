"""The staleness bound (training/rl_async.py): when each step's rollouts may start, and how
stale their trajectories are when the trainer takes them (issue 26 point 1)."""

from __future__ import annotations

import asyncio

import pytest

from rollout.trajectory import Trajectory
from training.rl_async import RolloutsAhead, WeightSteps


def _trajectory(*versions: int | None) -> Trajectory:
    t = Trajectory(problem_index=0, sample_index=0, prompt_ids=[1])
    t.weight_versions = list(versions)
    return t


async def _run(k: int, steps: int, roll_s: float = 0.01, update_s: float = 0.03) -> tuple[list, list]:
    """A trainer loop over fake rollouts: returns, per step, the weights each step's rollouts
    began under, and the staleness of the trajectories the trainer took."""
    weights = WeightSteps(0, 0)
    began, stale = [], []

    async def roll(i: int) -> list[Trajectory]:
        began.append((i, weights.step))
        await asyncio.sleep(roll_s)
        return [_trajectory(v) for v, s in weights.of_version.items() if s == weights.step]

    async with RolloutsAhead(range(steps), k, weights, roll) as ahead:
        for i in range(steps):
            kept, started_at = await ahead.get()
            stale.append(weights.staleness(i, kept, started_at))
            await asyncio.sleep(update_s)  # the update
            await weights.advance(i + 1, version=i + 1)
    return began, stale


def test_synchronous_steps_roll_out_under_the_weights_of_the_update_before():
    began, stale = asyncio.run(_run(k=0, steps=5))
    assert began == [(i, i) for i in range(5)]
    assert stale == [[0]] * 5


@pytest.mark.parametrize("k", [1, 2])
def test_rollouts_run_up_to_k_steps_ahead_and_never_past_the_bound(k):
    began, stale = asyncio.run(_run(k=k, steps=8))
    # Updates are slower than rollouts, so the producer runs as far ahead as it may: step i
    # begins under the weights before update i - k, and no earlier than them.
    assert [i - step for i, step in began][k:] == [k] * (8 - k)
    assert all(step >= i - k for i, step in began)
    assert max(max(s) for s in stale) == k and all(0 <= x <= k for s in stale for x in s)


def test_a_trajectory_counts_from_its_oldest_turn_and_unknown_versions_from_the_step_start():
    weights = WeightSteps(3, 10)
    asyncio.run(weights.advance(4, 11))
    asyncio.run(weights.advance(5))  # a skipped update pushes no weights
    mixed, unknown = _trajectory(11, 10), _trajectory(None)
    assert mixed.oldest_weights == 10
    assert weights.staleness(5, [mixed, unknown, _trajectory(11)], started_at=4) == [2, 1, 1]


def test_a_failed_rollout_reaches_the_trainer():
    async def main() -> None:
        weights = WeightSteps(0, 0)

        async def roll(i: int) -> int:
            raise RuntimeError(f"engine lost at step {i}")

        async with RolloutsAhead(range(3), 1, weights, roll) as ahead:
            await ahead.get()

    with pytest.raises(RuntimeError, match="engine lost at step 0"):
        asyncio.run(main())
