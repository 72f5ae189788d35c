"""The RL stages chained on the tiny model (issue 11 points 4, 5, 7): stage 1 → stage 2
(continues optimizer, schedule and step count) → the stage-3 filter → stage 3 (fresh
optimizer), each writing its model, trainer state, curves and plots.

The tiny base model never solves a problem, so every group is uniform: RoC drops them and
the step is skipped (tested), while plain `grpo` keeps them with zero advantages, so the
update, weight push, checkpoint and schedule still run (used for the chain)."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
import torch

from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from configs.schema import RLConfig, RLStageConfig, Stage3FilterConfig
from datalib.records import RLProblem
from datalib.synthetic import generate_problems
from datalib.tables import read_problems, write_problems
from stagekit import artifacts
from stagekit.workdir import WorkDir
from training import rl, stage3_filter

SHORT = {"max_response_tokens": 48, "max_turns": 2}


def _rl(**kw) -> RLConfig:
    base = {"lr": 1e-3, "warmup_steps": 2, "prompts_per_step": 2, "rollouts_per_prompt": 4, "kept_per_prompt": 2,
            "micro_batch_per_device": 4, "checkpoint_every_steps": 1, "algorithm": "grpo"}
    return RLConfig(**(base | kw))


@pytest.fixture(scope="module")
def inputs(tiny_assets, tmp_path_factory):
    base = tmp_path_factory.mktemp("rl")
    (base / "sft").mkdir()
    shutil.copytree(tiny_assets.model, base / "sft" / "model")  # an SFT artifact holds both
    shutil.copytree(tiny_assets.tokenizer, base / "sft" / "model", dirs_exist_ok=True)
    (base / "decontaminate").mkdir()
    problems = [RLProblem(p.id, "synthetic", p.problem, p.answer) for p in generate_problems(6, 0, "train")]
    write_problems(base / "decontaminate" / "problems.parquet", problems)
    return base


def _curves(out) -> list[dict]:
    return list(csv.DictReader((out / "curves.csv").open()))


def _stage(inputs, name: str, steps: int, rl_cfg: RLConfig, upstream: dict, tag: str):
    out = inputs / tag
    out.mkdir()
    metrics = rl.run(RLStageConfig(steps=steps, **SHORT), rl_cfg, RolloutConfig(), SandboxConfig(), name, upstream,
                     out, work=WorkDir(inputs / "work", name, tag))
    return out, metrics


@pytest.fixture(scope="module")
def chain(inputs):
    up = {"policy": inputs / "sft", "problems": inputs / "decontaminate"}
    s1, m1 = _stage(inputs, "rl_stage1", 2, _rl(), up, "s1")
    s2, m2 = _stage(inputs, "rl_stage2", 1, _rl(), {"policy": s1, "optimizer": s1, "problems": up["problems"]}, "s2")
    (inputs / "filter").mkdir()
    fm = stage3_filter.run(Stage3FilterConfig(rollouts_per_problem=2, drop_when_solved=2),
                           RLStageConfig(problems=4, **SHORT), RolloutConfig(), SandboxConfig(), 1.0, 0,
                           {"policy": s2, "problems": up["problems"]}, inputs / "filter")
    s3, m3 = _stage(inputs, "rl_stage3", 1, _rl(), {"policy": s2, "problems": inputs / "filter"}, "s3")
    return {"s1": (s1, m1), "s2": (s2, m2), "filter": (inputs / "filter", fm), "s3": (s3, m3)}


def test_stage_writes_model_state_curves_and_plot(chain):
    out, metrics = chain["s1"]
    assert metrics["steps"] == 2 and metrics["global_step"] == 2 and metrics["skipped_steps"] == 0
    for name in ("model/config.json", "model/tokenizer_config.json", "trainer_state/optimizer.bin", "curves.png"):
        assert (out / name).exists(), name
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    rows = _curves(out)
    assert [int(r["step"]) for r in rows] == [1, 2]
    for column in ("reward", "accuracy", "positives_kept", "negatives_kept", "groups_dropped",
                   "tool_calls_per_trajectory", "tool_error_ratio", "tool_error_ratio_correct", "p_format",
                   "response_len_mean", "response_len_p50", "response_len_p90", "truncation_ratio", "turns_mean",
                   "generation_s", "tool_s", "verification_s", "selection_s", "update_s", "tokens_per_s",
                   "loss", "grad_norm", "learning_rate"):
        assert column in rows[0], column
    assert int(rows[0]["trajectories"]) + int(rows[0]["failed"]) == 2 * 2  # grpo rolls out G per prompt
    assert float(rows[0]["response_len_mean"]) > 0 and float(rows[0]["tokens_per_s"]) > 0
    assert json.loads((out / artifacts.RL_STATE).read_text()) == {"global_step": 2}


def test_stage_two_continues_and_stage_three_starts_a_fresh_optimizer(chain):
    lr1 = [float(r["learning_rate"]) for r in _curves(chain["s1"][0])]
    lr2 = [float(r["learning_rate"]) for r in _curves(chain["s2"][0])]
    lr3 = [float(r["learning_rate"]) for r in _curves(chain["s3"][0])]
    assert lr1 == pytest.approx([5e-4, 1e-3])  # warmup over 2 optimizer steps
    assert lr2 == pytest.approx([1e-3])  # continues stage 1's schedule
    assert lr3 == pytest.approx([5e-4])  # fresh optimizer and schedule (SPEC §7)
    assert [int(r["step"]) for r in _curves(chain["s2"][0])] == [3]  # global step count goes on
    assert [int(r["step"]) for r in _curves(chain["s3"][0])] == [4]
    assert chain["s3"][1]["global_step"] == 4


def test_filter_reports_and_writes_what_stage_three_reads(chain):
    out, metrics = chain["filter"]
    assert metrics["problems_in"] == 4  # the first rl.stage3.problems of the curated set
    assert metrics["problems_kept"] + metrics["problems_removed"] == 4
    assert sum(metrics[f"solved_{k}_of_2"] for k in range(3)) == 4
    kept = read_problems(out / "problems.parquet")
    assert len(kept) == metrics["problems_kept"]
    rows = list(csv.DictReader((out / "solve_rates.csv").open()))
    assert len(rows) == 4 and {r["id"] for r in rows if r["kept"] == "1"} == {p.id for p in kept}
    assert (out / "solve_rates.png").exists() and "remain" in (out / "card.md").read_text()


def test_uniform_groups_are_dropped_and_the_step_skipped(inputs):
    up = {"policy": inputs / "sft", "problems": inputs / "decontaminate"}
    out, metrics = _stage(inputs, "rl_stage1", 1, _rl(algorithm="grpo_roc", kept_per_prompt=4), up, "roc")
    assert metrics["skipped_steps"] == 1
    row = _curves(out)[0]
    assert row["skipped"] == "1" and row["groups_dropped"] == "2" and row["kept"] == "0"
    assert "loss" not in row or row["loss"] == ""  # no optimizer step was made


@pytest.mark.parametrize("algorithm", ["prof", "blend"])
def test_prm_algorithms_build_the_tiny_prm_and_score_every_group(inputs, algorithm):
    """`prof.prm: tiny` builds a tiny PRM offline; PROF keeps uniform groups (advantage 0) as its code
    does; Blend keeps every group (reward r + 0.8 r_pro)."""
    up = {"policy": inputs / "sft", "problems": inputs / "decontaminate"}
    cfg = _rl(algorithm=algorithm, prof={"prm": "tiny", "rollouts": 4, "kept": 2})
    out, metrics = _stage(inputs, "rl_stage1", 1, cfg, up, algorithm)
    assert (inputs / "work" / "rl_stage1" / algorithm / "tiny_prm" / "config.json").exists()
    row = _curves(out)[0]
    if algorithm == "prof":  # uniform outcomes: m = 2 kept of each group, all with advantage 0
        assert metrics["skipped_steps"] == 0 and row["groups_dropped"] == "0" and row["kept"] == "4"
        assert float(row["grad_norm"]) == 0.0
    else:  # Blend's reward varies with the PRM: groups kept, an update made
        assert metrics["skipped_steps"] == 0 and row["kept"] == "4" and float(row["grad_norm"]) > 0


@pytest.mark.parametrize("algorithm", ["grpo_roc", "prof", "blend"])
def test_selection_is_unchanged_when_rollouts_run_a_step_ahead(inputs, algorithm):
    """`rl.max_staleness_steps: 1` (issue 26): each algorithm selects on whichever groups a step
    completed, as it does synchronously, and no kept trajectory is more than one step stale."""
    up = {"policy": inputs / "sft", "problems": inputs / "decontaminate"}
    cfg = _rl(algorithm=algorithm, max_staleness_steps=1, prof={"prm": "tiny", "rollouts": 4, "kept": 2},
              **({"kept_per_prompt": 4} if algorithm == "grpo_roc" else {}))
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the stage splits them between its two threads, and gives them back
    try:
        out, metrics = _stage(inputs, "rl_stage1", 2, cfg, up, f"{algorithm}-async")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    rows = _curves(out)
    assert len(rows) == 2 and all(float(r["staleness_max"]) <= 1 for r in rows)
    if algorithm == "grpo_roc":  # uniform groups dropped, both steps skipped, as synchronously
        assert metrics["skipped_steps"] == 2 and all(r["groups_dropped"] == "2" for r in rows)
    else:  # m = 2 kept of each group; step 2 rolled out under the weights before update 1
        assert metrics["skipped_steps"] == 0 and all(r["kept"] == "4" for r in rows)
        assert [float(r["staleness_max"]) for r in rows] == [0.0, 1.0]
