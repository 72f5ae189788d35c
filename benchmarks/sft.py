"""Benchmark of the SFT stage's batching (issue 10, point 2): tokens/s of TRL's padding-free
packing (`sft.packing: true`) against padded batches, same model, same conversations,
same global batch, measured in the same run and interleaved.

    OMP_NUM_THREADS=1 python -m benchmarks.sft [--examples 128] [--steps 4] [--repeats 2]

Tokens/s counts the tokens that carry data (TRL's `num_tokens`, pads excluded) over the
wall time of the optimizer steps, the first step of each run left out (warm-up).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from transformers import TrainerCallback

from configs.data import ColdStartConfig, ColdStartSource
from configs.schema import PipelineConfig, SFTConfig
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sft")
    parser.add_argument("--examples", type=int, default=128)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        store = ArtifactStore(str(tmp / "store"))
        assets = store.local_path(run_stage(get_stage("assets"), PipelineConfig(), {}, store))
        (tmp / "cold").mkdir()
        cold_start.run(ColdStartConfig(sources=[ColdStartSource(source="synthetic", examples=args.examples)]), {},
                       tmp / "cold")
        model, tokenizer = str(assets / "model"), str(assets / "tokenizer")
        rates: dict[bool, list[float]] = {True: [], False: []}
        for r in range(args.repeats):
            for packing in (True, False):
                cfg = SFTConfig(lr=1e-3, global_batch_size=16, micro_batch_per_device=8, max_seq_tokens=1024,
                                packing=packing, checkpoint_every_steps=10_000)
                work = tmp / f"run-{r}-{packing}"
                work.mkdir()
                rates[packing].append(tokens_per_s(cfg, model, tokenizer, tmp / "cold" / artifacts.CHATS,
                                                   args.steps, work))
    packed, padded = statistics.median(rates[True]), statistics.median(rates[False])
    print(f"tiny model, {args.examples} synthetic conversations, global batch 16, {args.steps} timed steps, "
          f"{args.repeats} repeats (median, range):")
    print(f"  padding-free packing: {packed:8.0f} tokens/s ({min(rates[True]):.0f}-{max(rates[True]):.0f})")
    print(f"  padded batches:       {padded:8.0f} tokens/s ({min(rates[False]):.0f}-{max(rates[False]):.0f})")
    print(f"  ratio packing / padded: {packed / padded:.2f}")


if __name__ == "__main__":
    main()
