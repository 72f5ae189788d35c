"""Loading benchmarks: field mapping, bad rows counted and written aside, never silently dropped."""

from __future__ import annotations

import json

import pytest

from configs.eval import EvalBenchmark, EvalConfig
from configs.load import load_config
from evaluation.problem_sets import load_benchmark


def test_bad_rows_are_rejected_with_file_row_and_field(tmp_path):
    f = tmp_path / "bench.jsonl"
    lines = [json.dumps({"id": "a", "problem": "1+1?", "answer": "2"}),
             json.dumps({"id": "b", "problem": "no answer"}),
             "{not json",
             json.dumps({"id": "a", "problem": "again", "answer": "3"}),
             json.dumps({"id": "c", "problem": "  ", "answer": "4"}),
             json.dumps({"id": "d", "problem": "2+2?", "answer": 4}),
             json.dumps({"problem": "no id", "answer": "5"})]
    f.write_text("\n".join(lines) + "\n")
    b = load_benchmark(EvalBenchmark(name="mine", location=str(f)), choice_seed=0)
    assert [(p.id, p.reference) for p in b.problems] == [("a", "2"), ("d", "4"), ("6", "5")]
    rejects = {(e["row"], e["reason"]): e for e in b.rejects.entries}
    assert set(rejects) == {(1, "missing_field"), (2, "invalid_json"), (3, "duplicate_id"), (4, "missing_field")}
    assert "'answer'" in rejects[(1, "missing_field")]["detail"] and rejects[(1, "missing_field")]["file"] == str(f)
    assert "'problem'" in rejects[(4, "missing_field")]["detail"]
    out = tmp_path / "rejects.jsonl"
    b.rejects.write(out)
    assert len(out.read_text().splitlines()) == 4


def test_a_file_of_another_schema_fails_naming_the_field(tmp_path):
    f = tmp_path / "other.jsonl"
    f.write_text(json.dumps({"question": "q", "solution": "s"}) + "\n")
    with pytest.raises(Exception, match="problem"):
        load_benchmark(EvalBenchmark(name="x", location=str(f)), choice_seed=0)


def test_first_n_problems_and_the_synthetic_set(tmp_path):
    synth = load_benchmark(EvalBenchmark(name="s", location="synthetic", problems=7), 0).problems
    assert len(synth) == 7 and all(p.reference.isdigit() for p in synth)
    f = tmp_path / "b.jsonl"
    f.write_text("".join(json.dumps({"id": i, "problem": f"p{i}", "answer": i}) + "\n" for i in range(10)))
    assert [p.id for p in load_benchmark(EvalBenchmark(name="b", location=str(f), problems=3), 0).problems] == \
        ["0", "1", "2"]


def test_configs_check_the_eval_set_against_decontamination():
    with pytest.raises(Exception, match="decontaminated against 200"):
        load_config("configs/tiny.yaml", ["eval.benchmarks=[{name: s, location: synthetic, problems: 500}]"])
    with pytest.raises(Exception, match="set `problems`"):
        EvalConfig(benchmarks=[EvalBenchmark(name="s", location="synthetic")])
    with pytest.raises(Exception, match="unique"):
        EvalConfig(benchmarks=[EvalBenchmark(name="s", location="synthetic", problems=1)] * 2)
