"""Rows of one local file (JSONL, JSON array, Parquet), every bad row a precise reject.

A bad byte or an odd value costs its own row and nothing else, and row numbers are those
of the file (0-based line index for JSONL, element index for a JSON array, row index for
Parquet), whatever the row holds:

- nothing is read whole: a file is indexed when opened (the offset of every line, or of every
  element of a JSON array, found by scanning it a chunk at a time) and its rows are decoded
  when asked for;
- a UTF-8 byte-order mark is dropped; a UTF-16 one (a file saved by another tool) has the
  file re-encoded as UTF-8 into the source's spool;
- lines are cut at `\\n` only: `str.splitlines()` also cuts at U+2028, U+0085, `\\x0b`, …,
  which JSON allows raw inside strings, and would shift every later row number;
- invalid UTF-8 bytes reject their row (`invalid_utf8`, with the byte and its offset); so
  does a `\\ud800`-style escape left unpaired (`lone_surrogate`), which no UTF-8 writer,
  Parquet included, accepts later;
- `NaN` / `Infinity` are not JSON (`invalid_json`); a number literal of more digits than
  Python converts (4300) is `number_too_long`; nesting past the parser's depth `too_deep`;
- a Parquet row whose string cells are not UTF-8 is rejected alone (`invalid_utf8`, naming
  the column); the rest of its batch is read normally. A file that is no Parquet at all
  is one reject with row -1 (`unreadable_file`), which the schema check then reports
  (Parquet: datalib/parquet_rows.py).
"""

from __future__ import annotations

import codecs
import json
import re
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from datalib.files import _CHUNK, Region, new_spool, spool_copy

_BOM_UTF8, _BOMS_UTF16 = b"\xef\xbb\xbf", (b"\xff\xfe", b"\xfe\xff")
_SURROGATE = re.compile("[\ud800-\udfff]")  # from a lone \udXXX escape (bytes are decoded strictly)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # only such escapes can decode to a lone surrogate


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


