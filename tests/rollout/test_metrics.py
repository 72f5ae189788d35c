"""The numbers of rollout/metrics.py against direct computations, on evaluation's samples table."""

from __future__ import annotations

import itertools
import json
import math
import random

import pandas as pd
import pytest

from evaluation.evaluate import sample_outcomes
from rollout.metrics import majority_reward as majority_score
from rollout.metrics import summarise
from rollout.metrics import unbiased_pass_at_k as pass_at_k


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


def benchmark_metrics(samples: pd.DataFrame, pass_k: list[int]) -> dict:
    """The summary as results.json holds it."""
    return summarise(list(sample_outcomes(samples).values()), pass_k).model_dump()


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


def test_the_summary_keeps_the_estimators_usual_names_in_json_and_reads_them_back():
    from rollout.metrics import Outcome, SampleSummary

    groups = [[Outcome(1.0, ("ok",), "1"), Outcome(0.0, ("error",), "2")], [Outcome(0.0, (), None)] * 2]
    s = summarise(groups, pass_k=[1, 2, 4])
    data = json.loads(s.model_dump_json())
    assert list(data)[:6] == ["problems", "samples", "pass@1", "pass@1_stderr", "pass@2", "maj@2"]
    assert "pass@4" not in data and data["failed"] == 0
    assert data["tool_error_ratio_correct"] == 0.0 and data["pass@2"] == 0.5
    back = SampleSummary.model_validate_json(s.model_dump_json())
    assert back.model_dump_json() == s.model_dump_json()  # (NaN != NaN, so compare the files)
    assert back.number("pass@2") == 0.5 and back.number("maj@2") == s.maj and math.isnan(back.number("pass@16"))
    empty = SampleSummary.model_validate({"pass@1": None})  # nothing to measure: null in, NaN out
    assert math.isnan(empty.pass1) and json.loads(empty.model_dump_json())["pass@1"] is None


def test_tool_error_ratio_within_correct_samples_is_clustered_over_the_problems_that_have_one():
    from rollout.metrics import Outcome, tool_error_ratio_estimate

    groups = [[Outcome(1.0, ("ok", "error"))], [Outcome(1.0, ("ok", "ok", "ok", "error"))],
              [Outcome(0.0, ("error",) * 5)]]  # no correct sample: not a cluster of the within-correct ratio
    r = tool_error_ratio_estimate(groups, correct_only=True)
    assert (r.mean, r.units) == (2 / 6, 6)
    e, c, ratio = [1, 1], [2, 4], 2 / 6
    assert r.stderr == pytest.approx(math.sqrt(sum((x - ratio * d) ** 2 for x, d in zip(e, c, strict=True)) * 2) / 6)


def test_paired_difference_is_over_the_problems_both_checkpoints_have():
    from rollout.metrics import paired_difference

    d = paired_difference({"a": 1.0, "b": 0.5, "c": 0.0}, {"a": 0.5, "b": 0.5, "x": 1.0})
    assert (d.mean, d.units) == (0.25, 2) and d.stderr == pytest.approx(0.25)
