"""Answer extraction and scoring (SPEC §5): only model text counts, timeouts score 0."""

from __future__ import annotations

import pytest

from rollout.agent_loop import AgentState, TurnLimits, run_agent
from rollout.prompt import tool_call_text
from rollout.reward import boxed_contents, extract_final_answer, extract_integer, score
from rollout.trajectory import Trajectory
from sandbox.types import SandboxResult, VerifyResult


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer> \\boxed{42} </answer>", "42"),
        ("\\boxed{1} then <answer>so \\boxed{2} and \\boxed{3}</answer> \\boxed{4}", "3"),
        ("<answer>no box</answer> but \\boxed{5} and \\boxed{6}", "6"),
        ("<answer>\\boxed{\\frac{1}{2}}</answer>", "\\frac{1}{2}"),
        ("<answer>\\boxed{\\{1, \\{2\\}\\}}</answer>", "\\{1, \\{2\\}\\}"),
        ("<answer>a</answer><answer>\\boxed{8}</answer>", "8"),
        ("<answer>\\boxed{9} (budget ran out", "9"),
        ("\\boxed {10}", "10"),
        ('<tool_call>{"code": "print(\'\\\\boxed{1}\')"}</tool_call> <answer>none</answer>', None),
        ('<answer>\\boxed{2}</answer><tool_call>{"code": "<answer>\\boxed{3}</answer>"}', "2"),
        ("\\boxed{unclosed", None),
        ("nothing at all", None),
    ],
)
def test_extract_final_answer(text, expected):
    assert extract_final_answer(text) == expected


def test_boxed_contents_balances_braces():
    assert boxed_contents("\\boxed{a{b}c} x \\boxed{{d}}") == ["a{b}c", "{d}"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{1,234}", 1234),
        ("\\boxed{1{,}234}", 1234),
        ("\\boxed{\\$12}", 12),
        ("\\boxed{-7}", -7),
        ("\\boxed{12.0}", 12),
        ("\\boxed{\\text{17}}", 17),
        ("\\boxed{1/2}", None),
        ("\\boxed{3\\sqrt{2}}", None),
        ("\\boxed{12.5}", None),
        ("no answer", None),
    ],
)
def test_extract_integer(text, expected):
    assert extract_integer(text) == expected


async def test_a_boxed_answer_printed_by_the_tool_does_not_count(small_fmt, scripted):
    """The program prints \\boxed{7}; the model never writes a box: no answer, reward 0."""
    turns = [tool_call_text("print(chr(92) + 'boxed{7}')"), "<answer> as printed above </answer>"]
    sandbox = scripted.sandbox(answer=lambda c: SandboxResult(status="ok", feedback="\\boxed{7}"))
    state = AgentState(Trajectory(0, 0, small_fmt.prompt_ids("3 + 4?")), small_fmt, TurnLimits(4, 2048))
    traj = await run_agent(state, scripted.engine(small_fmt, lambda s, t: turns[t]), sandbox)
    assert "\\boxed{7}" in small_fmt.decode(traj.response_ids)  # it is in the sequence, as feedback
    assert "\\boxed{7}" not in traj.model_text and traj.final_answer is None
    assert await score([traj], ["7"], sandbox) == [0.0]
    assert sandbox.pairs == []  # nothing to verify


async def test_score_counts_timeouts_as_zero(scripted):
    trajs = [Trajectory(i, 0, [], final_answer=a) for i, a in enumerate(["7", "7", "8", None])]

    def verdict(answer: str, reference: str) -> VerifyResult:
        if answer == "\\boxed{7}" and reference == "slow":
            return VerifyResult(score=1.0, status="timeout", elapsed_s=5.0)
        return VerifyResult(score=float(answer == f"\\boxed{{{reference}}}"), status="ok", elapsed_s=0.01)

    sandbox = scripted.sandbox(verdict=verdict)
    rewards = await score(trajs, ["7", "slow", "7", "7"], sandbox)
    assert rewards == [1.0, 0.0, 0.0, 0.0]
    assert [t.verify_status for t in trajs] == ["ok", "timeout", "ok", "ok"]
    assert [t.reward for t in trajs] == rewards and trajs[1].timings.verification_s == 5.0
    assert sandbox.pairs == [("\\boxed{7}", "7"), ("\\boxed{7}", "slow"), ("\\boxed{8}", "7")]


async def test_score_with_the_real_verifier():
    client = pytest.importorskip("sandbox.client", reason="sandbox.client (issue 3) is not in this checkout yet")
    from configs.sandbox import SandboxConfig

    trajs = [Trajectory(i, 0, [], final_answer=a) for i, a in enumerate(["\\frac{1}{2}", "0.5", "3", None])]
    async with client.build_sandbox(SandboxConfig()) as sandbox:
        rewards = await score(trajs, ["1/2", "1/2", "4", "4"], sandbox)
    assert rewards == [1.0, 1.0, 0.0, 0.0]
