"""Outcome reward (SPEC §5): 1 when the model's final answer matches the reference, else 0.

The answer is `rollout.answer.final_answer` of the model's own turns (never tool output):
the last `\\boxed{}` inside the last `<answer>` block, else the last `\\boxed{}` of the
model's text. A string reference is matched by math-verify inside the sandbox's isolated
workers; a verification that times out scores 0 and is counted
(`Trajectory.verify_status == "timeout"`). A `LetterReference` (GPQA) is matched by
letter here (`rollout.answer.letters_match`), an `IntegerReference` (RL curation's agreement
filter) by the integer rules of `rollout.answer.answer_integer`: no parser, nothing to isolate.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rollout.answer import IntegerReference, LetterReference, answer_integer, letters_match
from rollout.trajectory import Trajectory
from sandbox.types import VerifyResult, VerifyStatus

log = logging.getLogger(__name__)


class Verifier(Protocol):
    """What scoring needs from the sandbox client (sandbox.client.SandboxClient)."""

    async def verify_batch(self, pairs: list[tuple[str, str]]) -> list[VerifyResult]: ...


@dataclass(frozen=True)
class Verdict:
    """How one answer scored against its reference."""

    reward: float  # 1.0 or 0.0
    status: VerifyStatus  # ok | timeout | error; ok also when nothing needed verifying (no answer, a letter)
    elapsed_s: float = 0.0  # time math-verify took in the isolated worker


Reference = str | LetterReference | IntegerReference


async def verify_answers(answers: Sequence[str | None], references: Sequence[Reference],
                         sandbox: Verifier | None) -> list[Verdict]:
    """The reward of each final answer (None: the model gave none) against its reference."""
    if len(answers) != len(references):
        raise ValueError(f"{len(answers)} answers but {len(references)} references")
    verdicts = [Verdict(0.0, "ok")] * len(answers)
    todo = [i for i, a in enumerate(answers) if a is not None and isinstance(references[i], str)]
    # Verify the extracted answer only, re-boxed, so math-verify cannot pick up anything else.
    pairs = [(f"\\boxed{{{answers[i]}}}", str(references[i])) for i in todo]
    if pairs and sandbox is None:
        raise ValueError(f"{len(pairs)} answers need math-verify, but no verifier was given")
    results = await sandbox.verify_batch(pairs) if pairs else []
    for i, result in zip(todo, results, strict=True):
        verdicts[i] = Verdict(result.score if result.status == "ok" else 0.0, result.status, result.elapsed_s)
    for i, ref in enumerate(references):
        if isinstance(ref, LetterReference):
            verdicts[i] = Verdict(float(letters_match(answers[i], ref.letter, ref.letters)), "ok")
        elif isinstance(ref, IntegerReference):
            verdicts[i] = Verdict(float(answer_integer(answers[i]) == ref.value), "ok")
    counts = Counter(v.status for v in verdicts)
    if counts["timeout"] or counts["error"]:
        log.warning("verification: %d timed out, %d failed (scored 0)", counts["timeout"], counts["error"])
    return verdicts


async def score(trajectories: Sequence[Trajectory], references: Sequence[Reference],
                sandbox: Verifier | None) -> list[float]:
    """Reward of each trajectory against its reference; also fills reward/verify_status/timing."""
    if len(trajectories) != len(references):
        raise ValueError(f"{len(trajectories)} trajectories but {len(references)} references")
    verdicts = await verify_answers([t.final_answer for t in trajectories], references, sandbox)
    for t, v in zip(trajectories, verdicts, strict=True):
        t.reward, t.verify_status, t.timings.verification_s = v.reward, v.status, v.elapsed_s
    return [v.reward for v in verdicts]
