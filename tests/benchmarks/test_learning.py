"""The learning proof, reduced to a few steps for CI (issue 13 point 4): the whole experiment
runs through the real stages, both RL arms start from one SFT checkpoint, reward and loss
stay finite, both arms' weights move, and the report is written.

A tiny model that learns the synthetic task needs a few hundred SFT steps (README), too long
for CI. So this run's SFT half-learns 8 demonstrations and RL trains on the same 8 problems
(given as a local DAPO-format file): the policy then solves some of its rollouts and not
others, which gives real, non-zero advantages without any stand-in reward. Since q/k-norm
1.0 (issue 24) 200 epochs memorised them outright, so every group was uniform and RoC never
updated, and 60 solved none; 100 epochs with room for the failed-first-call demonstrations
(300 tokens; at 160 those were always cut) solve about half.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from safetensors.torch import load_file

from benchmarks.learning import ARMS, graph_nodes, run, seed_overrides
from benchmarks.learning_seeds import pooled, write_seeds_report
from datalib import synthetic
from datalib.intake import entry_labels

DEMOS = 8


def _overrides(root, rl_file) -> list[str]:
    return [
        f"run.artifacts_root={root / 'store'}",
        f"data.cold_start.sources=[{{source: synthetic, examples: {DEMOS}}}]",
        "sft.epochs=100", "sft.lr=6e-3", f"sft.global_batch_size={DEMOS}", f"sft.micro_batch_per_device={DEMOS}",
        f"data.rl_curation.sources=[{{source: dapo_math, location: {rl_file}}}]",
        "data.decontaminate.synthetic_eval_problems=8",
        "rl.stage1.steps=2", "rl.prompts_per_step=4", "rl.rollouts_per_prompt=8", "rl.kept_per_prompt=4",
        "rl.checkpoint_every_steps=1", "rl.stage1.max_response_tokens=300", "rl.stage1.max_turns=3",
        "eval.samples_per_problem=2", "eval.pass_k=[1, 2]", "eval.max_response_tokens=64", "eval.max_turns=2",
        "eval.benchmarks=[{name: synthetic_eval, location: synthetic, problems: 8}]",
    ]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("learning")
    label = entry_labels(["synthetic"])[0]  # the SFT demonstrations' problems, as cold_start draws them
    rl_file = root / "memorised.jsonl"
    rl_file.write_text("".join(json.dumps({"prompt": p.problem, "solution": str(p.answer)}) + "\n"
                               for p in synthetic.generate_problems(DEMOS, 0, stream=f"sft-{label}")))
    return run("configs/learning.yaml", _overrides(root, rl_file), root / "report", quiet=True)


def test_report_is_written(report):
    for name in ("learning.md", "learning.csv", "learning.png", "learning.json"):
        assert (report / name).stat().st_size > 0, name
    text = (report / "learning.md").read_text()
    assert "| sft |" in text and "| grpo_roc |" in text and "| grpo |" in text
    assert "falls faster under RoC" in text
    assert "| grpo_roc_async |" in text and "## Asynchronous RL (issue 26)" in text
    assert (report / "async.png").stat().st_size > 0


def test_reward_and_loss_are_finite_and_both_arms_update(report):
    curves = pd.read_csv(report / "learning.csv")
    assert set(curves["arm"]) == set(ARMS)
    for arm, df in curves.groupby("arm"):
        assert len(df) == 2, arm
        assert all(math.isfinite(r) for r in df["reward"]), arm
        losses = df["loss"].dropna()
        assert len(losses) >= 1 and all(math.isfinite(x) for x in losses), f"{arm}: no finite update"


def test_both_arms_start_from_the_same_rollouts(report):
    """Same SFT policy, same seeds, same number of rollouts: step 1 rolls out the same trajectories."""
    curves = pd.read_csv(report / "learning.csv")
    first = curves[curves["step"] == curves["step"].min()].set_index("arm")
    for col in ("trajectories", "reward", "accuracy", "response_len_mean", "tool_calls_per_trajectory"):
        assert first.loc["grpo_roc", col] == first.loc["grpo", col], col


def test_the_async_arm_runs_a_step_ahead_within_the_bound(report):
    """k = 1: step 2's rollouts begin under the SFT weights, before update 1 lands, so its
    trajectories are one step stale when trained; none is more."""
    curves = pd.read_csv(report / "learning.csv")
    steps = {arm: df.set_index("step") for arm, df in curves.groupby("arm")}
    assert list(steps["grpo_roc_async"]["staleness_max"]) == [0, 1]
    assert (steps["grpo_roc"]["staleness_max"] == 0).all()
    summary = json.loads((report / "learning.json").read_text())["async"]
    assert summary["step_s"]["grpo_roc"] > 0 and summary["step_s"]["grpo_roc_async"] > 0
    assert summary["speedup"] == pytest.approx(summary["step_s"]["grpo_roc"] / summary["step_s"]["grpo_roc_async"])
    assert len(summary["pass1_async_minus_sync"]) == 3
    split = summary["time_split"]
    for arm in ("grpo_roc", "grpo_roc_async"):  # the curves' step time, its mean per arm
        assert split[arm]["step_s"] == pytest.approx(steps[arm]["step_s"].mean())
    assert "trainer waits for rollouts" in (report / "learning.md").read_text()


def test_weights_changed_in_both_arms(report):
    summary = json.loads((report / "learning.json").read_text())
    sft = load_file(f"{summary['artifacts']['sft']}/model/model.safetensors")
    for arm in ARMS:
        rl = load_file(f"{summary['artifacts'][f'rl_{arm}']}/model/model.safetensors")
        moved = max((rl[k] - sft[k]).abs().max().item() for k in sft)
        assert moved > 1e-6, f"{arm}: weights did not change"


def test_the_graph_feeds_each_arm_its_own_checkpoint():
    nodes = graph_nodes()
    for arm in ARMS:
        assert nodes[f"rl {arm}"].feeds == {"sft": "sft", "decontaminate": "decontaminate"}
        assert nodes[f"eval {arm}"].stage == "eval_rl_stage1"
        assert nodes[f"eval {arm}"].feeds == {"rl_stage1": f"rl {arm}"}
    assert nodes["eval sft"].feeds == {"sft": "sft"} and nodes["rl grpo"].arm == "grpo"
    assert seed_overrides(2) == ["model.tiny.init_seed=2", "sft.seed=2", "rl.seed=2"]


def test_seeds_report_pools_each_claim(report, tmp_path):
    base = json.loads((report / "learning.json").read_text())
    seeds = {}
    # RoC's gain over SFT per seed (0.10 ± 0.02, 0.04 ± 0.03, 0.07 ± 0.02): pooled 0.07 ± 0.0137
    for seed, (gain, se) in enumerate([(0.10, 0.02), (0.04, 0.03), (0.07, 0.02)]):
        s = json.loads(json.dumps(base))
        s["gains"]["grpo_roc"] = [gain, se, 8]
        s["gains"]["grpo"] = [0.01, 0.02, 8]
        s["error_ratio_correct_roc_minus_grpo"] = [-0.05, 0.01]
        (tmp_path / f"seed-{seed}").mkdir()
        (tmp_path / f"seed-{seed}" / "learning.json").write_text(json.dumps(s))
        seeds[seed] = tmp_path / f"seed-{seed}"
    assert pooled([(0.10, 0.02), (0.04, 0.03), (0.07, 0.02)]) == pytest.approx((0.07, math.sqrt(0.0017) / 3))
    out = write_seeds_report(seeds, tmp_path)
    text = (out / "seeds.md").read_text()
    assert "| RL (grpo_roc) - SFT, test pass@1 | 0.100 ± 0.020 (5.0) | 0.040 ± 0.030 (1.3) | 0.070 ± 0.020 (3.5) " \
           "| 0.070 ± 0.014 (5.1) | **holds** | 2 of 3 |" in text
    assert "| RL (grpo) - SFT, test pass@1 |" in text and "| does not hold | 0 of 3 |" in text
    # errors falling under RoC is the claim's direction: -0.05 ± 0.01 per seed holds
    assert "| -0.050 ± 0.006 (-8.7) | **holds** | 3 of 3 |" in text
    summary = json.loads((out / "seeds.json").read_text())
    assert summary["RL (grpo_roc) - SFT, test pass@1"]["seeds_held"] == 2
    assert "| RL (grpo_roc_async) - SFT, test pass@1 |" in text
    speedup = summary["async"]["speedup"]  # every seed is the same run here: the pooled speedup is its own
    assert speedup == pytest.approx(base["async"]["speedup"]) and f"**{speedup:.2f}x** (mean)" in text
    assert (out / "seeds.png").stat().st_size > 0
