"""Stand-ins for the parts a rollout test is not about: a scripted engine, a scripted sandbox.

The scripted engine plays a model that writes given turns (tokenized with the real
tokenizer under test), so stop conditions, masks and scheduling are tested exactly;
the hf engine and the real sandbox have their own tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from transformers import AutoTokenizer

from rollout.engines.base import GenerationResult, SamplingParams
from rollout.prompt import ChatFormat
from sandbox.types import SandboxResult, ToolCall, VerifyResult


class ScriptedEngine:
    """Answers turn k of a trajectory with `script(turn_index, prompt_ids)` + end of turn.

    The turn index comes from the seed (the agent loop sends seed + turn). Logs every
    request as (trajectory seed, turn, start, end) for scheduling tests.
    """

    def __init__(
        self,
        fmt: ChatFormat,
        script: Callable[[int, int], str],
        capacity: int = 1 << 20,
        delay_s: float = 0.0,
    ) -> None:
        self.fmt, self.script, self.capacity, self.delay_s = fmt, script, capacity, delay_s
        self.log: list[tuple[int, int, float, float]] = []
        self.seeds: dict[int, int] = {}  # trajectory seed -> seed of its first turn (to derive the turn)
        self.weights: list[str] = []
        self.versions: list[int | None] = []

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        start = time.perf_counter()
        base = min((s for s in self.seeds if 0 <= params.seed - s < 1000), default=None)
        if base is None:
            base = self.seeds.setdefault(params.seed, params.seed)
        turn = params.seed - base
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        ids = self.fmt.encode(self.script(base, turn)) + [self.fmt.end_of_turn_id]
        finish = "stop"
        if len(ids) > params.max_new_tokens:
            ids, finish = ids[: params.max_new_tokens], "length"
        self.log.append((base, turn, start, time.perf_counter()))
        return GenerationResult(ids, [-0.5] * len(ids), finish)

    def kv_capacity_tokens(self) -> int:
        return self.capacity

    async def update_weights(self, path: str, version: int | None = None) -> None:
        self.weights.append(path)
        self.versions.append(version)

    async def flush_cache(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


class ScriptedSandbox:
    """`run_batch` answers each call with `answer(call)`; `verify_batch` with `verdict(answer, ref)`."""

    def __init__(
        self,
        answer: Callable[[ToolCall], SandboxResult] | None = None,
        verdict: Callable[[str, str], VerifyResult] | None = None,
        delay_s: Callable[[ToolCall], float] | None = None,
    ) -> None:
        self.answer = answer or (lambda c: SandboxResult(status="ok", feedback="42\n", elapsed_s=0.01))
        self.verdict = verdict or (lambda a, r: VerifyResult(score=float(a == f"\\boxed{{{r}}}"), status="ok"))
        self.delay_s = delay_s or (lambda c: 0.0)
        self.calls: list[ToolCall] = []
        self.pairs: list[tuple[str, str]] = []

    async def run_batch(self, calls: list[ToolCall]) -> list[SandboxResult]:
        self.calls += calls
        await asyncio.sleep(max(self.delay_s(c) for c in calls))
        return [self.answer(c) for c in calls]

    async def verify_batch(self, pairs: list[tuple[str, str]]) -> list[VerifyResult]:
        self.pairs += pairs
        return [self.verdict(a, r) for a, r in pairs]


@pytest.fixture(scope="session")
def small_fmt(tiny_assets) -> ChatFormat:
    return ChatFormat(AutoTokenizer.from_pretrained(tiny_assets.tokenizer))


@pytest.fixture(scope="session")
def real_fmt(tiny_assets) -> ChatFormat:
    if tiny_assets.real_tokenizer is None:
        pytest.skip("the assets artifact has no real-vocabulary Qwen3 tokenizer")
    return ChatFormat(AutoTokenizer.from_pretrained(tiny_assets.real_tokenizer))


@pytest.fixture(params=["small", "real"])
def any_fmt(request, small_fmt, real_fmt) -> ChatFormat:
    return small_fmt if request.param == "small" else real_fmt


@pytest.fixture
def scripted():
    """Factories: scripted(fmt, script, ...) -> ScriptedEngine; the sandbox class as .sandbox."""

    class Factory:
        engine = ScriptedEngine
        sandbox = ScriptedSandbox

    return Factory
