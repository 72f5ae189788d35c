"""The async client: batching, spreading over servers, failover, local server lifecycle (SPEC §3)."""

from __future__ import annotations

import asyncio
import os
import signal

import psutil

from configs.sandbox import SandboxConfig
from sandbox.client import SandboxClient, build_sandbox
from sandbox.types import ToolCall

SMALL = SandboxConfig(timeout_s=10, exec_workers=2, verify_workers=1)


async def test_concurrent_calls_are_coalesced_into_batches(server):
    async with server.client(max_batch_calls=64, batch_window_ms=50) as sb:
        before = server.health()["counters"].get("http_run_requests", 0)
        results = await asyncio.gather(*(sb.run(ToolCall(f"print({i})")) for i in range(150)))
        after = server.health()["counters"]["http_run_requests"]
    assert [r.feedback for r in results] == [str(i) for i in range(150)]
    assert after - before == 3  # 64 + 64 + 22


async def test_calls_trickling_in_share_a_window(server):
    async with server.client(max_batch_calls=64, batch_window_ms=300) as sb:
        await sb.run(ToolCall("print(0)"))
        before = server.health()["counters"]["http_run_requests"]
        first = asyncio.ensure_future(sb.run(ToolCall("import time; time.sleep(0.5); print('a')")))
        await asyncio.sleep(0.05)  # the first batch is now in flight: later calls wait for the window

        async def later(i: int):
            await asyncio.sleep(0.01 * i)
            return await sb.run(ToolCall(f"print({i})"))

        rest = await asyncio.gather(*(later(i) for i in range(10)))
        assert (await first).feedback == "a" and [r.feedback for r in rest] == [str(i) for i in range(10)]
        assert server.health()["counters"]["http_run_requests"] - before == 2


async def test_unreachable_service_answers_every_call_with_a_status():
    cfg = SandboxConfig(urls=["http://127.0.0.1:9"], retry_attempts=2, server_cooldown_s=0.1)
    async with SandboxClient(cfg) as sb:
        results = await sb.run_batch([ToolCall("print(1)"), ToolCall("print(2)")])
        verdict = await sb.verify("\\boxed{1}", "1")
    assert [r.status for r in results] == ["error", "error"]
    assert all("service_error" in r.extra for r in results)
    assert (verdict.score, verdict.status) == (0.0, "error")


async def test_batches_spread_over_servers_and_survive_one_dying(start_extra_server):
    a, b = start_extra_server(SMALL), start_extra_server(SMALL)
    cfg = SMALL.model_copy(update={"urls": [a.url, b.url], "max_batch_calls": 4, "server_cooldown_s": 30})
    async with SandboxClient(cfg) as sb:
        calls = [ToolCall(f"import time\ntime.sleep(1)\nprint({i})") for i in range(16)]
        pending = asyncio.ensure_future(sb.run_batch(calls))
        await asyncio.sleep(0.5)  # both servers now hold batches in flight
        assert a.health()["exec_busy"] > 0 and b.health()["exec_busy"] > 0
        a_pids = [a.proc.pid, a.health()["zygote_pid"], *a.health()["verify_pids"]]
        os.killpg(a.proc.pid, signal.SIGKILL)
        results = await pending
        assert [r.feedback for r in results] == [str(i) for i in range(16)]
        assert all(r.status == "ok" for r in results)
        assert b.health()["counters"]["calls"] >= 8  # a's batches were re-run on b
    a.proc.wait()
    await asyncio.sleep(1)
    assert not [p for p in a_pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]


async def test_build_sandbox_starts_and_stops_a_local_server():
    async with build_sandbox(SMALL) as sb:
        assert (await sb.run(ToolCall("print(sum(range(10)))"))).feedback == "45"
        health = (await sb.health())["servers"]
        (state,) = health.values()
        assert state["exec_workers"] == 2 and state["isolation"]["network_namespace"]
        server_proc = psutil.Process(state["pid"])
        family = [server_proc, *server_proc.children(recursive=True)]
        assert server_proc.exe() and "sandbox.server" in " ".join(server_proc.cmdline())
    await asyncio.sleep(0.5)
    assert not [p.pid for p in family if p.is_running() and p.status() != "zombie"]
