"""The real in-process stages side by side (issue 24): `assets` and `cold_start` share the flow's
process when the graph runs them at once, and must write exactly the files they write alone."""

from __future__ import annotations

import hashlib

from configs.load import load_config
from orchestrator.graph import import_stage_modules, run_graph
from orchestrator.runner import run_stage
from orchestrator.stages import get_stage
from orchestrator.store import ArtifactStore
from stagekit.paths import REPO_ROOT

SMALL = ["data.cold_start.sources=[{source: synthetic, examples: 600}]", "model.tiny.tokenizer_corpus_lines=3000"]
STAMPED = {"card.md", "manifest.json"}  # they name the run's paths and times


def test_data_stages_side_by_side_write_what_they_write_one_at_a_time(tmp_path):
    files = {}
    for budget in (1, 2):
        cfg = load_config(REPO_ROOT / "configs" / "tiny.yaml", [*SMALL, f"run.artifacts_root={tmp_path / str(budget)}"])
        store = ArtifactStore(cfg.run.artifacts_root)
        stages = (get_stage("assets"), get_stage("cold_start"))
        import_stage_modules(stages)  # as the flow does
        refs = run_graph(stages, lambda spec, ups, _n, cfg=cfg, store=store: run_stage(spec, cfg, ups, store), budget)
        files[budget] = {
            (name, str(p.relative_to(root))): hashlib.sha256(p.read_bytes()).hexdigest()
            for name, ref in refs.items() for root in [store.local_path(ref)]
            for p in sorted(root.rglob("*")) if p.is_file() and p.name not in STAMPED
        }
    assert len(files[1]) > 6 and files[1] == files[2]
