"""Rows of a Parquet file, read a row group at a time through a cache the whole source shares.

A seeded order visits row groups at random, so row groups are kept in Arrow form up to
`ROW_GROUP_CACHE_BYTES` for the source (the first read, and always the last one), and the
files open lately stay open (`_OPEN_FILES`): the memory a source holds is that budget, one
row group more and one window of rows, whatever the size or the number of its files. A row
group that cannot be read costs its own rows (`unreadable_file`); a string cell that is not
UTF-8 costs its row (`invalid_utf8`).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict

from datalib.files import Region
from datalib.local_rows import FileRows, MemoryRows, RawRow

ROW_GROUP_CACHE_BYTES = 32 << 20
_OPEN_FILES = 8


class ParquetCache:
    """Open Parquet files and row groups read lately, for every Parquet file of one source."""

    def __init__(self, budget: int = ROW_GROUP_CACHE_BYTES):
        self.budget, self.size = budget, 0
        self.groups: dict[tuple[str, int], object] = {}  # (file, group) -> pyarrow Table
        self.last: tuple[tuple[str, int], object] | None = None  # the last group read beyond the budget
        self.files: OrderedDict[str, object] = OrderedDict()  # file -> pq.ParquetFile

    def parquet_file(self, name: str, region: Region):  # noqa: ANN201 (pq.ParquetFile)
        import pyarrow.parquet as pq

        if name in self.files:
            self.files.move_to_end(name)
            return self.files[name]
        pf = pq.ParquetFile(region.spool if region.spool is not None else str(region.path))
        self.files[name] = pf
        if len(self.files) > _OPEN_FILES:
            self.files.popitem(last=False)[1].close()
        return pf

    def group(self, name: str, region: Region, g: int, columns: list[str] | None):  # noqa: ANN201 (pa.Table)
        """A row group in Arrow form. Kept: the groups first read, up to the budget, and the last one.
        Least-recently-used would thrash here: each window visits its groups in file order, so
        the group evicted is always the one the next window needs first."""
        key = (name, g)
        if key in self.groups:
            return self.groups[key]
        if self.last is not None and self.last[0] == key:
            return self.last[1]
        table = self.parquet_file(name, region).read_row_group(g, columns=columns)
        if self.size + table.nbytes <= self.budget:
            self.groups[key] = table
            self.size += table.nbytes
        else:
            self.last = (key, table)
        return table


class ParquetRows(FileRows):
    """A Parquet file: the row count of every row group, and the columns it has."""

    def __init__(self, name: str, region: Region, columns: list[str] | None, first_position: int,
                 cache: ParquetCache):
        self.name, self.region, self.first_position, self.cache = name, region, first_position, cache
        pf = cache.parquet_file(name, region)
        self.columns = pf.schema_arrow.names
        self.wanted = [c for c in columns if c in self.columns] if columns else None
        self.group_starts, self.nbytes = [0], 0
        for g in range(pf.metadata.num_row_groups):
            self.group_starts.append(self.group_starts[-1] + pf.metadata.row_group(g).num_rows)
            self.nbytes += pf.metadata.row_group(g).total_byte_size

    def __len__(self) -> int:
        return self.group_starts[-1]

    def rows_at(self, local: list[int]) -> list[RawRow]:
        out: list[RawRow] = []
        k = 0
        while k < len(local):
            g = bisect.bisect_right(self.group_starts, local[k]) - 1
            j = bisect.bisect_left(local, self.group_starts[g + 1], k)
            out += self._group_rows(g, local[k:j])
            k = j
        return out

    def _group_rows(self, g: int, local: list[int]) -> list[RawRow]:
        import pyarrow as pa

        try:
            group = self.cache.group(self.name, self.region, g, self.wanted)
            table = group.take(pa.array([i - self.group_starts[g] for i in local], pa.int64()))
        except (OSError, ValueError) as err:  # ArrowInvalid is a ValueError: a damaged row group
            return [RawRow(self.name, i, None, f"row group {g} not readable: {err}"[:300], self.first_position + i,
                           "unreadable_file") for i in local]
        try:
            return [RawRow(self.name, i, r, position=self.first_position + i)
                    for i, r in zip(local, table.to_pylist(), strict=True)]
        except UnicodeDecodeError:  # one bad cell: find it row by row, keep the rest
            return [_one_row(self.name, i, table.slice(k, 1), self.first_position + i) for k, i in enumerate(local)]


def open_parquet_rows(name: str, region: Region, columns: list[str] | None, first_position: int,
                      cache: ParquetCache) -> FileRows:
    """The file's rows, or one reject (row -1, `unreadable_file`) when it is no readable Parquet."""
    try:
        return ParquetRows(name, region, columns, first_position, cache)
    except (OSError, ValueError) as err:  # not Parquet, truncated, ...
        return MemoryRows(name, [RawRow(name, -1, None, f"not a readable Parquet file: {err}"[:300], first_position,
                                        "unreadable_file")])


def _one_row(path: str, i: int, one_row, position: int) -> RawRow:  # noqa: ANN001 (a one-row Table)
    try:
        return RawRow(path, i, one_row.to_pylist()[0], position=position)
    except UnicodeDecodeError as err:
        bad = next((c for c in one_row.column_names if _undecodable(one_row.column(c))), "?")
        return RawRow(path, i, None, f"column {bad!r}: invalid UTF-8 byte at {err.start}", position, "invalid_utf8")


def _undecodable(column) -> bool:  # noqa: ANN001
    try:
        column.to_pylist()
    except UnicodeDecodeError:
        return True
    return False
