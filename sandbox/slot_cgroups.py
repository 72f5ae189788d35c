"""Per slot, a memory and a pids cgroup (issue 22, points 3 and 6).

Memory: `RLIMIT_AS` bounds each process's address space, not what a call holds: several
processes, System V segments written and detached, memfds, files on its tmpfs scratch are
all outside it. A memory cgroup counts every page its processes are charged for, shared
memory and tmpfs included, whatever maps them: the limit is `memory_mb`. When it is hit
the kernel's OOM killer ends the call; the server tells that from a SIGKILL of its own by
the slot's `oom_kill` count.

Processes: a pids cgroup counts a call's tasks until each is reaped (zombies included, as
RLIMIT_NPROC does), with `pids.max` = `max_processes`. Its `pids.current` is how the slot's
next child knows the previous call is gone: 1 (itself) once every leftover is killed and
reaped, and only then does it take a call (a slot is quiet).

The server creates `<its own cgroup>/rstar-sandbox-<uid base>/slot-<k>` in each hierarchy;
the zygote opens the files a child needs before calls lose sight of /sys (call_root.py);
each child writes itself into its slot's cgroups first thing in its setup, ahead of its
call (a write waits ~10 ms for the kernel here, on no one's path). cgroup v1 only: under
v2 the server's own cgroup would have to delegate a subtree to it. Where a hierarchy cannot
be written (not root, read-only cgroupfs, v2) /health says `memory_cgroup` / `pids_cgroup`
false: calls are then bounded by rlimits only, and a slot does not wait for quiet.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

log = logging.getLogger(__name__)

_V1 = "/sys/fs/cgroup"


@dataclass(frozen=True)
class SlotCgroups:
    memory: list[str]  # per slot; empty where there is no memory cgroup
    pids: list[str]  # per slot; empty where there is no pids cgroup

    def oom_kills(self, slot: int) -> int:
        """How many times the kernel's OOM killer struck in the slot's memory cgroup."""
        if not self.memory:
            return 0
        try:
            with open(os.path.join(self.memory[slot], "memory.oom_control")) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            pass
        return 0

    def remove(self) -> None:
        for slots in (self.memory, self.pids):
            for path in [*slots, *([os.path.dirname(slots[0])] if slots else [])]:
                try:
                    os.rmdir(path)
                except OSError as exc:  # tasks still there (a zygote torn down): the next server reuses it
                    log.warning("cgroup %s not removed: %s", path, exc)


def _own(controller: str) -> str | None:
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controller in controllers.split(","):
                return path
    return None


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _make(controller: str, uid_base: int, slots: int, limits: dict[str, str]) -> list[str]:
    own = _own(controller)
    mount = os.path.join(_V1, controller)
    if own is None or not os.path.isdir(mount):
        return []
    root = os.path.join(mount + own, f"rstar-sandbox-{uid_base}")
    try:
        paths = []
        for k in range(slots):
            path = os.path.join(root, f"slot-{k}")
            os.makedirs(path, exist_ok=True)
            for name, value in limits.items():
                if os.path.exists(os.path.join(path, name)):  # memsw: only where swap is accounted
                    _write(os.path.join(path, name), value)
            paths.append(path)
        return paths
    except OSError as exc:
        log.warning("no %s cgroup for calls (%s)", controller, exc)
        return []


def create(uid_base: int, slots: int, memory_mb: int, max_processes: int) -> SlotCgroups:
    limit = str(memory_mb << 20)
    return SlotCgroups(
        memory=_make("memory", uid_base, slots, {"memory.limit_in_bytes": limit, "memory.memsw.limit_in_bytes": limit}),
        pids=_make("pids", uid_base, slots, {"pids.max": str(max_processes)}),
    )


@dataclass(frozen=True)
class SlotFiles:
    """What a child of each slot writes and reads, opened by the zygote while /sys is in sight."""

    join: list[list[int]]  # per slot: fds of the cgroup.procs files to write itself into
    pids_current: list[int]  # per slot: fd of pids.current, or none

    @classmethod
    def open(cls, memory: list[str], pids: list[str]) -> SlotFiles:
        slots = max(len(memory), len(pids))
        flags = os.O_WRONLY | os.O_CLOEXEC
        join = [[os.open(os.path.join(group[k], "cgroup.procs"), flags) for group in (memory, pids) if group]
                for k in range(slots)]
        current = [os.open(os.path.join(p, "pids.current"), os.O_RDONLY | os.O_CLOEXEC) for p in pids]
        return cls(join, current)


def join(files: SlotFiles, slot: int) -> None:
    """Move the calling process into its slot's cgroups."""
    if files.join:
        for fd in files.join[slot]:
            os.write(fd, b"0")


def tasks(pids_current_fd: int) -> int:
    """Tasks in a pids cgroup, not yet reaped, from its `pids.current`."""
    return int(os.pread(pids_current_fd, 32, 0))
