"""The agreement filter of RL curation (SPEC §8, paper 4.2).

A filter model (Qwen3-32B in the paper config, the tiny random model in `tiny`) samples
`samples_per_problem` (16) answers per problem through the rollout runtime, with the
tool, exactly as RL rollouts run. Each sample's answer is the integer of its final
`\\boxed{}` (rollout.reward.extract_integer: model text only, never tool output). A problem
stays when at least `min_agreeing` (2) of those integers equal its label.

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
from data_prep.records import RLProblem

log = logging.getLogger(__name__)

_PROBLEMS_PER_CALL = 256  # problems per rollout() call: bounds memory, gives progress


@dataclass(frozen=True)
class Agreement:
    problem_id: str
    label: int
    answers: tuple[int | None, ...]  # the integer each sample answered, None when it gave none
    agreeing: int  # samples whose integer equals the label
    kept: bool
    tool_calls: int  # over all samples: how much the filter model used the tool


def agreement_of(problem: RLProblem, answers: list[int | None], tool_calls: int, min_agreeing: int) -> Agreement:
    agreeing = sum(1 for a in answers if a == problem.answer)
    return Agreement(problem.id, problem.answer, tuple(answers), agreeing, agreeing >= min_agreeing, tool_calls)


async def _sample(problems: list[RLProblem], cfg: AgreementFilterConfig, rollout_cfg: RolloutConfig,
                  sandbox_cfg: SandboxConfig, model: str, tokenizer: str) -> list[Agreement]:
    from rollout.reward import extract_integer
    from rollout.runtime import build_runtime

    out: list[Agreement] = []
    if cfg.sglang_urls:
        rollout_cfg = rollout_cfg.model_copy(update={"sglang_urls": list(cfg.sglang_urls)})
    async with build_runtime(rollout_cfg, sandbox_cfg, model, tokenizer) as runtime:
        for start in range(0, len(problems), _PROBLEMS_PER_CALL):
            chunk = problems[start:start + _PROBLEMS_PER_CALL]
            groups = await runtime.rollout(
                [p.problem for p in chunk], samples_per_problem=cfg.samples_per_problem, max_turns=cfg.max_turns,
                max_response_tokens=cfg.max_response_tokens, temperature=cfg.temperature, seed=cfg.seed + start,
            )
            for problem, group in zip(chunk, groups, strict=True):
                answers = [extract_integer(t.model_text) for t in group]
                out.append(agreement_of(problem, answers, sum(len(t.tool_calls) for t in group), cfg.min_agreeing))
            log.info("agreement filter: %d/%d problems sampled", len(out), len(problems))
    return out


def run_agreement_filter(problems: list[RLProblem], cfg: AgreementFilterConfig, rollout_cfg: RolloutConfig,
                         sandbox_cfg: SandboxConfig, model: str, tokenizer: str) -> list[Agreement]:
    """One Agreement per problem, in order (the caller keeps those with `kept`)."""
    if not problems:
        return []
    return asyncio.run(_sample(problems, cfg, rollout_cfg, sandbox_cfg, model, tokenizer))
