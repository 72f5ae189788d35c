"""Stages `eval_base`, `eval_sft` and `eval_rl_stage1..3`: one checkpoint each (SPEC §9).

Each runs as soon as its checkpoint exists and is cached on the checkpoint's digest, the
`eval` config and the benchmark data (local files by content, hub datasets by revision).
Samples live in a store beside the work directories (evaluation/samples.py), so a rerun
with more samples per problem, or after a kill, draws only what is missing.

    python -m evaluation.math_eval --config configs/tiny.yaml --stage eval_sft
    python -m evaluation --checkpoint PATH --config configs/tiny.yaml    # any checkpoint, outside the pipeline
"""

from __future__ import annotations

from pathlib import Path

from configs.eval import EvalConfig
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from evaluation.checkpoint import resolve_checkpoint
from evaluation.evaluate import evaluate_checkpoint
from stagekit.workdir import WorkDir

SAMPLE_STORE = "eval_samples"  # beside the work directories of every stage


def run(cfg: EvalConfig, rollout: RolloutConfig, sandbox: SandboxConfig, label: str, inputs: dict[str, Path],
        out_dir: Path, work: WorkDir) -> dict:
    """Evaluate `inputs["checkpoint"]` (an `sft`, `rl_stage*` or `assets` artifact), named `label` in reports."""
    ckpt = resolve_checkpoint(str(inputs["checkpoint"]), label=label)
    results = evaluate_checkpoint(ckpt, cfg, rollout, sandbox, out_dir, work.root.parent / SAMPLE_STORE)
    return results.manifest_metrics()


def main() -> None:
    from orchestrator.cli import stage_main

    stage_main("eval_sft")


if __name__ == "__main__":
    main()
