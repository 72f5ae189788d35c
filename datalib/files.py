"""Which files a local source location means, and what each one holds (issue 23, point 1).

A location is a file, a folder or a glob. A folder is read whole, recursively, in path
order: every file whose name ends in a data suffix, matched without regard to case —
`.jsonl`, `.jsonlines`, `.ndjson`, `.json`, `.parquet` — optionally followed by a
compression suffix (`.gz`, `.bz2`, `.xz`, `.zst`, `.zstd`). Hidden files and folders (editor
and notebook copies: `.ipynb_checkpoints/`, `.#x.jsonl`, `.git/`) and dangling links are
skipped, and so is every other file, each with the reason. A folder laid out by split
(`train/`, `test/`, or `train.jsonl`, `test-00000.parquet`, …) gives the files of the
source's `split:` and refuses a split it does not have, naming those it has.

A file is read by what it holds, not by its name: compression and format are recognised
from the first bytes (gzip, bzip2, xz, zstd; Parquet's `PAR1`, a JSON array, JSON lines).
When the name says otherwise the reader goes by the bytes and says so. An empty file is
skipped as empty. Nothing is dropped without a line in `FileList.skipped`, which the data
card shows.

Nothing is read whole: a compressed file is decompressed chunk by chunk into an unnamed
temporary file (under `TMPDIR`), and rows are then read from there, or from the file
itself, on demand (datalib/local_rows.py).
"""

from __future__ import annotations

import bz2
import errno
import glob
import gzip
import lzma
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from stagekit.errors import StageInputError

