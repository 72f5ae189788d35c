"""The agreement filter of RL curation (SPEC §8, paper 4.2).

A filter model (Qwen3-32B in the paper config, the tiny random model in `tiny`) samples
`samples_per_problem` (16) answers per problem through the rollout runtime, with the
tool, exactly as RL rollouts run. Each sample's answer is its final `\\boxed{}` (model
turns only, never tool output), read as an integer by the rules labels follow
(rollout.answer: `\\boxed{1, 2}` is no integer, `1,000` is 1000). An answer that is no
integer, or longer than any int64 label, counts as None; its text is kept. A problem
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
from rollout.answer import INT64_DIGITS, NotAnInteger, final_answer, parse_integer

log = logging.getLogger(__name__)

_PROBLEMS_PER_CALL = 256  # problems per rollout() call: bounds memory, gives progress
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


def sample_integer(answer: str | None) -> int | None:
    """A sample's integer; None for no answer, a non-integer, or one no int64 label can equal."""
    if answer is None:
        return None
    try:
        return parse_integer(answer, INT64_DIGITS)
    except NotAnInteger:
        return None


def agreement_of(problem: RLProblem, turns_per_sample: list[list[str] | None], tool_calls: int,
                 min_agreeing: int) -> Agreement:
    """Agreement of one problem's samples, each given as the model's own turns (None: the
    trajectory failed; its partial text may hold a box, which must not count)."""
    texts = [None if turns is None else final_answer(turns) for turns in turns_per_sample]
    answers = [sample_integer(t) for t in texts]
    agreeing = sum(1 for a in answers if a == problem.answer)
    cut = tuple(None if t is None else t[:_ANSWER_TEXT_CHARS] for t in texts)
    return Agreement(problem.id, problem.answer, tuple(answers), cut, agreeing,
                     agreeing >= min_agreeing, tool_calls, sum(turns is None for turns in turns_per_sample))


async def _sample(problems: list[RLProblem], cfg: AgreementFilterConfig, rollout_cfg: RolloutConfig,
                  sandbox_cfg: SandboxConfig, model: str, tokenizer: str) -> list[Agreement]:
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
                out.append(agreement_of(problem, [None if t.failed else t.turns for t in group],
                                        sum(len(t.tool_calls) for t in group), cfg.min_agreeing))
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
