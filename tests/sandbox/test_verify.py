"""Answer verification (SPEC §5): math-verify in killable single-threaded workers."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from configs.sandbox import SandboxConfig
from sandbox.verifier_pool import VerifierPool

PAIRS = [
    ("\\boxed{42}", "42", 1.0),
    ("\\boxed{41}", "42", 0.0),
    ("\\boxed{\\frac{1}{2}}", "0.5", 1.0),
    ("\\boxed{0.5}", "\\frac{1}{2}", 1.0),  # bare LaTeX reference
    ("\\boxed{2\\sqrt{3}}", "\\sqrt{12}", 1.0),
    ("\\boxed{(x+1)^2}", "x^2+2x+1", 1.0),
    ("\\boxed{\\{1,2,3\\}}", "\\{3,2,1\\}", 1.0),
    ("The answer is \\boxed{7}.", "7", 1.0),
    ("no answer at all", "7", 0.0),
    ("\\boxed{}", "7", 0.0),
]


async def test_scores_match_math_verify(sb):
    results = await sb.verify_batch([(m, r) for m, r, _ in PAIRS])
    assert [v.score for v in results] == [s for _, _, s in PAIRS]
    assert all(v.status == "ok" for v in results)


async def test_pathological_expression_costs_one_worker_a_bounded_time(sb, server):
    tower = "\\boxed{2^{2^{2^{2^{2^{2^{2}}}}}}}"
    start = time.monotonic()
    results = await asyncio.gather(sb.verify(tower, "3"), *(sb.verify("\\boxed{5}", "5") for _ in range(10)))
    assert (results[0].score, results[0].status) == (0.0, "timeout")
    assert all(v.score == 1.0 for v in results[1:])
    assert max(v.elapsed_s for v in results[1:]) < 3  # the other worker kept answering
    assert time.monotonic() - start < server.cfg.verify_timeout_s * 3 + 5
    assert server.health()["counters"]["verify_timeout"] >= 1


async def test_a_hung_worker_is_killed_and_replaced():
    pool = VerifierPool(SandboxConfig(verify_workers=1, verify_timeout_s=1, verify_kill_after_s=2))
    await pool.start()
    try:
        (pid,) = pool.health()["verify_pids"]
        os.kill(pid, signal.SIGSTOP)  # stands in for a C-level loop that signal.alarm cannot break
        start = time.monotonic()
        hung = await pool.verify("\\boxed{1}", "1")
        assert (hung.score, hung.status) == (0.0, "timeout")
        assert 2 <= time.monotonic() - start < 4
        after = await asyncio.wait_for(pool.verify("\\boxed{1}", "1"), 60)  # waits for the replacement
        assert (after.score, after.status) == (1.0, "ok")
        assert pool.health()["verify_pids"] != [pid]
        assert pool.counters["verify_worker_restarts"] == 1
    finally:
        await pool.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
