"""Which rollouts of a prompt's group the RL step trains on, and their advantages (SPEC §6).

One strategy per `rl.algorithm`, each a function registered by name in `STRATEGIES`:
- `grpo_roc`: Resample-on-Correct. From the 2G rollouts keep G, positives and negatives in
  their proportion (half to even, at least 2 of each where they exist), negatives uniformly
  at random, positives without replacement with weight `1 / (p_total + roc.epsilon)`
  (`roc.selection: sample`) or the lowest `p_total` (`topk`).
- `grpo`: no selection: the G rollouts, advantages exactly as TRL 1.16 `GRPOTrainer`.
- `prof`: PROF's consistency filter over n rollouts, keeping m, with a PRM's step scores.
- `blend`: PROF's baseline: reward `r + 0.8 r_pro`, no filter.
`select_batch(groups, cfg, rng, step_scores)` applies the configured one to every group;
`rollouts_per_prompt(cfg)` says how many the step must roll out per prompt.

Decisions where SPEC is silent (each pinned by tests/training/test_selection.py):
- Std: unbiased (Bessel), as the ref's verl `compute_grpo_outcome_advantage` (`torch.std`,
  epsilon 1e-6, the epsilon SPEC §6.5 quotes) and TRL's `nanstd` both use. `grpo` uses
  TRL's epsilon 1e-4 (`grpo_trainer.py`, `scale_rewards="group"`), so a TRL-equivalence
  test can compare exactly. A lone trajectory gets advantage 0 (TRL: NaN -> 0; verl would
  give it its raw reward): with no baseline it carries no relative signal.
- Uniform groups: `grpo_roc` drops them when `roc.drop_uniform_groups` (default, as ref
  `reject_equal_reward`); `grpo` keeps them, as TRL does (their advantages are 0); `prof`
  keeps them unless `prof.drop_uniform_groups`, as the PROF code does (amazon-science/PROF-GRPO,
  as issue 25 reads it; that code is not in the corpus searched here). SPEC's formula applies
  to them unchanged: all correct, the n - m least consistent positives go; all wrong, n - m
  negatives. The m kept train with advantage 0, and their tokens count in the token mean.
  `blend` keeps every group (no filter, and its reward varies).
- Group size: `grpo_roc` needs G >= 4 (configs/schema.py refuses less): a mixed group keeps at
  least 2 of each class, as the ref asserts (`min_zero + min_non_zero <= down_sample_to_n`).
  Odd G works: the split rounds half to even, then the 2-of-each floor moves the remainder.
- Short groups (failed rollouts removed by the caller): the split uses the group's real
  size; a group no larger than the kept size is kept whole (ref skips such a group).
- RoC negatives are random in `topk` too (SPEC §6.3). The ref's `roc.py` at 73b21b5 (and
  verl's recipe copy) sorts them by penalty and takes the lowest, as it does the positives;
  its later fix of that sort takes them in rollout order (issue 25). We keep SPEC's uniform
  draw. Ties in `topk` and PROF rankings go to the lower index.
- `roc.penalties: release` computes p_err and p_format as that `roc.py` does: "error" in a
  tool response's text instead of its status, and turns counted without the first (whose
  `<|im_start|>assistant` is in the prompt), so one turn gives p_format 1.
- The penalties p_err, p_format and p_total are rollout/metrics.py's (the RL curves report
  them too). `p_format` counts `<answer>` openings in the model's turns outside tool calls;
  an unclosed block counts, as in rollout/answer.py (the ref scores unbalanced tags 1.0).
- PROF's mu is the mean of every step score of the batch, uniform groups included. Steps
  the PRM could not score (NaN: past its `max_length`, training/prm.py) are left out of
  every mean but still count for the 2..30 step rule; a trajectory with no scored step
  takes `r_pro = mu` (neutral), in PROF and in Blend alike.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import fmean

from configs.schema import RLConfig
from rollout.metrics import p_err_release, p_format_release, p_total
from rollout.trajectory import Trajectory

ADV_EPS = 1e-6  # SPEC §6.5 (verl's GRPO advantage)
TRL_ADV_EPS = 1e-4  # TRL 1.16 GRPOTrainer, scale_rewards="group"
BLEND_PRM_WEIGHT = 0.8  # SPEC §6, PROF's Blend baseline
PROF_STEP_PENALTY, PROF_MIN_STEPS, PROF_MAX_STEPS = 10.0, 2, 30  # SPEC §6 PROF


@dataclass
class GroupSelection:
    """One prompt's group after selection."""

    kept: list[int]  # indices into the group, ascending
    advantages: list[float]  # one per kept trajectory, same order (SPEC §6.5, over the kept group)
    positives_kept: int  # kept trajectories with reward 1
    negatives_kept: int  # kept trajectories with reward 0
    dropped: str | None = None  # why the whole group was dropped ("uniform", "empty"); then kept == []


