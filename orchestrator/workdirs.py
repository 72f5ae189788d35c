"""List and clean the work directories that failed or killed stages left behind.

    python -m orchestrator.workdirs list  --config configs/tiny.yaml
    python -m orchestrator.workdirs clean --config configs/tiny.yaml                     # committed ones only
    python -m orchestrator.workdirs clean --config configs/tiny.yaml --older-than 7d     # and idle for a week
    python -m orchestrator.workdirs clean --root .rstar/artifacts --older-than 0s        # every idle one

A work dir is stale when its (stage, key) has been committed since (a multi-process run
launched by hand leaves its checkpoints behind), or when nothing in it changed for
`--older-than`. One in use by a running stage (locked) is never removed.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass

from configs.load import ConfigError, load_config
from orchestrator.store import ArtifactStore
from stagekit.workdir import WorkDir, WorkDirBusyError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class WorkDirInfo:
    work: WorkDir
    idle_s: float  # since the newest file in it changed
    size_bytes: int
    committed: bool
    running: bool

    @property
    def state(self) -> str:
        if self.running:
            return "running"
        return "committed" if self.committed else "resumable" if self.work.latest() else "failed"


def scan(store: ArtifactStore) -> list[WorkDirInfo]:
    found = []
    for stage_dir in sorted(p for p in store.work_root.glob("*") if p.is_dir()):
        for path in sorted(p for p in stage_dir.iterdir() if p.is_dir()):
            work = WorkDir(store.work_root, stage_dir.name, path.name)
            files = [f.stat() for f in path.rglob("*") if f.is_file()]
            newest = max([s.st_mtime for s in files] + [path.stat().st_mtime])
            found.append(WorkDirInfo(work, time.time() - newest, sum(s.st_size for s in files),
                                     store.lookup(work.stage, work.key) is not None, work.is_locked()))
    return found


def parse_age(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"--older-than: {text!r} is not a duration like 30m, 12h or 7d")
    return float(m.group(1)) * _UNITS[m.group(2)]


def is_stale(info: WorkDirInfo, older_than_s: float | None) -> bool:
    if info.running:
        return False
    return info.committed or (older_than_s is not None and info.idle_s >= older_than_s)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.workdirs", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["list", "clean"])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", help="YAML under configs/: its run.artifacts_root")
    where.add_argument("--root", help="an artifacts root (local path or fsspec URL)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--older-than", type=parse_age, help="clean: also remove uncommitted ones idle this long")
    args = parser.parse_args(argv)
    try:
        root = load_config(args.config, args.set).run.artifacts_root if args.config else args.root
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    store = ArtifactStore(root)
    infos = scan(store)
    if args.command == "list":
        print(f"{'stage':<16} {'key':<34} {'state':<10} {'checkpoint':>10} {'idle':>9} {'MB':>9}  path")
        for i in infos:
            ckpt = i.work.latest()
            print(f"{i.work.stage:<16} {i.work.key:<34} {i.state:<10} {ckpt.step if ckpt else '-':>10} "
                  f"{i.idle_s / 3600:>8.1f}h {i.size_bytes / 1e6:>9.1f}  {i.work.path}")
        return
    removed = []
    for i in (i for i in infos if is_stale(i, args.older_than)):
        try:
            with i.work.lock():  # a stage starting right now keeps its dir
                i.work.remove()
        except WorkDirBusyError:
            continue
        removed.append(i)
        print(f"removed {i.work.path} ({i.state}, {i.size_bytes / 1e6:.1f} MB)")
    print(f"{len(removed)} removed, {len(infos) - len(removed)} kept")


if __name__ == "__main__":
    main()
