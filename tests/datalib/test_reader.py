"""Reading sources: local JSONL/JSON/Parquet files and folders, and hub ids via `datasets`."""

from __future__ import annotations

import json

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalib.reader import SourceRows, local_path
from datalib.records import SourceSchemaError


def test_local_or_hub():
    assert local_path("Team-ACE/ToolACE") is None
    assert local_path("data/x.jsonl") is not None and local_path("../shared/x") is not None


def test_folder_of_mixed_files(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"q": 1}\n\nnot json\n{"q": 2}\n')
    (tmp_path / "b.json").write_text(json.dumps([{"q": 3}, 7]))
    pq.write_table(pa.Table.from_pylist([{"q": 4, "big": "x" * 10}]), tmp_path / "c.parquet")
    rows = SourceRows(str(tmp_path), columns=["q"])
    got = list(rows.iter())
    assert [(r.row, r.data) for r in got] == [(0, {"q": 1}), (2, None), (3, {"q": 2}), (0, {"q": 3}), (1, None),
                                               (0, {"q": 4})]
    assert [r.position for r in got] == list(range(6))
    assert (got[1].reason, got[4].reason) == ("invalid_json", "not_an_object")
    assert "Expecting value at column 1" in got[1].error and "not a JSON object: int" in got[4].error
    assert sorted(r.data["q"] for r in rows.iter(seed=3) if r.data) == [1, 2, 3, 4]


def test_hub_ids_go_through_load_dataset(monkeypatch):
    calls = {}

    def fake_load_dataset(path, name=None, split=None, revision=None):
        calls.update(path=path, name=name, split=split, revision=revision)
        return datasets.Dataset.from_list([{"problem": f"p{i}", "expected_answer": str(i), "generated_solution": "…"}
                                           for i in range(2500)])

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    rows = SourceRows("nvidia/OpenMathReasoning", None, "cot", columns=["problem", "expected_answer"],
                      revision="d3adb33f")
    assert calls == {"path": "nvidia/OpenMathReasoning", "name": None, "split": "cot", "revision": "d3adb33f"}
    assert rows.label == "hub:nvidia/OpenMathReasoning:cot@d3adb33f" and len(rows) == 2500
    shuffled = list(rows.iter(seed=0))
    assert sorted(r.row for r in shuffled) == list(range(2500)) and shuffled[0].row != 0
    assert all(r.data == {"problem": f"p{r.row}", "expected_answer": str(r.row)} for r in shuffled)
    with pytest.raises(SourceSchemaError, match=r"'dapo_math'.*\['prompt'\].*generated_solution"):
        rows.check_fields("dapo_math", ("prompt", "expected_answer"))


def test_missing_local_file_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SourceRows(str(tmp_path / "nope.jsonl"))
