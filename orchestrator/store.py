"""Content-addressed artifact store (SPEC §1).

Layout under the root (a local path or any fsspec URL):
    <stage>/<digest>/...            the artifact, `manifest.json` included
    index/<stage>/<key>.json        stage key -> artifact reference, written last
    tmp/<uuid>/                     work in progress; never read as an artifact
    work/<stage>/<key>/             a stage's persistent work dir: checkpoints (stagekit/workdir.py)

A stage writes into a local temp dir; `commit` digests it, writes the manifest, moves
it into place (an atomic rename on a local root) and only then writes the index entry.
A stage killed at any point therefore leaves no index entry: it never looks complete.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import fsspec
from pydantic import BaseModel

from stagekit import artifacts
from stagekit.paths import resolve_local


class ArtifactRef(BaseModel):
    """Small, JSON-serialisable handle passed between Prefect tasks (never a model)."""

    stage: str
    key: str  # cache key: config section + upstream digests + code version
    digest: str  # sha256 of the artifact's content
    uri: str  # where the artifact directory lives


ARTIFACT_METADATA = (artifacts.MANIFEST, artifacts.CARD)


def digest_dir(path: Path, skip: tuple[str, ...] = ARTIFACT_METADATA) -> str:
    """sha256 over sorted relative paths and file contents, the top-level files `skip` names
    excluded: an artifact's manifest and card say when, how long and at which commit it was
    made, so two runs that compute the same files get the same digest."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path).as_posix()
        if rel in skip:
            continue
        h.update(rel.encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


_UNLOCKED_STAGING_S = 600  # a staging dir without its lock file this old was left by a run that died


def _sweep_staging(base: Path) -> None:
    """Remove the staging dirs of runs that died: their lock is free (or, older ones, missing)."""
    for lock in base.glob("*.lock"):
        with open(lock, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its run is alive
            shutil.rmtree(base / lock.name.removesuffix(".lock"), ignore_errors=True)
            lock.unlink(missing_ok=True)
    now = time.time()
    for d in base.iterdir():
        if d.is_dir() and not (base / f"{d.name}.lock").exists() and now - d.stat().st_mtime > _UNLOCKED_STAGING_S:
            shutil.rmtree(d, ignore_errors=True)


class ArtifactStore:
    def __init__(self, root: str, cache_dir: str | None = None):
        # A relative local root means the same place from any working directory (the CLI,
        # a Prefect worker): the repository root, as for data `location`s.
        self.root = root.rstrip("/") if "://" in root else str(resolve_local(root))
        self.fs, self._root_path = fsspec.core.url_to_fs(self.root)
        self.is_local = self.fs.protocol in ("file", ("file", "local"), "local") or isinstance(
            self.fs, fsspec.implementations.local.LocalFileSystem
        )
        self._cache_dir = Path(cache_dir or Path.home() / ".cache" / "rstar" / "artifacts")

    def _join(self, *parts: str) -> str:
        return "/".join([self._root_path.rstrip("/"), *parts])

    @property
    def work_root(self) -> Path:
        """Where persistent work directories live: beside the artifacts on a local root, in
        the local cache for a remote one (checkpoints are written often and read back)."""
        return Path(self._join("work")) if self.is_local else self._cache_dir / "work"

    def lookup(self, stage: str, key: str) -> ArtifactRef | None:
        """The committed artifact for (stage, key), or None."""
        entry = self._join("index", stage, f"{key}.json")
        if not self.fs.exists(entry):
            return None
        ref = ArtifactRef.model_validate_json(self.fs.cat_file(entry))
        if not self.fs.exists(self._join(stage, ref.digest, artifacts.MANIFEST)):
            return None  # index outlived its artifact (manual deletion): treat as missing
        return ref

    @contextmanager
    def staging(self) -> Iterator[Path]:
        """A fresh local directory for a stage to write into; removed if not committed. Each
        is held by a lock file beside it, which the kernel releases when its run dies: the
        next staging removes what a killed run left (a SIGKILL runs no `finally`)."""
        base = Path(self._join("tmp")) if self.is_local else self._cache_dir / "tmp"
        base.mkdir(parents=True, exist_ok=True)
        _sweep_staging(base)
        tmp = Path(tempfile.mkdtemp(prefix=f"{uuid.uuid4().hex[:8]}-", dir=base))
        lock = base / f"{tmp.name}.lock"
        with open(lock, "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            try:
                yield tmp
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
                lock.unlink(missing_ok=True)

    def commit(self, tmp: Path, stage: str, key: str, manifest: dict) -> ArtifactRef:
        """Digest `tmp`, write its manifest, move it into place, then index it."""
        digest = digest_dir(tmp)
        manifest = {
            **manifest,
            "stage": stage,
            "key": key,
            "digest": digest,
            "created_at": datetime.now(UTC).isoformat(),
        }
        (tmp / artifacts.MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        final = self._join(stage, digest)
        if self.is_local:
            Path(final).parent.mkdir(parents=True, exist_ok=True)
            if Path(final).exists():
                shutil.rmtree(tmp)  # same content committed before: content addressing dedups
            else:
                os.rename(tmp, final)
        elif not self.fs.exists(self._join(stage, digest, artifacts.MANIFEST)):
            self.fs.put(str(tmp), final, recursive=True)
        ref = ArtifactRef(stage=stage, key=key, digest=digest, uri=self._uri(stage, digest))
        self._write_index(stage, key, ref)
        return ref

    def _uri(self, stage: str, digest: str) -> str:
        path = self._join(stage, digest)
        return str(Path(path).resolve()) if self.is_local else self.fs.unstrip_protocol(path)

    def _write_index(self, stage: str, key: str, ref: ArtifactRef) -> None:
        entry = self._join("index", stage, f"{key}.json")
        if self.is_local:
            Path(entry).parent.mkdir(parents=True, exist_ok=True)
            part = f"{entry}.{uuid.uuid4().hex}.part"
            Path(part).write_text(ref.model_dump_json())
            os.replace(part, entry)
        else:
            self.fs.pipe_file(entry, ref.model_dump_json().encode())

    def local_path(self, ref: ArtifactRef) -> Path:
        """A local directory holding the artifact (downloaded once for remote roots)."""
        if self.is_local:
            return Path(self._join(ref.stage, ref.digest))
        dest = self._cache_dir / ref.stage / ref.digest
        if not (dest / artifacts.MANIFEST).exists():
            part = dest.with_name(dest.name + f".{uuid.uuid4().hex}.part")
            self.fs.get(self._join(ref.stage, ref.digest), str(part), recursive=True)
            os.replace(part, dest)
        return dest

    def manifest(self, ref: ArtifactRef) -> dict:
        return json.loads((self.local_path(ref) / artifacts.MANIFEST).read_text())
