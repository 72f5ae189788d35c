"""Held-out accuracy along one SFT run: where the tiny model starts to solve problems.

    OMP_NUM_THREADS=1 python -m benchmarks.sft_curve --config configs/learning.yaml \\
        [--steps 800] [--every 100] [--problems 100] [--samples 4] [--set KEY=VALUE ...]

It builds the config's `assets` and `cold_start` in its store, trains with the SFT stage's
own trainer (`training.sft.build_trainer`, the config's `sft` section) for `--steps`,
keeps a checkpoint every `--every` steps, then measures each checkpoint as the SFT stage
does (`training.heldout`: the generated held-out problems, rollout runtime and code
service, T 0.6, standard error over problems). How `configs/learning.yaml` chose its SFT
length.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from assets.paths import asset_paths
from configs.load import load_config
from orchestrator.runner import run_stage
from orchestrator.stages import get_stage
from orchestrator.store import ArtifactStore
from stagekit import artifacts
from training.heldout import heldout_accuracy
from training.sft import build_trainer


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sft_curve")
    parser.add_argument("--config", default="configs/learning.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--samples", type=int, default=4)
    args = parser.parse_args()
    cfg = load_config(args.config, args.set)
    store = ArtifactStore(cfg.run.artifacts_root)
    assets = asset_paths(store.local_path(run_stage(get_stage("assets"), cfg, {}, store)))
    demos = store.local_path(run_stage(get_stage("cold_start"), cfg, {}, store)) / artifacts.CHATS
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(cfg.sft, assets.model, assets.tokenizer, demos, Path(tmp) / "trainer",
                                Path(tmp) / "curves", args.steps)
        trainer.args.save_steps = args.every
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
        for step in range(args.every, args.steps + 1, args.every):
            ckpt = str(Path(tmp) / "trainer" / f"checkpoint-{step}")
            acc = heldout_accuracy(cfg.sft.heldout, ckpt, ckpt, cfg.rollout, cfg.sandbox, args.problems, args.samples)
            rows.append((step, acc))
    print(f"\nSFT of {args.config}: {args.steps} steps in {seconds:.0f} s ({seconds / args.steps:.2f} s/step); "
          f"held-out: {args.problems} problems x {args.samples} samples, T {cfg.sft.heldout.temperature}")
    print(f"{'step':>6}  {'accuracy':>8}  {'± se':>6}  {'tool calls':>10}")
    for step, acc in rows:
        print(f"{step:>6}  {acc.pass1:8.3f}  {acc.pass1_stderr:6.3f}  {acc.tool_calls_per_trajectory:10.2f}")


if __name__ == "__main__":
    main()