# ---- advantages and counts ----


def group_advantages(rewards: Sequence[float], eps: float = ADV_EPS) -> list[float]:
    """`(r - mean) / (std + eps)` over one group, std unbiased; 0 for a lone member."""
    if len(rewards) < 2:
        return [0.0] * len(rewards)
    mean = fmean(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))
    return [(r - mean) / (std + eps) for r in rewards]


def roc_split(n_pos: int, n_neg: int, kept: int) -> tuple[int, int]:
    """(positives, negatives) RoC keeps: proportional, half to even, >= 2 of each where they exist."""
    pos_k = round(Fraction(n_pos * kept, n_pos + n_neg))  # Fraction: exact halves round to even
    neg_k = kept - pos_k
    # Negatives first, then positives, as the ref's resample_of_correct.
    if neg_k < min(2, n_neg):
        neg_k = min(2, n_neg)
        pos_k = kept - neg_k
    if pos_k < min(2, n_pos):
        pos_k = min(2, n_pos)
        neg_k = kept - pos_k
    return pos_k, neg_k


def prof_drop_counts(n_pos: int, n_neg: int, kept: int) -> tuple[int, int]:
    """(k_plus, k_minus): positives and negatives PROF removes to keep `kept` (SPEC §6)."""
    drop = n_pos + n_neg - kept
    k_plus = min(drop, round(Fraction(n_pos - n_neg + drop, 2)))
    # SPEC's formula goes below 0 when positives are few (n=8, m=4: n_pos < 2): drop no positive then.
    k_plus = max(k_plus, 0, drop - n_neg)
    return k_plus, drop - k_plus


def weighted_order(weights: Sequence[float], k: int, rng: random.Random) -> list[int]:
    """k indices drawn without replacement, each draw with probability ∝ weight, in draw order.

    Efraimidis-Spirakis keys `log(u) / w`: sorting by key has the law of successive draws.
    """
    keys = [math.log(1.0 - rng.random()) / w for w in weights]  # 1 - random() is never 0
    return sorted(range(len(weights)), key=lambda i: -keys[i])[:k]


def _positive(traj: Trajectory) -> bool:
    return traj.reward > 0


def _result(group: list[Trajectory], kept: list[int], rewards: list[float], eps: float) -> GroupSelection:
    kept = sorted(kept)
    pos = sum(_positive(group[i]) for i in kept)
    advantages = group_advantages([rewards[i] for i in kept], eps)
    return GroupSelection(kept, advantages, positives_kept=pos, negatives_kept=len(kept) - pos)


def _dropped(reason: str) -> GroupSelection:
    return GroupSelection([], [], 0, 0, dropped=reason)


def _uniform(group: list[Trajectory]) -> bool:
    return len({_positive(t) for t in group}) == 1


# ---- strategies: (group, cfg, rng, step scores of the group or None, batch mu) -> selection ----

StepScores = list[list[float]]  # one group: PRM score of each step of each trajectory
Strategy = Callable[[list[Trajectory], RLConfig, random.Random, StepScores | None, float], GroupSelection]


def select_grpo(group: list[Trajectory], cfg: RLConfig, rng: random.Random, scores: StepScores | None,
                mu: float) -> GroupSelection:
    rewards = [t.reward for t in group]
    return _result(group, list(range(len(group))), rewards, TRL_ADV_EPS)


def select_roc(group: list[Trajectory], cfg: RLConfig, rng: random.Random, scores: StepScores | None,
               mu: float) -> GroupSelection:
    rewards = [t.reward for t in group]
    if cfg.roc.drop_uniform_groups and _uniform(group):
        return _dropped("uniform")
    if len(group) <= cfg.kept_per_prompt:
        return _result(group, list(range(len(group))), rewards, ADV_EPS)
    pos = [i for i, t in enumerate(group) if _positive(t)]
    neg = [i for i, t in enumerate(group) if not _positive(t)]
    pos_k, neg_k = roc_split(len(pos), len(neg), cfg.kept_per_prompt)
    kept = rng.sample(neg, neg_k)
    penalties = [_penalty(group[i], cfg.roc.penalties) for i in pos]
    if cfg.roc.selection == "topk":
        order = sorted(range(len(pos)), key=lambda j: penalties[j])[:pos_k]
    else:
        order = weighted_order([1.0 / (p + cfg.roc.epsilon) for p in penalties], pos_k, rng)
    kept += [pos[j] for j in order]
    return _result(group, kept, rewards, ADV_EPS)


def _penalty(t: Trajectory, definition: str) -> float:
    if definition == "release":
        return p_err_release([c.says_error for c in t.tool_calls]) + p_format_release(t.turns)
    return p_total(t.call_statuses, t.turns)


