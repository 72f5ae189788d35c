"""Origin filters that hold for null, missing and odd fields and every link form, and one
integer rule for every source and file type (issue 23, point 2)."""

from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalib.integers import parse_integer
from datalib.reader import SourceRows
from datalib.records import FilteredRow, MalformedRow, RowError
from datalib.sources import RL_SOURCES
from datalib.sources.openmathreasoning import normalise as omr
from datalib.sources.project_euler import normalise as euler

OMR = {"problem": "Find the number of positive divisors of 2024.", "expected_answer": "12",
       "problem_type": "has_answer_extracted"}
PE = {"problem": "Find the sum of all the multiples of 3 or 5 below 1000.", "answer": "233168"}


@pytest.mark.parametrize("origin", [None, "MISSING", 7, "", "MATH_training_set", ["aops_c4"]])
def test_aops_only_holds_for_null_missing_and_odd_origins(origin):
    row = dict(OMR) if origin == "MISSING" else {**OMR, "problem_source": origin}
    with pytest.raises(FilteredRow) as err:
        omr(row)
    assert err.value.reason == "not_aops"


@pytest.mark.parametrize("origin", ["aops_c4_high_school_math", "AoPS_c6_high_school_olympiads", " aops_forum "])
def test_aops_rows_are_kept(origin):
    assert omr({**OMR, "problem_source": origin}).answer == "12"


@pytest.mark.parametrize(("text", "links"), [
    ("", ["https://projecteuler.net/resources/documents/0022_names.txt"]),
    ("", ["project/resources/p022_names.txt"]),
    ("", {"data": "resources/documents/0059_cipher.txt"}),
    ("", json.dumps(["resources/images/0015.png"])),
    ("", "resources\\/documents\\/0042_words.txt"),
    ("", ["https://projecteuler.net/resources%2Fdocuments%2F0081_matrix.txt"]),
    (" Using names.txt (right click and 'Save Link/Target As...'), a 46K text file", None),
    (" ![triangle](https://example.org/t.png)", []),
    (' <img src="p015.gif" alt="grid">', []),
    (" See [the matrix](resources/documents/0082_matrix.txt).", []),
])
def test_project_euler_attachments_are_found_in_text_and_links_in_every_form(text, links):
    with pytest.raises(FilteredRow) as err:
        euler({**PE, "problem": PE["problem"] + text, "links": links})
    assert err.value.reason == "needs_attachment"


@pytest.mark.parametrize("links", [None, [], "MISSING", ["https://projecteuler.net/problem=1"]])
def test_project_euler_without_attachment_is_kept(links):
    row = dict(PE) if links == "MISSING" else {**PE, "links": links}
    assert euler(row).answer == "233168"


@pytest.mark.parametrize(("value", "expected"), [
    (25, 25), ("25", 25), (25.0, 25), ("025", 25), (" 25 ", 25), ("25.0", 25), (Decimal("25"), 25),
    (Decimal("25.00"), 25), ("1,000", 1000), (True, "complex_format"), (25.5, "not_integer"),
    (Decimal("25.5"), "not_integer"), (["25"], "complex_format"), ("", "empty_answer"),
])
def test_one_integer_rule_for_every_value_type(value, expected):
    if isinstance(expected, int):
        assert parse_integer(value, 18) == expected
    else:
        with pytest.raises(FilteredRow) as err:
            parse_integer(value, 18)
        assert err.value.reason == expected


@pytest.mark.parametrize("answer", [25, 25.0, "25", "025"])
def test_the_same_answer_is_judged_alike_in_every_source_and_file_type(tmp_path, answer):
    rows = {"dapo_math": {"prompt": "What is 5 * 5?", "solution": answer},
            "openmathreasoning": {"problem": "What is 5 * 5?", "expected_answer": answer,
                                  "problem_source": "aops_c4"},
            "project_euler": {"problem": "What is 5 * 5?", "answer": answer}}
    verdicts = set()
    for source, row in rows.items():
        (tmp_path / f"{source}.jsonl").write_text(json.dumps(row) + "\n")
        pq.write_table(pa.Table.from_pylist([row]), tmp_path / f"{source}.parquet")
        for suffix in ("jsonl", "parquet"):
            (raw,) = list(SourceRows(str(tmp_path / f"{source}.{suffix}")).iter())
            try:
                verdicts.add(parse_integer(RL_SOURCES[source].normalise(raw.data).answer, 18))
            except (RowError, MalformedRow) as err:
                verdicts.add(err.reason)
    assert verdicts == {25}
