"""A killed SFT run resumes from its last checkpoint (issue 10 point 4): SIGKILL after a
checkpoint, rerun, and it continues at the right step with the same data order, ending
with the step count and final loss of an uninterrupted run."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stagekit.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # two short trainings of the tiny model, about 2 min

STEPS, EVERY = 12, 4
DRIVER = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    from configs.rollout import RolloutConfig
    from configs.sandbox import SandboxConfig
    from configs.schema import SFTConfig
    from stagekit.workdir import WorkDir
    from training import sft
    assets, cold, base = (Path(a) for a in sys.argv[1:4])
    cfg = SFTConfig(lr=2e-3, global_batch_size=8, micro_batch_per_device=4, epochs=5, max_seq_tokens=512,
                    checkpoint_every_steps={every})
    (base / "out").mkdir(parents=True, exist_ok=True)
    metrics = sft.run(cfg, RolloutConfig(), SandboxConfig(), {{"base": assets, "chats": cold}}, base / "out",
                      work=WorkDir(base / "work", "sft", "k"), max_steps={steps})
    (base / "metrics.json").write_text(json.dumps(metrics))
''').format(every=EVERY, steps=STEPS)


def _start(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen([sys.executable, *args], cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def test_killed_sft_resumes_and_matches_an_uninterrupted_run(tiny_assets_dir, small_cold_start, tmp_path):
    cold = small_cold_start
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)

    whole = tmp_path / "whole"
    assert _start([str(driver), str(tiny_assets_dir), str(cold), str(whole)]).wait(timeout=900) == 0

    killed = tmp_path / "killed"
    proc = _start([str(driver), str(tiny_assets_dir), str(cold), str(killed)])
    trainer_dir = killed / "work" / "sft" / "k" / "trainer"
    deadline = time.time() + 900
    while not (trainer_dir / f"checkpoint-{2 * EVERY}" / "trainer_state.json").exists():
        assert proc.poll() is None and time.time() < deadline, "the run ended before its second checkpoint"
        time.sleep(0.2)
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "metrics.json").exists()
    assert _start([str(driver), str(tiny_assets_dir), str(cold), str(killed)]).wait(timeout=900) == 0

    a, b = (json.loads((d / "metrics.json").read_text()) for d in (whole, killed))
    assert b["resumed_from_step"] >= 2 * EVERY and a["resumed_from_step"] == 0
    assert a["steps"] == b["steps"] == STEPS
    assert abs(a["final_loss"] - b["final_loss"]) <= 0.01 * a["final_loss"], (a, b)
    # Same data order: the losses of the steps after the resume point match step for step.
    curves = [{int(r["step"]): float(r["loss"]) for r in csv.DictReader((d / "out" / "curves.csv").open())}
              for d in (whole, killed)]
    for step in range(b["resumed_from_step"] + 1, STEPS + 1):
        assert abs(curves[0][step] - curves[1][step]) <= 0.01 * curves[0][step], step
    assert Path(trainer_dir).exists()
