"""The filesystem a call sees: a root built from an allowlist (issue 22, points 1 and 2).

The zygote builds it once, after its preload, in its private mount namespace, and enters
it with pivot_root; every child inherits it. In it:

- the Python installation: the real tree of `sys.prefix`, `sys.base_prefix`, the exec
  prefixes and of every `sys.path` entry, read-only, and every symbolic link on the way to
  each of them (a virtualenv reached through a link resolves as it did). Entries inside the
  service's checkout or its data (`exclude`) are left out: the zygote has imported what it
  needs from there;
- the directories of the shared libraries the zygote has mapped, the ELF interpreter and
  the loader's cache, read-only;
- a minimal `/etc` written here (passwd and group naming root and the slot uids, hosts);
- `/dev` with null, zero, full, random and urandom only (no GPU, no terminal, no shm);
- `/proc`, a mount of its own with `hidepid=invisible`: a call's uid sees its own
  processes only, not the host's nor another call's;
- `/tmp/work`, where each call mounts its own scratch.

Nothing else of the host exists there: other checkouts, data folders, home directories,
version-control metadata, `/run` and `/var` (so no socket of a host daemon).
"""

from __future__ import annotations

import logging
import os
import platform
import struct
import sys

from sandbox import isolation
from sandbox.isolation import CALL_SCRATCH, MS_BIND, MS_NODEV, MS_NOSUID, MS_RDONLY, MS_REC, MS_REMOUNT

log = logging.getLogger(__name__)

_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_MNT_DETACH = 2
_MS_NOEXEC = 8
DEVICES = ("null", "zero", "full", "random", "urandom")
_STAGE_PARENTS = ("/run", "/mnt", "/media", "/srv", "/opt", "/var/tmp")


def python_paths(exclude: list[str]) -> list[str]:
    """The paths (as named, links not resolved) the Python installation is reached by."""
    named = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, sys.executable]
    named += [p for p in sys.path if os.path.isabs(p) and os.path.exists(p)]
    prefixes = [os.path.realpath(p) for p in named[:4]]
    out = []
    for p in named:
        real = os.path.realpath(p)
        inside_prefix = any(real == t or real.startswith(t + "/") for t in prefixes)
        if not inside_prefix and any(_under(p, e) or _under(real, e) for e in exclude):
            continue  # the service's own checkout on sys.path (PYTHONPATH) is not Python
        out.append(p)
    return out


def _under(path: str, top: str) -> bool:
    top = os.path.realpath(top)
    return path == top or path.startswith(top.rstrip("/") + "/")


def links_to(path: str, depth: int = 0) -> list[tuple[str, str]]:
    """(link, target) for every symbolic link met resolving `path`, targets' links included."""
    out: list[tuple[str, str]] = []
    current = "/"
    for part in path.strip("/").split("/"):
        if not part:
            continue
        step = os.path.join(current, part)
        if os.path.islink(step) and depth < 40:
            target = os.readlink(step)
            out.append((step, target))
            out += links_to(os.path.normpath(os.path.join(current, target)), depth + 1)
            current = os.path.realpath(step)
        else:
            current = step
    return out


def library_dirs() -> list[str]:
    """Directories of the shared objects this process has mapped (libc, libm, libstdc++, ...)."""
    dirs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6 and fields[5].startswith("/") and ".so" in fields[5]:
                dirs.add(os.path.dirname(os.path.realpath(fields[5].strip().removesuffix(" (deleted)"))))
    return sorted(dirs)