DATA_SUFFIXES = {".jsonl": "jsonl", ".jsonlines": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet"}
COMPRESSION_SUFFIXES = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd", ".zstd": "zstd"}
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"))
SPLIT_NAMES = ("train", "test", "validation", "valid", "dev", "eval")
_GLOB = re.compile(r"[*?\[]")


class DataFileError(StageInputError):
    """A location that names no readable data, said so with the path."""


@dataclass(frozen=True)
class DataFile:
    path: Path
    named_format: str  # what the name says: jsonl, json, parquet
    named_compression: str | None


@dataclass
class FileList:
    location: str
    files: list[DataFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)


def name_kind(path: Path) -> tuple[str | None, str | None]:
    """(format, compression) a file's name says; format None: not a data file by name."""
    suffixes = [s.lower() for s in path.suffixes]
    compression = COMPRESSION_SUFFIXES.get(suffixes[-1]) if suffixes else None
    if compression:
        suffixes = suffixes[:-1]
    return (DATA_SUFFIXES.get(suffixes[-1]) if suffixes else None), compression


def looks_like_data_file(location: str) -> bool:
    return name_kind(Path(location))[0] is not None


def is_glob(location: str) -> bool:
    return bool(_GLOB.search(location))


def _split_of(path: Path, root: Path) -> str | None:
    """The split a file belongs to by its folder or its name under `root`, if any."""
    first = path.relative_to(root).parts[0].lower()
    for name in SPLIT_NAMES:
        if first == name or re.match(rf"{name}([-_.]|$)", first):
            return name
    return None


def list_files(location: str, path: Path, split: str) -> FileList:
    """The data files of a local location (a file, a folder or a glob) and every file skipped, with why."""
    out = FileList(location)
    if is_glob(location):
        matches = sorted(Path(p) for p in glob.glob(str(path), recursive=True))
        if not matches:
            raise DataFileError(f"local source {location}: the pattern {path} matches no file")
        candidates = [(m, m.parent) for m in matches if m.is_file() or m.is_symlink()]
        for m in matches:
            if m.is_dir():
                candidates += [(p, m) for p in sorted(m.rglob("*")) if not p.is_dir()]
    elif path.is_dir():
        candidates = [(p, path) for p in sorted(path.rglob("*")) if not p.is_dir()]
    else:
        candidates = [(path, path.parent)]
    splits: dict[str, list[tuple[Path, Path]]] = {}
    for p, root in candidates:
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            out.skipped.append((str(p), "hidden (a name starting with '.')"))
        elif p.is_symlink() and not p.exists():
            out.skipped.append((str(p), "a link to nothing"))
        elif name_kind(p)[0] is None and not (path.is_file() and p == path):
            out.skipped.append((str(p), f"not a data file by its name (suffix {''.join(p.suffixes) or 'none'})"))
        else:
            group = (_split_of(p, root) or "") if root == path and path.is_dir() else ""
            splits.setdefault(group, []).append((p, root))
    if path.is_dir() and set(splits) - {""}:
        found = sorted(set(splits) - {""})
        if split not in found:
            raise DataFileError(f"local source {location}: laid out by split ({', '.join(found)}) but has no "
                                f"{split!r}; set `split:` to one of them")
        for name, members in splits.items():
            if name != split:
                out.skipped += [(str(p), f"split {name or '(none)'}, not {split!r}") for p, _ in members]
        chosen = splits[split]
    else:
        chosen = [m for members in splits.values() for m in members]
    for p, _ in sorted(chosen):
        fmt, compression = name_kind(p)
        out.files.append(DataFile(p, fmt or "jsonl", compression))
    return out


_CHUNK = 1 << 20


@dataclass(frozen=True)
class Region:
    """A file's content as bytes `[start, end)`: of the file itself, or of a spool file that
    holds it decompressed (or re-encoded). Rows are read from here on demand, never all at once."""

    path: Path | None  # the file on disk, when its bytes are the content
    spool: BinaryIO | None  # else the unnamed temporary file holding them
    start: int
    end: int

    @contextmanager
    def open(self) -> Iterator[BinaryIO]:
        if self.spool is not None:
            yield self.spool
        else:
            with self.path.open("rb") as fh:
                yield fh

    def read(self, start: int, end: int) -> bytes:
        """Bytes `[start, end)` of the file that holds the region (offsets are that file's)."""
        with self.open() as fh:
            fh.seek(start)
            return fh.read(end - start)

    def first_byte(self) -> bytes:
        """The first byte that is not ASCII whitespace, b"" when there is none (read a chunk at a time)."""
        with self.open() as fh:
            fh.seek(self.start)
            left = self.end - self.start
            while left > 0:
                chunk = fh.read(min(_CHUNK, left))
                left -= len(chunk)
                if first := chunk.lstrip()[:1]:
                    return first
        return b""


def new_spool() -> BinaryIO:
    """An unnamed temporary file (gone when closed, or when the process dies: a kill leaves nothing)."""
    return tempfile.TemporaryFile(prefix="rstar-source-")


def spool_copy(spool: BinaryIO, stream: BinaryIO, what: str, transform=None,  # noqa: ANN001
               prefix: bytes = b"") -> Region:
    """Copy `prefix`, then `stream`, to the end of `spool` chunk by chunk (`transform` applied to
    each chunk)."""
    spool.seek(0, 2)
    start = spool.tell()
    try:
        if prefix:
            spool.write(transform(prefix) if transform else prefix)
        while chunk := stream.read(_CHUNK):
            spool.write(transform(chunk) if transform else chunk)
        if transform:
            spool.write(transform(b"", final=True))
    except OSError as err:
        if err.errno == errno.ENOSPC:
            raise DataFileError(f"{what}: no space left on {tempfile.gettempdir()} to decompress it into; set "
                                "TMPDIR to a folder on a larger disk") from None
        raise
    spool.flush()
    return Region(None, spool, start, spool.tell())


def _decompressing(path: Path, compression: str) -> BinaryIO:
    if compression == "gzip":
        return gzip.open(path, "rb")
    if compression == "bz2":
        return bz2.open(path, "rb")
    if compression == "xz":
        return lzma.open(path, "rb")
    import pyarrow as pa  # zstd: Python 3.11 has no module of its own; pyarrow ships the codec

    return pa.input_stream(str(path), compression="zstd")


@dataclass(frozen=True)
class FileContent:
    region: Region  # the decompressed bytes
    compression: str | None  # what the bytes said
    format: str  # parquet, json (an array), jsonl, or empty
    note: str  # non-empty when the name says something else than the bytes


def open_content(f: DataFile, spool: Callable[[], BinaryIO]) -> FileContent:
    """The file's content, decompressed by what its bytes are (into a spool), and the format it holds.
    A compressed Parquet file gets a spool of its own: a Parquet reader needs the file to itself."""
    with f.path.open("rb") as fh:
        magic = fh.read(8)
    compression = next((name for magic_bytes, name in _MAGIC if magic.startswith(magic_bytes)), None)
    region = Region(f.path, None, 0, f.path.stat().st_size)
    if compression:
        try:
            with _decompressing(f.path, compression) as stream:
                head = stream.read(4)
                target = new_spool() if head == b"PAR1" else spool()
                region = spool_copy(target, stream, str(f.path), prefix=head)
        except (OSError, EOFError, ValueError, lzma.LZMAError) as err:
            if isinstance(err, DataFileError):
                raise
            raise DataFileError(f"{f.path}: {compression}-compressed but cannot be decompressed ({err})") from None
    fmt = _format(region)
    notes = []
    if compression != f.named_compression:
        notes.append(f"{compression or 'not'} compressed, though its name says "
                     f"{f.named_compression or 'uncompressed'}")
    if fmt == "parquet" and f.named_format != "parquet":
        notes.append(f"holds Parquet, though its name says {f.named_format}: read as Parquet")
    elif fmt in ("json", "jsonl") and f.named_format == "parquet":
        notes.append(f"holds JSON{' lines' if fmt == 'jsonl' else ''}, though its name says Parquet: read as JSON")
    return FileContent(region, compression, fmt, "; ".join(notes))


def _format(region: Region) -> str:
    """parquet, empty (nothing but whitespace), json (starts with `[`) or jsonl, from the bytes."""
    if region.read(region.start, min(region.start + 4, region.end)) == b"PAR1":
        return "parquet"
    first = region.first_byte()
    return "empty" if not first else "json" if first == b"[" else "jsonl"
