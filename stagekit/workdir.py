"""A stage's persistent work directory: checkpoints that survive failures and kills.

Each (stage, key) owns `<artifacts root>/work/<stage>/<key>/` (a local cache dir for
remote roots). A stage that declares a `work` parameter in its `run()` gets a `WorkDir`
and its output directory lives here too:

    def run(cfg, inputs, out_dir, work: WorkDir):
        ckpt = work.latest()                       # None on a fresh start
        state = ckpt.state() if ckpt else {...}
        for step in range(ckpt.step if ckpt else 0, cfg.steps):
            ...
            work.save(step + 1, state)              # atomic: a kill never leaves half a checkpoint
        (out_dir / "model.bin").write_bytes(...)

Rerunning the same stage and config resumes from the latest complete checkpoint. The
output directory starts empty on every attempt, so only what the finishing attempt wrote
is committed; after the commit the runner removes the whole work dir. In a
multi-process run every rank gets the same work dir; only the main process saves
checkpoints (gather state first, as accelerate's `save_state` does).
`python -m orchestrator.workdirs list|clean` finds the ones failures left behind.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_STEP = re.compile(r"^step-(\d+)$")
FINISHED = "FINISHED"


log = logging.getLogger(__name__)


class WorkDirBusyError(RuntimeError):
    pass


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path  # a directory; `save` puts `state.json` in it

    def state(self) -> dict:
        return json.loads((self.path / "state.json").read_text())


class WorkDir:
    def __init__(self, root: Path, stage: str, key: str, keep: int = 2):
        self.root = Path(root)  # every stage's work dirs; stage-wide caches live beside it (evaluation samples)
        self.path = self.root / stage / key
        self.stage, self.key, self.keep = stage, key, keep

    @property
    def out_dir(self) -> Path:
        return self.path / "out"

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    @contextmanager
    def checkpoint(self, step: int) -> Iterator[Path]:
        """A directory to write checkpoint `step` into; it becomes visible to `latest()`
        only when the block exits normally (one rename), and older ones beyond `keep` go."""
        self.checkpoints_dir.mkdir(parents=True, exist_ok=True)
        part = self.checkpoints_dir / f".step-{step:09d}.{uuid.uuid4().hex[:8]}.part"
        part.mkdir()
        try:
            yield part
            for f in part.rglob("*"):  # the rename must not overtake the data on a power cut
                if f.is_file():
                    with f.open("rb") as fh:
                        os.fsync(fh.fileno())
            final = self.checkpoints_dir / f"step-{step:09d}"
            if final.exists():  # the same step saved again (a resumed attempt): newest wins
                shutil.rmtree(final)
            os.rename(part, final)
        finally:
            shutil.rmtree(part, ignore_errors=True)
        self._prune()

    def save(self, step: int, state: dict) -> Checkpoint:
        """Checkpoint `step` holding a JSON-serialisable `state`."""
        with self.checkpoint(step) as d:
            (d / "state.json").write_text(json.dumps(state, sort_keys=True))
        return Checkpoint(step, self.checkpoints_dir / f"step-{step:09d}")

    def checkpoints(self) -> list[Checkpoint]:
        """Complete checkpoints, oldest first (half-written `.part` dirs are not listed)."""
        if not self.checkpoints_dir.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.checkpoints_dir.iterdir() if (m := _STEP.match(p.name))]
        return [Checkpoint(step, p) for step, p in sorted(found)]

    def latest(self) -> Checkpoint | None:
        ckpts = self.checkpoints()
        return ckpts[-1] if ckpts else None

    def finish(self) -> None:
        """Mark the work done: the output is complete and may be committed. The runner
        calls it after `run()` returns if the stage did not."""
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / FINISHED).write_text("")

    @property
    def finished(self) -> bool:
        return (self.path / FINISHED).exists()

    def _prune(self) -> None:
        for ckpt in self.checkpoints()[: -self.keep] if self.keep > 0 else []:
            shutil.rmtree(ckpt.path, ignore_errors=True)
        # Only one process saves (the main rank in a multi-process run), so any other
        # `.part` dir is debris from a killed attempt.
        for stale in self.checkpoints_dir.glob(".step-*.part"):
            shutil.rmtree(stale, ignore_errors=True)

    def start_attempt(self) -> None:
        """Empty the output dir and forget an old FINISHED mark; checkpoints stay."""
        shutil.rmtree(self.out_dir, ignore_errors=True)
        self.out_dir.mkdir(parents=True)
        (self.path / FINISHED).unlink(missing_ok=True)

    @contextmanager
    def lock(self, wait: bool = False) -> Iterator[None]:
        """Exclusive use of this work dir for one attempt (released by the kernel if the
        holder dies, so a killed run never leaves it locked). `wait`: block until the run
        holding it ends (the caller then looks for the artifact it made) instead of failing."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / "lock", "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not wait:
                    raise WorkDirBusyError(
                        f"stage {self.stage!r} (key {self.key}) is already running elsewhere: {self.path} is locked"
                    ) from None
                log.info("stage %s (key %s) is being computed by another run; waiting for it to end",
                         self.stage, self.key)
                fcntl.flock(fh, fcntl.LOCK_EX)
            yield

    def is_locked(self) -> bool:
        lock = self.path / "lock"
        if not lock.exists():
            return False
        with open(lock, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
            return False

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

