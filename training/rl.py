"""Stages `rl_stage1`, `rl_stage2`, `rl_stage3`: agentic RL with GRPO-RoC, or plain GRPO,
PROF or Blend by `rl.algorithm` (SPEC §5-§7).

A step: take `prompts_per_step` problems, roll out the algorithm's group per problem with
the dynamic scheduler (rollout runtime + code service), reward by math-verify, select
(training/selection.py), compute advantages over the kept group, make one optimizer step
(training/rl_policy.py) and push the new weights to the engines (in memory for `hf`;
written to disk and loaded by `update_weights_from_disk` otherwise). By default the rollouts
of a step all finish before the update, so every step is on-policy; with
`rl.max_staleness_steps` k > 0 the engines roll out the next k steps while the trainer
updates (training/rl_async.py). A step where no group survives selection is skipped and
logged. Failed trajectories are counted and left out.

Inputs, by role (orchestrator/stages.py wires them): `policy`, the model of the stage
before (its `rl_state.json`, when it has one, says which global step to count from);
`problems`; and, for stage 2, `optimizer`, whose optimizer and schedule it continues.
Stage 3 has no `optimizer` input: it starts a fresh one (SPEC §7). Problems are taken in
a seeded order that depends only on the step, and every random choice is seeded by the
step, so a run killed and resumed from its last checkpoint repeats the same steps.
Output: `model/`, `trainer_state/` (optimizer, schedule: what the next stage continues),
`curves.csv`, `curves.png`, `tensorboard/`.

    python -m training.rl --stage rl_stage1 --config configs/tiny.yaml
    accelerate launch --config_file configs/accelerate/zero3.yaml -m training.rl --stage rl_stage1 \\
        --config configs/rstar2_agent_14b.yaml
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import shutil
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
from accelerate.utils import broadcast_object_list
from transformers import AutoTokenizer

from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from configs.schema import RLConfig, RLStageConfig
from datalib.records import RLProblem
from datalib.tables import read_problems
from rollout.groups import Problem
from rollout.runtime import RolloutRuntime, build_runtime
from rollout.trajectory import Trajectory
from stagekit import artifacts, progress
from stagekit.workdir import WorkDir
from training.prm import prm_response
from training.rl_async import RolloutsAhead, WeightSteps
from training.rl_metrics import RLCurves, plot_rl_curves, rollout_metrics, time_split
from training.rl_policy import Policy
from training.selection import rollouts_per_prompt, select_batch

log = logging.getLogger(__name__)



def step_problems(problems: list[RLProblem], step: int, per_step: int, seed: int) -> list[RLProblem]:
    """The problems of global step `step`: epochs of seeded permutations, read in order."""
    orders: dict[int, list[int]] = {}  # one permutation per epoch the step touches (at most two)
    out = []
    for i in range(step * per_step, (step + 1) * per_step):
        epoch, pos = divmod(i, len(problems))
        if epoch not in orders:
            orders[epoch] = list(range(len(problems)))
            random.Random(f"{seed}:{epoch}").shuffle(orders[epoch])
        out.append(problems[orders[epoch][pos]])
    return out


async def push_weights(rt: RolloutRuntime, policy: Policy, scratch: Path, tokenizer) -> int:
    """The policy's weights to every engine, between requests; returns their weight version."""
    if all(hasattr(e, "load_state_dict") for e in rt.engines):
        return await rt.load_state_dict(policy.state_dict())
    policy.save_model(scratch, tokenizer)
    return await rt.update_weights(str(scratch))


def zero_truncated(groups: list[list[Trajectory]], rule: str) -> int:
    """Under `rl.truncated_reward: zero`, a trajectory cut by the token budget scores 0 (SPEC §6);
    returns how many had scored 1 (an answer boxed before the cut)."""
    if rule == "score":
        return 0
    cut = [t for g in groups for t in g if t.finish_reason == "length"]
    zeroed = sum(t.reward > 0 for t in cut)
    for t in cut:
        t.reward = 0.0
    return zeroed


@dataclass
class StepRollout:
    kept: list[Trajectory]  # the trajectories the update trains on
    advantages: list[float]  # one per kept trajectory
    metrics: dict[str, float]  # training/rl_metrics.py
    scored: list[Trajectory]  # every scored trajectory of the step (failed ones left out)


