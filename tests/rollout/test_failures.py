"""Engine failures (issue 9): retried turns, failover, failed trajectories, cancellation."""

from __future__ import annotations

import asyncio
import random

import httpx
import pytest

from configs.rollout import RolloutConfig, SamplingSettings
from rollout.engines.base import EngineError
from rollout.groups import Problem
from rollout.prompt import tool_call_text
from rollout.runtime import RolloutRuntime

ANSWER = "<answer> \\boxed{1} </answer>"
FAST = {"engine_retry_backoff_s": 0.0, "engine_cooldown_s": 60.0}


def _script(seed: int, turn: int) -> str:
    return tool_call_text(f"print({turn})") if turn < 2 else ANSWER


class Flaky:
    """A scripted engine that raises `error()` on a seeded share `rate` of requests, or on all after `dies_after`."""

    def __init__(self, inner, rate: float = 0.0, dies_after: int | None = None, error=None, seed: int = 0) -> None:
        self.inner, self.rate, self.dies_after, self.rng = inner, rate, dies_after, random.Random(seed)
        self.error = error or (lambda: EngineError("HTTP 500"))
        self.requests = self.failures = self.active = 0

    async def generate(self, prompt_ids, params):
        self.requests += 1
        if self.rng.random() < self.rate or (
            self.dies_after is not None and self.requests > self.dies_after
        ):
            self.failures += 1
            raise self.error()
        self.active += 1
        try:
            return await self.inner.generate(prompt_ids, params)
        finally:
            self.active -= 1

    def kv_capacity_tokens(self) -> int:
        return self.inner.kv_capacity_tokens()


async def _rollout(fmt, engines, sandbox, scheduler="dynamic", n=10, **cfg):
    runtime = RolloutRuntime(RolloutConfig(scheduler=scheduler, **FAST, **cfg), fmt, engines, sandbox)
    settings = SamplingSettings(temperature=1.0, max_response_tokens=2048, max_turns=5, seed=3)
    return await runtime.sample_and_score([Problem(f"p{i}", "1") for i in range(n)], 2, settings)


@pytest.mark.parametrize("scheduler", ["dynamic", "static"])
async def test_one_request_in_ten_fails_and_every_trajectory_still_completes(small_fmt, scripted, scheduler):
    clean = await _rollout(small_fmt, [scripted.engine(small_fmt, _script)], scripted.sandbox(), scheduler)
    inner = scripted.engine(small_fmt, _script)  # one script shared: it derives turns from the seeds it saw
    flaky = [Flaky(inner, rate=0.1, seed=k) for k in range(2)]
    groups = await _rollout(small_fmt, flaky, scripted.sandbox(), scheduler, engine_max_attempts=5)
    assert sum(e.failures for e in flaky) >= 5
    assert groups.failed == 0 and groups.engine_retries == sum(e.failures for e in flaky)
    assert [[t.response_ids for t in g] for g in groups] == [[t.response_ids for t in g] for g in clean]
    assert all(t.finish_reason == "stop" and t.num_turns == 3 for g in groups for t in g)


@pytest.mark.parametrize("scheduler", ["dynamic", "static"])
async def test_an_engine_that_dies_mid_rollout_hands_its_trajectories_to_the_other(small_fmt, scripted, scheduler):
    inner = scripted.engine(small_fmt, _script, delay_s=0.01)
    dies = Flaky(inner, dies_after=6, error=lambda: httpx.ConnectError("x"))
    lives = Flaky(inner)
    groups = await _rollout(small_fmt, [dies, lives], scripted.sandbox(), scheduler)
    assert dies.failures > 0 and groups.failed == 0
    assert all(t.num_turns == 3 and t.final_answer == "1" for g in groups for t in g)


async def test_a_trajectory_that_still_fails_is_recorded_counted_and_not_scored(small_fmt, scripted):
    dead = Flaky(scripted.engine(small_fmt, _script), dies_after=4, error=lambda: httpx.ReadTimeout("slow"))
    sandbox = scripted.sandbox()
    groups = await _rollout(small_fmt, [dead], sandbox, n=4, engine_max_attempts=3)  # scored as it rolls out
    flat = [t for g in groups for t in g]
    assert [len(g) for g in groups] == [2, 2, 2, 2]  # groups keep their size and order
    assert groups.failed == 8 - sum(not t.failed for t in flat) and groups.failed >= 4
    for t in flat:
        if t.failed:
            assert t.finish_reason == "failed" and t.final_answer is None
            assert "ReadTimeout" in t.failure and "attempt 3 of 3" in t.failure
    assert sum(groups.failures.values()) == groups.failed
    rewards = [t.reward for t in flat]
    assert [r is None for r in rewards] == [t.failed for t in flat]
    assert len(sandbox.pairs) == sum(not t.failed and t.final_answer is not None for t in flat)


async def test_a_refused_request_is_not_retried(small_fmt, scripted):
    refused = Flaky(scripted.engine(small_fmt, _script), rate=1.0, error=lambda: EngineError("400", retryable=False))
    groups = await _rollout(small_fmt, [refused], scripted.sandbox(), n=1)
    assert groups.failed == 2 and refused.requests == 2 and "attempt 1 of 3" in next(iter(groups.failures))


@pytest.mark.parametrize("scheduler", ["dynamic", "static"])
async def test_cancelling_the_rollout_cancels_every_request_in_flight(small_fmt, scripted, scheduler):
    engines = [Flaky(scripted.engine(small_fmt, _script, delay_s=5.0)) for _ in range(2)]
    task = asyncio.create_task(_rollout(small_fmt, engines, scripted.sandbox(), scheduler, n=6))
    await asyncio.sleep(0.2)
    assert sum(e.active for e in engines) == 12
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sum(e.active for e in engines) == 0
