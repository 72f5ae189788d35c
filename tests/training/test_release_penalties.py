"""RoC's penalties as the paper defines them and as the authors' release computes them
(issue 25, point 4; microsoft/rStar `rstar2_agent/down_sample/roc.py`), on hand-made trajectories."""

from __future__ import annotations

import random

import pytest

from configs.schema import RLConfig, RoCConfig
from rollout.metrics import p_err, p_err_release, p_format, p_format_release
from rollout.trajectory import ToolCallRecord, Trajectory
from training.selection import select_roc

ANSWER = "<answer>The answer is \\boxed{7}.</answer>"


def traj(turns: list[str], calls: list[tuple[str, bool]] = (), reward: float = 1.0) -> Trajectory:
    records = [ToolCallRecord(0, status, 0.0, 10, says_error) for status, says_error in calls]
    return Trajectory(0, 0, [], turns=turns, tool_calls=records, reward=reward)


def penalties(t: Trajectory) -> tuple[float, float]:
    paper = p_err(t.call_statuses) + p_format(t.turns)
    release = p_err_release([c.says_error for c in t.tool_calls]) + p_format_release(t.turns)
    return paper, release


def test_a_correct_answer_without_a_tool_call_weighs_half_in_the_paper_and_one_and_a_half_in_the_release():
    assert penalties(traj([f"<reason>7.</reason>{ANSWER}"])) == (0.5, 1.5)


def test_the_release_counts_error_in_the_text_not_the_status():
    ok_but_says_error = traj(["<tool_call>a</tool_call>", ANSWER], [("ok", True)])  # printed "ValueError: ..."
    failed_quietly = traj(["<tool_call>a</tool_call>", ANSWER], [("timeout", False)])  # "Timeout: the program..."
    assert penalties(ok_but_says_error) == (0.0, 1.0)
    assert penalties(failed_quietly) == (1.0, 0.0)


@pytest.mark.parametrize(("turns", "paper", "release"), [
    (["call", "call", ANSWER], 0.0, 0.0),
    (["call", ANSWER, ANSWER], 1 / 3, 1 / 2),  # 2 blocks: the paper divides by 3 turns, the release by 2
    (["call", "<answer>open", ANSWER], 1 / 3, 1.0),  # an unclosed block: counted / the release gives 1
    (["call", "no answer"], 1.0, 1.0),
])
def test_p_format_both_ways(turns, paper, release):
    assert p_format(turns) == pytest.approx(paper)
    assert p_format_release(turns) == pytest.approx(release)


def test_the_switch_changes_which_positives_roc_keeps():
    # Two positives kept of four (topk). A timed-out call whose text has no "error" weighs 1 by the
    # paper and 0 by the release; an ok call that printed a traceback, 0 and 1.
    quiet_timeout = [traj(["<tool_call>a</tool_call>", ANSWER], [("timeout", False)]) for _ in range(2)]
    loud_ok = [traj(["<tool_call>a</tool_call>", ANSWER], [("ok", True)]) for _ in range(2)]
    negatives = [traj(["x"], reward=0.0) for _ in range(4)]
    group = quiet_timeout + loud_ok + negatives
    kept = {}
    for definition in ("paper", "release"):
        cfg = RLConfig(rollouts_per_prompt=8, kept_per_prompt=4, roc=RoCConfig(selection="topk",
                                                                                penalties=definition))
        sel = select_roc(group, cfg, random.Random(0), None, 0.0)
        kept[definition] = sorted(i for i in sel.kept if group[i].reward == 1.0)
    assert kept == {"paper": [2, 3], "release": [0, 1]}
