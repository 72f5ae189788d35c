"""Where the time of one RL step goes (issue 11 point 8): generation, tool calls,
verification, selection and update, on the tiny config's shapes, and selection at the
paper's shape (512 prompts x 32 rollouts) for scale.

    OMP_NUM_THREADS=1 python -m benchmarks.rl_step [--model DIR] [--steps 2] [--algorithm grpo_roc]

`--model`: a policy checkpoint (an SFT artifact's `model/`); default the tiny base built
offline. A policy that never solves gives uniform groups, which RoC drops: the update is
then timed on the step's own trajectories with alternating advantages (same tokens, same
cost) and the table says so. The time split is wall clock; rollout time is shared between
generation and tools by the seconds trajectories awaited each (training/rl_metrics.py).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

from transformers import AutoTokenizer

from assets.paths import asset_paths
from configs.schema import PipelineConfig, RLConfig, RoCConfig
from datalib.records import RLProblem
from datalib.synthetic import generate_problems
from orchestrator.runner import run_stage
from orchestrator.stages import get_stage
from orchestrator.store import ArtifactStore
from rollout.runtime import build_runtime
from rollout.trajectory import ToolCallRecord, Trajectory
from training.rl import push_weights, rollout_step, step_problems
from training.rl_policy import Policy
from training.selection import select_batch

PHASES = ("generation_s", "tool_s", "verification_s", "selection_s", "update_s")


async def _steps(model: str, tokenizer_dir: str, cfg: PipelineConfig, steps: int, scratch: Path) -> list[dict]:
    rl, stage = cfg.rl, cfg.rl.stage1
    problems = [RLProblem(p.id, "synthetic", p.problem, p.answer) for p in generate_problems(64, 0, "train")]
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    policy = Policy(model, rl, tokenizer.pad_token_id or 0)
    rows = []
    async with build_runtime(cfg.rollout, cfg.sandbox, model, tokenizer_dir) as rt:
        for step in range(steps):
            t0 = time.perf_counter()
            result = await rollout_step(
                rt, step_problems(problems, step, rl.prompts_per_step, rl.seed), stage, rl, step, None)
            row, kept, advantages = result.metrics, result.kept, result.advantages
            row["update_on"] = "kept" if kept else "stand-in"
            if not kept:  # see module docstring
                kept = result.scored[: rl.kept_per_prompt * rl.prompts_per_step]
                advantages = [(-1.0) ** i for i in range(len(kept))]
            t1 = time.perf_counter()
            policy.update(kept, advantages)
            await push_weights(rt, policy, scratch, tokenizer)
            row["update_s"] = time.perf_counter() - t1
            row["step_s"] = time.perf_counter() - t0
            rows.append(row)
    return rows


def _paper_shape_selection(seed: int = 0) -> dict[str, float]:
    """select_batch on 512 x 32 made-up trajectories (40 % correct, 1-6 tool calls, ~6K chars)."""
    rng = random.Random(seed)
    turn = ("<reason>" + "we compute the sum of the squares step by step. " * 30 + "</reason>\n<tool_call>"
            '{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>')
    final = "<reason>so it follows.</reason>\n<answer>The answer is \\boxed{285}.</answer>"

    def trajectory() -> Trajectory:
        n = rng.randint(1, 6)
        calls = [ToolCallRecord(k, rng.choice(["ok", "ok", "ok", "error"]), 0.0, 10) for k in range(n)]
        return Trajectory(0, 0, [], turns=[turn] * n + [final], tool_calls=calls, reward=float(rng.random() < 0.4))

    groups = [[trajectory() for _ in range(32)] for _ in range(512)]
    out = {}
    for name, cfg in (("grpo_roc sample", RLConfig()), ("grpo_roc topk", RLConfig(roc=RoCConfig(selection="topk")))):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            select_batch(groups, cfg, random.Random(1))
            best = min(best, time.perf_counter() - t0)
        out[name] = best
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rl_step")
    parser.add_argument("--model", help="policy checkpoint dir (default: the tiny base, built here)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--algorithm", default="grpo_roc", choices=["grpo_roc", "grpo"])
    args = parser.parse_args()
    from configs.load import load_config

    cfg = load_config("configs/tiny.yaml", [f"rl.algorithm={args.algorithm}"])
    with tempfile.TemporaryDirectory() as tmp:
        model = tokenizer = args.model
        if model is None:
            store = ArtifactStore(str(Path(tmp) / "store"))
            paths = asset_paths(store.local_path(run_stage(get_stage("assets"), cfg, {}, store)))
            model, tokenizer = paths.model, paths.tokenizer
        rows = asyncio.run(_steps(model, tokenizer, cfg, args.steps, Path(tmp) / "policy"))
    rl = cfg.rl
    print(f"\nOne RL step on the tiny config: {rl.prompts_per_step} prompts x {rl.rollouts_per_prompt} rollouts, "
          f"up to {rl.stage1.max_response_tokens} tokens and {rl.stage1.max_turns} turns ({args.algorithm})")
    print(f"{'step':>4}  " + "  ".join(f"{p[:-2]:>13}" for p in PHASES) + f"  {'total':>8}  update on")
    for i, row in enumerate(rows):
        total = row["step_s"]
        cells = "  ".join(f"{row[p]:6.2f}s {100 * row[p] / total:4.1f}%" for p in PHASES)
        print(f"{i + 1:>4}  {cells}  {total:7.2f}s  {row['update_on']}")
    share = max(row["selection_s"] / row["step_s"] for row in rows)
    print(f"selection share of the step: at most {100 * share:.3f} % (target < 1 %)")
    for name, seconds in _paper_shape_selection().items():
        print(f"selection at the paper's shape (512 x 32), {name}: {1000 * seconds:.0f} ms (best of 3)")


if __name__ == "__main__":
    main()
