"""Benchmark of the SFT step on CPU (issues 10 and 24): tokens/s of padded batches with TRL's
chunked LM head (the baseline), padded batches with the label-only head
(training/sft_head.py, `sft.lm_head: labelled`) and TRL's padding-free packing
(`sft.packing: true`), same model, conversations and global batch, measured in the same run
and interleaved.

    OMP_NUM_THREADS=1 python -m benchmarks.sft [--config configs/tiny.yaml] [--examples 256] [--steps 4]

Tokens/s counts the tokens that carry data (TRL's `num_tokens`, pads excluded) over the
wall time of the optimizer steps, the first step of each run left out (warm-up). The model
is the config's (the tiny config's 1.1M-parameter Qwen3 by default), the batch its SFT batch
(packed: `PACKED_ROWS` rows of `sft.max_seq_tokens`, about as many conversations).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from transformers import TrainerCallback

from assets.paths import asset_paths
from configs.data import ColdStartConfig, ColdStartSource
from configs.load import load_config
from configs.schema import SFTConfig
from data_prep import cold_start
from orchestrator.runner import run_stage
from orchestrator.stages import get_stage
from orchestrator.store import ArtifactStore
from stagekit import artifacts
from training.sft import build_trainer


class _StepClock(TrainerCallback):
    def __init__(self) -> None:
        self.marks: list[tuple[float, float]] = []  # (time, num_tokens) after each step

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "num_tokens" in logs:
            self.marks.append((time.perf_counter(), float(logs["num_tokens"])))


def tokens_per_s(cfg: SFTConfig, model: str, tokenizer: str, parquet: Path, steps: int, work: Path) -> float:
    trainer = build_trainer(cfg, model, tokenizer, parquet, work / "trainer", work, max_steps=steps + 1)
    clock = _StepClock()
    trainer.add_callback(clock)
    trainer.train()
    (t0, n0), (t1, n1) = clock.marks[0], clock.marks[-1]
    return (n1 - n0) / (t1 - t0)


PACKED_ROWS = 4  # a packed row holds sft.max_seq_tokens tokens, ~7 tiny conversations: 4 rows ~ 28 of them
ARMS = {  # label -> (packing, lm_head)
    "padded, TRL's chunked head": (False, "trl"),
    "padded, label-only head": (False, "labelled"),
    "packed, TRL's chunked head": (True, "trl"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sft")
    parser.add_argument("--config", default="configs/tiny.yaml")
    parser.add_argument("--examples", type=int, default=256)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        base = load_config(args.config, [f"run.artifacts_root={tmp / 'store'}"])
        store = ArtifactStore(base.run.artifacts_root)
        assets = asset_paths(store.local_path(run_stage(get_stage("assets"), base, {}, store)))
        (tmp / "cold").mkdir()
        cold_start.run(ColdStartConfig(sources=[ColdStartSource(source="synthetic", examples=args.examples)]), {},
                       tmp / "cold")
        rates: dict[str, list[float]] = {label: [] for label in ARMS}
        for r in range(args.repeats):
            for n, (label, (packing, head)) in enumerate(ARMS.items()):
                rows = {"global_batch_size": PACKED_ROWS, "micro_batch_per_device": PACKED_ROWS} if packing else {}
                cfg = base.sft.model_copy(update={"packing": packing, "lm_head": head,
                                                  "checkpoint_every_steps": 10_000, **rows})
                work = tmp / f"run-{r}-{n}"
                work.mkdir()
                rates[label].append(tokens_per_s(cfg, assets.model, assets.tokenizer, tmp / "cold" / artifacts.CHATS,
                                                 args.steps, work))
    medians = {label: statistics.median(v) for label, v in rates.items()}
    baseline = medians["padded, TRL's chunked head"]
    print(f"{args.config} model, {args.examples} synthetic conversations, global batch {base.sft.global_batch_size}, "
          f"{args.steps} timed steps, {args.repeats} repeats (median, range), ratio against the first:")
    for label, v in rates.items():
        print(f"  {label:<28} {medians[label]:8.0f} tokens/s ({min(v):.0f}-{max(v):.0f})  "
              f"{medians[label] / baseline:5.2f}x")


if __name__ == "__main__":
    main()
