"""The zygote: a preloaded parent that forks one fresh child per call, ahead of time.

Started by the server (`python -m sandbox.zygote --control-fd N --settings-json ...`)
with a scrubbed environment; it never receives code, inputs or reference answers, so a
child (which can read everything its parent held) finds nothing worth reading. It
enters the network and mount namespaces once, imports numpy/scipy/sympy, warms sympy's
caches and freezes the GC before the first fork (NOTES "Code execution": a fork costs
milliseconds, a fresh interpreter with those imports about a second).

Control protocol (SOCK_SEQPACKET, one JSON object per message):
  server -> zygote  {"op": "fork", "slot": k} | {"op": "kill", "pid", "serial"} | {"op": "quit"}
  zygote -> server  {"op": "ready", "pid", "facts"} | {"op": "child", "slot", "pid", "serial"} with
                    fds [result socket, stdout pipe, stderr pipe] | {"op": "exit", "pid", "serial", "status"}

Only the zygote reaps its children, so only it knows whether a pid still names the child
it forked: the server asks it to kill (`serial` names the fork), and exits are reported by
serial. A pid the kernel has reused is never signalled or taken for another's (issue 22).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import logging
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable

from sandbox import call_root, child, hugepages, isolation, rng_state, seccomp, slot_cgroups
from sandbox.child import child_main

log = logging.getLogger("sandbox.zygote")
# Our own writes to a huge page that live children still share split its mapping back
# into 4 KB entries (copy-on-write in the parent), so the heap is collapsed again now and
# then: ~50 ms of the zygote's time where most of it is split, nothing where it is not.
RECOLLAPSE_EVERY = 256


def _warm(modules: list[str]) -> dict[str, str]:
    """Import the preloaded modules; those that fail, with why (the server reports `degraded`)."""
    failed = {}
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 (ImportError, or whatever the module raised)
            log.error("cannot preload %s: %s: %s", name, type(exc).__name__, exc)
            failed[name] = f"{type(exc).__name__}: {exc}"[:500]
    if "sympy" in sys.modules:
        import sympy

        # Cold caches and sympy's function-level imports make a child's first solve
        # ~100 ms (NOTES); exercising the common paths once here makes it ~25 ms.
        x, y = sympy.symbols("x y")
        sympy.solve(x**2 - 2, x)
        sympy.solve(x**3 - 2 * x + 1, x)
        sympy.solve([x + y - 3, x - y - 1], [x, y])
        sympy.roots(x**4 - 5 * x**2 + 4, x)
        sympy.factor(x**3 - 1)
        sympy.expand((x + 1) ** 5)
        sympy.simplify(sympy.sin(x) ** 2 + sympy.cos(x) ** 2)
        sympy.factorint(360)
        sympy.isprime(97)
        sympy.integrate(x**2, x)
        sympy.limit(sympy.sin(x) / x, x, 0)
        sympy.Matrix([[1, 2], [3, 4]]).det()
        sympy.nsimplify(0.5) + sympy.Rational(1, 3) + sympy.sqrt(2)
    return failed


def _seccomp_loader(wanted: bool, refuse_ipc: bool) -> Callable[[], None] | None:
    """The filter every child loads before its call, checked once here in a throwaway child."""
    if not wanted:
        return None
    program = seccomp.build(refuse_ipc)
    if program is None:
        log.warning("no seccomp syscall table for this architecture: calls run unfiltered")
        return None
    load = seccomp.loader(program)
    pid = os.fork()
    if pid == 0:
        try:
            isolation.prctl(isolation.PR_SET_NO_NEW_PRIVS, 1)
            load()
            os._exit(0)
        except BaseException:
            os._exit(1)
    if os.waitpid(pid, 0)[1] != 0:
        log.warning("the kernel refused the seccomp filter: calls run unfiltered")
        return None
    return load


class Zygote:
    def __init__(self, control: socket.socket, settings: dict, load_filter: Callable[[], None] | None):
        self.control = control
        self.s = settings
        self.load_filter = load_filter
        self.forks = 0
        self.children: dict[int, int] = {}  # pid -> serial of the call processes we forked and have not reaped
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the fd
        signal.signal(signal.SIGTERM, lambda *_: None)
        self.wake_w = wake_w

    def slot_uid(self, slot: int) -> int | None:
        return self.s["uid_base"] + slot if self.s["drop_uid"] else None

    def kill_orphans(self) -> None:
        """Without per-slot uids there is no uid to sweep, but as child subreaper we inherit
        every process a call left behind once its parent died: kill those."""
        me = os.getpid()
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in self.children:
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid == me:
                    os.kill(int(name), signal.SIGKILL)
            except (OSError, ValueError, IndexError):
                continue

    def fork(self, slot: int) -> None:
        if not self.s["drop_uid"]:
            self.kill_orphans()
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            log.error("fork for slot %d failed: %s", slot, exc)
            parent_sock.close()
            child_sock.close()
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            self.control.send(json.dumps({"op": "fork_failed", "slot": slot, "error": str(exc)}).encode())
            return
        if pid == 0:
            try:
                for fd in (self.control.fileno(), self.wake_r, self.wake_w, parent_sock.fileno(), out_r, err_r):
                    os.close(fd)
                child_main(slot, self.slot_uid(slot), child_sock.fileno(), out_w, err_w, self.s, self.load_filter)
            except BaseException as exc:  # setup failed: say so on the call's stderr
                os.write(2, f"sandbox setup failed: {type(exc).__name__}: {exc}\n".encode(errors="replace"))
            finally:
                os._exit(70)
        child_sock.close()
        os.close(out_w)
        os.close(err_w)
        os.set_blocking(out_r, False)  # the server's reads must never block its event loop
        os.set_blocking(err_r, False)
        self.forks += 1
        self.children[pid] = self.forks
        if self.s["huge_pages"] and self.forks % RECOLLAPSE_EVERY == 0:
            hugepages.collapse_heap()
        msg = json.dumps({"op": "child", "slot": slot, "pid": pid, "serial": self.forks}).encode()
        socket.send_fds(self.control, [msg], [parent_sock.fileno(), out_r, err_r])
        parent_sock.close()
        os.close(out_r)
        os.close(err_r)

    def kill(self, pid: int, serial: int) -> None:
        """Kill a call's process group, if `pid` is still the unreaped child of that fork."""
        if self.children.get(pid) == serial:
            kill_group(pid)

    def reap(self) -> None:
        call_ended = False
        while True:
            try:  # WNOWAIT: seen, not reaped, so the pid stays reserved for the group kill below
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            if info is None or info.si_pid == 0:
                break
            pid = info.si_pid
            serial = self.children.pop(pid, None)
            if serial is not None:
                kill_group(pid)  # what the call left in its group
            _, status = os.waitpid(pid, 0)
            if serial is not None:  # orphans re-parented to us (subreaper) are only reaped
                call_ended = True
                self.control.send(json.dumps({"op": "exit", "pid": pid, "serial": serial,
                                              "status": status}).encode())
        if call_ended and not self.s["drop_uid"]:
            # A call process's orphans are re-parented to us before it can be reaped.
            self.kill_orphans()

    def quit(self) -> None:
        for slot in range(self.s["slots"]):
            uid = self.slot_uid(slot)
            if uid is not None:
                isolation.sweep_uid(uid)  # once: we reap them ourselves, below
        self.kill_orphans()
        for pid in list(self.children):
            kill_group(pid)
        # Reap them here rather than leave zombies to whatever init the machine has.
        deadline = time.monotonic() + 5
        while self.children and time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.01)
            self.children.pop(pid, None)

    def serve(self) -> None:
        while True:
            ready, _, _ = select.select([self.control, self.wake_r], [], [])
            if self.wake_r in ready:
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            self.reap()
            if self.control not in ready:
                continue
            data = self.control.recv(4096)
            if not data:
                self.quit()  # the server is gone
                return
            req = json.loads(data)
            if req["op"] == "fork":
                self.fork(int(req["slot"]))
            elif req["op"] == "kill":
                self.kill(int(req["pid"]), int(req["serial"]))
            elif req["op"] == "quit":
                self.quit()
                return


