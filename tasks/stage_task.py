"""The one Prefect task every stage runs through (SPEC §1, §10).

A stage declared `long_running` runs as a watched child process (orchestrator/launcher.py):
its output lines go to this task's run logs, its progress to the `<stage>-progress`
artifact, and cancelling the flow run stops its whole process tree. Other stages run in
this process. Progress updates leave through a background thread, at most once per
`PROGRESS_INTERVAL_S`, never on the stage's own (event-loop) thread.

It returns the small `ArtifactRef` as JSON; its cache policy lives in tasks/cache.py.
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

from prefect import get_run_logger, task
from prefect.artifacts import (
    create_image_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.client.orchestration import get_client
from prefect.context import get_run_context
from prefect.states import Cancelled

from configs.schema import PipelineConfig
from orchestrator.launcher import LaunchHooks, StageCancelledError, launch_stage, thread_env
from orchestrator.runner import run_stage
from orchestrator.stages import StageSpec
from orchestrator.store import ArtifactRef, ArtifactStore
from stagekit import artifacts, progress
from tasks.summaries import artifact_key, csv_table, image_data_url, manifest_markdown

PROGRESS_INTERVAL_S = 1.0


@task(name="stage", persist_result=True, retries=0)
def run_stage_task(
    spec: StageSpec, key: str, config: dict, upstream: dict[str, dict], force: bool = False,
    threads: int | None = None,
) -> dict:
    """Run (or reuse) one stage; `key` is only there to drive the cache policy. A long stage's
    processes get `threads` CPU threads between them (OMP_NUM_THREADS)."""
    cfg = PipelineConfig.model_validate(config)
    store = ArtifactStore(cfg.run.artifacts_root)
    stage = spec.name
    progress_id = create_progress_artifact(progress=0.0, key=artifact_key(stage, "progress"))
    ups = {name: ArtifactRef.model_validate(r) for name, r in upstream.items()}
    with progress.publishing(lambda pct, _msg: update_progress_artifact(progress_id, progress=pct),
                             PROGRESS_INTERVAL_S):
        if spec.long_running:
            ref = _launch(spec, cfg, ups, store, force, threads)
        else:
            ref = run_stage(spec, cfg, ups, store, force=force)
    update_progress_artifact(progress_id, progress=100.0)
    local = store.local_path(ref)
    create_markdown_artifact(
        key=artifact_key(stage, "manifest"), markdown=manifest_markdown(store.manifest(ref)),
        description=f"{stage}: manifest and metrics",
    )
    if (local / artifacts.CARD).exists():
        create_markdown_artifact(key=artifact_key(stage, "card"), markdown=(local / artifacts.CARD).read_text())
    _figures(stage, local)
    return ref.model_dump()


def _figures(stage: str, local: Path) -> None:
    """The artifact's top-level plots and curve tables, where a person looks for them."""
    for png in sorted(local.glob("*.png")):
        create_image_artifact(image_url=image_data_url(png), key=artifact_key(stage, png.stem),
                              description=f"{stage}: {png.name}")
    for table in sorted(local.glob("curves*.csv")):
        create_table_artifact(table=csv_table(table), key=artifact_key(stage, f"{table.stem}-table"),
                              description=f"{stage}: {table.name} (at most 200 rows, evenly spaced)")


def _launch(spec: StageSpec, cfg: PipelineConfig, ups: dict[str, ArtifactRef], store: ArtifactStore,
            force: bool, threads: int | None) -> ArtifactRef:
    """Child output to this task's run logs; stop when this flow run (or a flow run it is
    a subflow of) is being cancelled. A worker also SIGTERMs the flow-run process on
    cancel, which reaches the launcher as the stage graph's interrupt
    (orchestrator/graph.py); polling covers runs no worker owns,
    which nobody else would move on from Cancelling, so this task marks them Cancelled."""
    flow_run_id = get_run_context().task_run.flow_run_id
    hooks = LaunchHooks(on_line=get_run_logger().info, should_cancel=lambda: bool(_cancelling(flow_run_id)))
    try:
        return launch_stage(spec, cfg, ups, store, force=force, hooks=hooks, env=thread_env(spec, cfg, threads))
    except StageCancelledError as e:
        with get_client(sync_client=True) as client:
            for run_id in _cancelling(flow_run_id):
                client.set_flow_run_state(run_id, Cancelled(message=str(e)), force=True)
        raise


def _cancelling(flow_run_id: UUID | None, depth: int = 3) -> list[UUID]:
    """This flow run and its parents (up to `depth`) that are being cancelled."""
    found = []
    with get_client(sync_client=True) as client:
        while flow_run_id is not None and depth > 0:
            run = client.read_flow_run(flow_run_id)
            if run.state is not None and run.state.is_cancelling():
                found.append(run.id)
            parent = client.read_task_run(run.parent_task_run_id) if run.parent_task_run_id else None
            flow_run_id, depth = (parent.flow_run_id if parent else None), depth - 1
    return found
