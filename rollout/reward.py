"""Outcome reward (SPEC §5): 1 when the model's final answer matches the reference, else 0.

The answer comes only from text the model generated (`Trajectory.model_text`, the mask-1
turns, outside its tool calls), never from tool output: a `\\boxed{}` a program printed does not count. It is the
last `\\boxed{}` inside the last `<answer>` block, else the last `\\boxed{}` of the model's
text. Matching is math-verify inside the sandbox's isolated workers; a verification that
times out scores 0 and is counted (`Trajectory.verify_status == "timeout"`).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from rollout.trajectory import Trajectory
from sandbox.types import VerifyResult

log = logging.getLogger(__name__)

_BOXED = re.compile(r"\\boxed\s*\{")
_TOOL_CALL = re.compile(r"<tool_call>.*?(?:</tool_call>|\Z)", re.DOTALL)
_ANSWER_OPEN = "<answer>"
_ANSWER_CLOSE = "</answer>"


class Verifier(Protocol):
    """What scoring needs from the sandbox client (sandbox.client.SandboxClient)."""

    async def verify_batch(self, pairs: list[tuple[str, str]]) -> list[VerifyResult]: ...


def boxed_contents(text: str) -> list[str]:
    """Contents of every complete `\\boxed{...}` in order, nested braces balanced."""
    found = []
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    found.append(text[start:i])
                    break
    return found


def _last_answer_block(text: str) -> str | None:
    start = text.rfind(_ANSWER_OPEN)
    if start < 0:
        return None
    body = text[start + len(_ANSWER_OPEN) :]
    end = body.find(_ANSWER_CLOSE)
    return body if end < 0 else body[:end]  # an unclosed block (budget ran out) still counts


def extract_final_answer(model_text: str) -> str | None:
    """Last `\\boxed{}` of the last `<answer>` block, else of the whole text; None if there is none.

    Tool-call bodies are skipped: code the model sends (`print("\\boxed{...}")`) is an action,
    and what it prints comes back as feedback, which never counts.
    """
    model_text = _TOOL_CALL.sub(" ", model_text)
    block = _last_answer_block(model_text)
    if block is not None:
        inside = boxed_contents(block)
        if inside:
            return inside[-1].strip()
    everywhere = boxed_contents(model_text)
    return everywhere[-1].strip() if everywhere else None


_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")
_INTEGER = re.compile(r"[+-]?\d+(?:\.0+)?")


def extract_integer(model_text: str) -> int | None:
    """The final answer as an integer (RL data keeps integer answers only, SPEC §8), else None.

    Accepts `1,234`, `1{,}234`, `\\$12`, `12.0`, `\\text{12}`; rejects fractions, units and
    expressions, which the curation rules drop rather than guess.
    """
    answer = extract_final_answer(model_text)
    if answer is None:
        return None
    text = _TEXT_WRAPPER.sub(r"\1", answer)
    for junk in ("{,}", "\\,", "\\!", "\\ ", "\\$", "$", ",", " "):
        text = text.replace(junk, "")
    text = text.rstrip(".")
    if not _INTEGER.fullmatch(text):
        return None
    return int(text.split(".")[0])


async def score(trajectories: Sequence[Trajectory], references: Sequence[str], sandbox: Verifier) -> list[float]:
    """Reward of each trajectory against its reference; also fills reward/verify_status/timing."""
    if len(trajectories) != len(references):
        raise ValueError(f"{len(trajectories)} trajectories but {len(references)} references")
    rewards = [0.0] * len(trajectories)
    todo = [i for i, t in enumerate(trajectories) if t.final_answer is not None]
    # Verify the extracted answer only, re-boxed, so math-verify cannot pick up anything else.
    pairs = [(f"\\boxed{{{trajectories[i].final_answer}}}", str(references[i])) for i in todo]
    results = await sandbox.verify_batch(pairs) if pairs else []
    for i, result in zip(todo, results, strict=True):
        t = trajectories[i]
        rewards[i] = result.score if result.status == "ok" else 0.0
        t.verify_status = result.status
        t.timings.verification_s = result.elapsed_s
    for i, t in enumerate(trajectories):
        t.reward = rewards[i]
        if t.final_answer is None:
            t.verify_status = "ok"  # nothing to verify: no answer scores 0
    counts = Counter(t.verify_status for t in trajectories)
    if counts["timeout"] or counts["error"]:
        log.warning("verification: %d timed out, %d failed (scored 0)", counts["timeout"], counts["error"])
    return rewards
