"""A stored sample keeps its score until its benchmark's reference changes; then its stored
answer is scored again against the new one, never redrawn (evaluation/evaluate.py)."""

from __future__ import annotations

from datalib.rejects import RejectLog
from evaluation.evaluate import _rescore, _table
from evaluation.problem_sets import EvalProblem, LoadedBenchmark
from sandbox.types import VerifyResult


class CountingVerifier:
    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []

    async def verify_batch(self, pairs):
        self.pairs += pairs
        return [VerifyResult(float(m == f"\\boxed{{{ref}}}"), "ok") for m, ref in pairs]


def _stored(problem: EvalProblem, answer: str, score: float, scored_against: str) -> dict:
    return {"final_answer": answer, "response_tokens": 5, "tool_statuses": ["ok"], "finish_reason": "stop",
            "num_turns": 1, "seed": 0, "text": "t", "score": score, "scored_against": scored_against,
            "prompt_sha": problem.prompt_sha, "sample": 0}


async def test_only_samples_scored_against_another_reference_are_rescored():
    old, changed, unscored = EvalProblem("a", "A?", "7"), EvalProblem("b", "B?", "9"), EvalProblem("c", "C?", "4")
    bench = LoadedBenchmark("bench", [old, changed, unscored], RejectLog(), "test")
    have = {(old.prompt_sha, 0): _stored(old, "7", 1.0, old.reference_key),
            (changed.prompt_sha, 0): _stored(changed, "9", 0.0, "math:8"),  # drawn when the reference was 8
            (unscored.prompt_sha, 0): _stored(unscored, "4", None, None)}  # a store written before scores were kept
    tables = {"bench": _table(bench, 1, have)}
    verifier = CountingVerifier()
    assert await _rescore(tables, [bench], verifier) == 2
    assert verifier.pairs == [("\\boxed{9}", "9"), ("\\boxed{4}", "4")]
    assert list(tables["bench"]["score"]) == [1.0, 1.0, 1.0]


async def test_a_choice_problem_is_rescored_by_letter_without_the_verifier():
    p = EvalProblem("g", "Which?", "B", ("x", "y", "z", "w"))
    bench = LoadedBenchmark("gpqa", [p], RejectLog(), "test")
    tables = {"gpqa": _table(bench, 1, {(p.prompt_sha, 0): _stored(p, "B", 0.0, "letter:C/ABCD")})}
    verifier = CountingVerifier()
    assert await _rescore(tables, [bench], verifier) == 1
    assert verifier.pairs == [] and list(tables["gpqa"]["score"]) == [1.0]
