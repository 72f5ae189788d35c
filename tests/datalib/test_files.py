"""Files and folders as a user has them (issue 23, point 1): compression, spellings, hidden
copies, dangling links, split layouts, files misnamed for what they hold, empty files,
globs, and a card that lists every file read and skipped. Every file here is written by
the test; each case failed on the reader before datalib/files.py."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalib.card import DataCard
from datalib.files import DataFileError
from datalib.intake import normalise_rows
from datalib.reader import SourceRows
from datalib.rejects import RejectLog

ROWS = [{"problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(5)]
JSONL = "".join(json.dumps(r) + "\n" for r in ROWS).encode()


def _zstd(data: bytes) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as out:
        out.write(data)
    return sink.getvalue().to_pybytes()


def _parquet(path: Path) -> Path:
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    return path


def _problems(rows: SourceRows) -> list[str]:
    return sorted(r.data["problem"] for r in rows.iter())


@pytest.mark.parametrize(("name", "pack"), [("p.jsonl.gz", gzip.compress), ("p.jsonl.bz2", bz2.compress),
                                            ("p.jsonl.xz", lzma.compress), ("p.jsonl.zst", _zstd),
                                            ("p.ndjson.GZ", gzip.compress)])
def test_compressed_files_load(tmp_path, name, pack):
    (tmp_path / name).write_bytes(pack(JSONL))
    rows = SourceRows(str(tmp_path / name))
    assert _problems(rows) == sorted(r["problem"] for r in ROWS)
    assert rows.files_read == [(str(tmp_path / name), 5, "")]


def test_a_compressed_parquet_and_a_compressed_file_without_its_suffix(tmp_path):
    _parquet(tmp_path / "raw.parquet")
    (tmp_path / "p.parquet.gz").write_bytes(gzip.compress((tmp_path / "raw.parquet").read_bytes()))
    assert len(SourceRows(str(tmp_path / "p.parquet.gz"))) == 5
    (tmp_path / "q.jsonl").write_bytes(gzip.compress(JSONL))  # gzip under a plain name
    rows = SourceRows(str(tmp_path / "q.jsonl"))
    assert len(rows) == 5 and "gzip compressed, though its name says uncompressed" in rows.files_read[0][2]


def test_a_folder_reads_every_spelling_and_says_what_it_skipped(tmp_path):
    d = tmp_path / "data"
    (d / "sub").mkdir(parents=True)
    (d / "a.JSONL").write_bytes(JSONL)
    (d / "b.jsonlines").write_bytes(JSONL)
    (d / "sub" / "c.NDJSON").write_bytes(JSONL)
    (d / "d.Json").write_text(json.dumps(ROWS))
    (d / ".#a.jsonl").write_bytes(JSONL)  # an editor's copy
    (d / ".ipynb_checkpoints").mkdir()
    (d / ".ipynb_checkpoints" / "a-checkpoint.jsonl").write_bytes(JSONL)
    (d / "README.md").write_text("# notes")
    (d / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    rows = SourceRows(str(d))
    assert len(rows) == 20
    assert [Path(f).name for f, _, _ in rows.files_read] == ["a.JSONL", "b.jsonlines", "d.Json", "c.NDJSON"]
    skipped = {Path(f).name: why for f, why in rows.files_skipped}
    assert skipped == {".#a.jsonl": "hidden (a name starting with '.')",
                       "a-checkpoint.jsonl": "hidden (a name starting with '.')",
                       "README.md": "not a data file by its name (suffix .md)", "gone.jsonl": "a link to nothing"}


def test_a_split_layout_follows_split_or_is_refused(tmp_path):
    for split in ("train", "test"):
        (tmp_path / split).mkdir()
        (tmp_path / split / "part-0.jsonl").write_bytes(JSONL if split == "train" else JSONL[: JSONL.index(b"\n") + 1])
    assert len(SourceRows(str(tmp_path), split="train")) == 5
    assert len(SourceRows(str(tmp_path), split="test")) == 1
    with pytest.raises(DataFileError, match=r"laid out by split \(test, train\) but has no 'validation'"):
        SourceRows(str(tmp_path), split="validation")
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "train-00000.jsonl").write_bytes(JSONL)
    (flat / "test.jsonl").write_bytes(JSONL)
    rows = SourceRows(str(flat), split="train")
    assert len(rows) == 5 and [Path(f).name for f, _ in rows.files_skipped] == ["test.jsonl"]


def test_a_file_is_read_by_what_it_holds_and_an_empty_one_says_so(tmp_path):
    parquet_named_jsonl = _parquet(tmp_path / "p.jsonl")
    rows = SourceRows(str(parquet_named_jsonl))
    assert len(rows) == 5 and "holds Parquet, though its name says jsonl" in rows.files_read[0][2]
    (tmp_path / "j.parquet").write_bytes(JSONL)
    rows = SourceRows(str(tmp_path / "j.parquet"))
    assert len(rows) == 5 and "holds JSON lines, though its name says Parquet" in rows.files_read[0][2]
    (tmp_path / "empty.jsonl").write_text("\n  \n")
    rows = SourceRows(str(tmp_path / "empty.jsonl"))
    assert len(rows) == 0 and rows.files_skipped == [(str(tmp_path / "empty.jsonl"), "empty")]


def test_a_local_looking_path_that_is_not_there_fails_at_once(tmp_path, monkeypatch):
    import datasets

    def no_hub(*args, **kwargs):  # noqa: ANN002, ANN003
        raise AssertionError("a local-looking path went to the hub")

    monkeypatch.setattr(datasets, "load_dataset", no_hub)
    for location in (str(tmp_path / "nope.jsonl.gz"), "data/missing/dir", "./missing", str(tmp_path / "x.NDJSON")):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            SourceRows(location)


def test_globs_read_what_they_match_or_say_they_matched_nothing(tmp_path):
    for name in ("a.jsonl", "b.jsonl", "c.parquet"):
        (tmp_path / name).write_bytes(JSONL) if name.endswith("jsonl") else _parquet(tmp_path / name)
    rows = SourceRows(str(tmp_path / "*.jsonl"))
    assert [Path(f).name for f, _, _ in rows.files_read] == ["a.jsonl", "b.jsonl"] and len(rows) == 10
    with pytest.raises(DataFileError, match=r"matches no file"):
        SourceRows(str(tmp_path / "*.ndjson"))


def test_the_card_lists_every_file_read_and_skipped(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(JSONL)
    (tmp_path / "b.jsonl").write_text("")
    (tmp_path / "notes.txt").write_text("x")
    rows = SourceRows(str(tmp_path))
    _, counts = normalise_rows(rows, lambda row, pid: row, "src", None, 0, RejectLog())
    card = DataCard("t")
    card.files([counts])
    out = tmp_path / "card.md"
    card.write(out)
    text = out.read_text()
    assert f"| src | {tmp_path / 'a.jsonl'} | 5 |" in text
    assert f"| src | {tmp_path / 'b.jsonl'} | empty |" in text
    assert f"| src | {tmp_path / 'notes.txt'} | not a data file by its name (suffix .txt) |" in text
