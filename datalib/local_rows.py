"""Rows of one local file (JSONL, JSON array, Parquet), every bad row a precise reject.

A bad byte or an odd value costs its own row and nothing else, and row numbers are those
of the file (0-based line index for JSONL, element index for a JSON array, row index for
Parquet), whatever the row holds:

- a UTF-8 byte-order mark is dropped; a UTF-16 one (a file saved by another tool) decodes
  the file as UTF-16;
- lines are cut at `\\n` only: `str.splitlines()` also cuts at U+2028, U+0085, `\\x0b`, …,
  which JSON allows raw inside strings, and would shift every later row number;
- invalid UTF-8 bytes reject their row (`invalid_utf8`, with the byte and its offset); so
  does a `\\ud800`-style escape left unpaired (`lone_surrogate`), which no UTF-8 writer,
  Parquet included, accepts later;
- `NaN` / `Infinity` are not JSON (`invalid_json`); a number literal of more digits than
  Python converts (4300) is `number_too_long`; nesting past the parser's depth `too_deep`;
- a Parquet row whose string cells are not UTF-8 is rejected alone (`invalid_utf8`, naming
  the column); the rest of its batch is read normally. A file that is no Parquet at all
  is one reject with row -1 (`unreadable_file`), which the schema check then reports.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

_BOM_UTF8, _BOMS_UTF16 = b"\xef\xbb\xbf", (b"\xff\xfe", b"\xfe\xff")
_SURROGATE = re.compile("[\ud800-\udfff]")  # from an invalid byte (surrogateescape) or a lone \udXXX escape
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # only such escapes can decode to a lone surrogate
_PARQUET_BATCH_ROWS = 4096


@dataclass(frozen=True)
class RawRow:
    file: str  # the file (or `hub:<id>[/<config>]:<split>`) the row came from
    row: int  # 0-based index of the row inside that file (line index for JSONL)
    data: dict | None  # None when the row could not be read as a JSON object
    error: str = ""  # why `data` is None, precisely (byte, column, ...)
    position: int = -1  # index among all rows of the source (files of a folder in order)
    reason: str = ""  # category of `error` for the rejects file: invalid_json, invalid_utf8, ...


class _BadRow(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


@dataclass(frozen=True)
class _Unreadable:
    """Stands in for a value JSON parsing cannot give, so one bad value costs its row only."""

    reason: str
    detail: str


class _Decoder:
    """json.loads with NaN/Infinity refused and overlong integers marked, never raised mid-file."""

    def __init__(self) -> None:
        self.marked = 0  # _Unreadable values created by the last decode
        self._fast = json.JSONDecoder(parse_constant=self._constant)
        # A Python parse_int is called for every integer: used only once the fast one has failed.
        self._careful = json.JSONDecoder(parse_constant=self._constant, parse_int=self._int)

    def _constant(self, name: str) -> _Unreadable:
        self.marked += 1
        return _Unreadable("invalid_json", f"{name} is not JSON")

    def _int(self, digits: str) -> int | _Unreadable:
        try:
            return int(digits)
        except ValueError:  # beyond sys.get_int_max_str_digits()
            self.marked += 1
            return _Unreadable("number_too_long", f"a number literal of {len(digits)} digits")

    def decode(self, text: str) -> object:
        self.marked = 0
        try:
            return self._fast.decode(text)
        except json.JSONDecodeError:
            raise
        except ValueError:  # the integer-size limit, raised from inside the parser
            self.marked = 0
            return self._careful.decode(text)


def _invalid_bytes(text: str) -> str:
    """Where the first invalid byte of a surrogateescape-decoded text is."""
    raw = text.encode("utf-8", "surrogateescape")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"invalid UTF-8 byte 0x{raw[err.start]:02x} at byte {err.start} of the row"
    return "bytes invalid in the file's encoding"


def _check_values(obj: object, bytes_were_bad: bool) -> None:
    """Raise _BadRow for a lone surrogate or a marked value anywhere in a row (keys included)."""
    stack = [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if m := _SURROGATE.search(value):
                if bytes_were_bad and 0xDC80 <= ord(m.group()) <= 0xDCFF:
                    raise _BadRow("invalid_utf8", _invalid_bytes(value))
                raise _BadRow("lone_surrogate", f"an unpaired UTF-16 surrogate \\u{ord(m.group()):04x} in a string")
        elif isinstance(value, _Unreadable):
            raise _BadRow(value.reason, value.detail)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def _line_row(path: str, i: int, line: str, decoder: _Decoder, position: int) -> RawRow:
    try:
        if _SURROGATE.search(line):  # only an invalid byte puts one in a decoded line
            raise _BadRow("invalid_utf8", _invalid_bytes(line))
        try:
            value = decoder.decode(line)
        except json.JSONDecodeError as err:
            raise _BadRow("invalid_json", f"{err.msg} at column {err.colno}") from None
        except RecursionError:
            raise _BadRow("too_deep", "nested deeper than the JSON parser goes") from None
        if decoder.marked or _SURROGATE_ESCAPE.search(line):
            _check_values(value, bytes_were_bad=False)
        return _object_row(path, i, value, position)
    except _BadRow as bad:
        return RawRow(path, i, None, bad.detail, position, bad.reason)


def _object_row(path: str, i: int, value: object, position: int) -> RawRow:
    if not isinstance(value, dict):
        return RawRow(path, i, None, f"not a JSON object: {type(value).__name__}", position, "not_an_object")
    return RawRow(path, i, value, position=position)


def _decode(data: bytes) -> str:
    if data.startswith(_BOMS_UTF16):
        return data.decode("utf-16", errors="surrogateescape")
    if data.startswith(_BOM_UTF8):
        data = data[len(_BOM_UTF8):]
    return data.decode("utf-8", errors="surrogateescape")  # invalid bytes are judged per row


def read_json_file(path: Path, first_position: int = 0, data: bytes | None = None) -> list[RawRow]:
    """Rows of a JSON-lines file, or of a file holding one JSON array (else read as JSON lines).

    `first_position` is the source-wide position of the file's first row (files of a folder);
    `data`: the file's bytes already read (decompressed), else they are read from `path`.
    """
    data = path.read_bytes() if data is None else data
    text, name, decoder = _decode(data), str(path), _Decoder()
    if text.lstrip("\ufeff \t\r\n")[:1] == "[":
        try:
            data = decoder.decode(text)
        except (ValueError, RecursionError):
            data = None  # maybe JSON lines under a .json name: read line by line
        if isinstance(data, list):
            bad_bytes = bool(_SURROGATE.search(text))
            check = decoder.marked or bad_bytes or _SURROGATE_ESCAPE.search(text)
            return [_array_row(name, i, value, bad_bytes, first_position + i) if check
                    else _object_row(name, i, value, first_position + i) for i, value in enumerate(data)]
    rows: list[RawRow] = []
    for i, line in enumerate(text.split("\n")):
        if line.strip():
            rows.append(_line_row(name, i, line, decoder, first_position + len(rows)))
    return rows


def _array_row(path: str, i: int, value: object, bad_bytes: bool, position: int) -> RawRow:
    try:
        _check_values(value, bad_bytes)
    except _BadRow as bad:
        return RawRow(path, i, None, bad.detail, position, bad.reason)
    return _object_row(path, i, value, position)
def read_parquet_file(path: Path, columns: list[str] | None, first_position: int = 0,
                      data: bytes | None = None) -> tuple[list[RawRow], list[str]]:
    """Rows of a Parquet file (the wanted columns that exist) and every column the file has;
    `data`: its bytes already read (a decompressed `.parquet.gz`), else it is read from `path`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def source() -> object:
        return pa.BufferReader(data) if data is not None else path

    try:
        names = pq.read_schema(source()).names
        wanted = [c for c in columns if c in names] if columns else None
        table = pq.read_table(source(), columns=wanted)
    except (OSError, ValueError) as err:  # ArrowInvalid is a ValueError: not Parquet, truncated, ...
        return [RawRow(str(path), -1, None, f"not a readable Parquet file: {err}"[:300], first_position,
                       "unreadable_file")], []
    rows: list[RawRow] = []
    for start in range(0, table.num_rows, _PARQUET_BATCH_ROWS):
        batch = table.slice(start, _PARQUET_BATCH_ROWS)
        try:
            rows += [RawRow(str(path), start + k, r, position=first_position + start + k)
                     for k, r in enumerate(batch.to_pylist())]
        except UnicodeDecodeError:  # one bad cell: find it row by row, keep the rest
            rows += [_parquet_row(str(path), start + k, batch.slice(k, 1), first_position + start + k)
                     for k in range(batch.num_rows)]
    return rows, names


def _parquet_row(path: str, i: int, one_row, position: int) -> RawRow:  # noqa: ANN001 (a one-row Table)
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
