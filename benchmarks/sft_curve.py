"""Held-out accuracy along one SFT run: where the tiny model starts to solve problems.

    OMP_NUM_THREADS=1 python -m benchmarks.sft_curve --config configs/learning.yaml \\
        [--steps 800] [--every 100] [--problems 100] [--samples 4] [--teacher-forced] [--set KEY=VALUE ...]

It builds the config's `assets` and `cold_start` in its store, trains with the SFT stage's
own trainer (`training.sft.build_trainer`, the config's `sft` section) for `--steps`,
keeps a checkpoint every `--every` steps, then measures each checkpoint as the SFT stage
does (`training.heldout`: the generated held-out problems, rollout runtime and code
service, T 0.6, standard error over problems). How `configs/learning.yaml` chose its SFT
length.

`--teacher-forced` measures each checkpoint instead by one forward pass over held-out
demonstrations (no failing call): the share the model reproduces exactly under greedy
choice at every assistant token, and the mean probability that a sample at T 0.6
reproduces one. Both are lower bounds of accuracy (another program can be right too), and
they cost seconds rather than the rollouts' minutes: the way to compare settings by where
the jump in copying falls.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from assets.paths import asset_paths
from configs.load import load_config
from datalib import synthetic
from orchestrator.runner import run_stage
from orchestrator.stages import get_stage
from orchestrator.store import ArtifactStore
from stagekit import artifacts
from training.heldout import heldout_accuracy
from training.sft import build_trainer
from training.sft_data import chat_message, training_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sft_curve")
    parser.add_argument("--config", default="configs/learning.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--teacher-forced", action="store_true", help="score demonstrations, no rollouts")
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
            if args.teacher_forced:
                rows.append((step, teacher_forced(ckpt, assets.tokenizer, args.problems)))
                continue
            acc = heldout_accuracy(cfg.sft.heldout, ckpt, ckpt, cfg.rollout, cfg.sandbox, args.problems, args.samples)
            rows.append((step, acc))
    if args.teacher_forced:
        print(f"\nSFT of {args.config}: {args.steps} steps in {seconds:.0f} s ({seconds / args.steps:.2f} s/step); "
              f"{args.problems} held-out demonstrations, teacher-forced")
        print(f"{'step':>6}  {'greedy exact':>12}  {'P(sample = demo), T 0.6':>24}")
        for step, (exact, p_sample) in rows:
            print(f"{step:>6}  {exact:12.3f}  {p_sample:24.3g}")
        return
    print(f"\nSFT of {args.config}: {args.steps} steps in {seconds:.0f} s ({seconds / args.steps:.2f} s/step); "
          f"held-out: {args.problems} problems x {args.samples} samples, T {cfg.sft.heldout.temperature}")
    print(f"{'step':>6}  {'accuracy':>8}  {'± se':>6}  {'tool calls':>10}")
    for step, acc in rows:
        print(f"{step:>6}  {acc.pass1:8.3f}  {acc.pass1_stderr:6.3f}  {acc.tool_calls_per_trajectory:10.2f}")


def teacher_forced(model_dir: str, tokenizer_dir: str, problems: int) -> tuple[float, float]:
    """(greedy exact share, mean P(a T-0.6 sample is the demonstration)) over held-out demonstrations."""
    import torch
    from transformers import AutoModelForCausalLM

    tok = training_tokenizer(tokenizer_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    exact, p_sample = 0, 0.0
    for p in synthetic.generate_problems(problems, 0, stream="eval"):
        messages = [m.to_row() for m in synthetic.demonstration(p.problem, p.answer, p.program, "")]
        rows = [chat_message(m, f"held-out demonstration {p.id}") for m in messages]
        enc = tok.apply_chat_template(rows, tools=list(synthetic.tools()), return_dict=True,
                                      return_assistant_tokens_mask=True, tokenize=True)
        ids = torch.tensor([enc["input_ids"]])
        mask = torch.tensor(enc["assistant_masks"][1:], dtype=torch.bool)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, :-1].float()
        target = ids[0, 1:]
        exact += int((logits.argmax(-1)[mask] == target[mask]).all())
        logp = torch.log_softmax(logits / 0.6, -1).gather(-1, target[:, None]).squeeze(-1)
        p_sample += float(logp[mask].sum().exp())
    return exact / problems, p_sample / problems


if __name__ == "__main__":
    main()
