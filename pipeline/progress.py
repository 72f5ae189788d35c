"""Progress reporting that works with or without an orchestrator.

Stage code calls `report(done, total, message)`; by default it only logs. The Prefect
layer (tasks/) installs a sink that updates a progress artifact. Keeping the hook here
lets stages stay free of Prefect imports (STYLE rule 1).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar

log = logging.getLogger(__name__)

ProgressSink = Callable[[float, str], None]  # (percent 0-100, message)
_sink: ContextVar[ProgressSink | None] = ContextVar("progress_sink", default=None)


def set_sink(sink: ProgressSink | None) -> None:
    _sink.set(sink)


def report(done: int, total: int, message: str = "") -> None:
    percent = 100.0 * done / max(total, 1)
    sink = _sink.get()
    if sink is not None:
        sink(percent, message)
    else:
        log.debug("progress %.1f%% %s", percent, message)
