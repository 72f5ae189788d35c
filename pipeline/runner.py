"""Run one stage through the artifact store, with or without Prefect (SPEC §1).

`run_stage` is what both `python -m <stage module>` and the Prefect tasks call: it
computes the stage key, returns the committed artifact when there is one (unless
forced), else runs the stage's `run()` into a staging directory and commits it.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel

from configs.schema import PipelineConfig
from pipeline.paths import resolve_local
from pipeline.stages import BY_NAME, STAGES, StageSpec
from pipeline.store import ArtifactRef, ArtifactStore, digest_dir

log = logging.getLogger(__name__)


class StageNotImplementedError(RuntimeError):
    pass


class MissingUpstreamError(RuntimeError):
    pass


def _jsonable(value: object) -> object:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def section_payload(spec: StageSpec, cfg: PipelineConfig) -> dict:
    return {name: _jsonable(v) for name, v in spec.select(cfg).items()}


def local_file_digests(payload: object) -> dict[str, str]:
    """Content digests of local files named by `location` fields: the data a stage reads
    from disk is an input like an upstream artifact (a path string alone would not
    notice an edited file). Hub ids and `synthetic` are not local paths and are skipped."""
    found: dict[str, str] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "location" and isinstance(v, str) and "://" not in v and resolve_local(v).exists():
                    path = resolve_local(v)
                    found[v] = digest_dir(path) if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(payload)
    return found


def _digest(payload: object, chars: int) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:chars]


def key_payload(spec: StageSpec, cfg: PipelineConfig, upstream: dict[str, ArtifactRef]) -> dict:
    """Everything a stage's output depends on; its digest is the stage key."""
    sections = section_payload(spec, cfg)
    return {
        "stage": spec.name,
        "code_version": spec.code_version,
        "sections": sections,
        "upstream": {name: upstream[name].digest for name in spec.upstream},
        "files": local_file_digests(sections),
    }


def stage_key(spec: StageSpec, cfg: PipelineConfig, upstream: dict[str, ArtifactRef]) -> str:
    return _digest(key_payload(spec, cfg, upstream), 32)


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


def run_stage(
    spec: StageSpec,
    cfg: PipelineConfig,
    upstream: dict[str, ArtifactRef],
    store: ArtifactStore,
    force: bool = False,
) -> ArtifactRef:
    ensure_implemented(spec)
    payload = key_payload(spec, cfg, upstream)  # hashes local input files once per run
    key = _digest(payload, 32)
    if not force and (ref := store.lookup(spec.name, key)) is not None:
        log.info("stage %s: cache hit %s", spec.name, ref.uri)
        return ref
    module = importlib.import_module(spec.module)
    kwargs = spec.select(cfg)
    inputs: dict[str, Path] = {name: store.local_path(ref) for name, ref in upstream.items()}
    started = time.time()
    with store.staging() as tmp:
        metrics = module.run(**kwargs, inputs=inputs, out_dir=tmp) or {}
        manifest = {
            "config": payload["sections"],
            "config_hash": _digest(payload["sections"], 16),
            "inputs": payload["upstream"],
            "input_files": payload["files"],
            "code_version": spec.code_version,
            "git_commit": _git_commit(),
            "duration_s": round(time.time() - started, 3),
            "metrics": metrics,
        }
        ref = store.commit(tmp, spec.name, key, manifest)
    log.info("stage %s: wrote %s", spec.name, ref.uri)
    return ref
