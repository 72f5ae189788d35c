"""Bad input files (issue 9, point 9): each class of damage is a correct parse or a reject
with a precise reason and the right row number; good rows around it are all kept."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from configs.data import ColdStartConfig, ColdStartSource, RLCurationConfig, RLSource
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from data_prep import cold_start, rl_curation
from datalib.reader import SourceRows
from datalib.records import SourceSchemaError
from datalib.tables import read_problems


def dapo(problem: str, answer: object) -> bytes:
    return json.dumps({"prompt": problem, "solution": answer}, ensure_ascii=False).encode()


def curate(tmp_path, path) -> tuple[dict, dict[int, tuple[str, str]], list]:
    cfg = RLCurationConfig(sources=[RLSource(source="dapo_math", location=str(path))])
    metrics = rl_curation.run(cfg, {}, tmp_path, rollout=RolloutConfig(), sandbox=SandboxConfig())
    rejects = {r["row"]: (r["reason"], r["detail"])
               for r in map(json.loads, (tmp_path / "rejects.jsonl").read_text(encoding="utf-8").splitlines())}
    return metrics, rejects, read_problems(tmp_path / "problems.parquet")


def test_every_bad_row_class_in_one_jsonl_file(tmp_path):
    lines = [
        b"\xef\xbb\xbf" + dapo("Row 0 after a byte-order mark?", "1"),
        dapo("Row 1 has a\u2028line separator and a\u0085next line inside?", "2"),
        dapo("Row 2 has a bad byte ", "3").replace(b"bad byte", b"bad \xff byte"),
        dapo("Row 3 after the bad byte?", "4"),
        dapo("Row 4 has an absurd exponent?", "1e999999999"),
        b'{"prompt": "Row 5 has an absurd exponent as a number?", "solution": 1e999999999}',
        b'{"prompt": "Row 6 has a 5000-digit number?", "solution": ' + b"7" * 5000 + b"}",
        b'{"prompt": "Row 7 has NaN?", "solution": NaN}',
        b'{"prompt": "Row 8 has a lone surrogate \\ud800?", "solution": "8"}',
        b'{"prompt": "Row 9 has an emoji pair \\ud83d\\ude00?", "solution": "9"}',
        b'{"prompt": "Row 10 is deep", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b"",
        dapo("Row 12 after a blank line, with CRLF?", "1,000") + b"\r",
        dapo("Row 13 is the last, with no newline?", "13"),
    ]
    path = tmp_path / "dapo.jsonl"
    path.write_bytes(b"\n".join(lines))
    metrics, rejects, problems = curate(tmp_path, path)
    assert {row: reason for row, (reason, _) in rejects.items()} == {
        2: "invalid_utf8", 4: "too_large", 5: "too_large", 6: "number_too_long", 7: "invalid_json",
        8: "lone_surrogate", 10: "too_deep",
    }
    assert rejects[2][1] == "invalid UTF-8 byte 0xff at byte 28 of the row"  # 0-based, in the line
    assert rejects[7][1] == "NaN is not JSON" and rejects[6][1] == "a number literal of 5000 digits"
    assert "1000000000 digits" in rejects[4][1] and "\\ud800" in rejects[8][1]
    kept = {p.problem: p.answer for p in problems}
    assert kept == {
        "Row 0 after a byte-order mark?": 1,
        "Row 1 has a\u2028line separator and a\u0085next line inside?": 2,
        "Row 3 after the bad byte?": 4,
        "Row 9 has an emoji pair \U0001F600?": 9,
        "Row 12 after a blank line, with CRLF?": 1000,
        "Row 13 is the last, with no newline?": 13,
    }
    assert metrics["problems"] == 6


def test_json_array_file_with_bom_bad_bytes_and_separators(tmp_path):
    body = b"[" + b", ".join([
        dapo("Element 0\u2028spans a separator?", "10"),
        dapo("Element 1 has a bad byte", "11").replace(b"bad byte", b"bad \xc3\x28 byte"),
        b'{"prompt": "Element 2 has a huge number", "solution": ' + b"9" * 4400 + b"}",
        dapo("Element 3 is fine?", "12"),
    ]) + b"]"
    path = tmp_path / "dapo.json"
    path.write_bytes(b"\xef\xbb\xbf" + body)
    _, rejects, problems = curate(tmp_path, path)
    assert {row: reason for row, (reason, _) in rejects.items()} == {1: "invalid_utf8", 2: "number_too_long"}
    assert {p.problem for p in problems} == {"Element 0\u2028spans a separator?", "Element 3 is fine?"}


def test_utf16_file_is_decoded(tmp_path):
    path = tmp_path / "dapo.jsonl"
    path.write_bytes(b"\n".join([dapo("Saved as UTF-16 \u00e9?", "5"), dapo("Second?", "6")]).decode().encode("utf-16"))
    _, rejects, problems = curate(tmp_path, path)
    assert rejects == {} and [p.answer for p in problems] == [5, 6]


def _parquet_with_bad_utf8(path, column: str, values: list[bytes], other: dict) -> None:
    raw = pa.array(values, pa.binary())
    strings = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())  # skips UTF-8 validation, as a bad writer
    pq.write_table(pa.table({column: strings, **other}), path)


def test_parquet_row_with_invalid_utf8_is_rejected_alone(tmp_path):
    path = tmp_path / "dapo.parquet"
    _parquet_with_bad_utf8(path, "prompt", [b"Fine 0?", b"Bad \xff 1?", b"Fine 2?"],
                           {"solution": ["1", "2", "3"], "unused": ["a", "b", "c"]})
    _, rejects, problems = curate(tmp_path, path)
    assert rejects == {1: ("invalid_utf8", "column 'prompt': invalid UTF-8 byte at 4")}
    assert [p.problem for p in problems] == ["Fine 0?", "Fine 2?"]


def test_cold_start_keeps_separators_and_row_numbers(tmp_path):
    def tulu(text: str) -> bytes:
        return json.dumps({"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]},
                          ensure_ascii=False).encode()

    path = tmp_path / "tulu.jsonl"
    path.write_bytes(b"\n".join([b"\xef\xbb\xbf" + tulu("a\u2028b"), tulu("c\u0085d\x0be").replace(b"\x0b", b"\\u000b"),
                                 tulu("x").replace(b"x", b"\xfe"), b"not json", tulu("last")]))
    cfg = ColdStartConfig(sources=[ColdStartSource(source="tulu3", location=str(path))])
    metrics = cold_start.run(cfg, {}, tmp_path)
    rejects = {r["row"]: r["reason"] for r in map(json.loads, (tmp_path / "rejects.jsonl").read_text().splitlines())}
    assert rejects == {2: "invalid_utf8", 3: "invalid_json"} and metrics["examples"] == 3
    users = [m["content"] for row in pq.read_table(tmp_path / "sft.parquet").to_pylist()
             for m in row["messages"] if m["role"] == "user"]
    assert sorted(users) == sorted(["a\u2028b", "c\u0085d\x0be", "last"])


def test_schema_mismatch_names_the_columns_found(tmp_path):
    pq.write_table(pa.table({"question": ["q"], "final": ["1"], "meta": ["m"]}), tmp_path / "other.parquet")
    rows = SourceRows(str(tmp_path / "other.parquet"), columns=["prompt", "solution", "reward_model"])
    with pytest.raises(SourceSchemaError, match=r"\['prompt'.*fields found: \['final', 'meta', 'question'\]"):
        rows.check_fields("dapo_math", ("prompt", "reward_model|solution"))


def test_schema_mismatch_names_the_odd_file_of_a_folder(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(dapo("Good?", "1") + b"\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({"question": "q", "answer": "1"}) + "\n")
    rows = SourceRows(str(tmp_path))
    with pytest.raises(SourceSchemaError, match=r"file .*b\.jsonl\).*\['prompt', 'reward_model\|solution'\] "
                                                r"\(fields found: \['answer', 'question'\]\)"):
        rows.check_fields("dapo_math", ("prompt", "reward_model|solution"))


def test_schema_check_of_an_unreadable_file_says_why(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b"\n".join(dapo(f"Caf\xe9 {k}?", "1").replace(b"\xc3\xa9", b"\xe9") for k in range(3)))
    with pytest.raises(SourceSchemaError, match=r"fields found: \[\]; 3 of the 3 rows looked at unreadable: "
                                                r"\{'invalid_utf8': 3\}"):
        SourceRows(str(path)).check_fields("dapo_math", ("prompt",))


def test_a_file_that_is_no_parquet_is_named(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(dapo("Good?", "1") + b"\n")
    (tmp_path / "b.parquet").write_bytes(b"PAR1 this is not parquet")
    rows = SourceRows(str(tmp_path))
    assert [(r.row, r.reason) for r in rows.iter()] == [(0, ""), (-1, "unreadable_file")]
    with pytest.raises(SourceSchemaError, match=r"b\.parquet.*\{'unreadable_file': 1\}"):
        rows.check_fields("dapo_math", ("prompt",))


def test_hub_batch_with_invalid_utf8_is_read_row_by_row(monkeypatch):
    import datasets

    raw = pa.array([b"Fine 0?", b"Bad \xff 1?", b"Fine 2?"], pa.binary())
    prompts = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
    table = pa.table({"prompt": prompts, "solution": ["1", "2", "3"]})
    monkeypatch.setattr(datasets, "load_dataset",
                        lambda path, name=None, split=None, revision=None: datasets.Dataset(table))
    rows = list(SourceRows("org/dapo-like").iter())
    assert [(r.row, r.reason, (r.data or {}).get("prompt")) for r in rows] == [
        (0, "", "Fine 0?"), (1, "invalid_utf8", None), (2, "", "Fine 2?")]
