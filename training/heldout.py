"""Accuracy of a checkpoint on held-out problems, through the rollout runtime and the code
service (the model writes code, the service runs it, the reward scores it; SPEC §2-§5).

The standard error treats problems as the unit: the samples of one problem are not
independent, so it is the spread of per-problem accuracy over problems, / sqrt(problems).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from rollout.runtime import build_runtime


@dataclass(frozen=True)
class Accuracy:
    mean: float  # mean reward over every scored sample
    stderr: float  # over problems (see module docstring)
    problems: int
    samples: int  # scored samples (failed trajectories are left out and counted below)
    failed: int
    tool_calls_per_trajectory: float

    def metrics(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}_accuracy": round(self.mean, 4), f"{prefix}_accuracy_stderr": round(self.stderr, 4),
                f"{prefix}_samples": self.samples, f"{prefix}_failed": self.failed,
                f"{prefix}_tool_calls_per_trajectory": round(self.tool_calls_per_trajectory, 3)}


def summarise(per_problem: list[list[float]], failed: int, tool_calls: int) -> Accuracy:
    scored = [r for rs in per_problem for r in rs]
    means = [sum(rs) / len(rs) for rs in per_problem if rs]
    n = len(means)
    mean = sum(scored) / len(scored) if scored else 0.0
    var = sum((m - sum(means) / n) ** 2 for m in means) / (n - 1) if n > 1 else 0.0
    return Accuracy(mean, math.sqrt(var / n) if n else 0.0, n, len(scored), failed,
                    tool_calls / max(len(scored) + failed, 1))


async def _measure(model: str, tokenizer: str, problems: list[str], answers: list[str], rollout: RolloutConfig,
                   sandbox: SandboxConfig, samples: int, max_turns: int, max_response_tokens: int,
                   temperature: float, seed: int) -> Accuracy:
    async with build_runtime(rollout, sandbox, model, tokenizer) as rt:
        groups = await rt.rollout(problems, samples, max_turns, max_response_tokens, temperature, seed)
        flat = [t for g in groups for t in g]
        rewards = await rt.score(flat, [a for a in answers for _ in range(samples)])
    per_problem: list[list[float]] = [[] for _ in problems]
    for t, r in zip(flat, rewards, strict=True):
        if r is not None:
            per_problem[t.problem_index].append(float(r))
    tool_calls = sum(len(t.tool_calls) for t in flat)
    return summarise(per_problem, groups.failed, tool_calls)


def heldout_accuracy(model: str, tokenizer: str, problems: list[str], answers: list[str], rollout: RolloutConfig,
                     sandbox: SandboxConfig, samples: int, max_turns: int, max_response_tokens: int,
                     temperature: float, seed: int) -> Accuracy:
    return asyncio.run(_measure(model, tokenizer, problems, answers, rollout, sandbox, samples, max_turns,
                                max_response_tokens, temperature, seed))
