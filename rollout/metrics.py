"""Every number computed from scored samples, in one place (SPEC §6, §9).

Used by SFT's held-out measurement, the RL curves and selection, evaluation and the
learning report, so the same quantity is never computed two ways.

- pass@1: the mean reward of a problem's samples, then the mean over problems (SPEC §9:
  not best-of-k, not majority). Problems weigh equally even when some lost samples to
  engine failures. Its standard error is the spread of the per-problem means over
  problems / sqrt(problems): the samples of one problem are not independent.
- pass@k: the unbiased estimator 1 - C(n-c, k) / C(n, k) per problem, averaged over
  problems, for k no larger than the fewest samples of a problem.
- maj@k: the reward of the answer most samples of a problem gave (exact text after
  stripping; ties go to the answer given first; samples without an answer do not vote).
- Tool-error ratio: calls whose status is not `ok` over all calls, over every sample and
  within the correct ones (the paper's Figure 4). Where a standard error is wanted, it is
  clustered by problem (a ratio of sums).
- p_err, p_format, p_total: the RoC penalties of one trajectory (SPEC §6.4).

A quantity with nothing to measure (no tool call, no sample) is NaN in memory and null
in JSON.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_serializer, model_validator

from rollout.answer import TOOL_CALL


@dataclass(frozen=True)
class Outcome:
    """One scored sample, as the metrics see it."""

    reward: float  # 1.0 correct, 0.0 not (Blend's shaped reward is the RL stage's business)
    call_statuses: tuple[str, ...] = ()  # status of each tool call, in call order
    answer: str | None = None  # the final answer text the model gave; None: no answer
    response_tokens: int = 0  # every token after the prompt, tool feedback included
    finish_reason: str | None = None  # stop | eos | turns | length


@dataclass(frozen=True)
class Estimate:
    """A mean and its standard error over `units` (problems)."""

    mean: float
    stderr: float
    units: int


Groups = Sequence[Sequence[Outcome]]  # one inner sequence per problem


def _nan_if_none(value: object) -> object:
    return math.nan if value is None else value


Rate = Annotated[float, BeforeValidator(_nan_if_none)]  # NaN in memory, null in JSON


def mean_and_stderr(values: Sequence[float]) -> Estimate:
    """Mean of `values` and its standard error (unbiased variance); NaN for none."""
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, 0)
    mean = sum(values) / n  # plain sums in order: the figures printed before this module stay the same
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return Estimate(mean, math.sqrt(var / n), n)


def per_problem_pass1(groups: Groups) -> list[float]:
    """Each problem's mean reward; problems without a scored sample are left out."""
    return [sum(o.reward for o in g) / len(g) for g in groups if g]


def pass_at_1(groups: Groups) -> Estimate:
    return mean_and_stderr(per_problem_pass1(groups))


def paired_difference(after: Mapping[Hashable, float], before: Mapping[Hashable, float]) -> Estimate:
    """Mean per-problem difference `after - before` over the problems both have, with its
    standard error over problems (the gain of one checkpoint over another on one test set)."""
    return mean_and_stderr([after[k] - before[k] for k in after if k in before])


def unbiased_pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that k of n samples, drawn without replacement, hold one of the c correct ones."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_k(groups: Groups, k: int) -> float:
    scored = [g for g in groups if g]
    return sum(unbiased_pass_at_k(len(g), sum(o.reward > 0 for o in g), k) for g in scored) / len(scored) \
        if scored else math.nan


def majority_reward(answers: Sequence[str | None], rewards: Sequence[float]) -> float:
    """The reward of the most common answer (see the module docstring); 0 when none answered."""
    votes = Counter(a.strip() for a in answers if isinstance(a, str) and a.strip())
    if not votes:
        return 0.0
    top = max(votes.values())
    winner = next(a.strip() for a in answers if isinstance(a, str) and a.strip() and votes[a.strip()] == top)
    return next(r for a, r in zip(answers, rewards, strict=True) if isinstance(a, str) and a.strip() == winner)


def maj_at_k(groups: Groups) -> float:
    scored = [g for g in groups if g]
    return sum(majority_reward([o.answer for o in g], [o.reward for o in g]) for g in scored) / len(scored) \
        if scored else math.nan


