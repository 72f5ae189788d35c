"""The agreement filter of RL curation (SPEC §8, paper 4.2).

A filter model (Qwen3-32B in the paper config, the tiny random model in `tiny`) samples
`samples_per_problem` (16) answers per problem through the rollout runtime's one
scored-sampling call, with the tool, exactly as RL rollouts run. Each sample's answer is
its final `\\boxed{}` (model turns only, never tool output), scored against the label as
an `IntegerReference`: read as an integer by the rules labels follow (rollout.answer:
`\\boxed{1, 2}` is no integer, `1,000` is 1000), no math-verify. An answer that is no
integer, or longer than any int64 label, counts as None; its text is kept. A problem
stays when at least `min_agreeing` (2) of its samples agree with its label.

The tiny model answers at random, so in `tiny` nearly every filtered problem is dropped;
that is the honest outcome, and why `tiny` routes only a few problems through it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from configs.data import AgreementFilterConfig
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from datalib.records import RLProblem
from rollout.answer import IntegerReference, answer_integer
from rollout.groups import Problem, ScoredGroup
from stagekit import progress

log = logging.getLogger(__name__)

_PROBLEMS_PER_CALL = 256  # problems per sample_and_score call: bounds memory, gives progress
_ANSWER_TEXT_CHARS = 200  # a boxed answer kept for the record, not a copy of a runaway generation


@dataclass(frozen=True)
class Agreement:
    problem_id: str
    label: int
    answers: tuple[int | None, ...]  # the integer each sample answered, None when it gave none
    answer_texts: tuple[str | None, ...]  # each sample's boxed answer as written (cut), None: no box
    agreeing: int  # samples whose integer equals the label
    kept: bool
    tool_calls: int  # over all samples: how much the filter model used the tool
    failed_samples: int = 0  # trajectories no engine finished (rollout failure isolation): no answer


def agreement_of(problem: RLProblem, group: ScoredGroup, min_agreeing: int) -> Agreement:
    """Agreement of one problem's samples; a failed trajectory (no engine finished it) gives no
    answer, whatever box its partial text holds."""
    texts = [None if t.failed else t.final_answer for t in group]
    cut = tuple(None if a is None else a[:_ANSWER_TEXT_CHARS] for a in texts)
    return Agreement(problem.id, problem.answer, tuple(answer_integer(a) for a in texts), cut, group.solved,
                     group.solved >= min_agreeing, sum(len(t.tool_calls) for t in group), group.failed)


async def _sample(problems: list[RLProblem], cfg: AgreementFilterConfig, rollout_cfg: RolloutConfig,
                  sandbox_cfg: SandboxConfig, model: str, tokenizer: str) -> list[Agreement]:
    from rollout.runtime import build_runtime

    out: list[Agreement] = []
    if cfg.sglang_urls:
        rollout_cfg = rollout_cfg.model_copy(update={"sglang_urls": list(cfg.sglang_urls)})
    async with build_runtime(rollout_cfg, sandbox_cfg, model, tokenizer, progress=progress.report) as runtime:
        for start in range(0, len(problems), _PROBLEMS_PER_CALL):
            chunk = problems[start:start + _PROBLEMS_PER_CALL]
            settings = rollout_cfg.sampling(cfg.temperature, cfg.max_response_tokens, cfg.max_turns, cfg.seed + start)
            groups = await runtime.sample_and_score([Problem(p.problem, IntegerReference(p.answer)) for p in chunk],
                                                    cfg.samples_per_problem, settings)
            out += [agreement_of(p, group, cfg.min_agreeing) for p, group in zip(chunk, groups, strict=True)]
            log.info("agreement filter: %d/%d problems sampled", len(out), len(problems))
            if groups.failed:
                log.warning("agreement filter: %d trajectories failed and count as no answer: %s",
                            groups.failed, dict(groups.failures))
    return out


def run_agreement_filter(problems: list[RLProblem], cfg: AgreementFilterConfig, rollout_cfg: RolloutConfig,
                         sandbox_cfg: SandboxConfig, model: str, tokenizer: str) -> list[Agreement]:
    """One Agreement per problem, in order (the caller keeps those with `kept`)."""
    if not problems:
        return []
    return asyncio.run(_sample(problems, cfg, rollout_cfg, sandbox_cfg, model, tokenizer))
