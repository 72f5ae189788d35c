"""The three data stages end to end on the tiny config, through the artifact store."""

from __future__ import annotations

import json
import re
import shutil

import datasets
import pyarrow.parquet as pq
import pytest

from configs.schema import PipelineConfig
from datalib.tables import read_problems
from orchestrator.runner import resolve_upstream, run_stage
from orchestrator.stages import get_stage
from orchestrator.store import ArtifactStore
from stagekit.paths import REPO_ROOT

TEST_STORE = REPO_ROOT / ".rstar" / "test-cache"


@pytest.fixture(scope="module")
def store(tiny_assets, tmp_path_factory):
    """A fresh store holding a copy of the cached tiny `assets` artifact (building it costs ~30 s)."""
    root = tmp_path_factory.mktemp("store")
    for sub in ("assets", "index/assets"):
        shutil.copytree(TEST_STORE / sub, root / sub)
    return ArtifactStore(str(root))


def _run(name: str, cfg: PipelineConfig, store: ArtifactStore):
    spec = get_stage(name)
    ref = run_stage(spec, cfg, resolve_upstream(spec, cfg, store), store)
    return ref, store.manifest(ref)["metrics"], store.local_path(ref)


def test_cold_start_tiny(store, tokenizer):
    ref, metrics, path = _run("cold_start", PipelineConfig(), store)
    assert metrics["examples"] == metrics["examples_synthetic"] == 1000
    assert metrics["rejected_malformed"] == metrics["rejected_filtered"] == metrics["rewrite_ran"] == 0
    rows = pq.read_table(path / "sft.parquet").to_pylist()
    assert len({r["id"] for r in rows}) == 1000
    fixed = 0
    for row in rows:
        tool_outputs = [m["content"] for m in row["messages"] if m["role"] == "tool"]
        final = row["messages"][-1]["content"]
        # The answer the demonstration gives is exactly what its last program printed.
        assert re.search(r"\\boxed\{(-?\d+)\}", final).group(1) == tool_outputs[-1]
        if len(tool_outputs) == 2:
            fixed += 1
            assert re.search(r"(SyntaxError|NameError)", tool_outputs[0])
    assert 0.11 <= fixed / 1000 <= 0.19  # configured 15 %
    # The SFT stage's view: datasets reads the parquet and the chat template renders it.
    ds = datasets.load_dataset("parquet", data_files=str(path / "sft.parquet"), split="train")
    text = tokenizer.apply_chat_template(ds[0]["messages"], tools=json.loads(ds[0]["tools"]), tokenize=False)
    assert "execute_python_code_with_standard_io" in text and "<tool_response>" in text
    assert "Synthetic demonstrations whose first call fails" in (path / "card.md").read_text()
    assert _run("cold_start", PipelineConfig(), store)[0] == ref  # cached


def test_rl_curation_and_decontaminate_tiny(store):
    cfg = PipelineConfig()
    _, metrics, path = _run("rl_curation", cfg, store)
    # 8 synthetic problems go through the real agreement filter (tiny random model, real
    # runtime and sandbox); the other 256 bypass it.
    assert metrics["filter_ran"] == 1 and metrics["filter_problems"] == 8
    assert metrics["problems_synthetic"] == 256
    assert metrics["problems"] == 256 + metrics["filter_kept"]
    agreement = pq.read_table(path / "agreement.parquet").to_pylist()
    assert len(agreement) == 8 and all(len(a["answers"]) == 4 for a in agreement)
    assert all(a["kept"] == (a["agreeing"] >= 2) for a in agreement)
    problems = read_problems(path / "problems.parquet")
    assert all(1000 <= p.answer <= 9_999_999 for p in problems)
    assert "Agreement filter" in (path / "card.md").read_text()

    ref, metrics, out = _run("decontaminate", cfg, store)
    assert metrics["problems_in"] == len(problems)
    assert metrics["problems_out"] + metrics["removed"] == len(problems)
    assert metrics["removed"] <= 2  # only an exact synthetic eval duplicate could match
    assert len(read_problems(out / "synthetic_eval.parquet")) == 200
    card = (out / "card.md").read_text()
    assert "generated held-out set this config evaluates on" in card and "No public benchmark is checked" in card
    # A decontamination setting reruns this stage only.
    changed = cfg.model_copy(deep=True)
    changed.data.decontaminate.synthetic_eval_problems = 100
    assert _run("rl_curation", changed, store)[1] == _run("rl_curation", cfg, store)[1]
    assert _run("decontaminate", changed, store)[0] != ref
