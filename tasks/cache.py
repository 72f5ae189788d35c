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

from configs.schema import RunConfig
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
