"""Server side of answer verification: a pool of killable math-verify worker processes.

A pair that keeps a worker busy past `verify_kill_after_s` costs that worker: it is
killed, the pair scores 0 with status "timeout", and a replacement starts in the
background (about a second: the math-verify import). The caller never hangs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections import Counter

from configs.sandbox import SandboxConfig
from sandbox.locations import SOURCE_ROOT
from sandbox.types import VerifyResult
from sandbox.zygote_link import CLEAN_ENV

log = logging.getLogger(__name__)


class VerifierPool:
    def __init__(self, cfg: SandboxConfig):
        self.cfg = cfg
        self._idle: asyncio.Queue[asyncio.subprocess.Process] = asyncio.Queue()
        self._all: set[asyncio.subprocess.Process] = set()
        self._spawning: set[asyncio.Task] = set()
        self.waiting = 0
        self.counters: Counter[str] = Counter()
        self._closing = False

    async def start(self) -> None:
        await asyncio.gather(*(self._spawn() for _ in range(self.cfg.verify_workers)))

    async def _spawn(self) -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sandbox.verifier", "--timeout-s", str(self.cfg.verify_timeout_s),
            "--memory-mb", str(self.cfg.verify_memory_mb),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=CLEAN_ENV, cwd=SOURCE_ROOT,
        )
        self._all.add(proc)
        line = await asyncio.wait_for(proc.stdout.readline(), self.cfg.startup_timeout_s)
        if not line:
            raise RuntimeError(f"verify worker {proc.pid} exited during startup")
        self._idle.put_nowait(proc)

    def _replace(self, proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is None:
            proc.kill()
        self._all.discard(proc)
        self.counters["verify_worker_restarts"] += 1
        if not self._closing:
            task = asyncio.get_running_loop().create_task(self._respawn())
            self._spawning.add(task)
            task.add_done_callback(self._spawning.discard)

    async def _respawn(self) -> None:
        """Keep trying: a pool that silently shrank to nothing would leave callers waiting."""
        delay = 0.5
        while not self._closing:
            try:
                await self._spawn()
                return
            except (OSError, RuntimeError, TimeoutError) as exc:
                log.error("verify worker did not start (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(2 * delay, 30.0)

    async def verify(self, model_text: str, reference: str) -> VerifyResult:
        start = time.monotonic()
        self.waiting += 1
        try:
            proc = await self._idle.get()
        finally:
            self.waiting -= 1
        keep = False
        try:
            proc.stdin.write(json.dumps({"model_text": model_text, "reference": reference}).encode() + b"\n")
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), self.cfg.verify_kill_after_s)
            res = json.loads(line) if line else None
            keep = res is not None
        except TimeoutError:
            log.warning("verify worker %d exceeded %.1f s; killing it", proc.pid, self.cfg.verify_kill_after_s)
            res = {"score": 0.0, "status": "timeout"}
        except (OSError, ValueError):
            res = None
        finally:
            self._idle.put_nowait(proc) if keep else self._replace(proc)
        if res is None:
            res = {"score": 0.0, "status": "error"}
        self.counters[f"verify_{res['status']}"] += 1
        self.counters["verify_pairs"] += 1
        return VerifyResult(score=float(res["score"]), status=res["status"], elapsed_s=time.monotonic() - start)

    def health(self) -> dict:
        return {"verify_workers": self.cfg.verify_workers, "verify_idle": self._idle.qsize(),
                "verify_queue_depth": self.waiting, "verify_pids": sorted(p.pid for p in self._all)}

    async def stop(self) -> None:
        self._closing = True
        for task in list(self._spawning):
            task.cancel()
        for proc in list(self._all):
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
