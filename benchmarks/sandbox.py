"""Benchmark of the code execution service against the reference design (issue 3, point 7).

    python -m benchmarks.sandbox [--calls 500] [--ref-calls 40] [--pool-calls 2000] [--config-json '{...}']
    python -m benchmarks.sandbox --against REV [--rounds 3]   # CPU per call, this checkout vs REV

Prints calls/s and p50/p99 latency on one mix of programs (print, numpy, a sympy solve,
an exception, a short loop) for
  (a) this service, through HTTP with the batching client (local server on loopback);
  (b) the reference design: a fresh python3 per call importing numpy/scipy/sympy, rlimits only;
  (c) an unisolated warm process pool (state leaks between calls): the upper bound;
then the ratios a/b and a/c, the p50 of a trivial call at low load, verification
throughput (answers/s) on a mix of answer pairs, and where (a)'s CPU goes per call
(client, server, fork, child setup, program, exit). Everything runs on this machine, in one run.

`--against REV` instead measures (a) for this checkout and for the service of git revision
REV (its tree from `git archive`, started as its own server), alternating for `--rounds`
rounds, and prints the CPU per call of each (best round) and their ratio: the cost check
of a change to the service on a machine whose load moves wall-clock figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from benchmarks.revision import tree_at
from configs.sandbox import SandboxConfig
from sandbox.client import build_sandbox
from sandbox.types import ToolCall

MIX = {
    "print": "print('hello', 6 * 7)",
    "numpy": "import numpy as np\na = np.arange(1000).reshape(10, 100)\nprint(a.sum(), a.mean(axis=0)[:3])",
    "sympy_solve": "import sympy as sp\nx = sp.symbols('x')\nprint(sp.solve(x**3 - 6*x**2 + 11*x - 6, x))",
    "exception": "def f(d):\n    return d['missing']\nf({})",
    "short_loop": "s = 0\nfor i in range(20000):\n    s += i * i % 7\nprint(s)",
}
PAIRS = [
    ("\\boxed{42}", "42"), ("\\boxed{41}", "42"), ("\\boxed{\\frac{1}{2}}", "0.5"), ("\\boxed{0.5}", "\\frac{1}{2}"),
    ("\\boxed{2\\sqrt{3}}", "\\sqrt{12}"), ("\\boxed{x^2+2x+1}", "(x+1)^2"), ("\\boxed{\\{1,2,3\\}}", "\\{3,2,1\\}"),
    ("\\boxed{(1,2]}", "(1,2]"), ("\\boxed{1000}", "1,000"), ("no answer here", "7"),
]


def _percentiles(lat: list[float]) -> tuple[float, float]:
    lat = sorted(lat)
    return statistics.median(lat), lat[min(len(lat) - 1, int(0.99 * len(lat)))]


def _workload(n: int) -> list[str]:
    kinds = list(MIX.values())
    return [kinds[i % len(kinds)] for i in range(n)]


async def bench_service(n: int, concurrency: int, cfg: SandboxConfig) -> dict:
    async with build_sandbox(cfg) as sb:
        await sb.run_batch([ToolCall(code=c) for c in _workload(20)])  # warm the path
        trivial = []
        for _ in range(50):  # low load: one call at a time
            t = time.perf_counter()
            await sb.run(ToolCall(code="print(1)"))
            trivial.append(time.perf_counter() - t)
        queue = list(_workload(n))
        lat: list[float] = []
        statuses: dict[str, int] = {}

        async def worker() -> None:
            while queue:
                code = queue.pop()
                t = time.perf_counter()
                res = await sb.run(ToolCall(code=code))
                lat.append(time.perf_counter() - t)
                statuses[res.status] = statuses.get(res.status, 0) + 1

        before = await _cpu_snapshot(sb)
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - start
        breakdown = _breakdown(before, await _cpu_snapshot(sb), n)
        pairs = PAIRS * 20
        await sb.verify_batch(PAIRS)
        t = time.perf_counter()
        verdicts = await sb.verify_batch(pairs)
        verify_wall = time.perf_counter() - t
    p50, p99 = _percentiles(lat)
    return {"calls_s": n / wall, "p50": p50, "p99": p99, "statuses": statuses,
            "trivial_p50": statistics.median(trivial), "verify_s": len(pairs) / verify_wall,
            "verify_correct": sum(v.score for v in verdicts), "verify_n": len(pairs), "breakdown": breakdown}


def _proc_cpu(pid: int) -> tuple[float, float]:
    """(own, reaped children's) CPU seconds of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


async def _cpu_snapshot(sb) -> dict:
    (server,) = (await sb.health())["servers"].values()
    me = os.times()
    return {"client": me.user + me.system, "server": _proc_cpu(server["pid"])[0],
            "zygote": _proc_cpu(server["zygote_pid"]), "counters": server["counters"]}


def _breakdown(a: dict, b: dict, n: int) -> list[tuple[str, float]]:
    """CPU ms per call, by where it is spent (the load test's mix; the client's share is
    this benchmark's own HTTP client and batching)."""
    def counter(key: str) -> float:
        return b["counters"].get(key, 0) - a["counters"].get(key, 0)

    calls = counter("usage_calls") or 1
    setup = counter("child_setup_cpu_us") / calls / 1000
    run = counter("child_run_cpu_us") / calls / 1000
    children = (b["zygote"][1] - a["zygote"][1]) * 1000 / n  # setup + run + exit of the reaped children
    return [
        ("client: HTTP + JSON + batching (this benchmark)", (b["client"] - a["client"]) * 1000 / n),
        ("server: HTTP + JSON + event loop + pipes", (b["server"] - a["server"]) * 1000 / n),
        ("zygote: fork (parent side) + control messages", (b["zygote"][0] - a["zygote"][0]) * 1000 / n),
        (f"child setup ({counter('child_setup_faults') / calls:.0f} faults): sweep, namespaces, tmpfs, seccomp",
         setup),
        (f"program (with {counter('child_run_faults') / calls:.0f} minor faults of copy-on-write)", run),
        ("child exit: unmapping, namespace teardown", max(children - setup - run, 0.0)),
    ]


def _limits() -> None:
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (10, 11))
    resource.setrlimit(resource.RLIMIT_AS, (4096 * mb, 4096 * mb))
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * mb, 64 * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


