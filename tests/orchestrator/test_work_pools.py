"""A stage assigned to another work pool runs on that pool's worker (issue 8, SPEC §10).

Two process work pools with a worker each, under a temporary Prefect server: the toy
pipeline is deployed on pool A, `rstar-stage` on pool B; stage `b` is assigned to B.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from prefect import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
from prefect.deployments import run_deployment

from stagekit.paths import REPO_ROOT

HERE = Path(__file__).resolve().parent


def _worker(pool: str, label: str, api_url: str, log: Path, tmp: Path) -> subprocess.Popen:
    env = {**os.environ, "PREFECT_API_URL": api_url, "PREFECT_WORKER_QUERY_SECONDS": "1",
           "PREFECT_HOME": str(tmp / f"home-{label}"), "RSTAR_TOY_LOG": str(log), "RSTAR_TOY_WORKER": label,
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(HERE)])}
    out = open(tmp / f"worker-{label}.log", "w")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen([sys.executable, "-m", "prefect", "worker", "start", "--pool", pool, "--type", "process"],
                            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT, start_new_session=True)


async def _setup_pools() -> None:
    async with get_client() as client:
        for pool in ("pool-a", "pool-b"):
            await client.create_work_pool(WorkPoolCreate(name=pool, type="process"), overwrite=True)


def _deploy(entrypoint: str, name: str, pool: str) -> None:
    from prefect import Flow

    Flow.from_source(source=str(REPO_ROOT), entrypoint=entrypoint).deploy(
        name=name, work_pool_name=pool, print_next_steps=False, ignore_warnings=True)


def test_stage_on_another_pool_runs_there_and_feeds_downstream(prefect_server, tmp_path):
    server = prefect_server
    import asyncio

    asyncio.run(_setup_pools())
    _deploy("tests/orchestrator/toy_flows.py:toy_pool_flow", "pool-a", "pool-a")
    _deploy("flows/rstar_stage.py:rstar_stage", "pool-b", "pool-b")
    log = tmp_path / "runs.log"
    workers = [_worker("pool-a", "A", server, log, tmp_path), _worker("pool-b", "B", server, log, tmp_path)]
    try:
        root = str(tmp_path / "store")
        parent = run_deployment("toy-pool-pipeline/pool-a", timeout=240, poll_interval=1,
                                parameters={"root": root, "work_pools": {"b": "pool-b"}})
        worker_logs = "".join(p.read_text()[-3000:] for p in tmp_path.glob("worker-*.log"))
        assert parent.state is not None and parent.state.is_completed(), worker_logs
    finally:
        for w in workers:
            os.killpg(w.pid, 15)
            w.wait(timeout=30)
    assert log.read_text().split() == ["a@A", "b@B", "c@A"]
    # c consumed b's artifact, which pool B's worker wrote into the shared store.
    c_value = json.loads(next(Path(root, "c").glob("*/value.json")).read_text())
    assert c_value["upstream"]["b"]["name"] == "b"

    async def children():
        async with get_client() as client:
            runs = await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[parent.id])))
            return [(r.name, r.work_pool_name) for r in runs]

    assert asyncio.run(children()) == [("b", "pool-b")]  # the UI shows it nested under the pipeline run
