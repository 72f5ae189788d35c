"""What `--checkpoint` names: a pipeline artifact, a model directory, or a hub id.

The identity names the weights in the sample store (evaluation/samples.py): an
artifact's content digest, a hub id, or for a plain directory the names, sizes and
modification times of its files (cheap for a 14B model, and a rewrite changes it).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from assets.paths import asset_paths
from stagekit import artifacts


@dataclass(frozen=True)
class Checkpoint:
    model: str  # what from_pretrained loads
    tokenizer: str
    identity: str
    label: str  # shown in reports


def _dir_identity(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        st = f.stat()
        h.update(f"{f.relative_to(path)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return f"dir:{h.hexdigest()[:24]}"


def resolve_checkpoint(location: str, label: str | None = None) -> Checkpoint:
    path = Path(location).expanduser()
    if not path.exists():
        return Checkpoint(location, location, f"hub:{location}", label or location.rsplit("/", 1)[-1])
    path = path.resolve()
    manifest = path / artifacts.MANIFEST
    if manifest.exists():  # a pipeline artifact: sft and rl stages keep the model in model/, assets records it
        record = json.loads(manifest.read_text())
        if (path / artifacts.ASSETS).exists():  # the base model: built here, or a hub id the stage recorded
            found = asset_paths(path)
            model, tok = found.model, found.tokenizer or found.model
            if not Path(model).exists():
                return Checkpoint(model, tok, f"hub:{model}", label or model.rsplit("/", 1)[-1])
        else:
            model = tok = str(path / artifacts.MODEL)
        if not (Path(model) / "config.json").exists():
            raise FileNotFoundError(f"checkpoint {location}: artifact of stage {record.get('stage')!r} has no model "
                                    f"at {model}")
        return Checkpoint(model, tok, f"artifact:{record['digest']}", label or str(record.get("stage", path.name)))
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"checkpoint {location}: neither a pipeline artifact (manifest.json) nor a model "
                                "directory (config.json)")
    return Checkpoint(str(path), str(path), _dir_identity(path), label or path.name)
