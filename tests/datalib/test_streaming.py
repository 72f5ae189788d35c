"""Reading streams (issue 23, point 7): rows are read on demand from an index, never the whole file.

The JSON-array scanner is checked against `json.loads` on generated documents cut into chunks
of every small size, so a string, an escape or a bracket split across two reads is covered; the
memory test reads files far larger than what the reader may hold and measures the peak.
"""

from __future__ import annotations

import json
import random

import pytest

from benchmarks.reading import read_in_fresh_process, write_rows
from datalib import local_rows
from datalib.parquet_rows import ROW_GROUP_CACHE_BYTES
from datalib.reader import SourceRows


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice([None, True, False, 0, -3, 2.5, 10**20])
    if kind in (1, 2, 3):
        alphabet = ['a', ' ', ',', '[', ']', '{', '}', '"', '\\', '\n', 'é', '\u2028', '😀', ':']
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
    if kind in (4, 5):
        return {f"k{i}{rng.choice(['', '[', '}', ','])}": _value(rng, depth + 1) for i in range(rng.randrange(4))}
    return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 8, 13, 64])
def test_array_elements_are_those_json_loads_finds_whatever_the_chunk_size(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(local_rows, "_CHUNK", chunk)
    rng = random.Random(chunk)
    for doc in range(30):
        elements = [{"id": k, "v": _value(rng)} if k % 5 else _value(rng) for k in range(rng.randrange(6))]
        indent = rng.choice([None, 2])
        path = tmp_path / f"d{doc}.json"
        path.write_text(json.dumps(elements, indent=indent, ensure_ascii=rng.random() < 0.5), encoding="utf-8")
        rows = local_rows.read_json_file(path)
        assert [r.row for r in rows] == list(range(len(elements)))
        for r, element in zip(rows, elements, strict=True):
            if isinstance(element, dict):
                assert r.data == element
            else:
                assert r.data is None and r.reason == "not_an_object"


@pytest.mark.parametrize(("text", "expected"), [
    ("[]", []),
    (" [ \n ] \n", []),
    ('[{"a": 1}, {"b": "],["}]', [{"a": 1}, {"b": "],["}]),
    # One bad element costs its own row; the others are read (a whole-file parse lost them all).
    ('[{"a": 1}, {"b": NaN}, {"c": 3}]', [{"a": 1}, "invalid_json", {"c": 3}]),
    ('[{"a": 1},, {"c": 3}]', [{"a": 1}, "invalid_json", {"c": 3}]),
    ('[{"a": 1},]', [{"a": 1}, "invalid_json"]),
    # Not one array: JSON lines that start with `[`, text after the array, brackets that do not match.
    ('[1]\n{"a": 2}\n', ["not_an_object", {"a": 2}]),
    ('[{"a": 1}] x', ["invalid_json"]),
    ('[{"a": 1]\n{"b": 2}\n', ["invalid_json", {"b": 2}]),
    ('["unterminated\n{"b": 2}\n', ["invalid_json", {"b": 2}]),
])
def test_arrays_and_what_only_looks_like_one(tmp_path, text, expected):
    path = tmp_path / "x.json"
    path.write_text(text, encoding="utf-8")
    got = [r.data if r.data is not None else r.reason for r in local_rows.read_json_file(path)]
    assert got == expected


def test_utf16_and_bom_files_stream_like_utf8(tmp_path):
    rows = [{"q": "é😀", "n": k} for k in range(3)]
    (tmp_path / "a.jsonl").write_bytes("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
                                       .encode("utf-16"))
    (tmp_path / "b.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(rows, ensure_ascii=False).encode())
    got = SourceRows(str(tmp_path))
    assert [r.data for r in got.iter()] == rows + rows


def test_seeded_order_reads_the_same_rows_as_the_whole_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"n": k}) + "\n" for k in range(700)))
    pq.write_table(pa.Table.from_pylist([{"n": 700 + k} for k in range(900)]), tmp_path / "b.parquet",
                   row_group_size=100)
    rows = SourceRows(str(tmp_path))
    assert len(rows) == 1600 and [r.data["n"] for r in rows.iter()] == list(range(1600))
    seeded = [r.data["n"] for r in rows.iter(seed=5)]
    assert sorted(seeded) == list(range(1600)) and seeded != list(range(1600))
    assert seeded == [r.data["n"] for r in rows.iter(seed=5)]
    assert all(r.position == r.data["n"] for r in rows.iter(seed=5))


@pytest.mark.parametrize("kind", ["jsonl", "json", "jsonl.gz"])
def test_peak_memory_grows_with_the_row_not_with_the_file(tmp_path, kind):
    """A file 4x larger (12 MB -> 48 MB of rows) must not raise the peak: the old reader held
    every row, about 4x the file's size in Python objects (+150 MiB here)."""
    peaks = _peaks(tmp_path, kind, (6_000, 24_000))
    assert peaks[24_000][0] - peaks[6_000][0] < 16, f"{kind}: peak {peaks} MiB for 12 and 48 MB of rows"
    assert peaks[24_000][0] < 20, f"{kind}: reading 48 MB of rows raised the peak by {peaks[24_000][0]:.0f} MiB"


def test_parquet_peak_memory_is_the_row_group_cache_whatever_the_file(tmp_path):
    """Parquet keeps row groups up to ROW_GROUP_CACHE_BYTES by design, so both files are larger
    than that (48 MB -> 192 MB of rows; the old reader would add about 600 MiB). What Arrow's
    pool held is exact and the same for both; the resident peak also carries what the allocators
    keep after a free, which differs from machine to machine (a CI machine showed 10 MiB more
    than this one), and pyarrow's own start-up, so it is bounded, not pinned."""
    peaks = _peaks(tmp_path, "parquet", (24_000, 96_000))
    (small_rss, small_arrow), (large_rss, large_arrow) = peaks[24_000], peaks[96_000]
    group_mib = 2  # 1000 rows of 2 KB; beside the cache: the last group, the one being decoded, a window taken
    assert abs(large_arrow - small_arrow) < 0.5 and large_arrow < (ROW_GROUP_CACHE_BYTES >> 20) + 4 * group_mib, peaks
    assert large_rss - small_rss < 32, f"parquet: peak {peaks} MiB for 48 and 192 MB of rows"


def _peaks(tmp_path, kind: str, sizes: tuple[int, int]) -> dict[int, tuple[float, float]]:
    """Rows -> (resident peak, Arrow pool peak) in MiB, the larger of the file and seeded orders."""
    peaks = {}
    for n in sizes:
        path = tmp_path / f"rows{n}.{kind}"
        write_rows(path, kind, n)
        runs = [read_in_fresh_process(path, order) for order in ("file", "seeded")]
        assert [seen for seen, *_ in runs] == [n, n]
        peaks[n] = (max(r[2] for r in runs), max(r[3] for r in runs))
        path.unlink()
    return peaks
