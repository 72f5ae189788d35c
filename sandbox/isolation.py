"""Kernel-level isolation of sandbox processes (SPEC §3): namespaces, uids, rlimits.

The network and mount namespaces are entered once by the zygote (costs nothing per
call, NOTES "Code execution"); each child adds its own mount and IPC namespaces (~0.3 ms)
holding its tmpfs scratch and its System V objects, so they die with the call; uids and
limits are set per call in each child.
Python 3.11 has no os.unshare/mount, so libc is called through ctypes.
"""

from __future__ import annotations

import ctypes
import fcntl
import itertools
import logging
import os
import resource
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_MOVE = 1, 2, 4, 32, 4096, 8192
MS_REC, MS_PRIVATE = 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
SCRATCH_ROOT = "/tmp"  # covered by an empty read-only tmpfs when private_tmp is on
CALL_SCRATCH = "/tmp/work"  # where each call's own tmpfs is mounted (its cwd, HOME, TMPDIR)
TRASH = ".trash"  # on-disk scratch only: where a slot's last scratch waits for deletion
# World-writable places a sandbox uid could otherwise use to leave files for the next call.
SHARED_WRITABLE = ("/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")

libc = ctypes.CDLL(None, use_errno=True)


def check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def prctl(option: int, arg: int) -> None:
    check(libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl({option})")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    rc = libc.mount(
        source.encode(), target.encode(), fstype.encode() if fstype else None,
        ctypes.c_ulong(flags), data.encode() if data else None,
    )
    check(rc, f"mount {target}")


def _cover(path: str) -> None:
    """Mount an empty read-only tmpfs over `path`."""
    mount("sandbox", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=0755")


def _closed_ancestors(path: str) -> list[str]:
    """Ancestors an unprivileged uid cannot traverse (pyenv under /root, mode 0700)."""
    out, parts = [], path.strip("/").split("/")
    for i in range(1, len(parts)):
        anc = "/" + "/".join(parts[:i])
        if not os.stat(anc).st_mode & 0o001:
            out.append(anc)
    return out


def _hide_keeping(cover: str, keep: list[str], mkdirs: tuple[str, ...] | list[str] = ()) -> None:
    """Cover `cover` with an empty read-only tmpfs, except the `keep` trees under it (as
    they were) and empty directories `mkdirs` (mount points for later)."""
    # Stage the kept trees outside `cover`: a stage under it would vanish beneath the new tmpfs.
    tmp_parent = tempfile.gettempdir()
    parent = "/run" if (tmp_parent + "/").startswith(cover.rstrip("/") + "/") else tmp_parent
    stage = tempfile.mkdtemp(prefix="sandbox-stage-", dir=parent)
    mount("sandbox", stage, "tmpfs", 0, "size=4k,mode=0700")
    staged = []
    for i, path in enumerate(keep):
        os.mkdir(f"{stage}/{i}")
        mount(path, f"{stage}/{i}", None, MS_BIND | MS_REC, None)
        staged.append((f"{stage}/{i}", path))
    mount("sandbox", cover, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    for path in mkdirs:
        os.makedirs(path, 0o755, exist_ok=True)
    for src, path in staged:
        os.makedirs(path, 0o755, exist_ok=True)
        mount(src, path, None, MS_MOVE, None)
    mount("none", cover, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    check(libc.umount2(stage.encode(), 0), f"umount {stage}")
    os.rmdir(stage)


def _read_only(tree: str) -> None:
    """Bind `tree` onto itself and make that mount read-only (root included)."""
    mount(tree, tree, None, MS_BIND | MS_REC, None)
    mount("none", tree, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)


def enter_namespaces(isolate_network: bool, private_tmp: bool, hidden_paths: list[str], scratch_root: str,
                     call_settings: dict, defer_files: bool = False) -> dict:
    """Called once in the zygote; returns the isolation facts reported by /health. With
    `defer_files` it stops after entering the mount namespace: the zygote builds calls'
    filesystem after its preload (call_root.py), and `hide_host` is only its fallback."""
    facts: dict = {"network_namespace": False, "mount_namespace": False, "private_tmp": False, "hidden_paths": [],
                   "python_read_only": False, "call_namespaces": False, "ipc_namespace": False,
                   "ipc_limits": False, "allowlisted_root": False, "proc_hidepid": False}
    if isolate_network:
        if libc.unshare(CLONE_NEWNET) == 0:
            facts["network_namespace"] = True  # only a loopback device, and it is down
        else:
            log.warning("no network namespace (%s): sandboxed code keeps the host network",
                        os.strerror(ctypes.get_errno()))
    if not (private_tmp or hidden_paths or defer_files):
        return facts
    try:
        check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        mount("none", "/", None, MS_REC | MS_PRIVATE, None)  # keep our mounts off the host
    except OSError as exc:
        log.warning("no mount namespace (%s): /tmp stays shared, hidden_paths ignored", exc)
        return facts
    facts["mount_namespace"] = True
    if not defer_files:
        hide_host(facts, private_tmp, hidden_paths, scratch_root, call_settings)
    return facts


def hide_host(facts: dict, private_tmp: bool, hidden_paths: list[str], scratch_root: str, call_settings: dict) -> None:
    """The host's tree with holes punched in it: what calls see where an allowlisted root
    (call_root.py) cannot be built. `hidden_paths` and /tmp covered, Python kept readable."""
    # The interpreter and its packages must stay readable by the sandbox uids even when
    # they live under a hidden or closed directory.
    python_trees = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)})
    covers = {os.path.realpath(p) for p in hidden_paths if os.path.isdir(p)}
    for tree in python_trees:
        covers.update(_closed_ancestors(tree))
    for cover in sorted(covers, key=len):
        if not os.path.isdir(cover) or any(cover.startswith(c + "/") for c in facts["hidden_paths"]):
            continue
        _hide_keeping(cover, [t for t in python_trees if t.startswith(cover + "/")])
        facts["hidden_paths"].append(cover)
    if private_tmp:
        facts.update(probe_call_namespaces(call_settings))
        if not facts["call_namespaces"]:
            log.warning("no per-call mount/IPC namespace: scratch dirs on disk, System V IPC refused")
        # A checkout (and its venv) may itself live under /tmp, as CI clones can; so may
        # the on-disk scratch used when calls cannot have their own tmpfs.
        keep = [t for t in python_trees + ([] if facts["call_namespaces"] else [scratch_root])
                if t.startswith(SCRATCH_ROOT + "/")]
        _hide_keeping(SCRATCH_ROOT, keep, mkdirs=[CALL_SCRATCH])
        for path in SHARED_WRITABLE:
            if os.path.isdir(path):
                _cover(path)
        facts["private_tmp"] = True
    for tree in python_trees:
        if tree != "/":
            _read_only(tree)
    facts["python_read_only"] = all(os.statvfs(t).f_flag & os.ST_RDONLY for t in python_trees)


