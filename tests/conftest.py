"""Shared fixtures: the tiny offline assets and the real data under ../shared."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny models run many times faster (NOTES.md)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import json  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from assets.paths import AssetPaths, asset_paths  # noqa: E402
from configs.schema import PipelineConfig  # noqa: E402
from orchestrator.runner import run_stage  # noqa: E402
from orchestrator.stages import get_stage  # noqa: E402
from orchestrator.store import ArtifactStore  # noqa: E402

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
    """The `assets` artifact directory itself (what sft takes as `base`, rl_curation as `filter_model`)."""
    return Path(tiny_assets.model).parent


# The project chat template, and a render check (datalib and data_prep tests).


@pytest.fixture(scope="session")
def tokenizer(tiny_assets):
    """The small BPE tokenizer carrying the project's Qwen3 chat template."""
    return AutoTokenizer.from_pretrained(tiny_assets.tokenizer)


def _assert_renders(tokenizer, row: dict) -> str:
    """The chat template accepts the row and shows every message, call and tool in it."""
    tools = json.loads(row["tools"]) or None
    text = tokenizer.apply_chat_template(row["messages"], tools=tools, tokenize=False)
    for m in row["messages"]:
        assert m["content"].strip() in text, (row["id"], m["role"], m["content"][:80])
        for call in m["tool_calls"] or ():
            fn = call["function"]
            assert f'{{"name": "{fn["name"]}", "arguments": {fn["arguments"]}}}' in text
            assert isinstance(json.loads(fn["arguments"]), dict)
    for tool in tools or ():
        assert json.dumps(tool["function"]["name"]) in text
    return text


@pytest.fixture(scope="session")
def assert_renders(tokenizer) -> Callable[[dict], str]:
    return lambda row: _assert_renders(tokenizer, row)