def _reference_call(code: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import numpy, scipy, sympy\n" + code], capture_output=True,
                   timeout=30, preexec_fn=_limits, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    return time.perf_counter() - t


def bench_reference(n: int, concurrency: int) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    start, t0 = time.perf_counter(), os.times()
    with ThreadPoolExecutor(concurrency) as pool:
        lat = list(pool.map(_reference_call, _workload(n)))
    wall, t1 = time.perf_counter() - start, os.times()
    p50, p99 = _percentiles(lat)
    cpu = t1.children_user + t1.children_system - t0.children_user - t0.children_system
    return {"calls_s": n / wall, "p50": p50, "p99": p99, "cpu_ms": cpu * 1000 / n}


def _pool_init() -> None:
    import numpy  # noqa: F401
    import scipy  # noqa: F401
    import sympy  # noqa: F401


def _pool_call(code: str) -> tuple[str, float]:
    t = time.perf_counter()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(code, "main.py", "exec"), {"__name__": "__main__"})
        except Exception:
            out.write(traceback.format_exc())
    return out.getvalue(), time.perf_counter() - t


async def _bench_pool_async(pool: ProcessPoolExecutor, n: int, concurrency: int) -> tuple[list[float], float]:
    loop = asyncio.get_running_loop()
    queue = list(_workload(n))
    lat: list[float] = []

    async def worker() -> None:
        while queue:
            code = queue.pop()
            t = time.perf_counter()
            await loop.run_in_executor(pool, _pool_call, code)
            lat.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return lat, time.perf_counter() - start


def bench_pool(n: int, workers: int, concurrency: int) -> dict:
    with ProcessPoolExecutor(workers, initializer=_pool_init) as pool:
        list(pool.map(_pool_call, _workload(20)))
        lat, wall = asyncio.run(_bench_pool_async(pool, n, concurrency))
    p50, p99 = _percentiles(lat)
    return {"calls_s": n / wall, "p50": p50, "p99": p99}


@contextlib.contextmanager
def server_at(rev: str, config_json: str) -> Iterator[str]:
    """A sandbox server running the code of git revision `rev` (`config_json`: the overrides
    given, not a full dump, which may name fields that revision does not have); yields its URL."""
    with tempfile.TemporaryDirectory() as tmp:
        tree_at(rev, Path(tmp))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-m", "sandbox.server", "--port", str(port), "--config-json",
                                 config_json, "--exit-with-parent"], cwd=tmp,
                                env={**os.environ, "PYTHONPATH": tmp}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    urllib.request.urlopen(f"{url}/health", timeout=5).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"the server of {rev} did not start") from None
                    time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            proc.wait(30)


