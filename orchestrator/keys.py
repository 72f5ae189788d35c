"""A stage's cache key: everything its output depends on, and nothing else (SPEC §1).

The key covers the stage's config sections (operational fields left out, see
configs/fields.py), the content digests of its upstream artifacts and of the local
files its config names, the revisions of the hub datasets it names, and its code
version (computed from its source and library versions, orchestrator/code_version.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from functools import lru_cache

from configs.fields import key_view
from configs.schema import PipelineConfig
from orchestrator.code_version import code_version
from orchestrator.stages import StageSpec
from orchestrator.store import ArtifactRef, digest_dir
from stagekit.paths import resolve_local


def section_payload(spec: StageSpec, cfg: PipelineConfig) -> dict:
    return {name: key_view(v) for name, v in spec.select(cfg).items()}


def _location_nodes(node: object) -> Iterator[dict]:
    """Every config mapping with a string `location` (data sources, benchmarks), at any depth."""
    if isinstance(node, dict):
        if isinstance(node.get("location"), str):
            yield node
        for v in node.values():
            yield from _location_nodes(v)
    elif isinstance(node, list):
        for v in node:
            yield from _location_nodes(v)


def local_file_digests(payload: object) -> dict[str, str]:
    """Content digests of local files named by `location` fields: the data a stage reads
    from disk is an input like an upstream artifact (a path string alone would not
    notice an edited file). Hub ids and `synthetic` are not local paths and are skipped."""
    found: dict[str, str] = {}
    for node in _location_nodes(payload):
        location = node["location"]
        if "://" not in location and (path := resolve_local(location)).exists():
            is_dir = path.is_dir()
            found[location] = digest_dir(path, skip=()) if is_dir else hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _is_hub_id(location: str) -> bool:
    return location != "synthetic" and "://" not in location and not resolve_local(location).exists()


@lru_cache(maxsize=256)
def resolve_hub_revision(repo_id: str, revision: str | None) -> str:
    """The commit a hub dataset revision names, when the hub answers; else the revision as
    configured (`unpinned` for none). Cached for the process: keys are computed often."""
    if os.environ.get("HF_HUB_OFFLINE") not in (None, "", "0"):
        return revision or "unpinned"
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(repo_id, revision=revision, timeout=10).sha or revision or "unpinned"
    except Exception as e:  # offline, private, or no such dataset: the stage itself will say which
        logging.getLogger(__name__).info("hub dataset %s: revision not resolved (%s)", repo_id, e)
        return revision or "unpinned"


def hub_dataset_revisions(payload: object) -> dict[str, str]:
    """`location -> revision` for every hub dataset id in the sections (SPEC §8 sources)."""
    return {node["location"]: resolve_hub_revision(node["location"], node.get("revision"))
            for node in _location_nodes(payload) if _is_hub_id(node["location"])}


def digest_json(payload: object, chars: int) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:chars]


def key_payload(spec: StageSpec, cfg: PipelineConfig, upstream: dict[str, ArtifactRef]) -> dict:
    """Everything a stage's output depends on; its digest is the stage key."""
    sections = section_payload(spec, cfg)
    code = code_version(spec.module)
    return {
        "stage": spec.name,
        "code_version": code.digest,
        "code": {"modules": len(code.modules), "libraries": code.libraries},
        "sections": sections,
        "upstream": {role: upstream[stage].digest for role, stage in spec.inputs.items()},
        "files": local_file_digests(sections),
        "datasets": hub_dataset_revisions(sections),
    }


def stage_key(spec: StageSpec, cfg: PipelineConfig, upstream: dict[str, ArtifactRef]) -> str:
    return digest_json(key_payload(spec, cfg, upstream), 32)


class KeyMismatchError(RuntimeError):
    """Whoever runs a stage computes a different key than whoever asked for it."""


def check_key(stage: str, key: str, expected: str | None) -> None:
    """A stage is keyed once, by whoever starts it (the flow, or the launcher's parent); the
    process that runs it, on this machine or a pool's, must compute the same key, or its
    artifact would land where the caller never looks."""
    if expected is not None and key != expected:
        raise KeyMismatchError(
            f"stage {stage!r}: this process computes key {key}, but the run that started it computed {expected}. "
            "The code, the installed library versions or a local input file differ between the two (another "
            "checkout on a pool's machine, or files edited since the run started). Run the same commit and "
            "environment everywhere; `python -m orchestrator.code_version <stage module>` prints what a key covers.")
