"""Artifact store and runner without Prefect: digests, manifests, atomicity, CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from toy_stages import TOY_STAGES, executions

from configs.schema import PipelineConfig
from orchestrator.keys import stage_key
from orchestrator.runner import MissingUpstreamError, resolve_upstream, run_stage
from orchestrator.store import ArtifactStore, digest_dir

A, B, C = TOY_STAGES
REGISTRY = {s.name: s for s in TOY_STAGES}


@pytest.fixture()
def toy_log(tmp_path, monkeypatch):
    log = tmp_path / "runs.log"
    monkeypatch.setenv("RSTAR_TOY_LOG", str(log))
    return log


def test_the_digest_is_the_content_not_when_or_how_long_it_was_made(tmp_path):
    """The card says how long a run took and at which commit: two runs that write the same
    files must still share a digest (a resumed stage is checked against an uninterrupted one)."""
    store = ArtifactStore(str(tmp_path / "store"))
    digests = []
    for took in ("0.0", "7.3"):
        with store.staging() as tmp:
            (tmp / "values.json").write_text("[1, 2]")
            (tmp / "card.md").write_text(f"# a\n\nmade in {took} s at commit `abc`\n")
            digests.append(store.commit(tmp, "a", f"key-{took}", {"metrics": {}}).digest)
    assert digests[0] == digests[1]
    data = tmp_path / "data"  # a user's input folder is hashed whole, whatever its files are named
    data.mkdir()
    (data / "card.md").write_text("x")
    before = digest_dir(data, skip=())
    (data / "card.md").write_text("y")
    assert digest_dir(data, skip=()) != before


def test_commit_writes_manifest_and_is_content_addressed(tmp_path, toy_log):
    store = ArtifactStore(str(tmp_path / "store"))
    ref = run_stage(A, PipelineConfig(), {}, store)
    path = store.local_path(ref)
    manifest = json.loads((path / "manifest.json").read_text())
    assert path.name == ref.digest == manifest["digest"] == digest_dir(path)
    for field in ("stage", "key", "config_hash", "inputs", "code_version", "digest", "metrics", "created_at"):
        assert field in manifest
    assert manifest["metrics"] == {"steps": 300}
    assert store.lookup("a", ref.key) == ref
    assert run_stage(A, PipelineConfig(), {}, store) == ref and executions(toy_log) == ["a"]  # cache hit


def test_key_depends_on_section_and_upstream(tmp_path, toy_log):
    store = ArtifactStore(str(tmp_path / "store"))
    cfg = PipelineConfig()
    ref_a = run_stage(A, cfg, {}, store)
    k = stage_key(B, cfg, {"a": ref_a})
    other = cfg.model_copy(deep=True)
    other.rl.stage3.steps = 1  # c's section: b's key must not move
    assert stage_key(B, other, {"a": ref_a}) == k
    other.rl.stage2.steps = 1
    assert stage_key(B, other, {"a": ref_a}) != k
    assert stage_key(B, cfg, {"a": ref_a.model_copy(update={"digest": "x"})}) != k
    # code versions are computed from source: tests/orchestrator/test_keys.py


def test_missing_upstream_is_a_clear_error(tmp_path, toy_log):
    store = ArtifactStore(str(tmp_path / "store"))
    with pytest.raises(MissingUpstreamError, match="upstream stage 'a'"):
        resolve_upstream(B, PipelineConfig(), store, REGISTRY)
    ref_a = run_stage(A, PipelineConfig(), {}, store)
    assert resolve_upstream(B, PipelineConfig(), store, REGISTRY) == {"a": ref_a}


_KILLED_CHILD = """
import sys; sys.path.insert(0, {toy_dir!r})
from toy_stages import TOY_STAGES
from configs.schema import PipelineConfig
from orchestrator.runner import run_stage
from orchestrator.store import ArtifactStore
run_stage(TOY_STAGES[0], PipelineConfig(), {{}}, ArtifactStore({root!r}))
"""


def test_stage_killed_mid_write_leaves_nothing_complete(tmp_path, toy_log):
    root = tmp_path / "store"
    code = _KILLED_CHILD.format(toy_dir=str(Path(__file__).parent), root=str(root))
    env = {**os.environ, "RSTAR_TOY_SLEEP_S": "60"}
    child = subprocess.Popen([sys.executable, "-c", code], env=env)
    started = root / "tmp" / "STARTED"
    deadline = time.time() + 60
    while not started.exists() and time.time() < deadline:
        time.sleep(0.1)
    assert started.exists(), "toy stage never started"
    assert (Path(started.read_text()) / "part1.txt").exists()  # half-written output is on disk
    child.send_signal(signal.SIGKILL)
    child.wait()
    store = ArtifactStore(str(root))
    key = stage_key(A, PipelineConfig(), {})
    assert store.lookup("a", key) is None
    assert not (root / "a").exists() and not (root / "index").exists()
    ref = run_stage(A, PipelineConfig(), {}, store)  # the rerun completes normally
    assert (store.local_path(ref) / "value.json").exists()


def test_deleted_artifact_is_not_reported_complete(tmp_path, toy_log):
    store = ArtifactStore(str(tmp_path / "store"))
    ref = run_stage(A, PipelineConfig(), {}, store)
    (store.local_path(ref) / "manifest.json").unlink()
    assert store.lookup("a", ref.key) is None


def test_fsspec_memory_root_round_trips(tmp_path, toy_log):
    store = ArtifactStore("memory://rstar-test", cache_dir=str(tmp_path / "cache"))
    ref = run_stage(A, PipelineConfig(), {}, store)
    assert ref.uri.startswith("memory://")
    assert store.lookup("a", ref.key) == ref
    assert json.loads((store.local_path(ref) / "value.json").read_text())["name"] == "a"


def test_stage_cli_runs_without_prefect(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "assets.build", "--config", "configs/tiny.yaml",
         "--set", f"run.artifacts_root={tmp_path}", "--set", "model.tiny.tokenizer_corpus_lines=300"],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2], timeout=300,
    )
    assert out.returncode == 0, out.stderr
    ref = json.loads(out.stdout.strip().splitlines()[-1])
    assert (Path(ref["uri"]) / "model" / "config.json").exists()
    assert "prefect" not in out.stderr.lower()


def test_unimplemented_stage_cli_fails_loudly(capsys):
    from orchestrator.cli import stage_main
    from orchestrator.stages import StageSpec

    later = StageSpec("later", "evaluation.math_eval", lambda c: {}, delivered_by="issue #99 (later)")
    config = str(Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml")
    with pytest.raises(SystemExit) as exit_:
        stage_main("later", ["--config", config], {"later": later})
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "is not implemented yet" in err and "delivered by issue #99 (later)" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has GPUs")
def test_paper_config_gpu_stage_fails_at_once_without_gpus(tmp_path):
    out = subprocess.run([sys.executable, "-m", "training.sft", "--config", "configs/rstar2_agent_14b.yaml",
                          "--set", f"run.artifacts_root={tmp_path}"],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2], timeout=120)
    assert out.returncode == 2
    assert "stage 'sft' of configs/rstar2_agent_14b.yaml needs 8 GPU(s) per node" in out.stderr
    assert "has 0" in out.stderr
    assert not any(tmp_path.iterdir())  # no work was done


def test_local_location_files_are_part_of_the_key(tmp_path):
    from dataclasses import replace

    data = tmp_path / "problems.jsonl"
    data.write_text('{"problem": "1+1", "answer": "2"}\n')
    spec = replace(A, select=lambda c: {"cfg": {"sources": [{"location": str(data)}, {"location": "org/hub-id"}]}})
    k1 = stage_key(spec, PipelineConfig(), {})
    assert stage_key(spec, PipelineConfig(), {}) == k1
    data.write_text('{"problem": "1+1", "answer": "3"}\n')  # same path, edited content
    assert stage_key(spec, PipelineConfig(), {}) != k1


def test_relative_root_resolves_against_the_repo_from_any_cwd(tmp_path, monkeypatch):
    from stagekit.paths import REPO_ROOT

    monkeypatch.chdir(tmp_path)
    assert ArtifactStore(".rstar/artifacts").root == str(REPO_ROOT / ".rstar" / "artifacts")
    assert ArtifactStore("memory://bucket/x/").root == "memory://bucket/x"


def test_what_a_killed_run_left_in_staging_is_removed_by_the_next(tmp_path):
    """Issue 23: a SIGKILL runs no `finally`, so a data stage killed mid-write left its staging
    dir under <root>/tmp for good; the next staging now removes it, and never a live one's."""
    import signal
    import textwrap

    from orchestrator.store import ArtifactStore

    script = textwrap.dedent(f"""
        import sys, time
        from orchestrator.store import ArtifactStore
        with ArtifactStore({str(tmp_path / 'store')!r}).staging() as tmp:
            (tmp / "half.parquet").write_bytes(b"x" * 1000)
            print(tmp, flush=True)
            time.sleep(60)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[2],
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    dirs = [Path(p.stdout.readline().strip()) for p in procs]
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait(10)
    assert dirs[0].exists()  # left behind
    try:
        with ArtifactStore(str(tmp_path / "store")).staging() as mine:
            assert not dirs[0].exists() and not Path(f"{dirs[0]}.lock").exists()
            assert dirs[1].exists()  # a live run's dir stays
            assert mine.exists()
    finally:
        procs[1].kill()
        procs[1].wait(10)


def test_a_stage_that_writes_no_card_gets_one_from_its_manifest(tmp_path, monkeypatch):
    """Issue 21: assets, SFT and the RL stages had no card.md (and no `<stage>-card` in the UI)."""
    from configs.schema import PipelineConfig
    from orchestrator.runner import run_stage
    from orchestrator.stages import StageSpec
    from orchestrator.store import ArtifactStore

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "cardtoy.py").write_text("def run(cfg, inputs, out_dir):\n    (out_dir / 'curves.png').write_bytes(b'')\n"
                                     "    return {'final_loss': 0.5, 'note': 'a|b'}\n")
    own = "def run(cfg, inputs, out_dir):\n    (out_dir / 'card.md').write_text('mine')\n"
    (proj / "cardtoy_own.py").write_text(own)
    monkeypatch.syspath_prepend(str(proj))
    store = ArtifactStore(str(tmp_path / "store"))
    up = run_stage(StageSpec("own", "cardtoy_own", lambda c: {"cfg": c.rl.stage1}), PipelineConfig(), {}, store)
    assert (Path(up.uri) / "card.md").read_text() == "mine"  # a stage's own card is left alone
    spec = StageSpec("toy", "cardtoy", lambda c: {"cfg": c.rl.stage2}, inputs={"policy": "own"})
    card = (Path(run_stage(spec, PipelineConfig(), {"own": up}, store).uri) / "card.md").read_text()
    assert card.startswith("# toy\n") and f"| policy | `{up.digest[:16]}` |" in card
    assert "| final_loss | 0.5 |" in card and "| note | a\\|b |" in card
    assert "`curves.png`" in card and "| steps |" in card  # files and the stage's config section