def compare_with(rev: str, args: argparse.Namespace, cfg: SandboxConfig) -> None:
    """CPU per call of the service, this checkout against `rev`, rounds alternating."""
    totals: dict[str, list[tuple[float, float]]] = {"this checkout": [], rev: []}
    for _ in range(args.rounds):
        for name in totals:
            with contextlib.ExitStack() as stack:
                run_cfg = cfg if name == "this checkout" else cfg.model_copy(
                    update={"urls": [stack.enter_context(server_at(rev, args.config_json))]})
                r = asyncio.run(bench_service(args.calls, args.concurrency, run_cfg))
            service = sum(ms for what, ms in r["breakdown"] if not what.startswith("client"))
            totals[name].append((service, sum(ms for _, ms in r["breakdown"])))
            print(f"{name:>14}: {r['calls_s']:6.1f} calls/s, CPU per call {totals[name][-1][1]:6.2f} ms "
                  f"(service {service:6.2f} ms, client {totals[name][-1][1] - service:5.2f} ms)")
    new, old = min(totals["this checkout"]), min(totals[rev])
    print(f"best of {args.rounds}: service CPU per call {new[0]:.2f} ms here, {old[0]:.2f} ms at {rev}: "
          f"ratio {new[0] / old[0]:.3f} (target <= 1.10); with the client {new[1]:.2f} vs {old[1]:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--ref-calls", type=int, default=40)
    parser.add_argument("--pool-calls", type=int, default=2000)
    parser.add_argument("--config-json", default="{}", help='service overrides, e.g. \'{"huge_pages": false}\'')
    parser.add_argument("--against", metavar="REV", help="compare CPU per call with the service at git revision REV")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.against:
        compare_with(args.against, args, SandboxConfig.model_validate_json(args.config_json))
        return
    cores = os.cpu_count() or 1
    a = asyncio.run(bench_service(args.calls, args.concurrency, SandboxConfig.model_validate_json(args.config_json)))
    b = bench_reference(args.ref_calls, cores)
    c = bench_pool(args.pool_calls, cores, args.concurrency)
    print(f"machine: {cores} CPU cores; mix of {len(MIX)} programs ({', '.join(MIX)})")
    print(f"{'design':<44}{'calls/s':>10}{'p50 ms':>10}{'p99 ms':>10}")
    for name, r in (("(a) this service (HTTP, isolated, batched)", a),
                    ("(b) reference: fresh python3 + imports", b), ("(c) warm unisolated pool", c)):
        print(f"{name:<44}{r['calls_s']:>10.1f}{r['p50'] * 1000:>10.1f}{r['p99'] * 1000:>10.1f}")
    print(f"ratio a/b (calls/s): {a['calls_s'] / b['calls_s']:.1f}   (target >= 30)")
    print(f"ratio a/c (calls/s): {a['calls_s'] / c['calls_s']:.3f}")
    print(f"trivial call p50 at low load (a): {a['trivial_p50'] * 1000:.1f} ms   (target <= 25 ms)")
    print(f"statuses (a): {a['statuses']}")
    print(f"verification: {a['verify_s']:.1f} answers/s on {a['verify_n']} pairs "
          f"({a['verify_correct']:.0f} judged correct)")
    print("CPU per call of (a), ms (/proc and the children's getrusage; 10 ms ticks summed over the run):")
    total = sum(ms for _, ms in a["breakdown"])
    for name, ms in a["breakdown"]:
        print(f"  {name:<66}{ms:>7.2f}  {100 * ms / total:>4.0f} %")
    print(f"  {'total (kernel work deferred to kworkers not counted)':<66}{total:>7.2f}")
    # Wall-clock ratios swing with whatever else runs on the machine; CPU per call much less.
    print(f"reference (b) CPU per call: {b['cpu_ms']:.1f} ms; ratio of CPU per call b/a: {b['cpu_ms'] / total:.1f}"
          "   (the calls/s ratio a CPU-bound machine with nothing else running would approach)")


if __name__ == "__main__":
    main()
