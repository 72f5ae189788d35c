"""The stage task's cache policy: record key, lock, where records live (SPEC §1, issue 8).

The artifact store's index is the one source of truth for what is cached. A Prefect
cache record only serves the lock and the UI's "Cached" state: the flow keys it by the
stage key *and* the digest the index holds, and refreshes it when the index holds
nothing, so a record can never return an artifact the index does not name.

SERIALIZABLE isolation makes a second, overlapping run wait on the lock for the same
record key and then find the first run's artifact in the index. The lock is a file
lock (one machine, or a shared POSIX filesystem) or Redis (several machines sharing a
remote artifact root): `run.lock_manager`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect.cache_policies import CacheKeyFnPolicy
from prefect.locking.filesystem import FileSystemLockManager
from prefect.locking.protocol import LockManager

from configs.schema import PipelineConfig, RunConfig
from orchestrator.keys import stage_key
from orchestrator.stages import StageSpec
from orchestrator.store import ArtifactRef, ArtifactStore
from stagekit.paths import REPO_ROOT
from tasks.stage_task import run_stage_task


def _cache_key(_ctx: Any, inputs: dict[str, Any]) -> str:
    return f"{inputs['spec'].name}-{inputs['key']}"


def lock_manager(run: RunConfig, state_dir: Path) -> LockManager:
    if run.lock_manager == "redis":
        from prefect_redis.locking import RedisLockManager

        return RedisLockManager(connection_url=run.redis_url)
    return FileSystemLockManager(lock_files_directory=state_dir / "locks")


def stage_task_for(state_dir: Path, run: RunConfig | None = None, locked: bool = True):
    """The stage task with its records under `state_dir`; `locked=False` only for the test
    that shows overlapping runs compute twice without the lock."""
    policy = CacheKeyFnPolicy(cache_key_fn=_cache_key).configure(
        key_storage=state_dir / "cache-keys",
        lock_manager=lock_manager(run or RunConfig(), state_dir) if locked else None,
        isolation_level="SERIALIZABLE" if locked else "READ_COMMITTED",
    )
    return run_stage_task.with_options(
        cache_policy=policy, result_storage=state_dir / "results", result_serializer="json"
    )


def _state_dir(store: ArtifactStore) -> Path:
    return Path(store.root) / "_prefect" if store.is_local else REPO_ROOT / ".rstar" / "prefect-state"


def run_cached(spec: StageSpec, cfg: PipelineConfig, ups: dict[str, ArtifactRef], force: bool,
               threads: int | None = None) -> ArtifactRef:
    """Run (or reuse) one stage through the stage task; the store's index has the last word.
    `threads`: what a long stage's processes run with (None: the environment's setting)."""
    store = ArtifactStore(cfg.run.artifacts_root)
    key = stage_key(spec, cfg, ups)
    # The index decides (tasks/cache.py): a Prefect record is read only when it is keyed by
    # the digest the index holds now; with nothing indexed (or forced) it is refreshed.
    indexed = None if force else store.lookup(spec.name, key)
    record_key = f"{key}-{indexed.digest}" if indexed else key
    task = stage_task_for(_state_dir(store), cfg.run).with_options(name=spec.name, task_run_name=spec.name)
    ref = ArtifactRef.model_validate(task.with_options(refresh_cache=indexed is None)(
        spec=spec, key=record_key, config=cfg.model_dump(mode="json"),
        upstream={n: r.model_dump() for n, r in ups.items()}, force=force, threads=threads,
    ))
    current = store.lookup(spec.name, key)
    if current is None:
        raise RuntimeError(f"stage {spec.name!r} returned {ref.uri}, but the store at {store.root} has no "
                           f"artifact for key {key}: was it deleted during the run?")
    return current  # another run may have forced a recompute meanwhile: the index wins