async def rollout_step(rt: RolloutRuntime, problems: list[RLProblem], cfg: RLStageConfig, rl: RLConfig,
                       step: int, prm) -> StepRollout:
    """Roll out, reward and select one step's groups."""
    settings = rt.cfg.sampling(rl.temperature, cfg.max_response_tokens, cfg.max_turns, seed=rl.seed * 1_000_003 + step)
    groups = await rt.sample_and_score([Problem(p.problem, str(p.answer)) for p in problems],
                                       rollouts_per_prompt(rl), settings)
    t2 = time.perf_counter()
    scored_groups = [g.scored for g in groups]
    outcome = [t.reward for g in scored_groups for t in g]  # the curves' accuracy: answers as scored
    zeroed = zero_truncated(scored_groups, rl.truncated_reward)  # the training reward
    step_scores = None
    if prm is not None:
        special_tokens = rt.fmt.tokenizer.all_special_tokens  # the policy's: its turns keep them (decode)
        step_scores = [prm.step_scores([problems[i].problem] * len(g),
                                       [prm_response(t.model_text, special_tokens) for t in g], rl.prm_batch_size)
                       for i, g in enumerate(scored_groups)]
    selections = select_batch(scored_groups, rl, random.Random(f"{rl.seed}:select:{step}"), step_scores)
    t3 = time.perf_counter()
    kept, advantages = [], []
    for g, sel in zip(scored_groups, selections, strict=True):
        kept += [g[i] for i in sel.kept]
        advantages += sel.advantages
    scored = [t for g in scored_groups for t in g]
    metrics = rollout_metrics(scored, groups.failed, selections, outcome)
    metrics |= time_split(scored, groups.rollout_s) | {"verification_s": groups.verification_s, "selection_s": t3 - t2,
                                                       "truncated_correct_zeroed": zeroed}
    return StepRollout(kept, advantages, metrics, scored)


def staleness_metrics(staleness: list[int], bound: int, stage: str) -> dict[str, float]:
    """The kept trajectories' staleness (steps since their oldest weights); past the bound is a bug."""
    if staleness and max(staleness) > bound:
        raise RuntimeError(f"{stage}: a trajectory {max(staleness)} steps stale reached the update "
                           f"(rl.max_staleness_steps is {bound})")
    n = max(len(staleness), 1)
    return {"staleness_mean": sum(staleness) / n, "staleness_max": max(staleness, default=0)}