def _enter_call_root(facts: dict, settings: dict) -> None:
    """Calls' filesystem from an allowlist (call_root.py), after the preload so that every
    library it mapped is known; the host's tree with holes punched in it where that fails."""
    uids = [settings["uid_base"] + k for k in range(settings["slots"])] if settings["drop_uid"] else []
    probe = isolation.probe_call_namespaces(settings)  # a call's scratch is its own tmpfs, or no such root
    try:
        if not probe["call_namespaces"]:
            raise OSError("calls cannot have a mount namespace of their own")
        facts.update(call_root.enter(settings["hidden_paths"], uids))
    except OSError as exc:
        log.warning("no allowlisted root for calls (%s): hiding paths of the host's tree instead", exc)
        isolation.hide_host(facts, settings["private_tmp"], settings["hidden_paths"], settings["scratch_root"],
                            settings)
        return
    facts.update(probe)


def kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):  # the group exists once the child called setsid()
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--settings-json", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s zygote %(levelname)s %(message)s")
    settings = json.loads(args.settings_json)
    isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)  # die with the server
    isolation.prctl(isolation.PR_SET_CHILD_SUBREAPER, 1)  # orphans of calls come back to us
    if os.getppid() == 1:
        sys.exit(1)
    control = socket.socket(fileno=args.control_fd)
    allowlist = settings["allowlisted_root"] and settings["private_tmp"]
    facts = isolation.enter_namespaces(
        settings["isolate_network"], settings["private_tmp"], settings["hidden_paths"], settings["scratch_root"],
        settings, defer_files=allowlist,
    )
    facts["uid_drop"] = settings["drop_uid"]
    facts["preload_failed"] = _warm(settings["preload_modules"])
    groups = settings["slot_cgroups"]
    child.SLOT_FILES = slot_cgroups.SlotFiles.open(groups["memory"], groups["pids"])  # while /sys is in sight
    facts["memory_cgroup"], facts["pids_cgroup"] = bool(groups["memory"]), bool(groups["pids"])
    if allowlist and facts["mount_namespace"]:
        _enter_call_root(facts, settings)
    settings.update({k: facts[k] for k in ("call_namespaces", "ipc_namespace", "ipc_limits")})
    # System V IPC and POSIX queues are allowed only inside a call's own, limited IPC namespace.
    load_filter = _seccomp_loader(settings["seccomp"], refuse_ipc=not facts["ipc_limits"])
    facts["seccomp"] = load_filter is not None
    child.GENERATORS[:] = rng_state.module_generators()  # reseeded in every call (sandbox/rng_state.py)
    rng_state.reseed(child.GENERATORS)  # once here, so that no call pays its first-use costs
    gc.collect()
    gc.freeze()  # keeps the GC from touching (and copying) the shared heap in children
    facts["huge_pages_mb"] = hugepages.collapse_heap() if settings["huge_pages"] else 0
    control.send(json.dumps({"op": "ready", "pid": os.getpid(), "facts": facts}).encode())
    Zygote(control, settings, load_filter).serve()


if __name__ == "__main__":
    main()
