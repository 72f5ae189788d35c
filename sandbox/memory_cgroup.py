"""One memory cgroup per slot, so that all of a call's memory stays within `memory_mb` (issue 22, point 6).

`RLIMIT_AS` bounds each process's address space, not what a call holds: several processes,
System V segments written and detached, memfds, files on its tmpfs scratch are all
outside it. A memory cgroup counts every page the call's processes are charged for,
shared memory and tmpfs included, whatever maps them. The server creates
`<its own memory cgroup>/rstar-sandbox-<uid base>/slot-<k>` with that limit (swap included
where the kernel counts it), the zygote opens each slot's `cgroup.procs` before calls lose
sight of /sys, and each child writes itself into its slot's cgroup during its setup (ahead
of its call: the write waits ~10 ms for the kernel here, on no one's path). When the limit
is hit the kernel's OOM killer ends the call; the server tells it from a SIGKILL of its
own by the slot's `oom_kill` count.

cgroup v1 (`/sys/fs/cgroup/memory`) and v2 (the unified tree, where the server's cgroup
must allow a `memory` subtree) are both tried; where neither can be written (not root,
read-only cgroupfs) /health says `memory_cgroup: false` and calls are bounded by rlimits only.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

log = logging.getLogger(__name__)

_V1 = "/sys/fs/cgroup/memory"
_V2 = "/sys/fs/cgroup"


@dataclass(frozen=True)
class SlotCgroups:
    root: str  # rstar-sandbox-<uid base>
    slots: list[str]  # one directory per slot
    version: int

    def oom_kills(self, slot: int) -> int:
        """How many times the kernel's OOM killer struck in the slot's cgroup."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            with open(os.path.join(self.slots[slot], name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            pass
        return 0

    def remove(self) -> None:
        for path in [*self.slots, self.root]:
            try:
                os.rmdir(path)
            except OSError as exc:  # still has tasks (a zygote being torn down): the next server reuses it
                log.warning("memory cgroup %s not removed: %s", path, exc)


def _own_cgroup(version: int) -> str | None:
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if (version == 1 and "memory" in controllers.split(",")) or (version == 2 and controllers == ""):
                return path
    return None


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def create(uid_base: int, slots: int, limit_mb: int) -> SlotCgroups | None:
    """The slots' cgroups with `limit_mb` each, or None where the kernel or the mounts refuse."""
    for version, mount in ((1, _V1), (2, _V2)):
        if version == 2 and not os.path.exists(f"{_V2}/cgroup.controllers"):
            continue
        if version == 1 and not os.path.isdir(mount):
            continue
        own = _own_cgroup(version)
        if own is None:
            continue
        root = os.path.join(mount + own, f"rstar-sandbox-{uid_base}")
        try:
            return _make(version, root, slots, limit_mb << 20)
        except OSError as exc:
            log.warning("no memory cgroup v%d for calls (%s)", version, exc)
    return None


def _make(version: int, root: str, slots: int, limit: int) -> SlotCgroups:
    os.makedirs(root, exist_ok=True)
    if version == 2:
        _write(os.path.join(os.path.dirname(root), "cgroup.subtree_control"), "+memory")
        _write(os.path.join(root, "cgroup.subtree_control"), "+memory")
    paths = []
    for k in range(slots):
        path = os.path.join(root, f"slot-{k}")
        os.makedirs(path, exist_ok=True)
        if version == 1:
            _write(f"{path}/memory.limit_in_bytes", str(limit))
            if os.path.exists(f"{path}/memory.memsw.limit_in_bytes"):  # swap counted too, where it is
                _write(f"{path}/memory.memsw.limit_in_bytes", str(limit))
        else:
            _write(f"{path}/memory.max", str(limit))
            if os.path.exists(f"{path}/memory.swap.max"):
                _write(f"{path}/memory.swap.max", "0")
        paths.append(path)
    return SlotCgroups(root, paths, version)


def open_procs(slots: list[str]) -> list[int]:
    """Write-only fds of each slot's `cgroup.procs`, opened while /sys is in sight (zygote)."""
    return [os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC) for path in slots]


def join(procs_fd: int) -> None:
    """Move the calling process into the cgroup whose `cgroup.procs` this fd is."""
    os.write(procs_fd, b"0")
