"""Long stages as watched child processes, without Prefect: output, errors, progress, and
that no process of a stage survives a cancel or the death of whoever launched it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from toy_long import LONG, RANKS

from configs.schema import PipelineConfig
from orchestrator.launcher import LaunchHooks, StageCancelledError, StageFailedError, launch_stage, stage_command
from orchestrator.stages import BY_NAME
from orchestrator.store import ArtifactStore
from stagekit import progress

TOY_DIR = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def toy_path(monkeypatch):
    # The launched child imports the toy stage modules from here.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TOY_DIR), os.environ.get("PYTHONPATH", "")]))


def config(root: Path, **hardware) -> PipelineConfig:
    return PipelineConfig.model_validate(
        {"run": {"artifacts_root": str(root)}, "rl": {"stage1": {"steps": 3}, "stage3": {"steps": 1}},
         "hardware": hardware})


def survivors(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if p.pid != os.getpid() and any(marker in part for part in p.info["cmdline"] or []):
            found.append(p)
    return found


def wait_until(cond, timeout_s: float = 60.0) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def test_stage_runs_as_a_child_and_its_output_and_progress_come_back(tmp_path):
    lines: list[str] = []
    seen: list[float] = []
    store = ArtifactStore(str(tmp_path / "store"))
    progress.set_sink(lambda pct, _msg: seen.append(pct))
    try:
        ref = launch_stage(LONG, config(tmp_path / "store"), {}, store, hooks=LaunchHooks(on_line=lines.append))
    finally:
        progress.set_sink(None)
    assert (store.local_path(ref) / "value.json").exists()
    assert "toy-long: started, writing to stdout" in lines and "toy-long: a line on stderr" in lines
    assert not any(line.startswith(progress.MARKER) for line in lines)  # progress lines are not log lines
    assert seen and seen[-1] == 100.0
    assert not (store.work_root / "long").exists() or not any((store.work_root / "long").iterdir())
    assert launch_stage(LONG, config(tmp_path / "store"), {}, store) == ref  # cache hit: no child


def test_library_progress_bars_stay_out_of_the_stage_log(tmp_path, monkeypatch):
    monkeypatch.setenv("RSTAR_TOY_TQDM", "1")
    lines: list[str] = []
    store = ArtifactStore(str(tmp_path / "store"))
    launch_stage(LONG, config(tmp_path / "store"), {}, store, hooks=LaunchHooks(on_line=lines.append))
    assert "toy-long: started, writing to stdout" in lines
    assert not [line for line in lines if "Writing model shards" in line or "it/s" in line], lines
    # The same bar drawn outside a launched stage does write, so the check above can fail.
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    out = subprocess.run([sys.executable, "-c", "from tqdm.auto import tqdm\nfor _ in tqdm(range(3), desc='Writing "
                          "model shards'): pass"], capture_output=True, text=True, env={**os.environ}, check=True)
    assert "Writing model shards" in out.stderr


def test_failure_raises_with_the_childs_last_error_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("RSTAR_TOY_FAIL", "toy failure 8472")
    store = ArtifactStore(str(tmp_path / "store"))
    with pytest.raises(StageFailedError, match=r"(?s)exit code 1.*Traceback.*RuntimeError: toy failure 8472"):
        launch_stage(LONG, config(tmp_path / "store"), {}, store, hooks=LaunchHooks(on_line=lambda _: None))
    (work,) = (store.work_root / "long").iterdir()  # kept, with the child's output
    assert "toy failure 8472" in (work / "output.log").read_text()


def test_cancel_stops_the_whole_process_tree(tmp_path, monkeypatch):
    monkeypatch.setenv("RSTAR_TOY_SPAWN", str(tmp_path))
    pids = tmp_path / "pids.json"
    store = ArtifactStore(str(tmp_path / "store"))
    hooks = LaunchHooks(on_line=lambda _: None, should_cancel=pids.exists, cancel_poll_s=0.2)
    started = time.time()
    with pytest.raises(StageCancelledError, match="was cancelled"):
        launch_stage(LONG, config(tmp_path / "store"), {}, store, hooks=hooks)
    assert time.time() - started < 60
    assert survivors(str(tmp_path)) == []


_PARENT = """
import sys
from pathlib import Path
from toy_long import LONG
from configs.schema import PipelineConfig
from orchestrator.launcher import launch_stage
from orchestrator.store import ArtifactStore
root = Path({root!r})
cfg = PipelineConfig.model_validate({{"run": {{"artifacts_root": str(root)}}}})
launch_stage(LONG, cfg, {{}}, ArtifactStore(str(root)))
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_dead_launcher_takes_the_stage_with_it(tmp_path, sig):
    """What a Prefect worker does to a cancelled flow run's process: SIGTERM, then SIGKILL."""
    env = {**os.environ, "RSTAR_TOY_SPAWN": str(tmp_path)}
    parent = subprocess.Popen([sys.executable, "-c", _PARENT.format(root=str(tmp_path / "store"))], env=env)
    try:
        assert wait_until((tmp_path / "pids.json").exists), "toy stage never started"
        assert len(survivors(str(tmp_path))) >= 4  # supervisor, stage, two grandchildren
        parent.send_signal(sig)
        parent.wait(timeout=30)
        assert wait_until(lambda: not survivors(str(tmp_path)), 30), survivors(str(tmp_path))
    finally:
        parent.kill()
        for p in survivors(str(tmp_path)):
            p.kill()


