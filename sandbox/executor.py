"""Runs calls on forked-ahead sandbox children: the server's half of SPEC §3.

Each of `exec_workers` slots owns at most one child at a time. A call takes a ready
child, sends it the code, reads its stdout/stderr pipes (keeping both ends) and its
result record under the wall-clock limit, then kills the child's whole process group
and asks the zygote for the slot's next child, whose setup kills anything of the slot's
uid still alive and gives it a fresh scratch; only a child that reported its setup done
is ever handed a call, and a slot whose setup fails is replaced and shown in /health.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Hashable

from configs.sandbox import SandboxConfig
from sandbox import feedback as fb
from sandbox import isolation, slot_cgroups
from sandbox.child import HEADER, READY
from sandbox.fair_queue import FairQueue
from sandbox.feedback import Clip, StreamCapture
from sandbox.locations import SOURCE_ROOT
from sandbox.pipe_pump import PipePump
from sandbox.types import SandboxResult
from sandbox.zygote_link import Child, ZygoteLink

log = logging.getLogger(__name__)

# A program's own output is complete once its result record arrives (the runner flushes
# before sending it), so then we take what the pipes hold without waiting for EOF: EOF
# comes only after the child's exit has torn down its copy of the zygote's memory
# (milliseconds), and never while a process that escaped the group holds the pipe.
# Without a record we wait this long for EOF first.
DRAIN_GRACE_S = 0.05
EXIT_STATUS_WAIT_S = 2.0


class Executor:
    def __init__(self, cfg: SandboxConfig):
        self.cfg = cfg
        self.slots = cfg.exec_workers or 4 * (os.cpu_count() or 1)
        self.drop_uid = os.geteuid() == 0 and cfg.drop_privileges
        self.uid_base, self._uid_lock = -1, -1
        if self.drop_uid:
            self.uid_base, self._uid_lock = isolation.claim_uid_block(cfg.uid_base, self.slots)
        # All of a call's memory (processes, shared memory, scratch files) within memory_mb, and its
        # tasks counted until reaped, where the kernel lets us make cgroups per slot (slot_cgroups.py).
        self.cgroups = slot_cgroups.create(self.uid_base, self.slots, cfg.memory_mb, cfg.max_processes) \
            if self.drop_uid else slot_cgroups.SlotCgroups([], [])
        # Used only where calls cannot have their own tmpfs (the zygote says which in its facts).
        self.scratch_root = tempfile.mkdtemp(prefix="sandbox-scratch-")
        os.chmod(self.scratch_root, 0o711)
        os.mkdir(os.path.join(self.scratch_root, isolation.TRASH), 0o700)
        settings = {
            **cfg.model_dump(include={
                "cpu_time_s", "memory_mb", "file_size_mb", "max_open_files", "max_processes",
                "isolate_network", "private_tmp", "scratch_mb", "scratch_inodes", "preload_modules", "seccomp",
                "huge_pages", "allowlisted_root",
            }),
            "uid_base": self.uid_base,
            "hidden_paths": cfg.hidden_paths + ([str(SOURCE_ROOT), str(SOURCE_ROOT.parent / "shared")]
                                                if cfg.hide_project_data else []),
            "slots": self.slots, "drop_uid": self.drop_uid, "keep_chars": cfg.max_output_chars,
            "scratch_root": self.scratch_root,
            "slot_cgroups": {"memory": self.cgroups.memory, "pids": self.cgroups.pids},
        }
        self.zygote = ZygoteLink(settings, self._on_child, self._on_zygote_lost)
        self._ready: FairQueue[Child] = FairQueue()  # handed out round-robin by request
        self._waiting_fork: set[int] = set()  # slots whose child was asked for
        self._in_setup: dict[int, Child] = {}  # forked, READY not yet read
        self.failing: dict[int, dict] = {}  # slot -> {"failures", "error"} while its setup keeps failing
        self._trash_task: asyncio.Task | None = None
        self.busy = 0
        self.waiting = 0
        self.counters: Counter[str] = Counter()
        # repr + traceback clips of up to 4 x max_output_chars each, at most 12 JSON bytes a char.
        self._max_record = 64 * 1024 + 2 * 4 * 12 * cfg.max_output_chars

    async def start(self) -> None:
        await self.zygote.start(self.cfg.startup_timeout_s)
        if self.zygote.facts.get("call_namespaces"):  # unused: keep no empty dir to leak on a SIGKILL
            os.rmdir(os.path.join(self.scratch_root, isolation.TRASH))
            os.rmdir(self.scratch_root)
            self.scratch_root = ""
        for slot in range(self.slots):
            self._ask_child(slot)

    async def stop(self) -> None:
        await self.zygote.stop()
        for child in list(self._in_setup.values()):
            self._forget_setup(child)
        while not self._ready.empty():
            self._ready.get_nowait().close()
        if self._trash_task is not None:
            await asyncio.gather(self._trash_task, return_exceptions=True)
        try:
            if self.scratch_root:
                await asyncio.to_thread(isolation.empty_tree, self.scratch_root)
                os.rmdir(self.scratch_root)
        except OSError as exc:
            log.warning("scratch %s not removed: %s", self.scratch_root, exc)
        self.cgroups.remove()
        if self._uid_lock >= 0:
            os.close(self._uid_lock)  # only after the zygote swept the block's uids
            self._uid_lock = -1

    def health(self) -> dict:
        return {
            "exec_workers": self.slots, "exec_ready": self._ready.qsize(), "exec_busy": self.busy,
            "queue_depth": self.waiting,
            "uid_range": [self.uid_base, self.uid_base + self.slots - 1] if self.drop_uid else None,
            "zygote_pid": self.zygote.proc.pid if self.zygote.proc else None,
            "isolation": self.zygote.facts,
            # A module the calls expect preloaded failed to import in the zygote: calls would
            # import it themselves (seconds each) or fail, so the service says it is not well.
            "status": "degraded" if self.failing or self.zygote.facts.get("preload_failed") else "ok",
            "slots_failing": {str(k): v for k, v in self.failing.items()},
            "scratch_root": self.scratch_root,
            "slot_cgroups": {"memory": self.cgroups.memory, "pids": self.cgroups.pids},
        }

    def _ask_child(self, slot: int) -> None:
        self._waiting_fork.add(slot)
        if not self.zygote.request_fork(slot):
            asyncio.get_running_loop().call_later(0.2, self._retry_ask, slot)

    def _retry_ask(self, slot: int) -> None:
        if slot in self._waiting_fork and not self.zygote.closing:
            self._ask_child(slot)

    def _on_child(self, child: Child) -> None:
        self._waiting_fork.discard(child.slot)
        self._in_setup[child.slot] = child
        child.sock.setblocking(False)
        asyncio.get_running_loop().add_reader(child.sock.fileno(), self._on_setup_done, child)

    def _forget_setup(self, child: Child) -> None:
        asyncio.get_running_loop().remove_reader(child.sock.fileno())
        self._in_setup.pop(child.slot, None)

    def _on_setup_done(self, child: Child) -> None:
        try:
            first = child.sock.recv(1)
        except BlockingIOError:
            return
        except OSError:
            first = b""
        self._forget_setup(child)
        if first == READY:
            self.failing.pop(child.slot, None)
            self._ready.put_nowait(child)
            return
        # The child died in setup (or said something else): it never gets a call. Replace
        # it, backing off while the slot keeps failing, and show it in /health meanwhile.
        try:
            why = os.read(child.err_fd, 2000).decode(errors="replace").strip()
        except OSError:
            why = ""
        self.zygote.kill(child)
        child.close()
        if child.generation != self.zygote.generation or self.zygote.closing:
            return  # died with its zygote: the restart asks for the slot again
        self.counters["slot_setup_failures"] += 1
        state = self.failing.setdefault(child.slot, {"failures": 0, "error": ""})
        state["failures"] += 1
        state["error"] = why or "sandbox setup failed: child exited without a reason"
        log.error("slot %d setup failed (%d in a row): %s", child.slot, state["failures"], state["error"])
        self._waiting_fork.add(child.slot)
        delay = min(0.1 * 2 ** (state["failures"] - 1), 5.0)
        asyncio.get_running_loop().call_later(delay, self._retry_ask, child.slot)

    def _empty_trash(self) -> None:
        """On-disk scratch only: delete what finished calls left, out of band (a thread),
        never on a call's path; one deletion at a time."""
        if self.zygote.facts.get("call_namespaces", True) or (self._trash_task and not self._trash_task.done()):
            return
        trash = os.path.join(self.scratch_root, isolation.TRASH)

        async def empty() -> None:
            try:
                removed = await asyncio.to_thread(isolation.empty_tree, trash)
                self.counters["scratch_entries_deleted"] += removed
            except OSError as exc:
                log.error("could not empty %s: %s", trash, exc)

        self._trash_task = asyncio.get_running_loop().create_task(empty())

    def _on_zygote_lost(self) -> None:
        self.counters["zygote_restarts"] += 1
        for child in list(self._in_setup.values()):
            self._forget_setup(child)
            child.close()
            self._waiting_fork.add(child.slot)
        stale = []
        while not self._ready.empty():
            stale.append(self._ready.get_nowait())
        for child in stale:  # they die with their zygote (PDEATHSIG)
            child.close()
            self._waiting_fork.add(child.slot)
        asyncio.get_running_loop().create_task(self._restart_zygote())

    async def _restart_zygote(self) -> None:
        delay = 0.5
        while not self.zygote.closing:  # calls wait for children meanwhile; never give up on them
            try:
                await self.zygote.start(self.cfg.startup_timeout_s)
                break
            except (OSError, RuntimeError, TimeoutError) as exc:
                log.error("zygote restart failed (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(2 * delay, 30.0)
        for slot in sorted(self._waiting_fork):
            self._ask_child(slot)

    async def run(self, code: str, stdin: str = "", request: Hashable = None) -> SandboxResult:
        """Run one call; `request` groups the calls of one client request, served in turn with others."""
        queued = time.monotonic()
        for attempt in range(2):
            self.waiting += 1
            try:
                child = await self._ready.get(request)
            finally:
                self.waiting -= 1
            self.busy += 1
            start = time.monotonic()
            try:
                result = await self._execute(child, code, stdin)
            except Exception as exc:  # never drop a call: answer it with a status
                log.exception("call on slot %d failed inside the service", child.slot)
                result = SandboxResult(status="error", feedback=f"Sandbox internal error: {type(exc).__name__}.",
                                       extra={"internal_error": str(exc)})
            finally:
                self.busy -= 1
                self.zygote.kill(child)
                child.close()
                self._ask_child(child.slot)
                self._empty_trash()
            # A child whose zygote died meanwhile was killed with it: not the program's doing.
            lost = child.generation != self.zygote.generation and result.extra.get("wait_status", 0) is None
            if not lost or attempt:
                break
            self.counters["calls_retried"] += 1
        self.counters[f"status_{result.status}"] += 1
        self.counters["calls"] += 1
        result.extra["queued_s"] = round(start - queued, 6)
        return SandboxResult(result.status, result.feedback, time.monotonic() - start,
                             result.stdout_chars, result.stderr_chars, result.extra)

    async def _execute(self, child: Child, code: str, stdin: str) -> SandboxResult:
        cfg = self.cfg
        loop = asyncio.get_running_loop()
        max_bytes = cfg.max_stream_mb * 1024 * 1024
        out = StreamCapture(cfg.max_output_chars, max_bytes)
        err = StreamCapture(cfg.max_output_chars, max_bytes)
        too_much = loop.create_future()
        pumps = [PipePump(loop, child.out_fd, out, too_much), PipePump(loop, child.err_fd, err, too_much)]
        payload = json.dumps({"code": code, "input": stdin}).encode()  # ASCII: surrogates survive
        oom_before = self.cgroups.oom_kills(child.slot)
        writer = None
        try:
            reader, writer = await asyncio.open_unix_connection(sock=child.sock)
            record_task = loop.create_task(_read_record(reader, self._max_record))
            try:
                writer.write(HEADER.pack(len(payload)) + payload)
            except ConnectionError:  # the child died during setup: its stderr and exit status tell why
                pass
            done, _ = await asyncio.wait({record_task, too_much}, timeout=cfg.timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)
            self.zygote.kill(child)
            record_task.cancel()
            raw = record_task.result() if record_task in done and not record_task.cancelled() else b""
            if not raw:
                # No record: the program died or hung; wait briefly for what its group wrote.
                await asyncio.wait([p.eof for p in pumps], timeout=DRAIN_GRACE_S)
        finally:
            self.zygote.kill(child)
            if writer is not None:
                writer.transport.abort()
            for pump in pumps:
                pump.stop(drain=True)
        timed_out, flooded = not done, too_much.done()
        out_clip, err_clip = out.clip(), err.clip()
        sizes = {"stdout_chars": out.total_chars, "stderr_chars": err.total_chars}
        if timed_out:
            return SandboxResult("timeout", fb.timeout_line(cfg.timeout_s), **sizes, extra={"limit": "wall"})
        tail = [out_clip, err_clip]
        if flooded:
            line = fb.output_limit_line(cfg.max_stream_mb)
            return SandboxResult("resource_limit", fb.finish(fb.with_line(tail, line), cfg.max_output_chars),
                                 **sizes, extra={"limit": "output"})
        record = fb.parse_record(raw)
        extra: dict = {}
        if record is None:
            wait_status = await self.zygote.exit_status(child, EXIT_STATUS_WAIT_S)
            status, line = fb.ended_without_record(wait_status, cfg.cpu_time_s, cfg.file_size_mb)
            extra["wait_status"] = wait_status
            if status == "resource_limit":
                extra["limit"] = "cpu" if os.WTERMSIG(wait_status) == signal.SIGXCPU else "file_size"
            elif self.cgroups.oom_kills(child.slot) > oom_before:
                status, line = "resource_limit", fb.memory_line(cfg.memory_mb)  # the kernel's OOM killer
                extra["limit"] = "memory"
        else:
            self._account(record.get("usage"))
            status, line = record["status"], fb.record_line(record, cfg.memory_mb)
            if not out_clip.total and record.get("repr") is not None:
                tail[0] = Clip.from_dict(record["repr"])
            if record.get("traceback") is not None:
                tail.append(Clip.from_dict(record["traceback"]))
            if status == "resource_limit":
                extra["limit"] = "memory"
        return SandboxResult(status, fb.finish(fb.with_line(tail, line), cfg.max_output_chars), **sizes, extra=extra)


    def _account(self, usage: dict | None) -> None:
        """Sum a child's own CPU and fault counts (checked by fb.parse_record; a program could
        forge only its own)."""
        if usage is None:
            return
        self.counters["usage_calls"] += 1
        self.counters["child_setup_cpu_us"] += usage["setup_us"]
        self.counters["child_run_cpu_us"] += usage["end_us"] - usage["setup_us"]
        self.counters["child_setup_faults"] += usage["setup_flt"]
        self.counters["child_run_faults"] += usage["end_flt"] - usage["setup_flt"]


async def _read_record(reader: asyncio.StreamReader, limit: int) -> bytes:
    """The length-prefixed record; b"" when the child died first or sent something oversized."""
    try:
        size = int.from_bytes(await reader.readexactly(HEADER.size), "big")
        if size > limit:
            return b""
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return b""