def tool_error_ratio(outcomes: Iterable[Outcome], correct_only: bool = False) -> float:
    """Share of tool calls whose status is not `ok` (within correct samples if `correct_only`)."""
    statuses = [s for o in outcomes if not correct_only or o.reward > 0 for s in o.call_statuses]
    return sum(s != "ok" for s in statuses) / len(statuses) if statuses else math.nan


def tool_errors(group: Sequence[Outcome], correct_only: bool = False) -> tuple[int, int]:
    """(failed calls, calls) of one problem's samples, within the correct ones if `correct_only`."""
    statuses = [s for o in group if not correct_only or o.reward > 0 for s in o.call_statuses]
    return sum(s != "ok" for s in statuses), len(statuses)


def tool_error_ratio_estimate(groups: Groups, correct_only: bool = False) -> Estimate:
    """The tool-error ratio with its standard error clustered by problem; with `correct_only`
    the clusters are the problems that have a correct sample."""
    return ratio_estimate([tool_errors(g, correct_only) for g in groups
                           if g and (not correct_only or any(o.reward > 0 for o in g))])


def ratio_estimate(pairs: Sequence[tuple[int, int]]) -> Estimate:
    """Sum of numerators over sum of denominators, with its standard error clustered by unit
    (the linearised variance of a ratio of sums); `units` counts the denominator's total."""
    total = sum(d for _, d in pairs)
    if total == 0:
        return Estimate(math.nan, math.nan, 0)
    r = sum(e for e, _ in pairs) / total
    n = len(pairs)
    se = math.sqrt(sum((e - r * d) ** 2 for e, d in pairs) * n / max(n - 1, 1)) / total
    return Estimate(r, se, total)


# ---- RoC penalties of one trajectory (SPEC §6.4) ----


_CLOSED_ANSWER = re.compile(r"<answer>.*?</answer>", re.DOTALL)


def p_err(call_statuses: Sequence[str]) -> float:
    """Share of the trajectory's tool calls whose status is not `ok`; 0.5 when it made none."""
    if not call_statuses:
        return 0.5
    return sum(s != "ok" for s in call_statuses) / len(call_statuses)


def _answer_openings(turn: str) -> int:
    # The regex only runs on the rare turn that has both an answer and a tool call.
    n = turn.count("<answer>")
    return TOOL_CALL.sub(" ", turn).count("<answer>") if n and "<tool_call>" in turn else n


def p_format(turns: Sequence[str]) -> float:
    """1 without an `<answer>` block, else min(1, (blocks - 1) / assistant turns). Blocks are
    counted in the model's turns outside tool calls; an unclosed block counts."""
    blocks = sum(_answer_openings(turn) for turn in turns)
    return 1.0 if blocks == 0 else min(1.0, (blocks - 1) / len(turns))


def p_total(call_statuses: Sequence[str], turns: Sequence[str]) -> float:
    """RoC's penalty of a positive: `p_err + p_format` (lower is kept more often)."""
    return p_err(call_statuses) + p_format(turns)


def p_err_release(says_error: Sequence[bool]) -> float:
    """p_err as the authors' release computes it (microsoft/rStar `roc.py`): the share of tool
    responses whose text contains "error" in any case, whatever the call's status; 0.5 without one."""
    return sum(says_error) / len(says_error) if says_error else 0.5


def p_format_release(turns: Sequence[str]) -> float:
    """p_format as the release computes it: 1 unless `<answer>` and `</answer>` both occur and every
    one of them is in a closed block; else min(1, (blocks - 1) / turns after the first). The
    release counts `<|im_start|>assistant` openers in the response, and the first turn's is in
    the prompt, so one turn gives 1: a correct answer with no tool call weighs 0.5 + 1.0."""
    text = "".join(turns)
    opened, closed = text.count("<answer>"), text.count("</answer>")
    blocks = len(_CLOSED_ANSWER.findall(text))
    if not opened or not closed or opened != blocks or closed != blocks or len(turns) < 2:
        return 1.0
    return min(1.0, (blocks - 1) / (len(turns) - 1))


# ---- the summary of one set of problems ----


