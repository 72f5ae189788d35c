"""Run a command as the root of a process tree that cannot outlive its parent (SPEC §10).

    python -m orchestrator.supervisor -- python -m training.sft --config-json ...

orchestrator/launcher.py starts every long stage through this small process, in a session of
its own. It makes three guarantees the stage's own processes could not:
- when its parent dies, even by SIGKILL, the kernel sends it SIGTERM (PR_SET_PDEATHSIG),
  and a SIGTERM, SIGINT or SIGHUP makes it stop the whole tree: SIGTERM, then SIGKILL
  after a grace period;
- it is a child subreaper (PR_SET_CHILD_SUBREAPER): a grandchild whose parent died, or
  one that started its own session (accelerate's workers, a daemon), is re-parented to
  it instead of init, so "every descendant" stays findable;
- when the command exits it kills whatever the command left running.
It exits with the command's exit status (128 + signal number for a signal).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

import psutil

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PARENT_ENV = "RSTAR_SUPERVISOR_PARENT"
GRACE_ENV = "RSTAR_SUPERVISOR_GRACE_S"


class _Stop(Exception):
    def __init__(self, signum: int):
        self.signum = signum


def kill_tree(grace_s: float) -> None:
    """SIGTERM every descendant, SIGKILL those still alive after `grace_s`; repeat while
    new ones appear (a process may fork while we kill)."""
    me = psutil.Process()
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0), (signal.SIGKILL, 5.0)):
        procs = me.children(recursive=True)
        if not procs:
            return
        for p in procs:
            try:
                p.send_signal(sig)
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=wait_s)
        _reap()


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _ignore_signals() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m orchestrator.supervisor -- COMMAND ...", file=sys.stderr)
        return 2
    grace_s = float(os.environ.get(GRACE_ENV, "3"))
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    parent = int(os.environ.get(PARENT_ENV, "0"))
    if parent and os.getppid() != parent:
        return 128 + signal.SIGTERM  # the parent died before the death signal was armed

    def stop(signum: int, _frame: object) -> None:
        raise _Stop(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    env = {k: v for k, v in os.environ.items() if k not in (PARENT_ENV, GRACE_ENV)}
    try:
        child = os.fork()
        if child == 0:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            try:
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        while True:  # reap everything re-parented to us until the command itself exits
            pid, status = os.waitpid(-1, 0)
            if pid == child:
                code = os.waitstatus_to_exitcode(status)
                break
    except _Stop as stopped:
        _ignore_signals()
        kill_tree(grace_s)
        return 128 + stopped.signum
    _ignore_signals()  # from here on we are stopping anyway
    kill_tree(grace_s)  # whatever the command left behind
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
