"""Shared fixtures: the tiny offline assets and the real data under ../shared."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny models run many times faster (NOTES.md)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from assets.paths import AssetPaths, asset_paths  # noqa: E402
from configs.schema import PipelineConfig  # noqa: E402
from pipeline.runner import run_stage  # noqa: E402
from pipeline.stages import get_stage  # noqa: E402
from pipeline.store import ArtifactStore  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
# Built once and reused across test sessions: the store's cache key covers model.* and
# the assets code version, so a change to either rebuilds.
TEST_STORE = REPO / ".rstar" / "test-cache"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"{SHARED_DATA} is absent: real sample rows and benchmarks live only in ../shared")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_assets() -> AssetPaths:
    """Small BPE tokenizer, real-vocabulary Qwen3 tokenizer and tiny Qwen3 model dirs."""
    store = ArtifactStore(str(TEST_STORE))
    ref = run_stage(get_stage("assets"), PipelineConfig(), {}, store)
    return asset_paths(store.local_path(ref))


@pytest.fixture(scope="session")
def tiny_assets_dir(tiny_assets) -> Path:
    """The `assets` artifact directory itself (stages take it as their `assets` input)."""
    return Path(tiny_assets.model).parent
