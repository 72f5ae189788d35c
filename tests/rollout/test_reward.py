"""Answer extraction and scoring (SPEC §5): only model text counts, timeouts score 0."""

from __future__ import annotations

import pytest

from rollout.agent_loop import AgentState, TurnLimits, run_agent
from rollout.answer import LetterReference
from rollout.prompt import tool_call_text
from rollout.reward import score
from rollout.trajectory import Trajectory
from sandbox.types import SandboxResult, VerifyResult


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


async def test_letter_references_are_matched_by_letter_without_the_verifier(scripted):
    answers = ["(c)", "\\text{C}", "C and D", None, "7"]
    trajs = [Trajectory(i, 0, [], final_answer=a) for i, a in enumerate(answers)]
    sandbox = scripted.sandbox(verdict=lambda answer, reference: VerifyResult(score=1.0, status="ok", elapsed_s=0.0))
    refs = [LetterReference("C")] * 4 + ["7"]
    assert await score(trajs, refs, sandbox) == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert sandbox.pairs == [("\\boxed{7}", "7")]  # only the math reference went to math-verify
    assert all(t.verify_status == "ok" for t in trajs)


async def test_score_with_the_real_verifier():
    client = pytest.importorskip("sandbox.client", reason="sandbox.client (issue 3) is not in this checkout yet")
    from configs.sandbox import SandboxConfig

    trajs = [Trajectory(i, 0, [], final_answer=a) for i, a in enumerate(["\\frac{1}{2}", "0.5", "3", None])]
    async with client.build_sandbox(SandboxConfig()) as sandbox:
        rewards = await score(trajs, ["1/2", "1/2", "4", "4"], sandbox)
    assert rewards == [1.0, 1.0, 0.0, 0.0]


# What the reward relies on from sandbox/verifier.py (math-verify 0.9.0), next to what the
# strict integer rules of rollout.answer say: pinned, so an upgrade that moves one is seen.
MATH_VERIFY_VS_STRICT = [  # (boxed answer, integer reference, math-verify score, strict integer)
    ("1, 2", "12", 0.0, None), ("3,4,5", "345", 0.0, None), ("1,000", "1000", 1.0, 1000),
    ("1{,}000", "1000", 1.0, 1000), ("10,\\!080", "10080", 1.0, 10080), ("\\text{12}", "12", 1.0, 12),
    ("-0", "0", 1.0, 0), ("12.0", "12", 1.0, 12), ("１２", "12", 0.0, None),
    ("1e999999999", "1", 0.0, None), ("1, 000", "1000", 0.0, None),
    # Disagreements: math-verify reads expressions and ignores trailing words; it does not read 1e5.
    ("1e5", "100000", 0.0, 100000), ("10^{3}", "1000", 1.0, None), ("\\frac{24}{2}", "12", 1.0, None),
    ("12 apples", "12", 1.0, None),
]


@pytest.mark.parametrize(("answer", "reference", "verdict", "strict"), MATH_VERIFY_VS_STRICT)
def test_math_verify_verdicts_the_reward_relies_on(answer, reference, verdict, strict):
    from rollout.answer import integer_answer
    from sandbox.verifier import verify_pair

    result = verify_pair(f"\\boxed{{{answer}}}", reference, 5)
    assert (result["status"], result["score"]) == ("ok", verdict)
    assert integer_answer(f"<answer>\\boxed{{{answer}}}</answer>") == strict


async def test_an_integer_reference_is_scored_by_the_strict_rules_without_the_verifier():
    """RL curation's agreement filter counts a sample as agreeing by the integer rules labels
    follow, not by math-verify: the two disagree on the rows above."""
    from rollout.answer import IntegerReference

    class NoVerifier:
        async def verify_batch(self, pairs):
            raise AssertionError("an integer reference needs no math-verify")

    trajs = [Trajectory(0, i, [], final_answer=answer) for i, (answer, *_) in enumerate(MATH_VERIFY_VS_STRICT)]
    refs = [IntegerReference(int(reference)) for _, reference, _, _ in MATH_VERIFY_VS_STRICT]
    rewards = await score([*trajs, Trajectory(0, 99, [])], [*refs, IntegerReference(3)], NoVerifier())
    assert rewards == [float(strict == int(ref)) for _, ref, _, strict in MATH_VERIFY_VS_STRICT] + [0.0]
