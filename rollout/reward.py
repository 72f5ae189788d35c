"""Outcome reward (SPEC §5): 1 when the model's final answer matches the reference, else 0.

The answer is `rollout.answer.final_answer` of the model's own turns (never tool output):
the last `\\boxed{}` inside the last `<answer>` block, else the last `\\boxed{}` of the
model's text. A string reference is matched by math-verify inside the sandbox's isolated
workers; a verification that times out scores 0 and is counted
(`Trajectory.verify_status == "timeout"`). A `LetterReference` (GPQA) is matched by
letter here (`rollout.answer.letters_match`): no parser, nothing to isolate.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from rollout.answer import LetterReference, letters_match
from rollout.trajectory import Trajectory
from sandbox.types import VerifyResult

log = logging.getLogger(__name__)


class Verifier(Protocol):
    """What scoring needs from the sandbox client (sandbox.client.SandboxClient)."""

    async def verify_batch(self, pairs: list[tuple[str, str]]) -> list[VerifyResult]: ...


async def score(trajectories: Sequence[Trajectory], references: Sequence[str | LetterReference],
                sandbox: Verifier) -> list[float]:
    """Reward of each trajectory against its reference; also fills reward/verify_status/timing."""
    if len(trajectories) != len(references):
        raise ValueError(f"{len(trajectories)} trajectories but {len(references)} references")
    rewards = [0.0] * len(trajectories)
    todo = [i for i, t in enumerate(trajectories)
            if t.final_answer is not None and not isinstance(references[i], LetterReference)]
    # Verify the extracted answer only, re-boxed, so math-verify cannot pick up anything else.
    pairs = [(f"\\boxed{{{trajectories[i].final_answer}}}", str(references[i])) for i in todo]
    results = await sandbox.verify_batch(pairs) if pairs else []
    for i, result in zip(todo, results, strict=True):
        t = trajectories[i]
        rewards[i] = result.score if result.status == "ok" else 0.0
        t.verify_status = result.status
        t.timings.verification_s = result.elapsed_s
    for i, (t, ref) in enumerate(zip(trajectories, references, strict=True)):
        if isinstance(ref, LetterReference):
            rewards[i] = float(letters_match(t.final_answer, ref.letter, ref.letters))
        t.reward = rewards[i]
        if t.final_answer is None or isinstance(ref, LetterReference):
            t.verify_status = "ok"  # nothing sent to verify: no answer scores 0, a letter is compared here
    counts = Counter(t.verify_status for t in trajectories)
    if counts["timeout"] or counts["error"]:
        log.warning("verification: %d timed out, %d failed (scored 0)", counts["timeout"], counts["error"])
    return rewards
