"""Rows of a configured source: a local file, folder or glob (datalib/files.py), or a hub id.

Local files are read row by row (datalib/local_rows.py), not through `datasets`: Arrow's
schema inference stops at the first row whose types differ, and a malformed row must
never stop a stage (issue 5, point 4; issue 9, point 9). A row that cannot be read becomes
a `RawRow` with `data=None`, a reason and a precise error, which the stage writes to its
rejects file. Hub ids go through `datasets.load_dataset` (what a cluster run uses) and
are read lazily in batches.

Whether a source fits its schema is judged per file on the keys of its first rows (the
columns, for Parquet and hub datasets); a mismatch names the file and what it found.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from datalib.files import DataFile, is_glob, list_files, looks_like_data_file, new_spool, open_content
from datalib.local_rows import FileRows, MemoryRows, RawRow, open_json_rows
from datalib.parquet_rows import ParquetCache, ParquetRows, open_parquet_rows
from datalib.records import SourceSchemaError
from stagekit.paths import resolve_local

__all__ = ["RawRow", "SourceRows", "local_path"]

log = logging.getLogger(__name__)

_SCHEMA_PROBE_ROWS = 200  # readable rows per file whose keys decide whether it fits its source
_WINDOW_BYTES = 4 << 20  # rows read together (about): each file read once per window, in file order


def local_path(location: str) -> Path | None:
    """The local file, folder or glob a location names, or None for a hub id (`org/name`).
    A location that looks local (a data suffix, a path prefix, a glob, more than one `/`) is
    local even when nothing is there, so a mistyped path fails at once, not after a hub lookup."""
    looks_local = (looks_like_data_file(location) or location.startswith(("/", "./", "../", "~", "."))
                   or is_glob(location) or location.count("/") > 1 or "\\" in location)
    path = resolve_local(location)
    return path if looks_local or path.exists() else None


class SourceRows:
    """The rows of one source, iterable in a seeded order, with the field names they carry.

    Local files are indexed when the source is opened and their rows read on demand, a window
    of about `_WINDOW_BYTES` at a time: memory holds the index (16 bytes a row), one window of rows and,
    for Parquet, row groups up to a budget (datalib/parquet_rows.py), whatever the size of the files."""

    def __init__(self, location: str, hub_config: str | None = None, split: str = "train",
                 columns: list[str] | None = None, revision: str | None = None):
        self.location = location
        path = local_path(location)
        self._dataset = None
        self._files: list[FileRows] = []
        self._spool: BinaryIO | None = None
        self._parquet = ParquetCache()
        self.probes: list[FileFields] = []  # per file: the fields its rows carry
        self.files_read: list[tuple[str, int, str]] = []  # (file, rows, what its bytes said against its name)
        self.files_skipped: list[tuple[str, str]] = []  # (file, why)
        if path is not None:
            if not is_glob(location) and not path.exists() and not path.is_symlink():
                raise FileNotFoundError(f"local source {location} ({path}) does not exist")
            listing = list_files(location, path, split)
            self.files_skipped += listing.skipped
            for f in listing.files:
                self._open_file(f, columns)
            for skipped, why in listing.skipped:
                log.warning("source %s: skipped %s: %s", location, skipped, why)
            self.label = str(path)
        else:
            import datasets

            ds = datasets.load_dataset(location, name=hub_config, split=split, revision=revision)
            found = set(ds.column_names)
            if columns:
                ds = ds.select_columns([c for c in columns if c in ds.column_names])
            self._dataset = ds
            self.label = f"hub:{location}{'/' + hub_config if hub_config else ''}:{split}" + (
                f"@{revision}" if revision else "")
            self.probes.append(FileFields(self.label, found, len(ds)))
        self._ends = np.cumsum([len(f) for f in self._files], dtype=np.int64)

    def _open_file(self, f: DataFile, columns: list[str] | None) -> None:
        content = open_content(f, self._shared_spool)
        if content.format == "empty":
            self.files_skipped.append((str(f.path), "empty"))
            log.warning("source %s: %s is empty", self.location, f.path)
            return
        if content.note:
            log.warning("source %s: %s %s", self.location, f.path, content.note)
        last = self._files[-1] if self._files else None
        name, first = str(f.path), last.first_position + len(last) if last else 0
        if content.format == "parquet":
            rows = open_parquet_rows(name, content.region, columns, first, self._parquet)
            probe = FileFields(name, set(rows.columns), len(rows)) if isinstance(rows, ParquetRows) \
                else FileFields.of_rows(name, rows.rows_at([0]))
        else:
            rows = open_json_rows(name, content.region, first, self._shared_spool)
            probe = FileFields.of_rows(name, _first_rows(rows))
        self.probes.append(probe)
        self.files_read.append((name, len(rows), content.note))
        self._files.append(rows)

    def _shared_spool(self) -> BinaryIO:
        """One unnamed temporary file for every decompressed file of the source."""
        if self._spool is None:
            self._spool = new_spool()
        return self._spool

    @classmethod
    def from_records(cls, label: str, records: list[dict]) -> SourceRows:
        """Rows generated in-process (the synthetic source), read like any file's."""
        rows = cls.__new__(cls)
        rows.location, rows.label, rows._dataset, rows._spool = label, label, None, None
        rows._files = [MemoryRows(label, [RawRow(label, i, r, position=i) for i, r in enumerate(records)])]
        rows._ends = np.array([len(records)], dtype=np.int64)
        rows.files_read, rows.files_skipped = [], []
        rows.probes = [FileFields.of_rows(label, rows._files[0].rows)]
        return rows

    def __len__(self) -> int:
        if self._dataset is not None:
            return len(self._dataset)
        return int(self._ends[-1]) if len(self._ends) else 0

    @property
    def fields(self) -> set[str]:
        return set().union(*(p.fields for p in self.probes))

    def check_fields(self, source: str, required: tuple[str, ...]) -> None:
        """Fail fast when the data cannot be this source (`a|b` means either field), file by file."""
        probes = [p for p in self.probes if p.rows] or self.probes[:1]
        if not probes:
            skipped = "; ".join(f"{f}: {why}" for f, why in self.files_skipped[:5])
            raise SourceSchemaError(f"source {source!r} at {self.label}: no data file to read"
                                    + (f" (skipped: {skipped})" if skipped else ""))
        for probe in probes:
            missing = [f for f in required if not any(alt in probe.fields for alt in f.split("|"))]
            if missing:
                where = probe.file if probe.file == self.label else f"{self.label} (file {probe.file})"
                raise SourceSchemaError(
                    f"source {source!r} at {where}: the rows lack the required field(s) {missing} "
                    f"(fields found: {sorted(probe.fields)}{probe.unreadable_note()}); "
                    "is this the right dataset for this source?"
                )

    def iter(self, seed: int | None = None, batch_size: int = 1000) -> Iterator[RawRow]:
        """Every row; in a seeded random order when `seed` is given (for capped mixtures)."""
        n = len(self)
        order = np.random.default_rng(seed).permutation(n) if seed is not None else np.arange(n)
        if self._dataset is None:
            window = self._window_rows()
            for start in range(0, n, window):
                yield from self._window(order[start:start + window])
            return
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            try:
                batch = self._dataset.select(idx).to_dict()
            except UnicodeDecodeError:  # a cell that is not UTF-8: read this batch row by row
                yield from (self._hub_row(int(i)) for i in idx)
                continue
            for j, original in enumerate(idx):
                yield RawRow(self.label, int(original), {k: v[j] for k, v in batch.items()}, position=int(original))

    def _window_rows(self) -> int:
        """Rows per window: about `_WINDOW_BYTES` of rows of the source's average size."""
        average = sum(f.nbytes for f in self._files) / max(len(self), 1)
        return int(min(8192, max(64, _WINDOW_BYTES // max(average, 1))))

    def _window(self, idx: np.ndarray) -> list[RawRow]:
        """The rows at source indices `idx`, in that order, each file read once in file order."""
        file_of = np.searchsorted(self._ends, idx, side="right")
        found: dict[int, RawRow] = {}
        for k in np.unique(file_of):
            wanted = np.sort(idx[file_of == k])
            base = int(self._ends[k - 1]) if k else 0
            found.update(zip(wanted.tolist(), self._files[k].rows_at((wanted - base).tolist()), strict=True))
        return [found[int(i)] for i in idx]

    def _hub_row(self, i: int) -> RawRow:
        try:
            return RawRow(self.label, i, self._dataset[i], position=i)
        except UnicodeDecodeError as err:
            return RawRow(self.label, i, None, f"invalid UTF-8 byte at {err.start}", position=i, reason="invalid_utf8")


@dataclass
class FileFields:
    """The field names one file's rows carry: what a schema check compares and reports."""

    file: str
    fields: set[str]
    rows: int  # rows looked at
    unreadable: Counter = field(default_factory=Counter)  # reason -> rows of those that could not be read

    @classmethod
    def of_rows(cls, file: str, rows: Iterable[RawRow]) -> FileFields:
        """Keys of the first readable rows; unreadable ones are counted, not taken for the schema."""
        probe = cls(file, set(), 0)
        readable = 0
        for r in rows:
            if readable >= _SCHEMA_PROBE_ROWS:
                break
            probe.rows += 1
            if r.data is None:
                probe.unreadable[r.reason or "invalid_json"] += 1
            else:
                readable += 1
                probe.fields.update(r.data)
        return probe

    def unreadable_note(self) -> str:
        if not self.unreadable:
            return ""
        bad = sum(self.unreadable.values())
        return f"; {bad} of the {self.rows} rows looked at unreadable: {dict(self.unreadable)}"


def _first_rows(rows: FileRows) -> Iterator[RawRow]:
    """A file's rows from the first, read in small windows (what a schema probe looks at)."""
    for start in range(0, len(rows), 64):
        yield from rows.rows_at(list(range(start, min(start + 64, len(rows)))))
