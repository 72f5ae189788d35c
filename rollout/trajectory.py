"""The record of one rollout (SPEC §2): what RL trains on and what evaluation scores.

`prompt_ids + response_ids` is the whole token sequence; `loss_mask`, `logprobs` align
with `response_ids` (the shape TRL's `rollout_func` wants: completion ids, logprobs,
env_mask). The response budget counts every response token, tool feedback included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rollout.metrics import Outcome
from sandbox.types import CallStatus, VerifyStatus

# stop: a turn closed by end-of-turn without a tool call; eos: a turn ended by the model's
# end-of-text token (Qwen3-Base's <|endoftext|>); turns: limit T; length: the budget;
# failed: the engine never answered a turn (see Trajectory.failure).
TrajectoryFinish = Literal["stop", "eos", "turns", "length", "failed"]


@dataclass
class ToolCallRecord:
    """One tool call the model made and how it went."""

    turn: int  # index of the assistant turn (0-based) that made the call
    status: CallStatus  # ok | error | timeout | invalid_call | resource_limit (drives p_err, SPEC §6)
    elapsed_s: float  # time inside the service for this call, seconds (0 for calls answered locally)
    feedback_chars: int  # length of the feedback text the model got, characters
    # Its feedback contains "error" in any case: what the release's p_err counts instead of the status.
    says_error: bool = False


@dataclass
class Timings:
    """Wall-clock seconds spent on one trajectory, by kind."""

    queue_s: float = 0.0  # waiting for a KV reservation on an engine (dynamic) or a turn barrier (static)
    generation_s: float = 0.0  # awaiting the engine, summed over turns (includes engine-side queueing)
    tool_s: float = 0.0  # awaiting the sandbox, summed over turns
    verification_s: float = 0.0  # answer verification (filled by rollout.reward.score)
    total_s: float = 0.0  # first request to last token


@dataclass
class Trajectory:
    """One problem, one sample: every token, who wrote it, and how the rollout went."""

    problem_index: int  # position of the problem in the rollout() call
    sample_index: int  # 0..samples_per_problem-1
    prompt_ids: list[int]  # rendered system + tools + problem + assistant header, tokens
    response_ids: list[int] = field(default_factory=list)  # everything after the prompt, tokens
    loss_mask: list[int] = field(default_factory=list)  # len(response_ids); 1 on model-generated tokens only
    logprobs: list[float] = field(default_factory=list)  # len(response_ids); sampling log-prob, 0.0 where mask 0
    turns: list[str] = field(default_factory=list)  # text of each assistant turn as generated (specials kept)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)  # in call order
    final_answer: str | None = None  # rollout.answer.final_answer of the model's turns; None if none
    finish_reason: TrajectoryFinish | None = None  # see TrajectoryFinish
    # Why the trajectory failed (engine errors after every retry), None if it did not.
    # A failed trajectory is incomplete: leave it out of training and scoring.
    failure: str | None = None
    engine_attempts: int = 0  # generation requests that failed and were retried or gave up
    engine_index: int = -1  # engine that served its turns (pinned, SPEC §4; moved only after an engine error)
    seed: int = 0  # sampling seed of the first turn; turn k uses seed + k
    # Per assistant turn, the weight version that answered it (GenerationResult.weight_version):
    # what asynchronous RL measures staleness by. None where the engine could not tell.
    weight_versions: list[int | None] = field(default_factory=list)
    timings: Timings = field(default_factory=Timings)
    reward: float | None = None  # 1.0 / 0.0 once scored (rollout.reward.score)
    verify_status: VerifyStatus | None = None  # ok | timeout | error once scored

    @property
    def model_text(self) -> str:
        """All text the model generated (mask 1), turns joined: the only place answers come from."""
        return "".join(self.turns)

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def call_statuses(self) -> tuple[CallStatus, ...]:
        """Status of each tool call, in call order (what p_err and the tool-error ratio count)."""
        return tuple(c.status for c in self.tool_calls)

    def outcome(self) -> Outcome:
        """This trajectory as rollout.metrics sees it; it must have been scored."""
        if self.reward is None:
            raise ValueError(f"trajectory {self.problem_index}/{self.sample_index} has no reward (failed or unscored)")
        return Outcome(self.reward, self.call_statuses, self.final_answer, self.response_tokens, self.finish_reason)

    @property
    def oldest_weights(self) -> int | None:
        """The oldest weight version among its turns (None when no turn reported one)."""
        known = [v for v in self.weight_versions if v is not None]
        return min(known) if known else None

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def response_tokens(self) -> int:
        return len(self.response_ids)

    @property
    def generated_tokens(self) -> int:
        return sum(self.loss_mask)

    def append(self, ids: list[int], mask_value: int, logprobs: list[float] | None = None) -> None:
        """Add a span of tokens written by the model (mask 1) or by the environment (mask 0)."""
        self.response_ids.extend(ids)
        self.loss_mask.extend([mask_value] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