def r_pro(steps: Sequence[float], mu: float) -> float:
    """Mean PRM score of the scored (non-NaN) steps; `mu` when none was scored."""
    scored = [x for x in steps if not math.isnan(x)]
    return fmean(scored) if scored else mu


def consistency(traj: Trajectory, steps: Sequence[float], mu: float) -> float:
    """PROF's c = 2 (r_pro - mu)(2r - 1), minus 10 outside 2..30 steps (SPEC §6)."""
    c = 2.0 * (r_pro(steps, mu) - mu) * (2.0 * traj.reward - 1.0)
    return c - PROF_STEP_PENALTY if not PROF_MIN_STEPS <= len(steps) <= PROF_MAX_STEPS else c


def select_prof(group: list[Trajectory], cfg: RLConfig, rng: random.Random, scores: StepScores | None,
                mu: float) -> GroupSelection:
    rewards = [t.reward for t in group]
    if cfg.prof.drop_uniform_groups and _uniform(group):
        return _dropped("uniform")
    if len(group) <= cfg.prof.kept:
        return _result(group, list(range(len(group))), rewards, ADV_EPS)
    c = [consistency(t, s, mu) for t, s in zip(group, scores, strict=True)]
    pos = sorted((i for i, t in enumerate(group) if _positive(t)), key=lambda i: c[i])
    neg = sorted((i for i, t in enumerate(group) if not _positive(t)), key=lambda i: c[i])
    k_plus, k_minus = prof_drop_counts(len(pos), len(neg), cfg.prof.kept)
    removed = set(pos[:k_plus])
    removed |= set(neg[:k_minus] if cfg.prof.negatives == "lowest" else rng.sample(neg, k_minus))
    return _result(group, [i for i in range(len(group)) if i not in removed], rewards, ADV_EPS)


def select_blend(group: list[Trajectory], cfg: RLConfig, rng: random.Random, scores: StepScores | None,
                 mu: float) -> GroupSelection:
    rewards = [t.reward + BLEND_PRM_WEIGHT * r_pro(s, mu) for t, s in zip(group, scores, strict=True)]
    return _result(group, list(range(len(group))), rewards, ADV_EPS)


STRATEGIES: dict[str, Strategy] = {"grpo_roc": select_roc, "grpo": select_grpo, "prof": select_prof,
                                   "blend": select_blend}
NEEDS_PRM = {"prof", "blend"}


def rollouts_per_prompt(cfg: RLConfig) -> int:
    """Rollouts the step must generate per prompt for `cfg.algorithm`."""
    counts = {"grpo_roc": cfg.rollouts_per_prompt, "grpo": cfg.kept_per_prompt,
              "prof": cfg.prof.rollouts, "blend": cfg.prof.kept}  # Blend trains on as many as PROF keeps
    return counts[_strategy_name(cfg)]


def _strategy_name(cfg: RLConfig) -> str:
    if cfg.algorithm not in STRATEGIES:
        raise ValueError(f"rl.algorithm {cfg.algorithm!r} is not one of {sorted(STRATEGIES)}")
    return cfg.algorithm


def _check(groups: list[list[Trajectory]], cfg: RLConfig, step_scores: list[list[list[float]]] | None) -> None:
    for g, group in enumerate(groups):
        for i, t in enumerate(group):
            if t.failed or t.reward is None:
                raise ValueError(f"group {g} trajectory {i}: {'failed' if t.failed else 'not scored'}; "
                                 "remove failed trajectories and score the rest before selection")
    if cfg.algorithm in NEEDS_PRM:
        if step_scores is None:
            raise ValueError(f"rl.algorithm {cfg.algorithm!r} needs PRM step_scores")
        shape = [len(s) for s in step_scores]
        if shape != [len(group) for group in groups]:
            raise ValueError(f"step_scores per group {shape} do not match group sizes {[len(x) for x in groups]}")
    if cfg.algorithm == "grpo_roc" and cfg.roc.selection == "sample" and not cfg.roc.epsilon > 0:
        raise ValueError(f"rl.roc.epsilon must be > 0 (p_total is often 0), got {cfg.roc.epsilon}")


def select_batch(groups: list[list[Trajectory]], cfg: RLConfig, rng: random.Random,
                 step_scores: list[list[list[float]]] | None = None) -> list[GroupSelection]:
    """Selection and advantages for every prompt's group; `step_scores[g][i]` = PRM step scores."""
    strategy = STRATEGIES[_strategy_name(cfg)]
    _check(groups, cfg, step_scores)
    every_step = [x for group in step_scores or [] for steps in group for x in steps if not math.isnan(x)]
    mu = fmean(every_step) if every_step else 0.0
    return [
        strategy(group, cfg, rng, step_scores[g] if step_scores is not None else None, mu)
        if group else _dropped("empty")
        for g, group in enumerate(groups)
    ]
