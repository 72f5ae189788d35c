"""Persistent work dirs: a killed multi-step stage resumes from its last complete
checkpoint, redoes no completed step and ends with the same artifact as an uninterrupted
run; `python -m orchestrator.workdirs` lists and cleans what failures leave behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from toy_long import RESUMABLE

from configs.load import load_config
from configs.schema import PipelineConfig
from orchestrator.keys import stage_key
from orchestrator.launcher import LaunchHooks, StageCancelledError, launch_stage
from orchestrator.runner import run_stage
from orchestrator.store import ArtifactStore
from orchestrator.workdirs import main as workdirs_main
from stagekit.workdir import WorkDir, WorkDirBusyError

TOY_DIR = Path(__file__).resolve().parent
REPO = TOY_DIR.parents[1]
STEPS = 8


@pytest.fixture(autouse=True)
def toy_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TOY_DIR), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("RSTAR_TOY_STEPS", str(tmp_path / "steps.log"))


def config(root: Path) -> PipelineConfig:
    # What the CLI below loads, so that both compute the same key.
    return load_config(REPO / "configs" / "tiny.yaml", [f"run.artifacts_root={root}", f"rl.stage2.steps={STEPS}"])


def steps_run(tmp_path: Path) -> list[int]:
    log = tmp_path / "steps.log"
    return [int(x) for x in log.read_text().split()] if log.exists() else []


def work_of(root: Path) -> WorkDir:
    return WorkDir(ArtifactStore(str(root)).work_root, "resumable", stage_key(RESUMABLE, config(root), {}))


def uninterrupted_digest(tmp_path: Path, monkeypatch) -> str:
    monkeypatch.setenv("RSTAR_TOY_STEPS", str(tmp_path / "reference-steps.log"))
    ref = run_stage(RESUMABLE, config(tmp_path / "reference"), {}, ArtifactStore(str(tmp_path / "reference")))
    monkeypatch.setenv("RSTAR_TOY_STEPS", str(tmp_path / "steps.log"))
    return ref.digest


def test_sigkilled_plain_module_resumes_where_it_stopped(tmp_path, monkeypatch):
    root = tmp_path / "store"
    cmd = [sys.executable, "-m", "toy_resume", "--stage", "resumable", "--config", "configs/tiny.yaml",
           "--set", f"run.artifacts_root={root}", "--set", f"rl.stage2.steps={STEPS}"]
    child = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "RSTAR_TOY_STEP_S": "0.3"},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    work = work_of(root)
    deadline = time.time() + 90
    while (work.latest() is None or work.latest().step < 3) and time.time() < deadline and child.poll() is None:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert work.latest() is not None, child.stderr.read().decode()
    resume_from = work.latest().step
    before = steps_run(tmp_path)
    assert 3 <= resume_from < STEPS and ArtifactStore(str(root)).lookup("resumable", work.key) is None

    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ref = json.loads(out.stdout.strip().splitlines()[-1])
    after = steps_run(tmp_path)[len(before):]
    assert after == list(range(resume_from, STEPS))  # no checkpointed step is computed again
    assert f"resuming from checkpoint step {resume_from}" in out.stderr
    assert ref["digest"] == uninterrupted_digest(tmp_path, monkeypatch)
    assert not work.path.exists()  # committed: the work dir is gone


def test_cancelled_launch_resumes_on_rerun(tmp_path, monkeypatch):
    root = tmp_path / "store"
    store = ArtifactStore(str(root))
    work = work_of(root)
    monkeypatch.setenv("RSTAR_TOY_STEP_S", "0.3")
    hooks = LaunchHooks(on_line=lambda _: None, cancel_poll_s=0.05,
                        should_cancel=lambda: work.latest() is not None and work.latest().step >= 2)
    with pytest.raises(StageCancelledError):
        launch_stage(RESUMABLE, config(root), {}, store, hooks=hooks)
    resume_from = work.latest().step
    monkeypatch.setenv("RSTAR_TOY_STEP_S", "0")
    ref = launch_stage(RESUMABLE, config(root), {}, store, hooks=LaunchHooks(on_line=lambda _: None))
    assert steps_run(tmp_path)[-(STEPS - resume_from):] == list(range(resume_from, STEPS))
    assert steps_run(tmp_path).count(0) == 1
    assert ref.digest == uninterrupted_digest(tmp_path, monkeypatch)
    assert not work.path.exists()


def test_checkpoints_are_atomic_and_pruned(tmp_path):
    work = WorkDir(tmp_path, "s", "k", keep=2)
    for step in (1, 2, 3):
        work.save(step, {"step": step})
    with pytest.raises(RuntimeError), work.checkpoint(4) as d:
        (d / "state.json").write_text('{"step": 4, "half')
        raise RuntimeError("killed while writing")
    assert [c.step for c in work.checkpoints()] == [2, 3]
    assert work.latest().state() == {"step": 3}
    assert not list(work.checkpoints_dir.glob(".*part"))


def test_a_work_dir_in_use_is_not_taken_twice(tmp_path):
    work = WorkDir(tmp_path, "s", "k")
    with work.lock():
        assert work.is_locked()
        with pytest.raises(WorkDirBusyError, match="already running"):
            with WorkDir(tmp_path, "s", "k").lock():
                pass
    assert not work.is_locked()


def test_workdirs_lists_and_cleans_stale_ones(tmp_path, capsys):
    root = tmp_path / "store"
    store = ArtifactStore(str(root))
    failed = WorkDir(store.work_root, "resumable", "a" * 32)
    failed.save(3, {"x": 1})
    busy = WorkDir(store.work_root, "resumable", "b" * 32)
    busy.save(1, {"x": 1})
    workdirs_main(["list", "--root", str(root)])
    listing = capsys.readouterr().out
    assert "a" * 32 in listing and "resumable" in listing and "b" * 32 in listing
    workdirs_main(["clean", "--root", str(root)])  # nothing committed, no age given: keep all
    assert failed.path.exists() and busy.path.exists()
    with busy.lock():
        workdirs_main(["clean", "--root", str(root), "--older-than", "0s"])
    assert not failed.path.exists() and busy.path.exists()
    with pytest.raises(SystemExit):
        workdirs_main(["clean", "--root", str(root), "--older-than", "soon"])


@pytest.mark.parametrize("with_work", [False, True])
def test_two_runs_of_the_same_stage_at_once_compute_it_once(tmp_path, monkeypatch, with_work):
    """Issue 23: two plain-module runs of one stage and key at once used to both compute (a
    data stage) or fail (a checkpointing one); the second now waits and takes the artifact."""
    import threading

    from configs.schema import PipelineConfig
    from orchestrator.runner import run_stage
    from orchestrator.stages import StageSpec

    proj = tmp_path / "proj"
    proj.mkdir()
    signature = "cfg, inputs, out_dir, work" if with_work else "cfg, inputs, out_dir"
    (proj / f"slowtoy_{with_work}.py").write_text(
        "import os, time\n"
        f"def run({signature}):\n"
        "    with open(os.environ['RSTAR_TOY_LOG'], 'a') as log:\n"
        "        log.write('ran\\n')\n"
        "    time.sleep(1.5)\n"
        "    (out_dir / 'value.txt').write_text('v')\n")
    monkeypatch.syspath_prepend(str(proj))
    log = tmp_path / "runs.log"
    monkeypatch.setenv("RSTAR_TOY_LOG", str(log))
    spec = StageSpec("slow", f"slowtoy_{with_work}", lambda c: {"cfg": c.rl.stage1})
    store = ArtifactStore(str(tmp_path / "store"))
    refs: list = []
    runs = [threading.Thread(target=lambda: refs.append(run_stage(spec, PipelineConfig(), {}, store)))
            for _ in range(2)]
    for t in runs:
        t.start()
    for t in runs:
        t.join(30)
    assert log.read_text().split() == ["ran"]
    assert len(refs) == 2 and refs[0].digest == refs[1].digest
