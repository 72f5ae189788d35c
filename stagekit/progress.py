"""Progress reporting that works with or without an orchestrator, and never slows the work.

Stage code calls `report(done, total, message)`. Inside `with step(i, n):` the same call
moves only the i-th of n slices of the enclosing range, so nested loops (stage -> step
-> rollout batch) give one bar that never jumps back to 0 % on each batch.

Where the numbers go is a sink installed by the caller: the Prefect task (tasks/) updates
a progress artifact, `python -m <stage>` draws a tqdm bar, a launched child prints
marker lines its parent reads (orchestrator/launcher.py). Slow sinks go through `publishing`:
`report` then only stores the latest value, and a background thread publishes it at
most once per interval, so an HTTP call never runs on a rollout's event loop. Keeping
the hook here lets stages stay free of Prefect imports (STYLE rule 1).
"""

from __future__ import annotations

import contextvars
import json
import logging
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO

log = logging.getLogger(__name__)

ProgressSink = Callable[[float, str], None]  # (percent 0-100 of the whole stage, message)
MARKER = "@@rstar-progress "  # a line a launched child prints; its parent turns it back into report()

_sink: ContextVar[ProgressSink | None] = ContextVar("progress_sink", default=None)
_span: ContextVar[tuple[float, float]] = ContextVar("progress_span", default=(0.0, 1.0))  # fractions


def set_sink(sink: ProgressSink | None) -> None:
    """Install `sink`, called synchronously on every report: for cheap callables only
    (wrap anything that does I/O with `publishing`)."""
    _sink.set(sink)


def report(done: float, total: float, message: str = "") -> None:
    lo, hi = _span.get()
    fraction = min(max(done / (total if total > 0 else 1), 0.0), 1.0)
    percent = 100.0 * (lo + (hi - lo) * fraction)
    sink = _sink.get()
    if sink is not None:
        sink(percent, message)
    else:
        log.debug("progress %.1f%% %s", percent, message)


@contextmanager
def step(index: int, count: int, message: str = "") -> Iterator[None]:
    """Scope the reports inside to slice `index` of `count` of the enclosing range."""
    with share(index / max(count, 1), (index + 1) / max(count, 1), message):
        yield


@contextmanager
def share(start: float, end: float, message: str = "") -> Iterator[None]:
    """Scope the reports inside to the fractions `start`..`end` of the enclosing range: a stage
    of unequal phases (SFT: a held-out check, training, the check again) gives each its weight."""
    lo, hi = _span.get()
    token = _span.set((lo + (hi - lo) * start, lo + (hi - lo) * end))
    report(0, 1, message)
    try:
        yield
        report(1, 1, message)
    finally:
        _span.reset(token)


class Throttled:
    """A sink that keeps only the latest value and publishes it from its own thread, at
    most once per `interval_s`; `close()` publishes the last value and stops."""

    def __init__(self, publish: ProgressSink, interval_s: float = 1.0):
        self._publish, self._interval_s = publish, interval_s
        self._latest: tuple[float, str] | None = None
        self._closed = False
        self._cond = threading.Condition()
        self._failures = 0
        # The thread runs in a copy of the caller's context, so a publisher that reads
        # context variables (Prefect's settings and run context do) sees the caller's.
        ctx = contextvars.copy_context()
        self._thread = threading.Thread(target=ctx.run, args=(self._loop,), name="progress", daemon=True)
        self._thread.start()

    def __call__(self, percent: float, message: str) -> None:
        with self._cond:
            self._latest = (percent, message)
            self._cond.notify()

    def _loop(self) -> None:
        last = -float("inf")
        while True:
            with self._cond:
                while self._latest is None and not self._closed:
                    self._cond.wait()
                if self._latest is None:
                    return
                wait = last + self._interval_s - time.monotonic()
                if wait > 0 and not self._closed:
                    self._cond.wait(wait)
                    continue
                item, self._latest = self._latest, None
            try:
                self._publish(*item)
            except Exception as e:  # a progress backend being down must never fail the stage
                self._failures += 1
                if self._failures == 1:
                    log.warning("progress update failed (%s); later failures are not logged", e)
            last = time.monotonic()

    def close(self, timeout_s: float = 10.0) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout_s)


@contextmanager
def publishing(publish: ProgressSink, interval_s: float = 1.0) -> Iterator[None]:
    """Route `report` to `publish`, throttled and off the caller's thread, for the block."""
    sink = Throttled(publish, interval_s)
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)
        sink.close()


@contextmanager
def terminal_bar(desc: str, file: IO[str] | None = None, disable: bool | None = None) -> Iterator[None]:
    """A tqdm bar for a stage run as a plain module (`disable=None`: only on a terminal)."""
    from tqdm import tqdm

    # A pty that reports no size (`script`, some CI runners) makes tqdm draw nothing.
    size = shutil.get_terminal_size((100, 20))
    bar = tqdm(total=100.0, desc=desc, file=file or sys.stderr, disable=disable,
               ncols=size.columns if size.columns > 0 else 100, nrows=size.lines if size.lines > 1 else 20,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed} {postfix}")

    def draw(percent: float, message: str) -> None:
        bar.n = percent
        bar.set_postfix_str(message, refresh=False)
        bar.refresh()

    try:
        with publishing(draw, interval_s=0.2):
            yield
    finally:
        bar.close()


@contextmanager
def marker_lines(file: IO[str] | None = None, interval_s: float = 0.5) -> Iterator[None]:
    """Print progress as marker lines on stdout for a parent process to read."""
    out = file or sys.stdout

    def emit(percent: float, message: str) -> None:
        out.write(MARKER + json.dumps({"percent": round(percent, 3), "message": message}) + "\n")
        out.flush()

    with publishing(emit, interval_s):
        yield


def split_marker(line: str) -> tuple[str, tuple[float, str] | None]:
    """(text before the marker, (percent, message)) if `line` carries a progress marker, else (line, None).

    The marker can follow text that another writer left without a newline on the same pipe
    (a tqdm bar redrawn with carriage returns on the child's stderr), so it is looked for
    anywhere in the line, not only at its start."""
    at = line.rfind(MARKER)
    if at < 0:
        return line, None
    try:
        data = json.loads(line[at + len(MARKER):])
        return line[:at], (float(data["percent"]), str(data.get("message", "")))
    except (ValueError, KeyError, TypeError):
        return line, None
