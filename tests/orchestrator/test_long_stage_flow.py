"""A long stage through the real flow and task, under a temporary Prefect server: its
log lines reach the run logs, its error text the task's failure message, and cancelling
the flow run (`prefect flow-run cancel`, or the SIGTERM a worker sends) leaves no
process of it alive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName, LogFilter, LogFilterFlowRunId
from prefect.settings import PREFECT_API_URL
from test_launcher import survivors, wait_until
from toy_long_flow import long_flow

TOY_DIR = Path(__file__).resolve().parent
REPO = TOY_DIR.parents[1]


@pytest.fixture(autouse=True)
def _server(prefect_server):  # tests/orchestrator/conftest.py: one server for the session
    return prefect_server


@pytest.fixture(autouse=True)
def toy_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TOY_DIR), os.environ.get("PYTHONPATH", "")]))


def flow_run_named(tag: str):
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[tag])))
    return runs[0] if runs else None


def test_log_lines_and_error_text_reach_prefect(tmp_path, monkeypatch):
    tag = f"ok-{uuid.uuid4().hex[:8]}"
    state = long_flow(str(tmp_path / "store"), tag, return_state=True)
    assert state.is_completed(), state.message
    run_id = state.state_details.flow_run_id

    def logged() -> list[str]:
        with get_client(sync_client=True) as client:
            logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))
        return [entry.message for entry in logs]

    assert wait_until(lambda: "toy-long: a line on stderr" in logged(), 30), logged()
    assert "toy-long: started, writing to stdout" in logged()

    monkeypatch.setenv("RSTAR_TOY_FAIL", "toy failure 8472")
    state = long_flow(str(tmp_path / "store2"), f"fail-{uuid.uuid4().hex[:8]}", return_state=True)
    assert state.is_failed()
    with get_client(sync_client=True) as client:
        task_runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id={"any_": [state.state_details.flow_run_id]}))
    (task_run,) = [t for t in task_runs if t.name == "long"]
    assert task_run.state.is_failed() and "RuntimeError: toy failure 8472" in task_run.state.message


def test_prefect_flow_run_cancel_stops_every_process(tmp_path, monkeypatch):
    monkeypatch.setenv("RSTAR_TOY_SPAWN", str(tmp_path))
    tag = f"cancel-{uuid.uuid4().hex[:8]}"
    states: list = []
    runner = threading.Thread(target=lambda: states.append(long_flow(str(tmp_path / "store"), tag,
                                                                      return_state=True)))
    runner.start()
    try:
        assert wait_until((tmp_path / "pids.json").exists, 90), "toy stage never started"
        assert len(survivors(str(tmp_path))) >= 4  # supervisor, stage, two grandchildren
        run = flow_run_named(tag)
        out = subprocess.run([sys.executable, "-m", "prefect", "flow-run", "cancel", str(run.id)],
                             env={**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()},
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        runner.join(timeout=60)
        assert not runner.is_alive()
        assert wait_until(lambda: not survivors(str(tmp_path)), 15), survivors(str(tmp_path))
        final = flow_run_named(tag).state
        assert final.is_cancelled() and "stage 'long' was cancelled" in final.message, final
    finally:
        for p in survivors(str(tmp_path)):
            p.kill()


_FLOW_PROCESS = """
import sys
sys.path.insert(0, {toy_dir!r})
from toy_long_flow import long_flow
long_flow({root!r}, {tag!r})
"""


def test_sigterm_to_the_flow_run_process_stops_every_process(tmp_path):
    """A process worker cancels a flow run by SIGTERM to its process (then SIGKILL): the
    flow engine turns it into an exception in the task, and the launcher stops the tree."""
    tag = f"sigterm-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "RSTAR_TOY_SPAWN": str(tmp_path), "PREFECT_API_URL": PREFECT_API_URL.value()}
    code = _FLOW_PROCESS.format(toy_dir=str(TOY_DIR), root=str(tmp_path / "store"), tag=tag)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env)
    try:
        assert wait_until((tmp_path / "pids.json").exists, 120), "toy stage never started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) != 0
        assert wait_until(lambda: not survivors(str(tmp_path)), 15), survivors(str(tmp_path))
    finally:
        proc.kill()
        for p in survivors(str(tmp_path)):
            p.kill()


@flow(name="toy-progress")
def progress_flow() -> str:
    from prefect.artifacts import create_progress_artifact, update_progress_artifact

    from stagekit import progress

    artifact_id = create_progress_artifact(progress=0.0, key="toy-progress")
    with progress.publishing(lambda pct, _msg: update_progress_artifact(artifact_id, progress=pct), 0.1):
        progress.report(1, 2)
    return str(artifact_id)


def test_progress_reaches_prefect_from_the_publisher_thread():
    """`publishing` calls the Prefect API from its own thread: the update must land."""
    artifact_id = progress_flow()
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterId

    with get_client(sync_client=True) as client:  # by id: other tests' artifacts can fill a page
        artifact = client.read_artifacts(artifact_filter=ArtifactFilter(id=ArtifactFilterId(any_=[artifact_id])))
    assert [a.data for a in artifact] == [50.0]


@pytest.mark.slow
def test_cancel_through_a_process_worker_stops_every_process(tmp_path):
    """The deployment path: a process worker runs the flow; `prefect flow-run cancel`
    makes the worker SIGTERM (then SIGKILL) the flow-run process."""
    import asyncio

    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.deployments import run_deployment
    from prefect.flows import Flow

    async def make_pool() -> None:
        async with get_client() as client:
            await client.create_work_pool(WorkPoolCreate(name="long-pool", type="process"), overwrite=True)

    asyncio.run(make_pool())
    Flow.from_source(source=str(REPO), entrypoint="tests/orchestrator/toy_long_flow.py:long_flow").deploy(
        name="long", work_pool_name="long-pool", print_next_steps=False, ignore_warnings=True)
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_WORKER_QUERY_SECONDS": "1",
           "PREFECT_HOME": str(tmp_path / "home"), "RSTAR_TOY_SPAWN": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(REPO), str(TOY_DIR)])}
    log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 (closed with the process)
    worker = subprocess.Popen([sys.executable, "-m", "prefect", "worker", "start", "--pool", "long-pool"],
                              env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    tag = f"worker-{uuid.uuid4().hex[:8]}"
    try:
        run = run_deployment("toy-long/long", timeout=0, parameters={"root": str(tmp_path / "store"), "tag": tag})
        assert wait_until((tmp_path / "pids.json").exists, 180), (tmp_path / "worker.log").read_text()[-3000:]
        out = subprocess.run([sys.executable, "-m", "prefect", "flow-run", "cancel", str(run.id)], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        assert wait_until(lambda: flow_run_named(tag).state.is_final(), 120), flow_run_named(tag).state
        assert wait_until(lambda: not survivors(str(tmp_path)), 30), survivors(str(tmp_path))
        assert flow_run_named(tag).state.is_cancelled()
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        for p in survivors(str(tmp_path)):
            p.kill()
