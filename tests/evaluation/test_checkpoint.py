"""What `--checkpoint` can name: an artifact, a model directory, a hub id."""

from __future__ import annotations

import json
import shutil

import pytest

from evaluation.checkpoint import resolve_checkpoint


def test_an_assets_artifact_a_model_dir_and_a_hub_id(tiny_assets_dir, tmp_path):
    art = resolve_checkpoint(str(tiny_assets_dir))
    digest = json.loads((tiny_assets_dir / "manifest.json").read_text())["digest"]
    assert art.identity == f"artifact:{digest}"
    assert art.model.endswith("/model") and art.tokenizer.endswith("/tokenizer")
    model_dir = tmp_path / "m"
    shutil.copytree(tiny_assets_dir / "model", model_dir)
    plain = resolve_checkpoint(str(model_dir))
    assert plain.identity.startswith("dir:") and plain.model == plain.tokenizer == str(model_dir)
    (model_dir / "config.json").write_text((model_dir / "config.json").read_text() + " ")
    assert resolve_checkpoint(str(model_dir)).identity != plain.identity  # a rewritten file is another model
    hub = resolve_checkpoint("Qwen/Qwen3-14B-Base")
    assert (hub.model, hub.identity, hub.label) == ("Qwen/Qwen3-14B-Base", "hub:Qwen/Qwen3-14B-Base", "Qwen3-14B-Base")


def test_a_directory_without_a_model_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a pipeline artifact"):
        resolve_checkpoint(str(tmp_path))
