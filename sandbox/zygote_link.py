"""Server side of the zygote: start it, ask for children, collect their fds and exit codes.

One zygote per server. If it dies (only possible where the service cannot drop
privileges, so a program may signal it) a new one is started and every slot that was
waiting for a child asks again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from sandbox.locations import SOURCE_ROOT

log = logging.getLogger(__name__)

# The zygote (and so every child) starts from this environment only: nothing of the
# server's environment (tokens, paths, credentials) is visible to sandboxed code.
CLEAN_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONPATH": str(SOURCE_ROOT),
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
    "OMP_NUM_THREADS": "1",  # threads would make fork unsafe and RLIMIT_AS tight
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


@dataclass
class Child:
    """A forked-ahead sandbox process, waiting for its call."""

    slot: int
    pid: int  # also its process group id
    sock: socket.socket  # request in, result record out
    out_fd: int  # read end of its stdout pipe
    err_fd: int  # read end of its stderr pipe
    generation: int = 0  # which zygote forked it (the link counts restarts)
    serial: int = 0  # which fork of that zygote: a pid can be reused, (generation, serial) cannot
    killed: bool = False

    def close(self) -> None:
        self.sock.close()
        for fd in (self.out_fd, self.err_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class ZygoteLink:
    def __init__(self, settings: dict, on_child: Callable[[Child], None], on_lost: Callable[[], None]):
        self.settings = settings
        self._on_child = on_child
        self._on_lost = on_lost
        self.proc: subprocess.Popen | None = None
        self.facts: dict = {}
        self._sock: socket.socket | None = None
        self._ready: asyncio.Future | None = None
        # (generation, serial) -> wait status, recent only; and who waits for one.
        self._exited: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._exit_waiters: dict[tuple[int, int], asyncio.Future] = {}
        self.closing = False
        self.generation = 0

    async def start(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        self.generation += 1
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cmd = [sys.executable, "-m", "sandbox.zygote", "--control-fd", str(theirs.fileno()),
               "--settings-json", json.dumps(self.settings)]
        self.proc = subprocess.Popen(cmd, env=CLEAN_ENV, pass_fds=[theirs.fileno()], cwd=SOURCE_ROOT,
                                     stdin=subprocess.DEVNULL)
        theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self._ready = loop.create_future()
        loop.add_reader(ours.fileno(), self._on_readable)
        try:
            msg = await asyncio.wait_for(self._ready, timeout_s)
        except BaseException:
            self._detach()
            self.proc.kill()
            await asyncio.to_thread(self.proc.wait)
            raise
        self.facts = msg["facts"]
        log.info("zygote %d ready: %s", msg["pid"], self.facts)

    def request_fork(self, slot: int) -> bool:
        if self._sock is None or self._ready is None or not self._ready.done():
            return False
        try:
            self._sock.send(json.dumps({"op": "fork", "slot": slot}).encode())
        except OSError as exc:
            log.warning("fork request for slot %d not sent: %s", slot, exc)
            return False
        return True

    def kill(self, child: Child) -> None:
        """Have the zygote kill the child's process group; only it knows whether the pid is still
        that child's (a child of an earlier zygote died with it)."""
        if child.killed or child.generation != self.generation or self._sock is None:
            return
        child.killed = True
        try:
            self._sock.send(json.dumps({"op": "kill", "pid": child.pid, "serial": child.serial}).encode())
        except OSError as exc:
            log.warning("kill request for slot %d not sent: %s", child.slot, exc)

    async def exit_status(self, child: Child, wait_s: float) -> int | None:
        """Wait status of a call process, as reaped by the zygote (None if it never came)."""
        key = (child.generation, child.serial)
        if key in self._exited:
            return self._exited.pop(key)
        fut = self._exit_waiters.setdefault(key, asyncio.get_running_loop().create_future())
        try:
            return await asyncio.wait_for(fut, wait_s)
        except TimeoutError:
            return None
        finally:
            self._exit_waiters.pop(key, None)

    def _on_readable(self) -> None:
        while self._sock is not None:
            try:
                data, fds, _, _ = socket.recv_fds(self._sock, 65536, 3)
            except BlockingIOError:
                return
            except OSError:
                data, fds = b"", []
            if not data:
                self._lost()
                return
            msg = json.loads(data)
            op = msg["op"]
            if op == "ready" and self._ready is not None and not self._ready.done():
                self._ready.set_result(msg)
            elif op == "child":
                sock = socket.socket(fileno=fds[0])
                self._on_child(Child(msg["slot"], msg["pid"], sock, fds[1], fds[2], self.generation,
                                     msg["serial"]))
            elif op == "exit":
                key = (self.generation, msg["serial"])
                waiter = self._exit_waiters.get(key)
                if waiter is not None and not waiter.done():
                    waiter.set_result(msg["status"])
                else:
                    self._exited[key] = msg["status"]
                    while len(self._exited) > 4096:
                        self._exited.popitem(last=False)
            elif op == "fork_failed":
                log.warning("zygote could not fork for slot %s: %s", msg["slot"], msg["error"])
                asyncio.get_running_loop().call_later(0.5, self.request_fork, msg["slot"])

    def _detach(self) -> None:
        if self._sock is not None:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None

    def _lost(self) -> None:
        self._detach()
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(RuntimeError("zygote exited during startup"))
            return
        if not self.closing:
            log.error("zygote died (exit %s); starting a new one", self.proc.poll() if self.proc else None)
            self._on_lost()

    async def stop(self) -> None:
        self.closing = True
        if self._sock is not None:
            try:
                self._sock.send(b'{"op": "quit"}')
            except OSError:
                pass
        if self.proc is not None:
            try:
                await asyncio.wait_for(asyncio.to_thread(self.proc.wait), 10)
            except TimeoutError:
                self.proc.kill()
                self.proc.wait()
        self._detach()
