"""Load test (issue 3, point 6): 10,000 calls through HTTP from 64 concurrent clients, 5 %
of them hostile. Every call answered once with its own output, workers restored, memory
stable. Run with `-m slow -s` to see the figures:

    .venv/bin/python -m pytest tests/sandbox/test_load.py -m slow -s
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time

import psutil
import pytest

from configs.sandbox import SandboxConfig
from sandbox.client import SandboxClient
from sandbox.types import ToolCall

CALLS, CLIENTS, HOSTILE_EVERY = 10_000, 64, 20  # 1 in 20 = 5 % hostile
LOAD_CFG = SandboxConfig(timeout_s=2, cpu_time_s=2, memory_mb=512, max_stream_mb=8, verify_workers=1)

NORMAL = [
    "print('id-{i}', {i} * 3)",
    "import numpy as np\nprint('id-{i}', int(np.arange({i} % 100 + 1).sum()))",
    "import sympy as sp\nx = sp.Symbol('x')\nprint('id-{i}', sp.solve(x - {i}, x))",
    "s = 0\nfor k in range(2000):\n    s += k\nprint('id-{i}', s)",
    "raise ValueError('id-{i}')",
    "'id-{i}'",
]
HOSTILE = [
    ("while True:\n    pass", {"resource_limit", "timeout"}),
    ("import time\ntime.sleep(10**6)", {"timeout"}),
    ("import numpy as np\na = [np.empty(10**8) for _ in range(100)]", {"resource_limit"}),
    ("import os\nwhile True:\n    os.fork()", {"error", "resource_limit", "timeout"}),
    ("import sys\nsys.stdout.write('x' * 100_000_000)", {"resource_limit"}),
    ("import ctypes\nctypes.string_at(0)", {"error"}),
    ("import os\nos.killpg(0, 9)", {"error"}),
    ("import socket\nsocket.create_connection(('1.1.1.1', 443), timeout=1)", {"error"}),
    ("open('/etc/x', 'w')", {"error"}),
    ("import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)'], "
     "start_new_session=True)", {"ok"}),
    ("import threading, time\nthreading.Thread(target=time.sleep, args=(1000,)).start()", {"ok"}),
    ("import builtins\nbuiltins.print = None\nbuiltins.len = None", {"ok"}),
    ("def f(n):\n    return f(n + 1)\nf(0)", {"error"}),
    ("import os\nos._exit(1)", {"error"}),
]


def tree_rss_mb(pid: int) -> dict[str, float]:
    """RSS of the server and its long-lived helpers (zygote, verify workers), not of call children."""
    server = psutil.Process(pid)
    out = {"server": server.memory_info().rss / 2**20}
    for child in server.children():
        name = "zygote" if "sandbox.zygote" in " ".join(child.cmdline()) else f"verifier-{child.pid}"
        out[name] = child.memory_info().rss / 2**20
    return out


@pytest.mark.slow
async def test_ten_thousand_calls_from_64_clients(start_extra_server, check_clean):
    srv = start_extra_server(LOAD_CFG)
    h0 = srv.health()
    for _ in range(3):  # one warm-up round so start RSS is measured on a used service
        async with srv.client() as sb:
            await sb.run_batch([ToolCall(NORMAL[k].replace("{i}", str(k))) for k in range(len(NORMAL))] * 4)
    rss_start = tree_rss_mb(h0["pid"])
    calls_before = srv.health()["counters"]["calls"]

    work = list(range(CALLS))
    results: dict[int, tuple] = {}
    latencies: list[float] = []

    async def client_loop() -> None:
        async with SandboxClient(LOAD_CFG.model_copy(update={"urls": [srv.url]})) as sb:
            while work:
                i = work.pop()
                hostile = i % HOSTILE_EVERY == 0
                code = HOSTILE[(i // HOSTILE_EVERY) % len(HOSTILE)][0] if hostile else NORMAL[i % len(NORMAL)]
                t = time.perf_counter()
                res = await sb.run(ToolCall(code.replace("{i}", str(i))))
                latencies.append(time.perf_counter() - t)
                assert i not in results, f"call {i} answered twice"
                results[i] = (hostile, res)

    start = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(CLIENTS)))
    wall = time.perf_counter() - start

    assert sorted(results) == list(range(CALLS))  # none lost
    statuses: dict[str, int] = {}
    for i, (hostile, res) in results.items():
        statuses[res.status] = statuses.get(res.status, 0) + 1
        if hostile:
            allowed = HOSTILE[(i // HOSTILE_EVERY) % len(HOSTILE)][1]
            assert res.status in allowed, (i, res)
        else:
            assert set(re.findall(r"id-(\d+)", res.feedback)) == {str(i)}, (i, res)  # its own output only
            assert res.status == ("error" if i % len(NORMAL) == 4 else "ok"), (i, res)
    h1 = srv.health()
    assert h1["counters"]["calls"] - calls_before == CALLS  # none run twice
    check_clean(srv, settle_s=15)  # worker count restored, nothing left behind
    rss_end = tree_rss_mb(h0["pid"])
    lat = sorted(latencies)
    print(
        f"\nload: {CALLS} calls, {CLIENTS} clients, {sum(h for h, _ in results.values())} hostile, "
        f"{wall:.1f} s, {CALLS / wall:.1f} calls/s, p50 {statistics.median(lat) * 1000:.0f} ms, "
        f"p99 {lat[int(0.99 * len(lat))] * 1000:.0f} ms\nstatuses: {statuses}\n"
        f"workers: {h1['exec_ready']}/{h1['exec_workers']} ready after the run\n"
        f"RSS start (MB): { {k: round(v, 1) for k, v in rss_start.items()} }\n"
        f"RSS end   (MB): { {k: round(v, 1) for k, v in rss_end.items()} }"
    )
    assert rss_end["server"] < rss_start["server"] + 64
    assert rss_end["zygote"] < rss_start["zygote"] + 16
