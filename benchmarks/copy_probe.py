"""Diagnostic for the tiny SFT (issue 10, point 6): can the tiny model learn to copy digits,
with and without the protocol's system prompt and tools block in front?

Each sequence is [prefix] + 12 random digits + `=` + the same 12 digits; loss is on the
copy only, so chance is ln 10 = 2.30. The first two runs start from the same weights and see
the same digits; only the prefix differs. A third run continues the no-prefix model with
the prefix: does copying learned on short sequences carry over? A tool-use conversation
needs this copying (problem numbers into the program, the tool's output into the answer).

    OMP_NUM_THREADS=1 python -m benchmarks.copy_probe [--steps 300] [--batch 8] [--lr 2e-3]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from configs.schema import PipelineConfig
from orchestrator.runner import run_stage
from orchestrator.stages import get_stage
from orchestrator.store import ArtifactStore
from rollout.prompt import SYSTEM_PROMPT, TOOL_SCHEMA

DIGITS = 12


def protocol_prefix(tokenizer) -> list[int]:
    """The tokens every conversation starts with: system prompt and tools block."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    return list(tokenizer.apply_chat_template(messages, tools=[TOOL_SCHEMA], tokenize=True, return_dict=False))


def copy_losses(model, tokenizer, prefix: list[int], steps: int, batch: int, lr: float,
                every: int) -> list[tuple[int, float]]:
    digits = [tokenizer.convert_tokens_to_ids(str(i)) for i in range(10)]
    sep = tokenizer.convert_tokens_to_ids("=")
    rng = random.Random(0)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    out, window = [], []
    for step in range(1, steps + 1):
        rows = []
        for _ in range(batch):
            s = [rng.choice(digits) for _ in range(DIGITS)]
            rows.append(prefix + s + [sep] + s)
        x = torch.tensor(rows)
        labels = x.clone()
        labels[:, : len(prefix) + DIGITS + 1] = -100
        loss = model(input_ids=x, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        window.append(loss.item())
        if step % every == 0:
            out.append((step, sum(window) / len(window)))
            window = []
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.copy_probe")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--every", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(str(Path(tmp) / "store"))
        assets = store.local_path(run_stage(get_stage("assets"), PipelineConfig(), {}, store))
        tokenizer = AutoTokenizer.from_pretrained(assets / "tokenizer")
        prefix = protocol_prefix(tokenizer)
        curves = {}
        short = AutoModelForCausalLM.from_pretrained(assets / "model")
        runs = (("no prefix", [], short),
                (f"{len(prefix)}-token prefix", prefix, AutoModelForCausalLM.from_pretrained(assets / "model")),
                ("prefix, after no-prefix run", prefix, short))  # continues the first run's weights
        for name, pre, model in runs:
            t0 = time.time()
            curves[name] = copy_losses(model, tokenizer, pre, args.steps, args.batch, args.lr, args.every)
            print(f"{name}: {time.time() - t0:.0f} s")
    print(f"\ncopy loss (mean over the last {args.every} steps; chance = 2.30)")
    names = list(curves)
    print(f"{'step':>6}  " + "  ".join(f"{n:>28}" for n in names))
    for i, (step, _) in enumerate(curves[names[0]]):
        print(f"{step:>6}  " + "  ".join(f"{curves[n][i][1]:>28.3f}" for n in names))


if __name__ == "__main__":
    main()
