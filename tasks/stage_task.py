"""The one Prefect task every stage runs through (SPEC §1, §10).

Cache key = the stage key computed by `pipeline.runner.stage_key` (its config sections,
upstream content digests, code version); the result is the small `ArtifactRef` as
JSON. SERIALIZABLE isolation with a file lock makes a second, overlapping run wait for
the first and then take its cached result instead of computing the stage again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact
from prefect.cache_policies import CacheKeyFnPolicy
from prefect.locking.filesystem import FileSystemLockManager

from configs.schema import PipelineConfig
from pipeline import progress
from pipeline.runner import run_stage
from pipeline.stages import StageSpec
from pipeline.store import ArtifactRef, ArtifactStore
from tasks.summaries import artifact_key, manifest_markdown


def _cache_key(_ctx: Any, inputs: dict[str, Any]) -> str:
    return f"{inputs['spec'].name}-{inputs['key']}"


def stage_task_for(state_dir: Path):
    """The stage task with its cache records and locks under `state_dir`."""
    policy = CacheKeyFnPolicy(cache_key_fn=_cache_key).configure(
        key_storage=state_dir / "cache-keys",
        lock_manager=FileSystemLockManager(lock_files_directory=state_dir / "locks"),
        isolation_level="SERIALIZABLE",
    )
    return run_stage_task.with_options(
        cache_policy=policy, result_storage=state_dir / "results", result_serializer="json"
    )


@task(name="stage", persist_result=True, retries=0)
def run_stage_task(
    spec: StageSpec, key: str, config: dict, upstream: dict[str, dict], force: bool = False
) -> dict:
    """Run (or reuse) one stage; `key` is only there to drive the cache policy."""
    cfg = PipelineConfig.model_validate(config)
    store = ArtifactStore(cfg.run.artifacts_root)
    stage = spec.name
    progress_id = create_progress_artifact(progress=0.0, key=artifact_key(stage, "progress"))
    progress.set_sink(lambda pct, _msg: update_progress_artifact(progress_id, progress=pct))
    try:
        ups = {name: ArtifactRef.model_validate(r) for name, r in upstream.items()}
        ref = run_stage(spec, cfg, ups, store, force=force)
    finally:
        progress.set_sink(None)
    update_progress_artifact(progress_id, progress=100.0)
    local = store.local_path(ref)
    create_markdown_artifact(
        key=artifact_key(stage, "manifest"), markdown=manifest_markdown(store.manifest(ref)),
        description=f"{stage}: manifest and metrics",
    )
    if (local / "card.md").exists():
        create_markdown_artifact(key=artifact_key(stage, "card"), markdown=(local / "card.md").read_text())
    return ref.model_dump()
