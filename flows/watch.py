"""Watch a pipeline run from the terminal: a line per stage with its state, a progress bar,
elapsed time and ETA, read from the Prefect API (issue 24).

    python -m flows.watch                                  # the latest rstar-full run
    python -m flows.watch 0f3c…                            # a flow run by id (or by name)
    python -m flows.watch --start rstar-full/tiny --params '{"until": "sft"}'   # start one, then watch

A stage's state is its task run's (the stage task is named after the stage, in the flow run
or in a `rstar-stage` run the flow sent to another work pool); its progress is the stage's
progress artifact. There is no timeout: it watches until the run ends, then prints the table
once more and where to look. Ctrl-C stops the watching only; the run goes on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterTaskRunId,
    ArtifactFilterType,
    FlowFilter,
    FlowFilterName,
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterName,
    FlowRunFilterParentFlowRunId,
)
from prefect.client.schemas.objects import FlowRun
from prefect.client.schemas.sorting import FlowRunSort
from rich.console import Console
from rich.live import Live
from rich.table import Table

from orchestrator.stages import STAGES

FLOW_NAME = "rstar-full"
REFRESH_S = 2.0


@dataclass
class StageLine:
    name: str
    state: str = "not started"
    progress: float = 0.0  # percent
    started: datetime | None = None
    ended: datetime | None = None

    def elapsed_s(self, now: datetime) -> float | None:
        if self.started is None:
            return None
        return ((self.ended or now) - self.started).total_seconds()

    def eta_s(self, now: datetime) -> float | None:
        """Time left at the rate so far; None before any progress or once ended."""
        elapsed = self.elapsed_s(now)
        if elapsed is None or self.ended is not None or not 0 < self.progress < 100:
            return None
        return elapsed * (100 - self.progress) / self.progress


def flow_run_of(client: SyncPrefectClient, ref: str | None) -> FlowRun:
    """The flow run named by id or name, or the latest run of `rstar-full`."""
    if ref:
        try:
            return client.read_flow_run(UUID(ref))
        except ValueError:
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[ref])), limit=1)
    else:
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[FLOW_NAME])),
                                     sort=FlowRunSort.START_TIME_DESC, limit=1)
    if not runs:
        where = os.environ.get("PREFECT_API_URL", "the Prefect API")
        raise SystemExit(f"no flow run {ref!r} on {where}" if ref else f"no {FLOW_NAME} flow run on {where}")
    return runs[0]


def snapshot(client: SyncPrefectClient, flow_run_id: UUID, stages: list[str]) -> list[StageLine]:
    """Every stage's line, in table order, from the flow run and the stage runs it started."""
    ids = [flow_run_id] + [r.id for r in client.read_flow_runs(
        flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id])))]
    task_runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=ids)))
    lines = {name: StageLine(name) for name in stages}
    by_id = {}
    for t in sorted(task_runs, key=lambda t: t.created or datetime.min.replace(tzinfo=UTC)):
        if t.name in lines:  # the latest task run of a stage wins (a retry)
            line = lines[t.name]
            line.state = t.state.name if t.state else "Pending"
            line.started, line.ended = t.start_time, t.end_time
            if t.state and t.state.is_completed():
                line.progress = 100.0
            by_id[t.id] = line
    if by_id:
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            task_run_id=ArtifactFilterTaskRunId(any_=list(by_id)), type=ArtifactFilterType(any_=["progress"])))
        for a in artifacts:
            line = by_id.get(a.task_run_id)
            if line is not None and isinstance(a.data, int | float) and line.ended is None:
                line.progress = float(a.data)
    return list(lines.values())