def test_command_plain_python_or_accelerate():
    req = Path("/w/launch.json")
    one = stage_command(LONG, config(Path("/x")).hardware, req)
    assert one[1:] == ["-m", "toy_long", "--stage", "long", "--config-json", str(req)]
    two = stage_command(LONG, config(Path("/x"), processes_per_node=2).hardware, req)
    assert two[1:5] == ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes"]
    assert two[5] == "2" and two[-6:] == one[1:]
    paper = PipelineConfig.model_validate(
        {"hardware": {"gpus_per_node": 8, "nodes": 8, "accelerate_config": "configs/accelerate/zero3.yaml"}})
    cmd = stage_command(BY_NAME["sft"], paper.hardware, req)
    assert cmd[cmd.index("--config_file") + 1].endswith("configs/accelerate/zero3.yaml")
    assert cmd[cmd.index("--num_processes") + 1] == "64" and cmd[cmd.index("--num_machines") + 1] == "8"
    assert "--multi_gpu" not in cmd and cmd[cmd.index("-m", 3) + 1] == "training.sft"


def test_only_training_stages_start_one_process_per_gpu():
    """Evaluation and the stage-3 filter roll out on the engines and split nothing across
    ranks: under the paper's 64 processes each rank repeated the whole evaluation."""
    req = Path("/w/launch.json")
    paper = PipelineConfig.model_validate(
        {"hardware": {"gpus_per_node": 8, "nodes": 8, "accelerate_config": "configs/accelerate/zero3.yaml"}})
    several = {s for s in BY_NAME.values() if s.long_running
               and "accelerate.commands.launch" in stage_command(s, paper.hardware, req)}
    assert {s.name for s in several} == {"sft", "rl_stage1", "rl_stage2", "rl_stage3"}
    for name in ("eval_sft", "eval_rl_stage3", "stage3_filter"):
        assert stage_command(BY_NAME[name], paper.hardware, req)[1:3] == ["-m", BY_NAME[name].module]


def test_two_processes_through_accelerate_share_the_output(tmp_path):
    """hardware.processes_per_node=2 on CPU: `accelerate launch --multi_gpu` starts two ranks."""
    store = ArtifactStore(str(tmp_path / "store"))
    lines: list[str] = []
    ref = launch_stage(RANKS, config(tmp_path / "store", processes_per_node=2), {}, store,
                       hooks=LaunchHooks(on_line=lines.append))
    out = store.local_path(ref)
    assert sorted(p.name for p in out.glob("rank-*.txt")) == ["rank-0.txt", "rank-1.txt"], lines
    assert (out / "rank-1.txt").read_text() == "1 of 2"
    assert store.manifest(ref)["metrics"] == {"world_size": 2}
