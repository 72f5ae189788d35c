"""Selection strategies and advantages (SPEC §6): training/selection.py."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from typing import get_args

import pytest
from scipy import stats

from configs.schema import PROFConfig, RLConfig, RoCConfig
from rollout import metrics
from rollout.trajectory import ToolCallRecord, Trajectory
from training.selection import (
    STRATEGIES,
    consistency,
    group_advantages,
    prof_drop_counts,
    r_pro,
    roc_split,
    rollouts_per_prompt,
    select_batch,
    weighted_order,
)

ONE_ANSWER = "<answer>\\boxed{1}</answer>"


def traj(reward: float, statuses: tuple[str, ...] = ("ok",), turns: list[str] | None = None) -> Trajectory:
    calls = [ToolCallRecord(turn=0, status=s, elapsed_s=0.0, feedback_chars=0) for s in statuses]
    return Trajectory(0, 0, [], turns=turns if turns is not None else [ONE_ANSWER], tool_calls=calls, reward=reward)


def group_of(n_pos: int, n_neg: int) -> list[Trajectory]:
    return [traj(1.0) for _ in range(n_pos)] + [traj(0.0) for _ in range(n_neg)]


def roc_cfg(**roc) -> RLConfig:
    return RLConfig(rollouts_per_prompt=32, kept_per_prompt=16, roc=RoCConfig(**roc))


def prof_cfg(negatives: str = "lowest") -> RLConfig:
    return RLConfig(algorithm="prof", prof=PROFConfig(rollouts=8, kept=4, negatives=negatives))


# ---- RoC split ----

SPLIT_32_TO_16 = (
    "1:1/15 2:2/14 3:2/14 4:2/14 5:2/14 6:3/13 7:4/12 8:4/12 9:4/12 10:5/11 11:6/10 12:6/10 13:6/10 14:7/9 "
    "15:8/8 16:8/8 17:8/8 18:9/7 19:10/6 20:10/6 21:10/6 22:11/5 23:12/4 24:12/4 25:12/4 26:13/3 27:14/2 "
    "28:14/2 29:14/2 30:14/2 31:15/1"
)


@pytest.mark.parametrize("selection", ["sample", "topk"])
def test_kept_split_32_to_16_for_every_number_of_positives(selection):
    expected = {int(p): tuple(map(int, kn.split("/"))) for p, kn in (x.split(":") for x in SPLIT_32_TO_16.split())}
    assert sorted(expected) == list(range(1, 32))
    groups = [group_of(p, 32 - p) for p in range(1, 32)]
    got = select_batch(groups, roc_cfg(selection=selection), random.Random(0))
    for p, sel in zip(range(1, 32), got, strict=True):
        assert (sel.positives_kept, sel.negatives_kept) == expected[p], p
        assert roc_split(p, 32 - p, 16) == expected[p]
        assert len(sel.kept) == 16 and sel.kept == sorted(set(sel.kept)) and sel.dropped is None


def test_short_group_splits_on_its_real_size_and_small_group_is_kept_whole():
    # 30 left after two failures: 5 positives -> round(5 * 16 / 30) = round(2.67) = 3.
    short, tiny = select_batch([group_of(5, 25), group_of(3, 9)], roc_cfg(), random.Random(0))
    assert (short.positives_kept, short.negatives_kept) == (3, 13)
    assert tiny.kept == list(range(12))


# ---- RoC penalties (rollout/metrics.py), on the trajectories selection sees ----


def p_err(t: Trajectory) -> float:
    return metrics.p_err(t.call_statuses)


def p_format(t: Trajectory) -> float:
    return metrics.p_format(t.turns)


def p_total(t: Trajectory) -> float:
    return metrics.p_total(t.call_statuses, t.turns)


def test_p_err():
    assert p_err(traj(1.0, statuses=())) == 0.5
    assert p_err(traj(1.0, statuses=("ok", "ok"))) == 0.0
    assert p_err(traj(1.0, statuses=("ok", "error", "timeout", "ok"))) == 0.5
    assert p_err(traj(1.0, statuses=("invalid_call",))) == 1.0


def test_p_format():
    three_turns_two_answers = ["<reason>a</reason><answer>\\boxed{1}</answer>", "call", "<answer>\\boxed{2}</answer>"]
    assert p_format(traj(1.0, turns=three_turns_two_answers)) == pytest.approx(1 / 3)
    assert p_format(traj(1.0, turns=["no answer here", "\\boxed{3}"])) == 1.0
    assert p_format(traj(1.0, turns=["x", ONE_ANSWER])) == 0.0
    assert p_format(traj(1.0, turns=[ONE_ANSWER * 3, "x"])) == 1.0  # (3 - 1) / 2 capped at 1
    assert p_format(traj(1.0, turns=["<answer>\\boxed{1}"])) == 0.0  # cut by the budget: still a block
    in_code = '<tool_call>{"name": "python", "arguments": {"code": "print(\'<answer>\')"}}</tool_call>'
    assert p_format(traj(1.0, turns=[in_code, ONE_ANSWER])) == 0.0  # a tool call's body is not the model's answer


def test_p_total_is_the_sum():
    t = traj(1.0, statuses=("ok", "error"), turns=[ONE_ANSWER, ONE_ANSWER])
    assert p_total(t) == pytest.approx(0.5 + 0.5)
    assert p_total(traj(1.0, statuses=(), turns=["none"])) == 1.5


# ---- RoC positives ----


def test_weighted_order_first_pick_follows_the_weights():
    weights = [10.0, 4.0, 2.0, 1.0, 1.0]
    rng = random.Random(1234)
    firsts = Counter(weighted_order(weights, 3, rng)[0] for _ in range(20000))
    observed = [firsts[i] for i in range(len(weights))]
    expected = [20000 * w / sum(weights) for w in weights]
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    uniform = [20000 / len(weights)] * len(weights)
    assert stats.chisquare(observed, uniform).pvalue < 1e-12  # the test can tell weights from uniform


def _inclusion(weights: list[float], k: int) -> list[float]:
    """Exact inclusion probability under successive weighted draws without replacement."""
    total, p = sum(weights), [0.0] * len(weights)
    for order in itertools.permutations(range(len(weights)), k):
        prob, left = 1.0, total
        for i in order:
            prob *= weights[i] / left
            left -= weights[i]
        for i in order:
            p[i] += prob
    return p


def test_sample_prefers_low_p_total_with_the_frequencies_its_weights_imply():
    # Four positives with p_total 0, 0.5, 1, 1.5 (and four negatives): 8 -> 4 keeps 2 positives.
    positives = [
        traj(1.0, statuses=("ok",)),
        traj(1.0, statuses=("ok", "error")),
        traj(1.0, statuses=("ok",), turns=["x"]),
        traj(1.0, statuses=(), turns=["x"]),
    ]
    assert [p_total(t) for t in positives] == [0.0, 0.5, 1.0, 1.5]
    cfg = RLConfig(rollouts_per_prompt=8, kept_per_prompt=4, roc=RoCConfig(epsilon=0.1))
    draws = 20000
    sels = select_batch([positives + group_of(0, 4)] * draws, cfg, random.Random(7))
    assert all((s.positives_kept, s.negatives_kept) == (2, 2) for s in sels)
    counts = Counter(i for s in sels for i in s.kept if i < 4)
    expected = _inclusion([1 / (p + 0.1) for p in (0.0, 0.5, 1.0, 1.5)], 2)
    for i in range(4):
        sd = math.sqrt(draws * expected[i] * (1 - expected[i]))
        assert abs(counts[i] - draws * expected[i]) < 4.5 * sd, (i, counts[i], draws * expected[i])
    assert expected[0] > 0.95 and expected[3] < 0.25  # far from the uniform 0.5


def test_topk_keeps_the_lowest_p_total():
    # p_total of positives 0..5: 1.5, 0.0, 1.0, 0.5, 1.5, 0.0; 12 -> 6 keeps 3 of the 6 positives.
    positives = [traj(1.0, statuses=(), turns=["x"]), traj(1.0), traj(1.0, turns=["x"]),
                 traj(1.0, statuses=("ok", "error")), traj(1.0, statuses=(), turns=["x"]), traj(1.0)]
    cfg = RLConfig(rollouts_per_prompt=12, kept_per_prompt=6, roc=RoCConfig(selection="topk"))
    for seed in range(20):
        (sel,) = select_batch([positives + group_of(0, 6)], cfg, random.Random(seed))
        assert [i for i in sel.kept if i < 6] == [1, 3, 5]


def test_roc_rejects_a_zero_epsilon():
    with pytest.raises(ValueError, match="epsilon"):
        select_batch([group_of(3, 29)], roc_cfg(epsilon=0.0), random.Random(0))


# ---- uniform groups, advantages, determinism ----


def test_uniform_groups_are_dropped_and_reported():
    sels = select_batch([group_of(32, 0), group_of(0, 32), group_of(4, 28), []], roc_cfg(), random.Random(0))
    assert [s.dropped for s in sels] == ["uniform", "uniform", None, "empty"]
    assert sels[0].kept == [] and sels[0].advantages == []
    (kept_all_wrong,) = select_batch([group_of(0, 32)], roc_cfg(drop_uniform_groups=False), random.Random(0))
    assert kept_all_wrong.dropped is None and len(kept_all_wrong.kept) == 16
    assert kept_all_wrong.advantages == [0.0] * 16


def test_advantages_are_over_the_kept_group():
    (sel,) = select_batch([group_of(5, 27)], roc_cfg(), random.Random(0))
    rewards = [1.0] * 2 + [0.0] * 14  # 2/14 kept
    mean, std = 2 / 16, math.sqrt(sum((r - 2 / 16) ** 2 for r in rewards) / 15)  # unbiased, as verl's torch.std
    group = group_of(5, 27)
    got = {group[i].reward: a for i, a in zip(sel.kept, sel.advantages, strict=True)}
    assert got[1.0] == pytest.approx((1 - mean) / (std + 1e-6), rel=1e-12)
    assert got[0.0] == pytest.approx((0 - mean) / (std + 1e-6), rel=1e-12)
    full = group_advantages([1.0] * 5 + [0.0] * 27)
    assert got[1.0] != pytest.approx(full[0])  # over the 32 it would differ


def test_grpo_keeps_everything_with_trl_advantages():
    cfg = RLConfig(algorithm="grpo", rollouts_per_prompt=8, kept_per_prompt=4)
    rewards = [1.0, 0.0, 0.0, 1.0]
    sel, uniform = select_batch([[traj(r) for r in rewards], group_of(4, 0)], cfg, random.Random(0))
    assert sel.kept == [0, 1, 2, 3] and uniform.dropped is None and uniform.advantages == [0.0] * 4
    std = math.sqrt(sum((r - 0.5) ** 2 for r in rewards) / 3)
    assert sel.advantages == pytest.approx([(r - 0.5) / (std + 1e-4) for r in rewards], rel=1e-12)


@pytest.mark.slow  # imports TRL (15 s here)
def test_grpo_advantages_equal_trls_formula():
    import torch
    from trl.trainer.utils import nanstd

    cfg = RLConfig(algorithm="grpo", rollouts_per_prompt=8, kept_per_prompt=4)
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    grouped = rewards.view(-1, 4)
    ours = select_batch([[traj(float(r)) for r in g] for g in grouped], cfg, random.Random(0))
    std = nanstd(grouped, dim=1).repeat_interleave(4)
    trl = (rewards - grouped.mean(dim=1).repeat_interleave(4)) / (std + 1e-4)
    assert [a for s in ours for a in s.advantages] == pytest.approx(trl.tolist(), rel=1e-6)


def test_same_seed_same_selection():
    rng_groups = random.Random(3)
    groups = [[traj(float(rng_groups.random() < 0.4), statuses=("ok", "error")[: rng_groups.randint(0, 2)])
               for _ in range(32)] for _ in range(20)]
    first = select_batch(groups, roc_cfg(), random.Random(11))
    assert first == select_batch(groups, roc_cfg(), random.Random(11))
    assert first != select_batch(groups, roc_cfg(), random.Random(12))


# ---- PROF and Blend ----

# Hand-computed from SPEC: k_plus = min(n-m, round((n_pos - n_neg + n - m) / 2)), floored at 0.
PROF_8_TO_4 = {0: (0, 4), 1: (0, 4), 2: (0, 4), 3: (1, 3), 4: (2, 2), 5: (3, 1), 6: (4, 0), 7: (4, 0), 8: (4, 0)}


def test_prof_drop_counts_for_n8_m4():
    for n_pos, counts in PROF_8_TO_4.items():
        assert prof_drop_counts(n_pos, 8 - n_pos, 4) == counts, n_pos


def test_prof_keeps_m_with_the_computed_split():
    groups = [group_of(p, 8 - p) for p in range(9)]
    scores = [[[0.5, 0.5]] * 8 for _ in groups]
    sels = select_batch(groups, prof_cfg(), random.Random(0), scores)
    for p, sel in enumerate(sels):  # uniform groups (p = 0, 8) too: PROF keeps and filters them
        k_plus, k_minus = PROF_8_TO_4[p]
        assert (sel.positives_kept, sel.negatives_kept) == (p - k_plus, 8 - p - k_minus)


def prof_group() -> tuple[list[Trajectory], list[list[float]]]:
    # 3 positives, 5 negatives -> drop 1 positive and 3 negatives.
    group = group_of(3, 5)
    r_pro = [0.9, 0.2, 0.6, 0.1, 0.8, 0.3, 0.95, 0.5]  # positive 1 is least consistent; negatives 6, 4, 7 most
    return group, [[x, x] for x in r_pro]


def test_prof_both_drops_the_lowest_consistency_negatives():
    group, scores = prof_group()
    (sel,) = select_batch([group], prof_cfg("lowest"), random.Random(0), [scores])
    assert sel.kept == [0, 2, 3, 5]


def test_prof_correct_drops_random_negatives():
    group, scores = prof_group()
    dropped_negatives = Counter()
    runs = 3000
    rng = random.Random(5)
    for _ in range(runs):
        (sel,) = select_batch([group], prof_cfg("random"), rng, [scores])
        assert [i for i in sel.kept if i < 3] == [0, 2]  # positives still by consistency
        dropped_negatives.update(set(range(3, 8)) - set(sel.kept))
    for i in range(3, 8):  # each negative dropped with probability 3/5
        assert abs(dropped_negatives[i] / runs - 0.6) < 0.05, (i, dropped_negatives[i])


def test_consistency_and_step_count_penalty():
    assert consistency(traj(1.0), [0.9, 0.7], mu=0.5) == pytest.approx(2 * (0.8 - 0.5))
    assert consistency(traj(0.0), [0.9, 0.7], mu=0.5) == pytest.approx(-2 * (0.8 - 0.5))
    assert consistency(traj(1.0), [0.8] * 30, mu=0.5) == pytest.approx(0.6)
    assert consistency(traj(1.0), [0.8], mu=0.5) == pytest.approx(0.6 - 10)
    assert consistency(traj(1.0), [0.8] * 31, mu=0.5) == pytest.approx(0.6 - 10)
    assert consistency(traj(1.0), [], mu=0.5) == pytest.approx(-10)  # no scored step: r_pro = mu
    # A positive with the best PRM score but a single step is the one dropped.
    group = group_of(3, 5)
    scores = [[0.99], [0.5, 0.5], [0.6, 0.6]] + [[0.1, 0.1]] * 5
    (sel,) = select_batch([group], prof_cfg(), random.Random(0), [scores])
    assert [i for i in sel.kept if i < 3] == [1, 2]


def test_blend_rewards_outcome_plus_prm_without_filter():
    cfg = RLConfig(algorithm="blend", prof=PROFConfig(rollouts=8, kept=4))
    group = [traj(1.0), traj(0.0), traj(0.0), traj(0.0)]
    scores = [[0.5, 0.7], [0.9], [0.1, 0.3, 0.2], []]
    uniform = group_of(0, 4)
    sel, kept_uniform = select_batch([group, uniform], cfg, random.Random(0), [scores, [[0.2], [0.4], [], [0.6]]])
    assert sel.kept == [0, 1, 2, 3] and sel.dropped is None
    mu = 3.9 / 9  # every step of the batch; the trajectory without steps takes it
    blended = [1 + 0.8 * 0.6, 0.8 * 0.9, 0.8 * 0.2, 0.8 * mu]
    assert sel.advantages == pytest.approx(group_advantages(blended))
    assert kept_uniform.dropped is None and kept_uniform.kept == [0, 1, 2, 3]
    assert kept_uniform.advantages == pytest.approx(group_advantages([0.16, 0.32, 0.8 * mu, 0.48]))


def test_steps_the_prm_could_not_score_leave_the_means_but_count_as_steps():
    nan = math.nan
    assert r_pro([0.8, nan, 0.4], mu=0.5) == pytest.approx(0.6)
    assert r_pro([nan, nan], mu=0.3) == 0.3
    assert consistency(traj(1.0), [0.8, nan], mu=0.5) == pytest.approx(0.6)  # 2 steps: no penalty
    assert consistency(traj(1.0), [0.8] + [nan] * 30, mu=0.5) == pytest.approx(0.6 - 10)
    # Blend over a batch with NaN steps: mu = mean(0.2, 0.6) = 0.4, nothing turns NaN.
    cfg = RLConfig(algorithm="blend", prof=PROFConfig(rollouts=8, kept=2))
    (sel,) = select_batch([[traj(1.0), traj(0.0)]], cfg, random.Random(0), [[[0.2, nan], [nan]], ])
    assert sel.advantages == pytest.approx(group_advantages([1 + 0.8 * 0.2, 0.8 * 0.4]))
    # PROF: a negative whose only score is NaN is neutral (c = 0), so the confident wrong one goes first.
    group = group_of(3, 5)
    scores = [[0.9, 0.9]] * 3 + [[nan, nan], [0.1, 0.1], [0.1, 0.1], [0.1, 0.1], [0.9, 0.9]]
    (sel,) = select_batch([group], prof_cfg(), random.Random(0), [scores])
    assert 7 not in sel.kept and all(not math.isnan(a) for a in sel.advantages)


# ---- interface ----


def test_registry_matches_the_config_and_unknown_names_fail():
    assert set(STRATEGIES) == set(get_args(RLConfig.model_fields["algorithm"].annotation))
    bad = RLConfig().model_copy(update={"algorithm": "ppo"})
    with pytest.raises(ValueError, match=r"'ppo'.*\['blend', 'grpo', 'grpo_roc', 'prof'\]"):
        select_batch([group_of(1, 1)], bad, random.Random(0))
    with pytest.raises(ValueError, match="grpo_roc"):
        rollouts_per_prompt(bad)


def test_rollouts_per_prompt():
    base = dict(rollouts_per_prompt=32, kept_per_prompt=16, prof=PROFConfig(rollouts=8, kept=4))
    assert [rollouts_per_prompt(RLConfig(algorithm=a, **base)) for a in ("grpo_roc", "grpo", "prof", "blend")] == [
        32, 16, 8, 4]


def test_bad_input_is_named():
    unscored = group_of(2, 2)
    unscored[3].reward = None
    with pytest.raises(ValueError, match="group 1 trajectory 3: not scored"):
        select_batch([group_of(2, 2), unscored], roc_cfg(), random.Random(0))
    failed = group_of(2, 2)
    failed[0].failure = "engine down"
    with pytest.raises(ValueError, match="group 0 trajectory 0: failed"):
        select_batch([failed], roc_cfg(), random.Random(0))
    with pytest.raises(ValueError, match="needs PRM step_scores"):
        select_batch([group_of(4, 4)], prof_cfg(), random.Random(0))
    with pytest.raises(ValueError, match=r"\[7\] do not match group sizes \[8\]"):
        select_batch([group_of(4, 4)], prof_cfg(), random.Random(0), [[[0.5]] * 7])