def _clock(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return ""
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def _bar(percent: float, width: int = 20) -> str:
    filled = int(round(width * min(max(percent, 0.0), 100.0) / 100))
    return "█" * filled + "·" * (width - filled)


STYLE = {"Completed": "green", "Cached": "green", "Running": "cyan", "Failed": "red", "Crashed": "red",
         "Cancelled": "yellow", "Cancelling": "yellow"}


def table(run: FlowRun, lines: list[StageLine], now: datetime) -> Table:
    state = run.state.name if run.state else "unknown"
    t = Table(title=f"{run.name} ({run.id}): {state}", title_justify="left")
    for column in ("stage", "state", "progress", "elapsed", "ETA"):
        t.add_column(column, justify="right" if column in ("elapsed", "ETA") else "left")
    for line in lines:
        style = STYLE.get(line.state, "dim" if line.state == "not started" else "")
        t.add_row(line.name, f"[{style}]{line.state}[/]" if style else line.state,
                  f"{_bar(line.progress)} {line.progress:5.1f}%", _clock(line.elapsed_s(now)), _clock(line.eta_s(now)))
    return t


def plain_line(line: StageLine, now: datetime) -> str:
    eta = _clock(line.eta_s(now))
    return (f"{line.name:<16} {line.state:<12} {line.progress:5.1f}%  elapsed {_clock(line.elapsed_s(now)) or '-'}"
            + (f"  ETA {eta}" if eta else ""))


def watch(ref: str | None = None, console: Console | None = None, refresh_s: float = REFRESH_S,
          stages: list[str] | None = None) -> FlowRun:
    """Follow one flow run to its end; returns it in its final state."""
    console = console or Console()
    stages = stages or [s.name for s in STAGES]
    with get_client(sync_client=True) as client:
        run = flow_run_of(client, ref)
        try:
            if console.is_terminal:
                with Live(console=console, refresh_per_second=4, transient=False) as live:
                    while True:
                        run = client.read_flow_run(run.id)
                        live.update(table(run, snapshot(client, run.id, stages), _now()))
                        if run.state is not None and run.state.is_final():
                            break
                        time.sleep(refresh_s)
            else:  # a log file or CI: one line per change, no redrawing
                seen: dict[str, tuple[str, int]] = {}
                while True:
                    run = client.read_flow_run(run.id)
                    now, lines = _now(), snapshot(client, run.id, stages)
                    for line in lines:
                        mark = (line.state, int(line.progress // 10))
                        if seen.get(line.name, ("not started", 0)) != mark:
                            seen[line.name] = mark
                            console.print(plain_line(line, now), highlight=False)
                    if run.state is not None and run.state.is_final():
                        console.print(table(run, lines, now))
                        break
                    time.sleep(refresh_s)
        except KeyboardInterrupt:
            console.print(
                f"\nStopped watching; the run goes on. Look again: python -m flows.watch {run.id}\n"
                f"Stop it: prefect flow-run cancel {run.id}. After a failure or a cancel, start the same "
                "deployment again: finished stages are cache hits and a killed stage resumes from its checkpoint.")
            raise SystemExit(130) from None
    _where(console, run)
    return run


def _where(console: Console, run: FlowRun) -> None:
    state = run.state.name if run.state else "unknown"
    ui = os.environ.get("PREFECT_UI_URL")
    console.print(f"\nflow run {run.name}: {state}" + (f" ({run.state.message})" if run.state and run.state.message
                                                         and not run.state.is_completed() else ""), soft_wrap=True)
    if ui:
        console.print(f"Prefect UI:  {ui}/runs/flow-run/{run.id}  (artifacts: cards, curves, plots per stage)",
                      soft_wrap=True)
    config = (run.parameters or {}).get("config")
    if config:
        console.print(f"Stage table: python -m orchestrator.status --config {config}", soft_wrap=True)


def _now() -> datetime:
    return datetime.now(UTC)


def start(deployment: str, params: dict) -> str:
    """Start a run of `deployment` (FLOW/DEPLOYMENT) and return its id, without waiting."""
    from prefect.deployments import run_deployment

    return str(run_deployment(deployment, parameters=params, timeout=0).id)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m flows.watch", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", nargs="?", help="flow run id or name (default: the latest rstar-full run)")
    parser.add_argument("--start", metavar="FLOW/DEPLOYMENT", help="start a run of this deployment, then watch it")
    parser.add_argument("--params", default="{}", help="JSON parameters for --start")
    args = parser.parse_args()
    ref = start(args.start, json.loads(args.params)) if args.start else args.run
    run = watch(ref)
    sys.exit(0 if run.state is not None and run.state.is_completed() else 1)


if __name__ == "__main__":
    main()
