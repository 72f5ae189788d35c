"""Evaluation throughput on the tiny config (issue 12 point 7): trajectories/s and response
tokens/s (model and tool feedback) of the evaluation stage's own code path, against a
baseline measured in the same run: the same samples decoded one sequence at a time
(`rollout.hf_max_batch_size=1`, what a plain per-sample loop does). Each run starts from an
empty sample store; the time covers loading the model, the rollouts (tool calls included),
scoring and writing the results.

    OMP_NUM_THREADS=1 python -m benchmarks.eval [--checkpoint DIR] [--problems 25] [--samples 4]

`--checkpoint`: an artifact or model directory (e.g. an SFT artifact); default the tiny
base built offline, whose random answers run to the token budget.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from assets.paths import asset_paths
from configs.load import load_config
from evaluation.checkpoint import Checkpoint, resolve_checkpoint
from evaluation.evaluate import evaluate_checkpoint
from orchestrator.runner import run_stage
from orchestrator.stages import get_stage
from orchestrator.store import ArtifactStore


def _timed(ckpt: Checkpoint, overrides: list[str], root: Path) -> dict:
    cfg = load_config("configs/tiny.yaml", overrides)
    start = time.perf_counter()
    results = evaluate_checkpoint(ckpt, cfg.eval, cfg.rollout, cfg.sandbox, root / "out", root / "samples")
    seconds = time.perf_counter() - start
    m = results.benchmarks["synthetic_eval"]
    tokens = m.response_tokens_mean * m.samples
    return {"seconds": seconds, "trajectories": m.samples, "traj_per_s": m.samples / seconds,
            "tokens_per_s": tokens / seconds, "length": m.response_tokens_mean, "pass@1": m.pass1}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.eval")
    parser.add_argument("--checkpoint", help="artifact or model dir (default: the tiny base, built here)")
    parser.add_argument("--problems", type=int, default=25)
    parser.add_argument("--samples", type=int, default=4)
    args = parser.parse_args()
    common = [f"eval.samples_per_problem={args.samples}",
              f"eval.benchmarks=[{{name: synthetic_eval, location: synthetic, problems: {args.problems}}}]"]
    with tempfile.TemporaryDirectory() as tmp:
        if args.checkpoint:
            ckpt = resolve_checkpoint(args.checkpoint)
        else:
            store = ArtifactStore(str(Path(tmp) / "store"))
            paths = asset_paths(store.local_path(run_stage(get_stage("assets"), load_config("configs/tiny.yaml", []),
                                                           {}, store)))
            ckpt = Checkpoint(paths.model, paths.tokenizer, "tiny-base", "tiny base")
        ours = _timed(ckpt, common, Path(tmp) / "ours")
        base = _timed(ckpt, [*common, "rollout.hf_max_batch_size=1"], Path(tmp) / "baseline")
    print(f"\nEvaluation of {ckpt.label}: {args.problems} problems x {args.samples} samples "
          "(tiny config limits), from an empty sample store")
    print(f"{'run':<40} {'seconds':>8} {'traj/s':>8} {'resp tok/s':>10} {'mean length':>12} {'pass@1':>7}")
    for name, r in (("evaluation stage (batched, dynamic)", ours), ("baseline: one sequence at a time", base)):
        print(f"{name:<40} {r['seconds']:8.1f} {r['traj_per_s']:8.2f} {r['tokens_per_s']:10.0f} "
              f"{r['length']:12.0f} {r['pass@1']:7.3f}")
    print(f"speed-up over the baseline: {ours['traj_per_s'] / base['traj_per_s']:.1f}x trajectories/s")


if __name__ == "__main__":
    main()
