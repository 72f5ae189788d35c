"""Async client of the code execution service, used by rollout and reward code (SPEC §3, §5).

    async with build_sandbox(cfg) as sb:          # cfg.urls empty: a local server for this run
        result = await sb.run(parse_tool_call(body))
        score = await sb.verify("\\boxed{42}", "42")

Calls made concurrently from many coroutines are coalesced into batches of up to
`max_batch_calls` (or what arrived within `batch_window_ms`). Batches go to the server
with the fewest requests in flight; a batch whose server fails (died, refused, 5xx) is
sent again to another one. A call is always answered: when every try failed it gets
status "error" with `extra["service_error"]` set, so callers can tell it from a program error.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

import aiohttp

from configs.sandbox import SandboxConfig
from sandbox.batcher import Batcher
from sandbox.locations import SOURCE_ROOT
from sandbox.types import InvalidCall, SandboxResult, ToolCall, VerifyResult

log = logging.getLogger(__name__)


class SandboxUnavailable(RuntimeError):
    """No server answered a request after every retry."""


class SandboxClient:
    def __init__(self, cfg: SandboxConfig):
        self.cfg = cfg
        self.urls = [u.rstrip("/") for u in cfg.urls]
        self.server_log: str | None = None  # log file of the local server, when we started one
        self._proc: subprocess.Popen | None = None
        self._session: aiohttp.ClientSession | None = None
        self._inflight: dict[str, int] = {}
        self._cooldown_until: dict[str, float] = {}
        self._start_lock = asyncio.Lock()
        window = cfg.batch_window_ms / 1000
        self._runs: Batcher[ToolCall, SandboxResult] = Batcher(self._send_runs, cfg.max_batch_calls, window)
        self._verifies: Batcher[tuple[str, str], VerifyResult] = Batcher(
            self._send_verifies, cfg.max_batch_calls, window
        )

    async def __aenter__(self) -> SandboxClient:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        async with self._start_lock:
            if self._session is not None:
                return
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.cfg.request_timeout_s),
                connector=aiohttp.TCPConnector(limit=0),
            )
            if not self.urls:
                self.urls = [await self._start_local_server()]
            self._inflight = dict.fromkeys(self.urls, 0)

    async def run(self, call: ToolCall | InvalidCall) -> SandboxResult:
        if isinstance(call, InvalidCall):
            return SandboxResult(status="invalid_call", feedback=call.reason)
        await self.start()
        return await self._runs.submit(call)

    async def run_batch(self, calls: Sequence[ToolCall | InvalidCall]) -> list[SandboxResult]:
        return list(await asyncio.gather(*(self.run(c) for c in calls)))

    async def verify(self, model_text: str, reference: str) -> VerifyResult:
        await self.start()
        return await self._verifies.submit((model_text, reference))

    async def verify_batch(self, pairs: Sequence[tuple[str, str]]) -> list[VerifyResult]:
        await self.start()
        return await self._verifies.submit_many(list(pairs))

    async def health(self) -> dict:
        """{"ok": every server reachable and not degraded, "servers": {url: its /health or {"error": ...}}}."""
        await self.start()

        async def one(url: str) -> dict:
            try:
                async with self._session.get(f"{url}/health", timeout=aiohttp.ClientTimeout(total=10)) as resp:
                    resp.raise_for_status()
                    return await resp.json()
            except (TimeoutError, aiohttp.ClientError) as exc:
                return {"error": f"{type(exc).__name__}: {exc}"}

        states = await asyncio.gather(*(one(u) for u in self.urls))
        ok = all(s.get("status") == "ok" for s in states)
        return {"ok": ok, "servers": dict(zip(self.urls, states, strict=True))}

    async def aclose(self) -> None:
        await self._runs.aclose()
        await self._verifies.aclose()
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._proc is not None:
            await asyncio.to_thread(_stop_process, self._proc)
            if self._proc.returncode == 0 and self.server_log:
                os.unlink(self.server_log)  # kept only when the server ended badly
                self.server_log = None
            self._proc = None

    # --- transport ---

    async def _send_runs(self, calls: list[ToolCall]) -> list[SandboxResult]:
        payload = {"calls": [{"code": c.code, "input": c.input} for c in calls]}
        try:
            body = await self._post("/run", payload)
        except SandboxUnavailable as exc:
            return [SandboxResult("error", "Sandbox service unavailable; the call was not run.",
                                  extra={"service_error": str(exc)}) for _ in calls]
        return [SandboxResult(**r) for r in body["results"]]

    async def _send_verifies(self, pairs: list[tuple[str, str]]) -> list[VerifyResult]:
        payload = {"pairs": [{"model_text": m, "reference": r} for m, r in pairs]}
        try:
            body = await self._post("/verify", payload)
        except SandboxUnavailable as exc:
            log.error("verification unavailable: %s", exc)
            return [VerifyResult(score=0.0, status="error") for _ in pairs]
        return [VerifyResult(**r) for r in body["results"]]

    def _pick(self, tried: set[str]) -> str:
        now = time.monotonic()
        fresh = [u for u in self.urls if u not in tried] or self.urls
        healthy = [u for u in fresh if self._cooldown_until.get(u, 0) <= now] or fresh
        return min(healthy, key=lambda u: self._inflight[u])

    async def _post(self, path: str, payload: dict) -> dict:
        tried: set[str] = set()
        errors = []
        for attempt in range(self.cfg.retry_attempts):
            url = self._pick(tried)
            if url in tried:
                await asyncio.sleep(min(0.5 * attempt, 2.0))  # same server again: give it a moment
            tried.add(url)
            self._inflight[url] += 1
            try:
                async with self._session.post(f"{url}{path}", json=payload) as resp:
                    resp.raise_for_status()
                    return await resp.json()
            except (TimeoutError, aiohttp.ClientError, ConnectionError, ValueError) as exc:
                self._cooldown_until[url] = time.monotonic() + self.cfg.server_cooldown_s
                errors.append(f"{url}: {type(exc).__name__}: {exc}")
                log.warning("sandbox request to %s failed (%s); %s", url, exc,
                            "retrying" if attempt + 1 < self.cfg.retry_attempts else "giving up")
            finally:
                self._inflight[url] -= 1
        raise SandboxUnavailable("; ".join(errors))

    async def _start_local_server(self) -> str:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        fd, self.server_log = tempfile.mkstemp(prefix="sandbox-server-", suffix=".log")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "sandbox.server", "--host", "127.0.0.1", "--port", str(port),
             "--config-json", self.cfg.model_dump_json(), "--exit-with-parent"],
            cwd=SOURCE_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: stopping it reaches every helper it started
        )
        os.close(fd)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.cfg.startup_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"sandbox server exited with {self._proc.returncode}; see {self.server_log}")
            try:
                async with self._session.get(f"{url}/health", timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    if resp.status == 200:
                        log.info("local sandbox server at %s (log %s)", url, self.server_log)
                        return url
            except (TimeoutError, aiohttp.ClientError):
                pass
            await asyncio.sleep(0.2)
        _stop_process(self._proc)
        raise RuntimeError(f"sandbox server not ready after {self.cfg.startup_timeout_s} s; see {self.server_log}")


def _stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM (the server stops its zygote and workers), then SIGKILL to the whole group."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        log.warning("sandbox server %d ignored SIGTERM; killing its group", proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)  # the leader is not reaped yet, so the group id is ours
        proc.wait()


def build_sandbox(cfg: SandboxConfig) -> SandboxClient:
    """`async with build_sandbox(cfg) as sb:` starts a local server when cfg.urls is empty."""
    return SandboxClient(cfg)
