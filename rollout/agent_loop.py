"""The multi-turn agent loop (SPEC §2): generate a turn, run its tool calls, append, repeat.

`AgentState` is one trajectory in progress, stepped by whoever schedules it: the dynamic
scheduler runs `run_agent` (one coroutine per trajectory, so a trajectory waiting on its
tool never blocks others); the static scheduler steps every state turn by turn behind a
barrier. Stop conditions, in the order they are checked after each turn:
  length: the turn is not closed by end-of-turn and the engine hit max_new_tokens;
  eos:    the turn ended on another stop token (the model's end of text, e.g. Qwen3-Base's
          <|endoftext|>): no feedback turn can follow an unclosed assistant turn;
  stop:   the turn holds no tool call;
  turns:  the turn limit T is reached (its calls are not run, as in the ref agent loop);
  length: the feedback would leave no room for another token.
A turn is "closed" when its last token is end-of-turn, whatever finish reason the engine
gave (SGLang reports "length" for a stop token emitted as the last allowed token).
An engine error that outlasts the scheduler's retries raises TurnFailed; the trajectory is
then recorded as failed (Trajectory.failure) instead of sinking the batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from rollout.answer import final_answer
from rollout.engines.base import Engine, GenerationResult, SamplingParams
from rollout.prompt import ChatFormat, extract_tool_calls
from rollout.trajectory import Timings, ToolCallRecord, Trajectory
from sandbox.types import InvalidCall, SandboxResult, ToolCall

log = logging.getLogger(__name__)
T = TypeVar("T")


class TurnFailed(Exception):
    """No engine answered a turn within the retry policy; the message says why."""


class ToolRunner(Protocol):
    """What the loop needs from the sandbox client (sandbox.client.SandboxClient)."""

    async def run_batch(self, calls: list[ToolCall]) -> list[SandboxResult]: ...


@dataclass(frozen=True)
class TurnLimits:
    """Per-rollout settings every trajectory of one rollout() call shares."""

    max_turns: int  # assistant turns, T in SPEC §2
    max_response_tokens: int  # every token after the prompt, feedback included
    temperature: float = 1.0
    top_p: float = 1.0
    max_tool_calls_per_turn: int = 8
    extra_tool_calls: Literal["invalid", "skip"] = "invalid"  # calls past the limit (rollout.extra_tool_calls)


class AgentState:
    """One trajectory in progress; the scheduler asks for requests and feeds back results."""

    def __init__(self, trajectory: Trajectory, fmt: ChatFormat, limits: TurnLimits) -> None:
        self.trajectory = trajectory
        self.fmt = fmt
        self.limits = limits
        self.pending_calls: list[ToolCall | InvalidCall] = []

    @property
    def done(self) -> bool:
        return self.trajectory.finish_reason is not None

    def next_request(self) -> tuple[list[int], SamplingParams]:
        t = self.trajectory
        params = SamplingParams(
            max_new_tokens=self.limits.max_response_tokens - len(t.response_ids),
            temperature=self.limits.temperature,
            top_p=self.limits.top_p,
            stop_token_ids=self.fmt.stop_token_ids,
            seed=t.seed + t.num_turns,  # a fresh draw each turn, reproducible
        )
        return t.prompt_ids + t.response_ids, params

    def add_generation(self, result: GenerationResult) -> None:
        """Append the model's turn and decide whether tool calls follow."""
        t = self.trajectory
        t.append(result.output_ids, 1, result.logprobs)
        t.weight_versions.append(result.weight_version)
        text = self.fmt.decode(result.output_ids)
        t.turns.append(text)
        closed = bool(result.output_ids) and result.output_ids[-1] == self.fmt.end_of_turn_id
        if not closed:
            return self._finish("length" if result.finish_reason == "length" else "eos")
        calls = extract_tool_calls(text, self.limits.max_tool_calls_per_turn, self.limits.extra_tool_calls)
        if not calls:
            return self._finish("stop")
        if t.num_turns >= self.limits.max_turns:
            return self._finish("turns")
        self.pending_calls = calls

    def add_feedback(self, results: list[SandboxResult]) -> None:
        """Record each call's status and append the tool-response turn (mask 0)."""
        t = self.trajectory
        for result in results:
            t.tool_calls.append(ToolCallRecord(t.num_turns - 1, result.status, result.elapsed_s, len(result.feedback),
                                               "error" in result.feedback.lower()))
        self.pending_calls = []
        ids = self.fmt.feedback_ids([r.feedback for r in results])
        if len(t.response_ids) + len(ids) >= self.limits.max_response_tokens:
            return self._finish("length")
        t.append(ids, 0)

    def fail(self, reason: str) -> None:
        """Record that the engines never answered a turn; the trajectory stays incomplete."""
        t = self.trajectory
        t.failure = reason
        t.finish_reason = "failed"
        t.final_answer = None
        self.pending_calls = []

    def _finish(self, reason: str) -> None:
        t = self.trajectory
        t.finish_reason = reason  # type: ignore[assignment]
        t.final_answer = final_answer(t.turns)


async def run_tool_calls(sandbox: ToolRunner, calls: list[ToolCall | InvalidCall]) -> list[SandboxResult]:
    """Answer every call in order: malformed ones here, the rest through the sandbox."""
    answers: list[SandboxResult | None] = [
        SandboxResult(status="invalid_call", feedback=c.reason) if isinstance(c, InvalidCall) else None for c in calls
    ]
    valid = [c for c in calls if isinstance(c, ToolCall)]
    if valid:
        try:
            results = iter(await sandbox.run_batch(valid))
        except Exception as exc:  # the service itself failed: answer, never drop (SPEC §2)
            log.warning("sandbox batch of %d calls failed: %s", len(valid), exc)
            message = f"Tool service error: {type(exc).__name__}; the call was not run."
            results = iter([SandboxResult(status="error", feedback=message)] * len(valid))
        answers = [a if a is not None else next(results) for a in answers]
    return answers  # type: ignore[return-value]


async def timed(coro: Awaitable[T], timings: Timings, field_name: str) -> T:
    """Await `coro`, adding its wall time to `timings.<field_name>`."""
    start = time.perf_counter()
    try:
        return await coro
    finally:
        setattr(timings, field_name, getattr(timings, field_name) + time.perf_counter() - start)


class TurnGenerator(Protocol):
    """An engine, or the scheduler's placement of one trajectory (reservation, retries, failover)."""

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult: ...


async def run_agent(state: AgentState, engine: Engine | TurnGenerator, sandbox: ToolRunner) -> Trajectory:
    """Drive one trajectory to its end; a TurnFailed marks it failed instead of raising."""
    t = state.trajectory
    start = time.perf_counter()
    try:
        while not state.done:
            prompt, params = state.next_request()
            state.add_generation(await timed(engine.generate(prompt, params), t.timings, "generation_s"))
            if state.pending_calls:
                state.add_feedback(await timed(run_tool_calls(sandbox, state.pending_calls), t.timings, "tool_s"))
    except TurnFailed as exc:
        log.warning("trajectory %d/%d failed: %s", t.problem_index, t.sample_index, exc)
        state.fail(str(exc))
    t.timings.total_s = time.perf_counter() - start
    return t