def elf_interpreter(path: str) -> str | None:
    """PT_INTERP of a 64-bit little-endian ELF file (the dynamic loader a new process needs)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return None
        phoff, = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        for k in range(phnum):
            f.seek(phoff + k * phentsize)
            ptype, _, offset, _, _, filesz = struct.unpack("<IIQQQQ", f.read(40))
            if ptype == 3:
                f.seek(offset)
                return f.read(filesz).rstrip(b"\0").decode()
    return None


def _trees(paths: list[str]) -> list[str]:
    """The real directories to bind, none inside another."""
    reals = sorted({os.path.realpath(p) if os.path.isdir(p) else os.path.dirname(os.path.realpath(p))
                    for p in paths})
    out: list[str] = []
    for r in reals:
        if not any(_under(r, t) for t in out):
            out.append(r)
    return out


def _stage_parent(sources: list[str]) -> str:
    """A host directory to build the root on: covering it (in our namespace only) hides no source."""
    for parent in _STAGE_PARENTS:
        if os.path.isdir(parent) and not any(_under(s, parent) or _under(parent, s) for s in sources):
            return parent
    raise OSError("no directory to build the call root on that holds none of its sources")


def _bind(src: str, root: str, read_only: bool = True) -> None:
    dst = root + src
    if os.path.isdir(src):
        os.makedirs(dst, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), 0o755, exist_ok=True)
        if not os.path.exists(dst):
            open(dst, "w").close()
    isolation.mount(src, dst, None, MS_BIND | MS_REC, None)
    if read_only:
        isolation.mount("none", dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, None)


def _link(link: str, target: str, root: str) -> None:
    dst = root + link
    if os.path.lexists(dst):
        return
    os.makedirs(os.path.dirname(dst), 0o755, exist_ok=True)
    os.symlink(target, dst)


def _write_etc(root: str, uids: list[int]) -> None:
    os.makedirs(f"{root}/etc", 0o755, exist_ok=True)
    users = "root:x:0:0:root:/root:/sbin/nologin\n" + "".join(
        f"sandbox{k}:x:{u}:{u}:sandbox slot {k}:{CALL_SCRATCH}:/sbin/nologin\n" for k, u in enumerate(uids))
    groups = "root:x:0:\n" + "".join(f"sandbox{k}:x:{u}:\n" for k, u in enumerate(uids))
    for name, text in (("passwd", users), ("group", groups), ("hosts", "127.0.0.1 localhost\n::1 localhost\n")):
        with open(f"{root}/etc/{name}", "w") as f:
            f.write(text)


def _mount_proc(target: str) -> bool:
    """A proc of our own; True when it hides other uids' processes."""
    for options in ("hidepid=invisible", "hidepid=2"):
        try:
            isolation.mount("proc", target, "proc", MS_NOSUID | MS_NODEV | _MS_NOEXEC, options)
            return True
        except OSError:
            continue
    isolation.mount("proc", target, "proc", MS_NOSUID | MS_NODEV | _MS_NOEXEC, None)
    return False


def enter(exclude: list[str], uids: list[int]) -> dict:
    """Build the allowlisted root and pivot into it (in the zygote's own mount namespace).
    Returns the facts /health shows; raises OSError when the kernel refuses a step."""
    nr = _PIVOT_ROOT.get(platform.machine())
    if nr is None:
        raise OSError(f"no pivot_root number for {platform.machine()}")
    named = python_paths(exclude)
    interpreter = elf_interpreter(os.path.realpath(sys.executable))
    libs = library_dirs() + ([os.path.dirname(os.path.realpath(interpreter))] if interpreter else [])
    trees = _trees(named + libs)
    files = [f for f in ("/etc/ld.so.cache",) if os.path.isfile(f)]
    parent = _stage_parent(trees + files)
    root = os.path.join(parent, ".sandbox-root")
    isolation.mount("sandbox", parent, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    os.mkdir(root, 0o755)
    isolation.mount("sandbox-root", root, "tmpfs", MS_NOSUID, "size=1m,mode=0755")
    for tree in trees:
        _bind(tree, root)
    for f in files:
        _bind(f, root)
    for p in named + ([interpreter] if interpreter else []) + ["/lib", "/lib64", "/usr/lib64"]:
        for link, target in links_to(p):
            if not any(_under(link, t) for t in trees):
                _link(link, target, root)
    _write_etc(root, uids)
    os.makedirs(f"{root}/dev", 0o755)
    isolation.mount("sandbox-dev", f"{root}/dev", "tmpfs", MS_NOSUID, "size=4k,mode=0755")
    for dev in DEVICES:
        if os.path.exists(f"/dev/{dev}"):
            _bind(f"/dev/{dev}", root, read_only=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    isolation.mount("none", f"{root}/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID, None)
    os.makedirs(f"{root}/proc", 0o555)
    hidepid = _mount_proc(f"{root}/proc")
    os.makedirs(f"{root}{CALL_SCRATCH}", 0o755)
    os.chdir(root)
    isolation.check(isolation.libc.syscall(nr, b".", b"."), "pivot_root")  # the old root now lies under the new one
    isolation.check(isolation.libc.umount2(b".", _MNT_DETACH), "umount old root")
    os.chdir("/")
    isolation.mount("none", "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID, None)
    log.info("calls see an allowlisted root: %s", trees)
    return {"allowlisted_root": True, "root_trees": trees, "proc_hidepid": hidepid, "private_tmp": True,
            "python_read_only": True, "hidden_paths": ["everything not in root_trees"]}

