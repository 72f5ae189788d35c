"""Accuracy of a checkpoint on held-out problems, through the rollout runtime and the code
service (the model writes code, the service runs it, the reward scores it; SPEC §2-§5).

Accuracy is pass@1 as evaluation computes it (rollout/metrics.py): the mean over
problems of each problem's mean reward, with its standard error over problems. Until
issue 20 the mean here was taken over samples while the standard error was over
problems; the two agree when no trajectory fails, and problems-first is the definition
(SPEC §9) that keeps a problem from weighing less because an engine lost one of its samples.
Tool calls per trajectory are likewise over the scored trajectories only, as everywhere.
"""

from __future__ import annotations

import asyncio

from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from configs.schema import SFTHeldoutConfig
from datalib.eval_texts import synthetic_eval_set
from rollout.groups import Problem
from rollout.metrics import SampleSummary, summarise
from rollout.runtime import build_runtime
from stagekit import progress


def heldout_metrics(summary: SampleSummary, prefix: str) -> dict[str, float]:
    """The manifest's `<prefix>_accuracy`, `_accuracy_stderr`, `_samples`, `_failed`, `_tool_calls_per_trajectory`."""
    return {f"{prefix}_accuracy": round(summary.pass1, 4), f"{prefix}_accuracy_stderr": round(summary.pass1_stderr, 4),
            f"{prefix}_samples": summary.samples, f"{prefix}_failed": summary.failed,
            f"{prefix}_tool_calls_per_trajectory": round(summary.tool_calls_per_trajectory, 3)}


async def _measure(cfg: SFTHeldoutConfig, model: str, tokenizer: str, rollout: RolloutConfig, sandbox: SandboxConfig,
                   problems: int, samples: int) -> SampleSummary:
    todo = [Problem(p.problem, str(p.answer)) for p in synthetic_eval_set(problems, cfg.seed)]
    settings = rollout.sampling(cfg.temperature, cfg.max_response_tokens, cfg.max_turns, cfg.seed)
    async with build_runtime(rollout, sandbox, model, tokenizer, progress=progress.report) as rt:
        groups = await rt.sample_and_score(todo, samples, settings)
    return summarise(groups.outcomes(), failed=groups.failed)


def heldout_accuracy(cfg: SFTHeldoutConfig, model: str, tokenizer: str, rollout: RolloutConfig,
                     sandbox: SandboxConfig, problems: int | None = None, samples: int | None = None) -> SampleSummary:
    """pass@1 of `model` on the first `problems` (default `cfg.problems`) generated held-out
    problems, `samples` (default `cfg.samples_per_problem`) each."""
    return asyncio.run(_measure(cfg, model, tokenizer, rollout, sandbox, problems or cfg.problems,
                                samples or cfg.samples_per_problem))