def probe_call_namespaces(s: dict) -> dict:
    """What a child's setup can have, best first: its own mount and IPC namespaces with
    IPC limits; without the limits (/proc/sys read-only, as in some containers); mount
    namespace only. Each tried in a throwaway child, exactly as a call's setup does it."""
    for ipc, limits in ((True, True), (True, False), (False, False)):
        pid = os.fork()
        if pid == 0:
            try:
                enter_call_namespaces(None, {**s, "ipc_namespace": ipc, "ipc_limits": limits}, target=SCRATCH_ROOT)
                os._exit(0)
            except BaseException:
                os._exit(1)
        if os.waitpid(pid, 0)[1] == 0:
            return {"call_namespaces": True, "ipc_namespace": ipc, "ipc_limits": limits}
    return {"call_namespaces": False, "ipc_namespace": False, "ipc_limits": False}


def enter_call_namespaces(uid: int | None, s: dict, target: str = CALL_SCRATCH) -> None:
    """In a child, before its call: its own mount namespace with a fresh tmpfs scratch
    (size and inode limits) and its own IPC namespace with limits that keep System V
    objects within the call's memory budget. Nothing is ever cleaned: both namespaces,
    and every file and IPC object in them, go away with the call's last process (the
    kernel frees them in that process's exit, charged to no later call)."""
    check(libc.unshare(CLONE_NEWNS | (CLONE_NEWIPC if s["ipc_namespace"] else 0)), "unshare(call namespaces)")
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    mount("scratch", target, "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={s['scratch_mb']}m,nr_inodes={s['scratch_inodes']},mode=0700{owner}")
    if not s["ipc_limits"]:
        return
    budget = s["memory_mb"] * 1024 * 1024
    for name, value in (("kernel/shmmax", budget), ("kernel/shmall", budget // resource.getpagesize()),
                        ("kernel/shmmni", 64), ("kernel/msgmni", 16), ("kernel/sem", "250 8000 32 32")):
        fd = os.open(f"/proc/sys/{name}", os.O_WRONLY)  # not open(): its io stack costs ~0.1 ms a file here
        try:
            os.write(fd, str(value).encode())
        finally:
            os.close(fd)


def sweep_uid(uid: int, quiet: Callable[[], bool] = lambda: True, wait_s: float = 5.0) -> None:
    """SIGKILL every process of `uid` (what a previous call left behind, setsid'd or not),
    again until `quiet()` says none is left (slot_cgroups.py counts them until reaped).

    kill(-1) reaches exactly the processes our real uid may signal, so the real uid is
    switched to the sandbox uid for that one call; the saved uid 0 lets us come back.
    Never called unless we are root and uid is a sandbox uid: kill(-1) as root would hit
    every process on the machine.
    """
    if os.geteuid() != 0 or uid == 0:
        return
    deadline, pause = time.monotonic() + wait_s, 0.0005
    while True:
        os.setresuid(uid, uid, 0)
        try:
            if os.getuid() == uid and os.geteuid() == uid:
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        finally:
            os.setresuid(0, 0, 0)
        if quiet():
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of the slot's uid still there {wait_s:.0f} s after SIGKILL")
        time.sleep(pause)  # they die, then the zygote (their subreaper) reaps them
        pause = min(2 * pause, 0.05)


def claim_uid_block(base: int, count: int, blocks: int = 64) -> tuple[int, int]:
    """First uid of a block of `count` sandbox uids no other server on this machine uses.

    Two servers sharing uids would kill each other's calls (the sweep above), so each
    holds an exclusive flock on its block's lock file for its whole life; the kernel
    releases it when the server dies, however it dies. Returns (first uid, lock fd).
    """
    lock_dir = "/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()
    stride = max(count, 1024)
    for i in range(blocks):
        start = base + i * stride
        fd = os.open(f"{lock_dir}/rstar-sandbox-uids-{start}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return start, fd
    raise RuntimeError(f"all {blocks} sandbox uid blocks from {base} are in use")


def recycle_scratch(root: str, slot: int, uid: int | None) -> str:
    """On-disk scratch (no per-call tmpfs): move the slot's last scratch into the trash,
    which the server empties out of band, and make a fresh 0700 dir owned by the slot uid.
    A rename, so its cost does not depend on what the last call left."""
    path = f"{root}/slot-{slot}"
    try:
        os.rename(path, f"{root}/{TRASH}/slot-{slot}-{os.getpid()}")
    except FileNotFoundError:
        pass
    os.mkdir(path, 0o700)
    if uid is not None:
        os.chown(path, uid, uid)
    return path


def empty_tree(top: str) -> int:
    """Delete everything below `top` (kept) without recursion, at any depth: each
    subdirectory met is first moved up to `top`, so paths stay short and one directory
    fd is open at a time. Returns the number of entries removed."""
    top_fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    removed = 0
    try:
        while names := os.listdir(top_fd):
            for name in names:
                if not _is_real_dir(name, top_fd):
                    os.unlink(name, dir_fd=top_fd)
                    removed += 1
                    continue
                fd = _open_dir(name, top_fd)
                try:
                    for sub in os.listdir(fd):
                        if _is_real_dir(sub, fd):
                            os.rename(sub, f".up-{next(_UP)}-{os.getpid()}", src_dir_fd=fd, dst_dir_fd=top_fd)
                        else:
                            os.unlink(sub, dir_fd=fd)
                            removed += 1
                finally:
                    os.close(fd)
                os.rmdir(name, dir_fd=top_fd)
                removed += 1
    finally:
        os.close(top_fd)
    return removed


_UP = itertools.count()


def _is_real_dir(name: str, dir_fd: int) -> bool:
    return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)


def _open_dir(name: str, dir_fd: int) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except PermissionError:  # not root: a program may have taken its own dir's permissions away
        os.chmod(name, 0o700, dir_fd=dir_fd)
        return os.open(name, flags, dir_fd=dir_fd)


def drop_privileges(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.geteuid() == 0 or os.getuid() == 0:
        raise RuntimeError("privilege drop failed")


def count_own_processes() -> int:
    """Processes of our uid (RLIMIT_NPROC counts them all when we cannot switch uid)."""
    uid, n = os.getuid(), 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                n += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                pass
    return n


def set_call_limits(limits: dict, nproc: int) -> None:
    """Per-call rlimits. RLIMIT_AS counts virtual memory, and the preloaded image is already
    a few hundred MB, so the budget is added on top of what this process maps now."""
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * resource.getpagesize()
    mb = 1024 * 1024
    cpu = int(limits["cpu_time_s"])
    for which, value in (
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (mapped + limits["memory_mb"] * mb,) * 2),
        (resource.RLIMIT_FSIZE, (limits["file_size_mb"] * mb,) * 2),
        (resource.RLIMIT_NOFILE, (limits["max_open_files"],) * 2),
        (resource.RLIMIT_NPROC, (nproc, nproc)),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        resource.setrlimit(which, value)