class SampleSummary(BaseModel):
    """What evaluation reports per benchmark and SFT per held-out measurement. In JSON the
    estimators keep their usual names: `pass@1`, `pass@1_stderr`, `pass@4`, `maj@16`."""

    model_config = ConfigDict(extra="forbid")

    problems: int = 0
    samples: int = 0  # scored samples (failed trajectories are not among them)
    failed: int = 0  # trajectories no engine finished: left out of every number, counted here
    pass1: Rate = math.nan
    pass1_stderr: Rate = math.nan
    pass_at: dict[int, Rate] = {}  # k -> unbiased pass@k, for 1 < k <= the fewest samples of a problem
    maj_k: int | None = None  # the k of maj@k: the fewest samples of a problem
    maj: Rate = math.nan
    response_tokens_mean: Rate = math.nan
    tool_calls_per_trajectory: Rate = math.nan
    tool_error_ratio: Rate = math.nan
    tool_error_ratio_correct: Rate = math.nan  # the paper's Figure 4, on a test set
    truncation_ratio: Rate = math.nan  # trajectories cut by the token budget
    answered_ratio: Rate = math.nan  # samples with a final answer

    @model_validator(mode="before")
    @classmethod
    def _from_json_names(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        out = {k: v for k, v in data.items() if "@" not in k}
        out.setdefault("pass_at", {})
        for key, value in data.items():
            if key == "pass@1":
                out["pass1"] = value
            elif key == "pass@1_stderr":
                out["pass1_stderr"] = value
            elif key.startswith("pass@"):
                out["pass_at"] = {**out["pass_at"], int(key[5:]): value}
            elif key.startswith("maj@"):
                out["maj_k"], out["maj"] = int(key[4:]), value
        return out

    @model_serializer(mode="wrap")
    def _to_json_names(self, handler):  # noqa: ANN001 - pydantic's serializer hook
        data = handler(self)
        out = {"problems": data.pop("problems"), "samples": data.pop("samples"),
               "pass@1": data.pop("pass1"), "pass@1_stderr": data.pop("pass1_stderr")}
        out |= {f"pass@{k}": v for k, v in data.pop("pass_at").items()}
        maj_k, maj = data.pop("maj_k"), data.pop("maj")
        if maj_k is not None:
            out[f"maj@{maj_k}"] = maj
        failed = data.pop("failed")
        return out | data | {"failed": failed}

    def number(self, name: str) -> float:
        """A metric by its report name (`pass@1`, `pass@4`, `maj@16`, `tool_error_ratio`, …); NaN if absent."""
        if name == "pass@1":
            return self.pass1
        if name == "pass@1_stderr":
            return self.pass1_stderr
        if name.startswith("pass@"):
            return self.pass_at.get(int(name[5:]), math.nan)
        if name.startswith("maj@"):
            return self.maj if self.maj_k == int(name[4:]) else math.nan
        value = getattr(self, name, math.nan)
        return float(value) if isinstance(value, int | float) else math.nan


def summarise(groups: Groups, pass_k: Iterable[int] = (), failed: int = 0) -> SampleSummary:
    """Every number of one set of problems (one group of scored samples per problem)."""
    flat = [o for g in groups for o in g]
    if not flat:
        return SampleSummary(failed=failed)
    p1 = pass_at_1(groups)
    fewest = min(len(g) for g in groups if g)
    n = len(flat)
    return SampleSummary(
        problems=p1.units, samples=n, failed=failed, pass1=p1.mean, pass1_stderr=p1.stderr,
        pass_at={k: pass_at_k(groups, k) for k in sorted(set(pass_k)) if 1 < k <= fewest},
        maj_k=fewest, maj=maj_at_k(groups),
        response_tokens_mean=sum(o.response_tokens for o in flat) / n,
        tool_calls_per_trajectory=sum(len(o.call_statuses) for o in flat) / n,
        tool_error_ratio=tool_error_ratio(flat), tool_error_ratio_correct=tool_error_ratio(flat, correct_only=True),
        truncation_ratio=sum(o.finish_reason == "length" for o in flat) / n,
        answered_ratio=sum(o.answer is not None for o in flat) / n,
    )
