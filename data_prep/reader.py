"""Rows of a configured source: a local JSONL/JSON/Parquet file or folder, or a hub id.

Local files are read line by line, not through `datasets`: Arrow's schema inference
stops at the first row whose types differ, and a malformed row must never stop a stage
(issue 5, point 4). A line that is not a JSON object becomes a `RawRow` with `data=None`
and an error, which the stage writes to its rejects file. Hub ids go through
`datasets.load_dataset` (what a cluster run uses) and are read lazily in batches.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_prep.records import SourceSchemaError
from pipeline.paths import resolve_local

log = logging.getLogger(__name__)

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")
_SCHEMA_PROBE_ROWS = 200  # rows whose keys decide whether a local file fits its source


@dataclass(frozen=True)
class RawRow:
    file: str  # the file (or `hub:<id>[/<config>]:<split>`) the row came from
    row: int  # 0-based index of the row inside that file (line number for JSONL)
    data: dict | None  # None when the row is not a JSON object
    error: str = ""  # why `data` is None
    position: int = -1  # index among all rows of the source (files of a folder in order)


def local_path(location: str) -> Path | None:
    """The local file or folder a location names, or None for a hub id."""
    looks_local = location.endswith(LOCAL_SUFFIXES) or location.startswith(("/", "./", "../", "~"))
    path = resolve_local(location)
    return path if looks_local or path.exists() else None


def _read_json_file(path: Path) -> list[RawRow]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None  # maybe JSON lines under a .json name: fall through
        if isinstance(data, list):
            return [RawRow(str(path), i, r) if isinstance(r, dict) else
                    RawRow(str(path), i, None, f"not a JSON object: {type(r).__name__}") for i, r in enumerate(data)]
    rows = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            rows.append(RawRow(str(path), i, None, f"invalid JSON: {e.msg} at column {e.colno}"))
            continue
        rows.append(RawRow(str(path), i, obj) if isinstance(obj, dict) else
                    RawRow(str(path), i, None, f"not a JSON object: {type(obj).__name__}"))
    return rows


def _read_parquet_file(path: Path, columns: list[str] | None) -> list[RawRow]:
    import pyarrow.parquet as pq

    present = set(pq.read_schema(path).names)
    wanted = [c for c in columns if c in present] if columns else None
    table = pq.read_table(path, columns=wanted)
    return [RawRow(str(path), i, r) for i, r in enumerate(table.to_pylist())]


class SourceRows:
    """The rows of one source, iterable in a seeded order, with the field names they carry."""

    def __init__(self, location: str, hub_config: str | None = None, split: str = "train",
                 columns: list[str] | None = None):
        self.location = location
        path = local_path(location)
        self._dataset = None
        self._rows: list[RawRow] = []
        if path is not None:
            if not path.exists():
                raise FileNotFoundError(f"local source {location} ({path}) does not exist")
            files = sorted(p for p in path.rglob("*") if p.suffix in LOCAL_SUFFIXES) if path.is_dir() else [path]
            for f in files:
                self._rows += _read_parquet_file(f, columns) if f.suffix == ".parquet" else _read_json_file(f)
            self._rows = [dataclasses.replace(r, position=i) for i, r in enumerate(self._rows)]
            self.label = str(path)
            keys: set[str] = set()
            for r in self._rows[:_SCHEMA_PROBE_ROWS]:
                keys.update(r.data or ())
            self.fields = keys
        else:
            import datasets

            ds = datasets.load_dataset(location, name=hub_config, split=split)
            self.fields = set(ds.column_names)
            if columns:
                ds = ds.select_columns([c for c in columns if c in ds.column_names])
            self._dataset = ds
            self.label = f"hub:{location}{'/' + hub_config if hub_config else ''}:{split}"

    @classmethod
    def from_records(cls, label: str, records: list[dict]) -> SourceRows:
        """Rows generated in-process (the synthetic source), read like any file's."""
        rows = cls.__new__(cls)
        rows.location, rows.label, rows._dataset = label, label, None
        rows._rows = [RawRow(label, i, r, position=i) for i, r in enumerate(records)]
        rows.fields = set().union(*(r.keys() for r in records[:_SCHEMA_PROBE_ROWS]))
        return rows

    def __len__(self) -> int:
        return len(self._dataset) if self._dataset is not None else len(self._rows)

    def check_fields(self, source: str, required: tuple[str, ...]) -> None:
        """Fail fast when the data cannot be this source (`a|b` means either field)."""
        missing = [f for f in required if not any(alt in self.fields for alt in f.split("|"))]
        if missing:
            raise SourceSchemaError(
                f"source {source!r} at {self.label}: the rows lack the required field(s) {missing} "
                f"(fields found: {sorted(self.fields)}); is this the right dataset for this source?"
            )

    def iter(self, seed: int | None = None, batch_size: int = 1000) -> Iterator[RawRow]:
        """Every row; in a seeded random order when `seed` is given (for capped mixtures)."""
        n = len(self)
        order = np.random.default_rng(seed).permutation(n) if seed is not None else np.arange(n)
        if self._dataset is None:
            for i in order:
                yield self._rows[i]
            return
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            batch = self._dataset.select(idx).to_dict()
            for j, original in enumerate(idx):
                yield RawRow(self.label, int(original), {k: v[j] for k, v in batch.items()}, position=int(original))
