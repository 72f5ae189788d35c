"""The terminal watcher (flows/watch.py): a line per stage read from the Prefect API while a
flow runs the toy diamond, and the plain lines and closing table it prints for a finished run."""

from __future__ import annotations

import io
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from rich.console import Console
from toy_stages import GRAPH

from configs.load import validate
from flows.rstar_full import run_pipeline
from flows.watch import StageLine, flow_run_of, snapshot, watch

NAMES = [s.name for s in GRAPH]


@pytest.fixture(autouse=True)
def _server(prefect_server):
    return prefect_server


@flow(name="toy-watch", flow_run_name="toy-watch-{tag}")
def toy_watch_flow(root: str, tag: str) -> dict:
    return run_pipeline(validate({"run": {"artifacts_root": root}, "hardware": {"cpu_threads": 2}}, "toy"), GRAPH)


def test_eta_is_the_rate_so_far_and_absent_when_it_cannot_be_told():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    line = StageLine("sft", "Running", 25.0, started=now - timedelta(seconds=10))
    assert line.elapsed_s(now) == 10 and line.eta_s(now) == pytest.approx(30)
    assert StageLine("sft", "Running", 0.0, started=now).eta_s(now) is None
    assert StageLine("sft", "Completed", 100.0, now - timedelta(seconds=5), now).eta_s(now) is None


def test_snapshot_follows_the_stages_of_a_running_flow(tmp_path, monkeypatch):
    monkeypatch.setenv("RSTAR_TOY_LOG", str(tmp_path / "runs.log"))
    monkeypatch.setenv("RSTAR_TOY_EACH_S", "2")
    tag = f"snap{time.time_ns()}"
    runner = threading.Thread(target=toy_watch_flow, args=(str(tmp_path / "store"), tag))
    runner.start()
    seen: list[dict[str, str]] = []
    with get_client(sync_client=True) as client:
        deadline = time.time() + 120
        run = None
        while run is None and time.time() < deadline:
            try:
                run = flow_run_of(client, f"toy-watch-{tag}")
            except SystemExit:
                time.sleep(0.2)
        while runner.is_alive() and time.time() < deadline:
            seen.append({line.name: line.state for line in snapshot(client, run.id, NAMES)})
            time.sleep(0.3)
        runner.join()
        final = snapshot(client, run.id, NAMES)
    busiest = max(seen, key=lambda s: list(s.values()).count("Running"))
    assert busiest["b"] == busiest["c"] == "Running"  # side by side, as the API tells it
    assert any(s["a"] == "Running" and s["d"] == "not started" for s in seen)
    assert [(x.state, x.progress) for x in final] == [("Completed", 100.0)] * 4
    assert all(x.started and x.ended and x.ended >= x.started for x in final)

    out = io.StringIO()  # not a terminal: one line per change, then the table and where to look
    done = watch(f"toy-watch-{tag}", Console(file=out, width=120), refresh_s=0.1, stages=NAMES)
    text = out.getvalue()
    assert done.state.is_completed()
    assert [line.split()[0] for line in text.splitlines()[:4]] == NAMES
    assert "toy-watch-" in text and "Completed" in text and "elapsed" in text
    live = io.StringIO()  # a terminal: the table redrawn in place, ending on the final one
    watch(f"toy-watch-{tag}", Console(file=live, width=120, force_terminal=True), refresh_s=0.1, stages=NAMES)
    assert all(name in live.getvalue() for name in NAMES) and "100.0%" in live.getvalue()
