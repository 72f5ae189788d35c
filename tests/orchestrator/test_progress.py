"""Progress: nested scopes that never jump back, a throttled sink that publishes from its
own thread (never the caller's event loop), and a terminal bar for plain module runs."""

from __future__ import annotations

import asyncio
import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

from stagekit import progress

TOY_DIR = Path(__file__).resolve().parent
REPO = TOY_DIR.parents[1]


def test_nested_steps_move_one_bar_forward_only():
    seen: list[float] = []
    progress.set_sink(lambda pct, _msg: seen.append(pct))
    try:
        for step in range(3):
            with progress.step(step, 3):
                for batch in range(4):  # e.g. rollout batches, each reporting 0..100 % of its own
                    progress.report(batch + 1, 4)
                    assert 100 * step / 3 <= seen[-1] <= 100 * (step + 1) / 3 + 1e-9
    finally:
        progress.set_sink(None)
    assert seen == sorted(seen) and seen[-1] == 100.0 and seen[0] == 0.0


def test_nesting_composes_and_top_level_reports_are_unchanged():
    seen: list[float] = []
    progress.set_sink(lambda pct, _msg: seen.append(pct))
    try:
        progress.report(1, 4)
        with progress.step(1, 2), progress.step(1, 2):
            progress.report(1, 2)  # half of the second half of the second half
    finally:
        progress.set_sink(None)
    assert seen[0] == 25.0 and 87.5 in seen


def test_a_slow_publisher_never_blocks_the_event_loop():
    published: list[tuple[float, int]] = []

    def slow_publish(pct: float, _msg: str) -> None:  # e.g. an HTTP call to the Prefect API
        time.sleep(0.3)
        published.append((pct, threading.get_ident()))

    async def rollout() -> tuple[float, int, float]:
        loop_thread, worst, start = threading.get_ident(), 0.0, time.monotonic()
        n = 0
        while time.monotonic() - start < 1.5:
            t0 = time.perf_counter()
            progress.report(n, 10**9)
            worst = max(worst, time.perf_counter() - t0)
            n += 1
            await asyncio.sleep(0)
        progress.report(1, 1)
        return worst, loop_thread, time.monotonic() - start

    with progress.publishing(slow_publish, interval_s=0.25):
        worst, loop_thread, elapsed = asyncio.run(rollout())
    assert worst < 0.05  # report() only stores a value
    assert all(tid != loop_thread for _, tid in published)
    assert 2 <= len(published) <= elapsed / 0.25 + 2  # at most one per interval (plus the final flush)
    assert published[-1][0] == 100.0


def test_publisher_failures_do_not_reach_the_stage():
    def broken(_pct: float, _msg: str) -> None:
        raise ConnectionError("API down")

    with progress.publishing(broken, interval_s=0.01):
        for i in range(50):
            progress.report(i, 50)
            time.sleep(0.002)


def test_plain_module_run_draws_a_terminal_bar(tmp_path):
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TOY_DIR), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, "-m", "toy_long", "--stage", "long", "--config", "configs/tiny.yaml",
         "--set", f"run.artifacts_root={tmp_path}", "--set", "rl.stage1.steps=3"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    output = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    assert child.wait(timeout=60) == 0, output.decode()
    text = output.decode(errors="replace")
    assert "long: 100%" in text, text


def test_a_marker_after_a_bar_redraw_on_the_same_line_is_still_read():
    """A launched child's tqdm bar (stderr, carriage returns, no newline) shares the pipe with
    the marker lines: the marker then arrives at the end of the bar's text."""
    marker = progress.MARKER + '{"percent": 34.7, "message": "sft: step 243/700"}'
    assert progress.split_marker(marker) == ("", (34.7, "sft: step 243/700"))
    assert progress.split_marker(" 35%|███▍ | 243/700 [03:00<05:40]" + marker) == (
        " 35%|███▍ | 243/700 [03:00<05:40]", (34.7, "sft: step 243/700"))
    assert progress.split_marker("plain output") == ("plain output", None)
    broken = progress.MARKER + "{not json"
    assert progress.split_marker(broken) == (broken, None)