def _check_values(obj: object) -> None:
    """Raise _BadRow for a lone surrogate or a marked value anywhere in a row (keys included)."""
    stack = [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if m := _SURROGATE.search(value):
                raise _BadRow("lone_surrogate", f"an unpaired UTF-16 surrogate \\u{ord(m.group()):04x} in a string")
        elif isinstance(value, _Unreadable):
            raise _BadRow(value.reason, value.detail)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def _bytes_row(path: str, i: int, raw: bytes, decoder: _Decoder, position: int) -> RawRow:
    """One row from its bytes: UTF-8 (strict: an invalid byte rejects its row), then one JSON object."""
    try:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise _BadRow("invalid_utf8", f"invalid UTF-8 byte 0x{raw[err.start]:02x} at byte {err.start} "
                                          "of the row") from None
        try:
            value = decoder.decode(line)
        except json.JSONDecodeError as err:
            raise _BadRow("invalid_json", f"{err.msg} at column {err.colno}") from None
        except RecursionError:
            raise _BadRow("too_deep", "nested deeper than the JSON parser goes") from None
        if decoder.marked or ("\\u" in line and _SURROGATE_ESCAPE.search(line)):
            _check_values(value)
        return _object_row(path, i, value, position)
    except _BadRow as bad:
        return RawRow(path, i, None, bad.detail, position, bad.reason)


def _object_row(path: str, i: int, value: object, position: int) -> RawRow:
    if not isinstance(value, dict):
        return RawRow(path, i, None, f"not a JSON object: {type(value).__name__}", position, "not_an_object")
    return RawRow(path, i, value, position=position)


class FileRows:
    """The rows of one file, indexed when opened and read on demand: what memory holds is the
    index (a few bytes per row) and the rows asked for, never the file."""

    name: str
    first_position: int  # source-wide position of the file's first row
    nbytes: int = 0  # the rows' size in bytes (about): what sets how many rows a window reads

    def __len__(self) -> int:
        raise NotImplementedError

    def rows_at(self, local: list[int]) -> list[RawRow]:
        """The rows at these 0-based indices (ascending), in that order."""
        raise NotImplementedError


class MemoryRows(FileRows):
    """Rows already in memory: generated in-process, or the one reject of an unreadable file."""

    def __init__(self, name: str, rows: list[RawRow]):
        self.name, self.rows = name, rows
        self.first_position = rows[0].position if rows else 0

    def __len__(self) -> int:
        return len(self.rows)

    def rows_at(self, local: list[int]) -> list[RawRow]:
        return [self.rows[i] for i in local]


class JsonLinesRows(FileRows):
    """A JSON-lines file: the byte offset and line number of every non-blank line."""

    def __init__(self, name: str, region: Region, first_position: int):
        self.name, self.region, self.first_position = name, region, first_position
        self.nbytes = region.end - region.start
        self.offsets, self.lines = array("q"), array("q")
        self._decoder = _Decoder()
        with region.open() as fh:
            fh.seek(region.start)
            pos, i = region.start, 0
            while pos < region.end:
                line = fh.readline(region.end - pos)
                if line.strip():
                    self.offsets.append(pos)
                    self.lines.append(i)
                pos += len(line)
                i += 1

    def __len__(self) -> int:
        return len(self.offsets)

    def rows_at(self, local: list[int]) -> list[RawRow]:
        out = []
        with self.region.open() as fh:
            for run in _runs(local):  # a run of consecutive rows is one read
                first, last = run[0], run[-1]
                fh.seek(self.offsets[first])
                end = self.offsets[last + 1] if last + 1 < len(self.offsets) else self.region.end
                lines = fh.read(end - self.offsets[first]).split(b"\n")
                out += [_bytes_row(self.name, self.lines[r], lines[self.lines[r] - self.lines[first]], self._decoder,
                                   self.first_position + r) for r in run]
        return out


class JsonArrayRows(JsonLinesRows):
    """A file holding one JSON array: the byte span of every element (`spans` found them)."""

    def __init__(self, name: str, region: Region, first_position: int, spans: tuple[array, array]):
        self.name, self.region, self.first_position = name, region, first_position
        self.nbytes = region.end - region.start
        self.offsets, self.ends = spans
        self._decoder = _Decoder()

    def rows_at(self, local: list[int]) -> list[RawRow]:
        out = []
        with self.region.open() as fh:
            for run in _runs(local):  # a run of consecutive elements is one read
                base = self.offsets[run[0]]
                fh.seek(base)
                block = fh.read(self.ends[run[-1]] - base)
                out += [_bytes_row(self.name, k, block[self.offsets[k] - base:self.ends[k] - base], self._decoder,
                                   self.first_position + k) for k in run]
        return out


def _runs(local: list[int]) -> Iterator[list[int]]:
    """Ascending indices cut into runs of consecutive ones."""
    k = 0
    while k < len(local):
        j = k + 1
        while j < len(local) and local[j] == local[j - 1] + 1:
            j += 1
        yield local[k:j]
        k = j


# A JSON string (complete), a bracket or a comma; a lone quote is a string not closed in this buffer.
_ARRAY_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[][{},]|"', re.DOTALL)
_CLOSE = {ord("]"): ord("["), ord("}"): ord("{")}
_OPEN_ARRAY, _QUOTE, _COMMA = ord("["), ord('"'), ord(",")


def array_spans(region: Region) -> tuple[array, array] | None:
    """(start, end) offsets of each element of the one JSON array `region` holds (its first
    non-blank byte is `[`), scanned chunk by chunk; None when it holds something else (JSON lines
    that start with `[`, brackets that do not match, text after the array): read as JSON lines."""
    starts, ends, stack = array("q"), array("q"), bytearray()
    element_start, closed = -1, False
    with region.open() as fh:
        fh.seek(region.start)
        base, carry, left = region.start, b"", region.end - region.start
        while True:
            chunk = fh.read(min(max(_CHUNK, 2 * len(carry)), left)) if left else b""  # a long string: read more
            left -= len(chunk)
            buf, carry, pos = carry + chunk, b"", 0
            if not buf:
                break
            for m in _ARRAY_TOKENS.finditer(buf):
                tok = buf[m.start()]
                if closed or (not stack and tok != _OPEN_ARRAY):
                    return None  # something after the array, or a first token that does not open one
                if tok == _QUOTE and m.end() - m.start() == 1:  # a string the buffer does not close
                    if not chunk:
                        return None
                    carry = buf[m.start():]
                    break
                if tok in _CLOSE:
                    if not stack or stack.pop() != _CLOSE[tok]:
                        return None
                    if not stack:
                        starts.append(element_start)
                        ends.append(base + m.start())
                        closed = True
                elif tok == _COMMA:
                    if len(stack) == 1:
                        starts.append(element_start)
                        ends.append(base + m.start())
                        element_start = base + m.end()
                elif tok != _QUOTE:  # [ or {
                    stack.append(tok)
                    if len(stack) == 1:
                        element_start = base + m.end()
                pos = m.end()
            if closed and not carry and buf[pos:].strip():
                return None
            base += len(buf) - len(carry)
    if not closed:
        return None
    if len(starts) == 1 and not region.read(starts[0], ends[0]).strip():
        return array("q"), array("q")  # `[]`
    return starts, ends


def open_json_rows(name: str, region: Region, first_position: int, spool: Callable[[], BinaryIO]) -> JsonLinesRows:
    """A JSON-lines file, or a file holding one JSON array (else read as JSON lines). A UTF-8 byte-order
    mark is skipped; a UTF-16 file is re-encoded as UTF-8 into the spool first."""
    head = region.read(region.start, min(region.start + 4, region.end))
    if head.startswith(_BOMS_UTF16):
        region = spool_copy(spool(), _Reader(region), name, _Utf16ToUtf8())
    elif head.startswith(_BOM_UTF8):
        region = Region(region.path, region.spool, region.start + len(_BOM_UTF8), region.end)
    if region.first_byte() == b"[" and (spans := array_spans(region)) is not None:
        return JsonArrayRows(name, region, first_position, spans)
    return JsonLinesRows(name, region, first_position)


class _Reader:
    """A region read as a stream (for re-encoding into the spool)."""

    def __init__(self, region: Region):
        self.region, self.pos = region, region.start

    def read(self, n: int) -> bytes:
        data = self.region.read(self.pos, min(self.pos + n, self.region.end))
        self.pos += len(data)
        return data


class _Utf16ToUtf8:
    """UTF-16 re-encoded as UTF-8. A lone surrogate, or an odd last byte, becomes bytes that are
    not UTF-8, so its row is rejected as `invalid_utf8` like any other bad byte."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-16")(errors="surrogatepass")

    def __call__(self, chunk: bytes, final: bool = False) -> bytes:
        try:
            text = self._decoder.decode(chunk, final)
        except UnicodeDecodeError:  # only at the end: a byte left over
            return b"\xff"
        return text.encode("utf-8", errors="surrogatepass")


def read_json_file(path: Path, first_position: int = 0) -> list[RawRow]:
    """Every row of a (plain) JSON-lines or JSON-array file at once: for small files and tests."""
    spool: list[BinaryIO] = []
    rows = open_json_rows(str(path), Region(path, None, 0, path.stat().st_size), first_position,
                          lambda: spool.append(new_spool()) or spool[-1])
    return rows.rows_at(list(range(len(rows))))
