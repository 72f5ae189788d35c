"""Fixtures of the evaluation tests: the five benchmark files of ../shared as configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from configs.eval import EvalBenchmark


def local_benchmarks(shared: Path) -> list[EvalBenchmark]:
    """The five benchmarks of SPEC §9 from the offline copies, with their field names."""
    d = shared / "benchmarks"
    return [
        EvalBenchmark(name="aime24", location=str(d / "aime2024.jsonl")),
        EvalBenchmark(name="aime25", location=str(d / "aime2025.jsonl")),
        EvalBenchmark(name="hmmt25", location=str(d / "hmmt_feb_2025.jsonl")),
        EvalBenchmark(name="math500", location=str(d / "math500.jsonl")),
        EvalBenchmark(name="gpqa_diamond", location=str(d / "gpqa_diamond.jsonl"), kind="choice",
                      problem_field="question"),
    ]


@pytest.fixture(scope="session")
def benchmark_configs(shared_data: Path) -> list[EvalBenchmark]:
    return local_benchmarks(shared_data)
