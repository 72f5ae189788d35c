"""Evaluate any checkpoint outside Prefect and the artifact store, with a progress bar.

    python -m evaluation --checkpoint PATH_OR_HUB_ID --config configs/tiny.yaml [--set eval.samples_per_problem=16]

PATH is a pipeline artifact (an `sft` or `rl_stage*` directory), a model directory or a
hub id. Results go to `--out` (default `.rstar/eval/<name>-<identity>`); samples already
drawn for the same checkpoint and settings (here or by the pipeline) are reused.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from configs.load import load_config
from evaluation.checkpoint import resolve_checkpoint
from evaluation.evaluate import evaluate_checkpoint
from evaluation.math_eval import SAMPLE_STORE
from evaluation.report import checkpoint_table, general_table
from orchestrator.store import ArtifactStore
from stagekit import progress
from stagekit.paths import resolve_local


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m evaluation")
    parser.add_argument("--checkpoint", required=True, help="artifact dir, model dir or hub id")
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override")
    parser.add_argument("--out", type=Path, help="output directory")
    parser.add_argument("--label", help="name of the checkpoint in the report")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = load_config(args.config, args.set)
    ckpt = resolve_checkpoint(args.checkpoint, args.label)
    out = args.out or resolve_local(f".rstar/eval/{ckpt.label}-{ckpt.identity.split(':')[-1][:12]}")
    out.mkdir(parents=True, exist_ok=True)
    sample_root = ArtifactStore(cfg.run.artifacts_root).work_root.parent / SAMPLE_STORE
    with progress.terminal_bar(f"evaluation of {ckpt.label}"):
        results = evaluate_checkpoint(ckpt, cfg.eval, cfg.rollout, cfg.sandbox, out, sample_root)
    print(f"\n{ckpt.label} ({ckpt.identity})\n")
    print(checkpoint_table(results))
    if general := general_table(results.general):
        print("\n" + general)
    print(f"\nwritten to {out} (card.md, results.json, samples/*.parquet); "
          f"one problem's samples: python -m evaluation.show {out}/samples/<benchmark>.parquet --problem ID")


if __name__ == "__main__":
    main()
