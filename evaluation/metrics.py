"""The numbers of one benchmark, from its scored samples (SPEC §9).

- pass@1: mean correctness over the samples of a problem, then over problems (not
  best-of-k, not majority). Its standard error is the spread of the per-problem means
  over problems / sqrt(problems): samples of one problem are not independent.
- pass@k: the unbiased estimator 1 - C(n-c, k) / C(n, k) per problem (n samples, c
  correct), averaged over problems; reported for each configured k <= the fewest samples.
- maj@k: the score of the answer most samples of a problem gave (exact text after
  stripping; ties go to the answer given first; samples without an answer do not vote).
- Response length: tokens after the prompt (model and tool feedback), as the paper's
  Table 4 counts; tool calls per trajectory; tool-error ratio = calls whose status is not
  `ok` / all calls; truncation ratio = trajectories cut by the token budget.
"""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd


def pass_at_k(n: int, c: int, k: int) -> float:
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def majority_score(answers: list, scores: list[float]) -> float:
    votes = Counter(a.strip() for a in answers if isinstance(a, str) and a.strip())
    if not votes:
        return 0.0
    top = max(votes.values())
    winner = next(a.strip() for a in answers if isinstance(a, str) and a.strip() and votes[a.strip()] == top)
    return next(s for a, s in zip(answers, scores, strict=True) if isinstance(a, str) and a.strip() == winner)


def _error_ratio(statuses: list[str]) -> float:
    return sum(s != "ok" for s in statuses) / len(statuses) if statuses else math.nan


def benchmark_metrics(samples: pd.DataFrame, pass_k: list[int]) -> dict[str, float]:
    """`samples`: one row per scored sample with problem_id, score, answer,
    response_tokens, tool_statuses, finish_reason."""
    if samples.empty:
        return {"problems": 0, "samples": 0, "pass@1": math.nan, "pass@1_stderr": math.nan}
    groups = list(samples.groupby("problem_id", sort=False))
    per_problem = [g["score"].mean() for _, g in groups]
    n = len(per_problem)
    mean = sum(per_problem) / n
    var = sum((m - mean) ** 2 for m in per_problem) / (n - 1) if n > 1 else 0.0
    fewest = min(len(g) for _, g in groups)
    out: dict[str, float] = {"problems": n, "samples": len(samples), "pass@1": mean,
                             "pass@1_stderr": math.sqrt(var / n)}
    for k in sorted(set(pass_k)):
        if 1 < k <= fewest:
            out[f"pass@{k}"] = sum(pass_at_k(len(g), int((g["score"] > 0).sum()), k) for _, g in groups) / n
    out[f"maj@{fewest}"] = sum(majority_score(list(g["answer"]), list(g["score"])) for _, g in groups) / n
    calls = [s for statuses in samples["tool_statuses"] for s in statuses]
    correct_calls = [s for statuses in samples.loc[samples["score"] > 0, "tool_statuses"] for s in statuses]
    out |= {
        "response_tokens_mean": float(samples["response_tokens"].mean()),
        "tool_calls_per_trajectory": len(calls) / len(samples),
        "tool_error_ratio": _error_ratio(calls),
        "tool_error_ratio_correct": _error_ratio(correct_calls),  # the paper's Figure 4, on the test set
        "truncation_ratio": float((samples["finish_reason"] == "length").mean()),
        "answered_ratio": float(samples["answer"].notna().mean()),
    }
    return out
