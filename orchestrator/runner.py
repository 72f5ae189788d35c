"""Run one stage through the artifact store, with or without Prefect (SPEC §1).

`run_stage` is what both `python -m <stage module>` and the Prefect tasks call: it
computes the stage key, returns the committed artifact when there is one (unless
forced), else runs the stage's `run()` into a staging directory and commits it.

A stage whose `run()` takes `work` gets its persistent work directory (stagekit/workdir.py)
and writes its output there, so a rerun resumes from its checkpoints. Under a
multi-process launch (`accelerate launch`, torchrun: RANK/WORLD_SIZE set) every rank runs
`run()` and only rank 0 commits; ranks share the work dir's output directory, and a stage
that writes from several ranks waits for them (a barrier) before returning.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

from configs.schema import PipelineConfig
from orchestrator.card import stage_card
from orchestrator.keys import check_key, digest_json, key_payload, stage_key
from orchestrator.stages import BY_NAME, STAGES, StageSpec
from orchestrator.store import ArtifactRef, ArtifactStore
from stagekit import artifacts
from stagekit.workdir import WorkDir

LAUNCHED_ENV = "RSTAR_LAUNCHED"  # set by orchestrator/launcher.py: it owns the work dir's attempt

log = logging.getLogger(__name__)


class StageNotImplementedError(RuntimeError):
    pass


class MissingUpstreamError(RuntimeError):
    pass


def ensure_implemented(spec: StageSpec) -> None:
    if not spec.implemented:
        raise StageNotImplementedError(
            f"stage {spec.name!r} ({spec.module}) is not implemented yet; it is delivered by "
            f"{spec.delivered_by}. Stages implemented so far: "
            f"{', '.join(s.name for s in STAGES if s.implemented)}."
        )


def resolve_upstream(
    spec: StageSpec, cfg: PipelineConfig, store: ArtifactStore, registry: Mapping[str, StageSpec] | None = None
) -> dict[str, ArtifactRef]:
    """The recorded artifacts this stage consumes for this config, without running anything."""
    registry = registry or BY_NAME
    refs: dict[str, ArtifactRef] = {}
    for name in spec.upstream:
        up = registry[name]
        key = stage_key(up, cfg, resolve_upstream(up, cfg, store, registry))
        ref = store.lookup(name, key)
        if ref is None:
            raise MissingUpstreamError(
                f"stage {spec.name!r} needs the artifact of upstream stage {name!r} for this config "
                f"(key {key}), but the store at {store.root} has none. Run the pipeline up to "
                f"{name!r} first (e.g. without `only`); nothing is recomputed implicitly."
            )
        refs[name] = ref
    return refs


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def rank() -> tuple[int, int]:
    """(this process's rank, world size) under torchrun/accelerate; (0, 1) otherwise."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def run_stage(
    spec: StageSpec,
    cfg: PipelineConfig,
    upstream: dict[str, ArtifactRef],
    store: ArtifactStore,
    force: bool = False,
    expected_key: str | None = None,
) -> ArtifactRef | None:
    """The stage's artifact: the cached one, or a fresh one. None on ranks other than 0.
    `expected_key`: the key the process that started this one computed (keys.check_key)."""
    ensure_implemented(spec)
    payload = key_payload(spec, cfg, upstream)  # hashes local input files once per run
    key = digest_json(payload, 32)
    check_key(spec.name, key, expected_key)
    if not force and (ref := store.lookup(spec.name, key)) is not None:
        log.info("stage %s: cache hit %s", spec.name, ref.uri)
        return ref
    module = importlib.import_module(spec.module)
    kwargs = spec.select(cfg)
    inputs: dict[str, Path] = {role: store.local_path(upstream[stage]) for role, stage in spec.inputs.items()}
    started = time.time()
    this_rank, world = rank()
    launched = os.environ.get(LAUNCHED_ENV) == "1"

    def commit(out_dir: Path, metrics: dict) -> ArtifactRef:
        manifest = {
            "config": payload["sections"],
            "config_hash": digest_json(payload["sections"], 16),
            "inputs": payload["upstream"],
            "input_files": payload["files"],
            "code_version": payload["code_version"],
            "code": payload["code"],
            "datasets": payload["datasets"],
            "git_commit": _git_commit(),
            "duration_s": round(time.time() - started, 3),
            "metrics": metrics,
        }
        if not (out_dir / artifacts.CARD).exists():  # every artifact has a card (orchestrator/card.py)
            (out_dir / artifacts.CARD).write_text(stage_card(spec.name, key, manifest, out_dir))
        return store.commit(out_dir, spec.name, key, manifest)

    uses_work = "work" in inspect.signature(module.run).parameters
    work = WorkDir(store.work_root, spec.name, key)

    def attempt() -> ArtifactRef | None:
        if uses_work:
            return _run_in_work(module, kwargs, inputs, work, this_rank, commit)
        with store.staging() as tmp:
            metrics = module.run(**kwargs, inputs=inputs, out_dir=tmp) or {}
            return commit(tmp, metrics) if this_rank == 0 else None

    if launched or world > 1:  # the launcher (or whoever started the ranks) owns the attempt and its lock
        ref = attempt()
    else:
        # Two runs of the same stage and key at once: the second waits for the first and takes its artifact.
        with work.lock(wait=True):
            if not force and (ref := store.lookup(spec.name, key)) is not None:
                log.info("stage %s: computed by another run while this one waited: %s", spec.name, ref.uri)
                return ref
            if uses_work:
                work.start_attempt()
            ref = attempt()
            work.remove()  # committed: checkpoints (and the lock's directory) are no longer needed
    if ref is not None:
        log.info("stage %s: wrote %s", spec.name, ref.uri)
    return ref


def _run_in_work(module: ModuleType, kwargs: dict, inputs: dict[str, Path], work: WorkDir, this_rank: int,
                 commit: Callable[[Path, dict], ArtifactRef]) -> ArtifactRef | None:
    work.out_dir.mkdir(parents=True, exist_ok=True)  # ranks started by hand: nobody emptied it for them
    if (ckpt := work.latest()) is not None:
        log.info("stage %s: resuming from checkpoint step %d in %s", work.stage, ckpt.step, work.path)
    metrics = module.run(**kwargs, inputs=inputs, out_dir=work.out_dir, work=work) or {}
    if this_rank != 0:
        return None
    work.finish()
    return commit(work.out_dir, metrics)
