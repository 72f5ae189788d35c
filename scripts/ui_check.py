"""Screenshot the latest `rstar-full` flow-run page in headless Chromium and check that
every stage that ran shows in the UI: the flow-run page, then each task run's own page
(the flow-run page lists logs a page at a time, so late stages can be past its first page).
When the run got to `eval_report`, the checkpoint comparison table must render on its
artifact page too.

    make screenshot            # needs the demo's server running and Debian `chromium`
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowFilter, FlowFilterName
from prefect.client.schemas.sorting import FlowRunSort

CHROMIUM_FLAGS = [  # NOTES.md: what headless Chromium needs as root, offline
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1600,1300", "--virtual-time-budget=20000",
]


async def latest_run() -> tuple[str, dict[str, str]]:
    async with get_client() as client:
        runs = await client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["rstar-full"])), sort=FlowRunSort.START_TIME_DESC, limit=1
        )
        if not runs:
            raise SystemExit("no rstar-full flow run found: run `make demo` first")
        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

        tasks = await client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[runs[0].id])))
        return str(runs[0].id), {str(t.id): t.name for t in sorted(tasks, key=lambda t: t.name)}


async def comparison_artifact() -> str | None:
    """Id of the latest checkpoint-comparison card, if an evaluation report was made."""
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    async with get_client() as client:
        wanted = ArtifactFilter(key=ArtifactFilterKey(any_=["eval-report-card"]))
        found = await client.read_artifacts(artifact_filter=wanted, limit=1)
        return str(found[0].id) if found else None


def chromium(args: list[str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/flow-run.png")
    out.parent.mkdir(parents=True, exist_ok=True)
    run_id, tasks = asyncio.run(latest_run())
    ui = os.environ["PREFECT_UI_URL"]
    url = f"{ui}/runs/flow-run/{run_id}"
    chromium([f"--screenshot={out.resolve()}", url])
    dom = chromium(["--dump-dom", url]).stdout
    missing = [name for task_id, name in tasks.items()
               if name not in dom and name not in chromium(["--dump-dom", f"{ui}/runs/task-run/{task_id}"]).stdout]
    print(f"flow run page: {url}\nscreenshot: {out}\ntask runs: {', '.join(tasks.values())}")
    if not out.exists() or missing:
        raise SystemExit(f"UI check failed: screenshot={out.exists()}, stages not on the page: {missing}")
    if (artifact := asyncio.run(comparison_artifact())) is not None:
        page = f"{ui}/artifacts/artifact/{artifact}"
        shot = out.with_name(out.stem + "-comparison.png")
        chromium([f"--screenshot={shot.resolve()}", page])
        if "Checkpoints compared" not in chromium(["--dump-dom", page]).stdout:
            raise SystemExit(f"UI check failed: the checkpoint comparison does not render at {page}")
        print(f"checkpoint comparison: {page}\nscreenshot: {shot}")
    print("UI check passed: every task run of the flow run shows on its page or the flow run's")


if __name__ == "__main__":
    main()
