"""One sandbox child: the process a single call runs in, forked by the zygote ahead of time.

Setup happens before the call arrives (off the latency path): its slot's memory and pids
cgroups, own session and process group, kill whatever the slot's uid left running and wait
until it is reaped, its own mount and IPC namespaces with
a fresh tmpfs scratch (or, without them, a recycled scratch dir), privileges dropped to
the slot's uid, no new privileges, death with the zygote, the seccomp filter. It then
says READY on its result socket (a child whose setup failed never gets a call), blocks
for the request, sets the rlimits and runs the program.

fds: 0 stdin (a memfd with the call's input), 1/2 pipes read by the server, 3 the result
socket (not inherited by the program's subprocesses).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import resource
import signal
import struct
import sys
from collections.abc import Callable

from sandbox import isolation, rng_state, slot_cgroups
from sandbox.runner import run_program, send_and_exit

RESULT_FD = 3
PIDS_FD = 4  # during setup only: the slot's pids.current (slot_cgroups.py)
HEADER = struct.Struct(">Q")  # request = 8-byte length + JSON {"code", "input"}
READY = b"R"  # first byte on the result socket: setup succeeded
_getrusage, _RUSAGE_SELF = resource.getrusage, resource.RUSAGE_SELF  # before any program can replace them


def _place_fds(result_fd: int, out_w: int, err_w: int, pids_fd: int | None) -> None:
    # Move sources out of the way first so a dup2 cannot clobber one that sits on 0..4.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in (result_fd, out_w, err_w)]
    pids_high = fcntl.fcntl(pids_fd, fcntl.F_DUPFD_CLOEXEC, 100) if pids_fd is not None else None
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(high[1], 1)
    os.dup2(high[2], 2)
    os.dup2(high[0], RESULT_FD, inheritable=False)
    if pids_high is not None:  # read during the setup's sweep, closed after it
        os.dup2(pids_high, PIDS_FD, inheritable=False)
    os.closerange(PIDS_FD + (pids_high is not None), 1 << 16)


def _read_request() -> dict:
    def read_exact(n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = os.read(RESULT_FD, min(left, 1 << 20))
            if not chunk:
                os._exit(0)  # the server dropped this child (shutdown)
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    (size,) = HEADER.unpack(read_exact(HEADER.size))
    return json.loads(read_exact(size))


def _stdin_from(text: str) -> None:
    fd = os.memfd_create("stdin")
    data = text.encode("utf-8", "replace")
    while data:
        data = data[os.write(fd, data) :]
    os.lseek(fd, 0, os.SEEK_SET)
    os.dup2(fd, 0)
    os.close(fd)


def _fresh_stdio() -> None:
    """New text streams over fds 0-2, as a fresh interpreter would have them."""
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )


GENERATORS: list[object] = []  # the zygote's module-level random generators (rng_state.py)
SLOT_FILES = slot_cgroups.SlotFiles([], [])  # the slots' cgroup files, opened by the zygote


def child_main(slot: int, uid: int | None, result_fd: int, out_w: int, err_w: int, s: dict,
               load_filter: Callable[[], None] | None) -> None:
    zygote_pid = os.getppid()
    slot_cgroups.join(SLOT_FILES, slot)  # first: every page and task from here on counts for the slot
    os.setsid()  # own process group: the server kills the whole group at the end of the call
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    pids = SLOT_FILES.pids_current[slot] if SLOT_FILES.pids_current else None
    _place_fds(result_fd, out_w, err_w, pids)
    rng_state.reseed(GENERATORS)  # before anything of the call's own runs
    if uid is not None:  # what the slot's last call left: killed, and reaped before we go on
        isolation.sweep_uid(uid, quiet=lambda: pids is None or slot_cgroups.tasks(PIDS_FD) == 1)
    if pids is not None:
        os.close(PIDS_FD)
    if s["call_namespaces"]:
        isolation.enter_call_namespaces(uid, s)
        scratch = isolation.CALL_SCRATCH
    else:
        scratch = isolation.recycle_scratch(s["scratch_root"], slot, uid)
    if uid is not None:
        isolation.drop_privileges(uid)
        nproc = s["max_processes"]
    else:
        # RLIMIT_NPROC counts every process of our uid system-wide (NOTES).
        nproc = isolation.count_own_processes() + s["max_processes"]
    isolation.prctl(isolation.PR_SET_NO_NEW_PRIVS, 1)  # setuid binaries cannot raise us back
    isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)  # cleared by setuid: set after
    if os.getppid() != zygote_pid:
        os._exit(0)
    os.chdir(scratch)
    os.environ.update(HOME=scratch, TMPDIR=scratch, PWD=scratch)
    sys.dont_write_bytecode = True
    if load_filter is not None:
        load_filter()
    os.write(RESULT_FD, READY)  # setup done: only now may the server hand this child a call
    setup = _getrusage(_RUSAGE_SELF)

    request = _read_request()
    _stdin_from(request.get("input", ""))
    _fresh_stdio()
    owner = os.getpid()
    isolation.set_call_limits(s, nproc)
    record = run_program(request["code"], s["keep_chars"])
    # CPU (µs) and minor faults (copy-on-write mostly) of this process at the end of its
    # setup and of the program, summed by the server for the benchmark's cost breakdown.
    end = _getrusage(_RUSAGE_SELF)
    record["usage"] = {"setup_us": _us(setup), "end_us": _us(end), "setup_flt": setup.ru_minflt,
                       "end_flt": end.ru_minflt}
    send_and_exit(record, RESULT_FD, owner)


def _us(ru: resource.struct_rusage) -> int:
    return int((ru.ru_utime + ru.ru_stime) * 1e6)
