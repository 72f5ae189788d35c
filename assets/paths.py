"""Where the model and tokenizers of an `assets` artifact are (local dirs or hub ids)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from stagekit import artifacts


@dataclass(frozen=True)
class AssetPaths:
    model: str  # local directory or Hugging Face id, for from_pretrained
    tokenizer: str  # idem
    real_tokenizer: str | None  # the 151K Qwen3 tokenizer when built offline


def asset_paths(artifact_dir: Path) -> AssetPaths:
    record = json.loads((artifact_dir / artifacts.ASSETS).read_text())

    def resolve(value: str | None) -> str | None:
        if value is None:
            return None
        local = artifact_dir / value
        return str(local) if local.exists() else value

    return AssetPaths(resolve(record["model"]), resolve(record["tokenizer"]), resolve(record["real_tokenizer"]))