@asynccontextmanager
async def _trainer_pool(k: int, policy: Policy) -> AsyncIterator[ThreadPoolExecutor | None]:
    """Asynchronous: the trainer's own thread, so that the event loop goes on rolling out (engine
    batches, tool calls) while it updates. Synchronous (k = 0): None, the update runs inline."""
    if k == 0:
        yield None
        return
    before = torch.get_num_threads()
    # On CPU both halves then compute at once: each gets half of the process's intra-op
    # threads (OMP_NUM_THREADS=2: a core each) rather than all of them twice over.
    threads = max(1, before // 2)
    torch.set_num_threads(threads)
    pool = ThreadPoolExecutor(1, "trainer", initializer=_trainer_thread, initargs=(policy, threads))
    try:
        yield pool
    finally:
        pool.shutdown()
        torch.set_num_threads(before)


def _trainer_thread(policy: Policy, threads: int) -> None:
    policy.bind_thread()
    torch.set_num_threads(threads)  # per thread under OpenMP: set where the ops run


def _checkpoint(work: WorkDir, step: int, policy: Policy, out_dir: Path) -> None:
    """Every process writes its part of the state (accelerate: weights and optimizer from the
    main one, RNG states from each) to one staging dir; the main process then commits it."""
    staging = work.path / "staging"
    if policy.rank == 0:
        shutil.rmtree(staging, ignore_errors=True)
    policy.accelerator.wait_for_everyone()
    policy.save_state(staging)
    policy.accelerator.wait_for_everyone()
    if policy.rank == 0:
        with work.checkpoint(step) as path:
            shutil.move(staging, path / artifacts.TRAINER_STATE)
            shutil.copy(out_dir / artifacts.CURVES, path / artifacts.CURVES)
    policy.accelerator.wait_for_everyone()


def _load_prm(rl: RLConfig, scratch: Path, tokenizer_dir: Path):
    """PROF/Blend's PRM: a hub id or path, or `tiny` (built here, offline, on the policy's tokenizer)."""
    if rl.algorithm not in ("prof", "blend"):
        return None
    from training.prm import ProcessRewardModel

    name = rl.prof.prm
    if name == "tiny":
        from training.tiny_prm import build_tiny_prm

        name = str(build_tiny_prm(scratch / "tiny_prm", seed=rl.seed, tokenizer_dir=tokenizer_dir))
    return ProcessRewardModel.from_pretrained(name, max_length=rl.prof.prm_max_tokens)


async def _train(cfg: RLStageConfig, rl: RLConfig, rollout: RolloutConfig, sandbox: SandboxConfig, stage: str,
                 inputs: dict[str, Path], out_dir: Path, scratch: Path, work: WorkDir | None) -> dict:
    policy_dir, problems_file = inputs["policy"], inputs["problems"] / artifacts.PROBLEMS
    problems = read_problems(problems_file)
    if cfg.problems is not None:
        problems = problems[: cfg.problems]
    if not problems:
        raise ValueError(f"{stage}: no problems in {problems_file}")
    model_dir = policy_dir / artifacts.MODEL
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    policy = Policy(str(model_dir), rl, tokenizer.pad_token_id or 0)
    state_file = policy_dir / artifacts.RL_STATE  # an RL policy says where its steps ended; SFT's starts at 0
    first = json.loads(state_file.read_text())["global_step"] if state_file.exists() else 0
    if "optimizer" in inputs:
        policy.load_state(inputs["optimizer"] / artifacts.TRAINER_STATE)
    ckpt = work.latest() if work else None
    done = ckpt.step if ckpt else 0
    if ckpt:
        policy.load_state(ckpt.path / artifacts.TRAINER_STATE)
        if (ckpt.path / artifacts.CURVES).exists() and policy.rank == 0:  # the output dir starts empty per attempt
            shutil.copy(ckpt.path / artifacts.CURVES, out_dir / artifacts.CURVES)
        log.info("%s: resumed after step %d of %d", stage, done, cfg.steps)
    curves = RLCurves(out_dir, first + done) if policy.rank == 0 else None
    main = policy.rank == 0
    prm = _load_prm(rl, scratch.parent, model_dir) if main else None
    runtime = build_runtime(rollout, sandbox, str(model_dir), str(model_dir), progress=progress.report) if main \
        else nullcontext(None)
    k = rl.max_staleness_steps
    async with runtime as rt, _trainer_pool(k, policy) as trainer:
        async def on_trainer(fn, *args):  # noqa: ANN001, ANN202
            return await asyncio.get_running_loop().run_in_executor(trainer, fn, *args) if trainer else fn(*args)

        if main and ckpt:
            await push_weights(rt, policy, scratch, tokenizer)
        weights = WeightSteps(done, rt.weight_version if main else 0)

        async def roll(i: int) -> StepRollout:
            # The rollouts' progress fills the first 90 % of this step's slice of the bar.
            with progress.step(i, cfg.steps, f"{stage}: step {i + 1}/{cfg.steps}"), progress.share(0.0, 0.9):
                return await rollout_step(rt, step_problems(problems, first + i, rl.prompts_per_step, rl.seed),
                                          cfg, rl, first + i, prm)

        ahead = RolloutsAhead(range(done, cfg.steps), k, weights, roll) if main else nullcontext()
        async with ahead:
            for i in range(done, cfg.steps):
                step = first + i
                t0 = time.perf_counter()
                if main:
                    result, started_at = await ahead.get()
                    row = result.metrics | staleness_metrics(weights.staleness(i, result.kept, started_at), k, stage)
                    payload = [(result.kept, result.advantages, row)]
                else:
                    payload = [None]
                # Rolled out once, on the main process; every process gets the kept list.
                kept, advantages, row = broadcast_object_list(payload)[0] if policy.world > 1 else payload[0]
                t1 = time.perf_counter()
                if kept:
                    row |= vars(await on_trainer(policy.update, kept, advantages))
                else:
                    log.warning("%s step %d: no group survived selection; the step is skipped", stage, step + 1)
                t2 = time.perf_counter()
                if main:
                    version = await push_weights(rt, policy, scratch, tokenizer) if kept else None
                    await weights.advance(i + 1, version)
                    row |= {"step": step + 1, "update_s": t2 - t1, "step_s": time.perf_counter() - t0,
                            "rollout_wall_s": t1 - t0, "kept": len(kept), "skipped": int(not kept)}
                    curves.log(row)
                    progress.report(i + 1, cfg.steps, f"{stage}: step {i + 1}/{cfg.steps}")
                if work and ((i + 1) % rl.checkpoint_every_steps == 0 or i + 1 == cfg.steps):
                    await on_trainer(_checkpoint, work, i + 1, policy, out_dir)
    policy.save_model(out_dir / artifacts.MODEL, tokenizer)
    policy.save_state(out_dir / artifacts.TRAINER_STATE)
    if not main:
        return {}
    curves.close()
    (out_dir / artifacts.RL_STATE).write_text(json.dumps({"global_step": first + cfg.steps}))
    plot_rl_curves(out_dir / artifacts.CURVES, out_dir / artifacts.CURVES_PLOT, f"{stage} ({rl.algorithm})")
    last = curves.rows[-1] if curves.rows else {}
    skipped = sum(int(r["skipped"]) for r in curves.rows)
    return {"steps": cfg.steps, "global_step": first + cfg.steps, "skipped_steps": skipped,
            "resumed_from_step": done, "final_reward": float(last.get("reward", "nan")),
            "mean_reward": sum(float(r["reward"]) for r in curves.rows) / max(len(curves.rows), 1)}


def run(cfg: RLStageConfig, rl: RLConfig, rollout: RolloutConfig, sandbox: SandboxConfig, stage: str,
        inputs: dict[str, Path], out_dir: Path, work: WorkDir | None = None) -> dict:
    scratch = (work.path if work else out_dir / "_work") / "policy"  # weights for disk-loading engines
    metrics = asyncio.run(_train(cfg, rl, rollout, sandbox, stage, inputs, out_dir, scratch, work))
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()  # NOTES.md: without this a gloo run aborts at exit (SIGABRT) 2 runs in 3
        torch.distributed.destroy_process_group()
    shutil.rmtree(out_dir / "_work", ignore_errors=True)
    return metrics


def main() -> None:
    import sys

    from orchestrator.cli import stage_main

    stage_main(sys.argv[sys.argv.index("--stage") + 1] if "--stage" in sys.argv else "rl_stage1")


if __name__ == "__main__":
    main()
