"""The numbers of evaluation/metrics.py against direct computations."""

from __future__ import annotations

import itertools
import math
import random

import pandas as pd
import pytest

from evaluation.metrics import benchmark_metrics, majority_score, pass_at_k


@pytest.mark.parametrize("n,c,k", [(4, 0, 1), (4, 1, 1), (4, 2, 2), (16, 3, 4), (16, 15, 8), (8, 8, 8), (5, 2, 4)])
def test_pass_at_k_is_the_chance_that_k_draws_without_replacement_hit_a_correct_one(n, c, k):
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    brute = sum(any(samples[i] for i in s) for s in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(brute)


def test_majority_vote_ignores_missing_answers_and_breaks_ties_by_first_seen():
    assert majority_score(["12", None, " 12", "7"], [1.0, 0.0, 1.0, 0.0]) == 1.0
    assert majority_score(["7", "12", "12", "7"], [0.0, 1.0, 1.0, 0.0]) == 0.0  # tie: "7" came first
    assert majority_score([None, None], [0.0, 0.0]) == 0.0


def _frame(per_problem: list[list[float]]) -> pd.DataFrame:
    rows = []
    for i, scores in enumerate(per_problem):
        for j, s in enumerate(scores):
            rows.append({"problem_id": f"p{i}", "score": s, "answer": "1" if s else "2",
                         "response_tokens": 10 * (j + 1), "tool_statuses": ["ok", "error"] if j == 0 else ["ok"],
                         "finish_reason": "length" if j == 1 else "stop"})
    return pd.DataFrame(rows)


def test_benchmark_metrics():
    rng = random.Random(0)
    per_problem = [[float(rng.random() < q) for _ in range(4)] for q in (0.1, 0.5, 0.9, 0.3, 0.7)]
    m = benchmark_metrics(_frame(per_problem), [1, 2, 4, 16])
    means = [sum(s) / 4 for s in per_problem]
    mean = sum(means) / 5
    assert m["pass@1"] == pytest.approx(mean)
    assert m["pass@1_stderr"] == pytest.approx(math.sqrt(sum((x - mean) ** 2 for x in means) / 4 / 5))
    assert m["pass@4"] == pytest.approx(sum(any(s) for s in per_problem) / 5)
    assert "pass@16" not in m  # more than the samples drawn
    assert m["maj@4"] == pytest.approx(sum(sum(s) > 2 or (sum(s) == 2 and s[0] == 1) for s in per_problem) / 5)
    assert m["response_tokens_mean"] == pytest.approx(25.0)
    assert m["tool_calls_per_trajectory"] == pytest.approx(5 / 4)
    assert m["tool_error_ratio"] == pytest.approx(1 / 5)
    assert m["truncation_ratio"] == pytest.approx(0.25)
    assert (m["problems"], m["samples"]) == (5, 20)


def test_problems_weigh_equally_when_some_samples_are_missing():
    df = _frame([[1.0], [0.0, 0.0, 0.0, 0.0]])
    assert benchmark_metrics(df, [1])["pass@1"] == pytest.approx(0.5)
