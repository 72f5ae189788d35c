"""The switches of issue 25, both ways: uniform groups under PROF (point 2), the reward of a
truncated trajectory (point 3), and RoC's group-size guard with odd G (point 6)."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from configs.schema import PROFConfig, RLConfig
from rollout.trajectory import Trajectory
from training.rl import zero_truncated
from training.selection import roc_split, select_batch

ANSWER = "<answer>\\boxed{1}</answer>"


def traj(reward: float, finish: str = "stop") -> Trajectory:
    return Trajectory(0, 0, [], turns=[ANSWER], reward=reward, finish_reason=finish)


def prof(drop: bool | None = None) -> RLConfig:
    extra = {} if drop is None else {"drop_uniform_groups": drop}
    return RLConfig(algorithm="prof", prof=PROFConfig(rollouts=8, kept=4, **extra))


def test_prof_keeps_uniform_groups_by_default_and_filters_them_by_consistency():
    correct, wrong = [traj(1.0) for _ in range(8)], [traj(0.0) for _ in range(8)]
    r_pro = [0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.6, 0.4]  # the same PRM means for both groups
    scores = [[[x, x] for x in r_pro]] * 2
    all_correct, all_wrong = select_batch([correct, wrong], prof(), random.Random(0), scores)
    assert all_correct.dropped is None and all_correct.kept == [0, 2, 4, 6]  # the 4 least consistent positives go
    assert all_wrong.kept == [1, 3, 5, 7]  # for a negative a high PRM score is inconsistent: those go
    assert all_correct.advantages == [0.0] * 4 and all_wrong.advantages == [0.0] * 4
    assert (all_correct.positives_kept, all_wrong.negatives_kept) == (4, 4)


def test_prof_drops_uniform_groups_when_told():
    group = [traj(1.0) for _ in range(8)]
    (sel,) = select_batch([group], prof(drop=True), random.Random(0), [[[0.5, 0.5]] * 8])
    assert sel.dropped == "uniform" and sel.kept == []
    mixed = [traj(1.0)] * 4 + [traj(0.0)] * 4  # a mixed group is filtered either way
    assert select_batch([mixed], prof(drop=True), random.Random(0), [[[0.5, 0.5]] * 8])[0].kept != []


def test_a_truncated_trajectory_scores_zero_by_default_and_as_scored_under_score():
    def group() -> list[Trajectory]:
        return [traj(1.0, "length"), traj(0.0, "length"), traj(1.0, "stop"), traj(1.0, "turns")]

    zeroed = group()
    assert zero_truncated([zeroed], "zero") == 1
    assert [t.reward for t in zeroed] == [0.0, 0.0, 1.0, 1.0]  # only the budget cut is a failure
    kept = group()
    assert zero_truncated([kept], "score") == 0 and [t.reward for t in kept] == [1.0, 0.0, 1.0, 1.0]
    assert RLConfig().truncated_reward == "zero"


@pytest.mark.parametrize("kept", [1, 2, 3])
def test_grpo_roc_refuses_a_group_too_small_for_two_of_each_class(kept):
    with pytest.raises(ValidationError, match=r"kept_per_prompt .* at least 4 under grpo_roc"):
        RLConfig(rollouts_per_prompt=8, kept_per_prompt=kept)
    RLConfig(algorithm="grpo", rollouts_per_prompt=8, kept_per_prompt=kept)  # no such floor without RoC


@pytest.mark.parametrize(("rollouts", "kept"), [(10, 5), (9, 5), (14, 7)])
def test_odd_group_sizes_keep_g_with_both_classes(rollouts, kept):
    cfg = RLConfig(rollouts_per_prompt=rollouts, kept_per_prompt=kept)
    rng = random.Random(0)
    for n_pos in range(1, rollouts):
        pos_k, neg_k = roc_split(n_pos, rollouts - n_pos, kept)
        assert pos_k + neg_k == kept and pos_k >= min(2, n_pos) and neg_k >= min(2, rollouts - n_pos)
        group = [traj(1.0) for _ in range(n_pos)] + [traj(0.0) for _ in range(rollouts - n_pos)]
        (sel,) = select_batch([group], cfg, rng)
        assert len(sel.kept) == kept and (sel.positives_kept, sel.negatives_kept) == (pos_k, neg_k)
        assert pos_k <= n_pos and neg_k <= rollouts - n_pos
