"""Rollouts ahead of the trainer within a staleness bound (`rl.max_staleness_steps` = k, SPEC §4).

Step i's rollouts may start once the engines serve the weights the trainer had before update
i - k. The trainer updates on step i while the engines already roll out steps i + 1 .. i + k,
so no trajectory is trained more than k steps after the weights that generated it. Weights
reach the engines between requests (rollout/engines), so a later turn of a trajectory may run
under newer weights than its first: its staleness is measured from its oldest turn, and each
token's behaviour log-prob is the one its own weights gave.

k = 0 is the synchronous step: step i's rollouts start when the weights of update i - 1 are
on the engines, and the trainer waits for them, exactly as before this module.

Steps here are the stage's own (0 .. steps - 1); `WeightSteps` maps the engines' weight
versions (rollout/runtime.py) to them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from rollout.trajectory import Trajectory

T = TypeVar("T")


class WeightSteps:
    """Which step's weights the engines serve, and for each weight version, its step."""

    def __init__(self, step: int, version: int) -> None:
        self.step = step  # the engines hold the weights the trainer had before update `step`
        self.of_version = {version: step}
        self._changed = asyncio.Condition()

    async def reach(self, step: int) -> None:
        """Return once the engines serve the weights of `step` or later."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.step >= step)

    async def advance(self, step: int, version: int | None = None) -> None:
        """The engines now serve the weights of `step` (under `version` when new ones were pushed;
        a skipped update pushes none, and the old weights are the new step's too)."""
        async with self._changed:
            if version is not None:
                self.of_version[version] = step
            self.step = step
            self._changed.notify_all()

    def staleness(self, trained_at: int, trajectories: Sequence[Trajectory], started_at: int) -> list[int]:
        """Steps between each trajectory's oldest weights and update `trained_at`. A trajectory
        whose engine reported no version counts from `started_at`, the step whose weights the
        engines served when its step's rollouts began (a lower bound on its weights)."""
        return [trained_at - self.of_version.get(t.oldest_weights, started_at) for t in trajectories]


class RolloutsAhead(Generic[T]):
    """A task that rolls out steps in order, each once the bound allows; `get` takes them in order.

        async with RolloutsAhead(range(done, steps), k, weights, roll) as ahead:
            for i in range(done, steps):
                result, started_at = await ahead.get()
    """

    def __init__(self, steps: range, max_staleness: int, weights: WeightSteps,
                 roll: Callable[[int], Awaitable[T]]) -> None:
        self.steps, self.k, self.weights, self.roll = steps, max_staleness, weights, roll
        self._ready: asyncio.Queue[tuple[T, int] | BaseException] = asyncio.Queue()
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> RolloutsAhead[T]:
        self._task = asyncio.create_task(self._produce())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _produce(self) -> None:
        try:
            for i in self.steps:
                await self.weights.reach(i - self.k)
                started_at = self.weights.step
                self._ready.put_nowait((await self.roll(i), started_at))
        except Exception as exc:  # noqa: BLE001 - handed to the trainer, which raises it
            self._ready.put_nowait(exc)

    async def get(self) -> tuple[T, int]:
        """The next step's rollouts and the step whose weights the engines served when they began."""
        item = await self._ready.get()
        if isinstance(item, BaseException):
            raise item
        return item
