"""The release's tool protocol as a profile (issue 25, point 5): `rollout.prompt: release`,
`rollout.extra_tool_calls: skip`, and the overlay `configs/rstar2_agent_14b_release.yaml`."""

from __future__ import annotations

from pathlib import Path

from configs.load import load_config
from rollout.agent_loop import AgentState, TurnLimits, run_agent
from rollout.prompt import (
    RELEASE_PROBLEM_PREFIX,
    RELEASE_SYSTEM_PROMPT,
    RELEASE_TURN_PREFILL,
    SYSTEM_PROMPT,
    chat_format,
    extract_tool_calls,
    tool_call_text,
)
from rollout.trajectory import Trajectory
from sandbox.types import InvalidCall, ToolCall

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
ANSWER = "ok </reason><answer> \\boxed{7} </answer>"


def test_the_release_prompt_carries_its_system_text_instruction_and_prefill(any_fmt):
    release = chat_format(any_fmt.tokenizer, "release")
    text = release.prompt_text("Compute 3 + 4.")
    assert RELEASE_SYSTEM_PROMPT in text and SYSTEM_PROMPT not in text
    assert RELEASE_PROBLEM_PREFIX + "Compute 3 + 4." in text
    assert text.endswith("<|im_start|>assistant\n" + RELEASE_TURN_PREFILL)
    assert release.feedback_text(["7"]).endswith("<|im_start|>assistant\n" + RELEASE_TURN_PREFILL)
    ours = chat_format(any_fmt.tokenizer)  # the project's: no instruction, no prefill
    assert ours.prompt_text("Compute 3 + 4.").endswith("<|im_start|>assistant\n")
    assert RELEASE_PROBLEM_PREFIX not in ours.prompt_text("Compute 3 + 4.")
    assert not ours.feedback_text(["7"]).endswith(RELEASE_TURN_PREFILL)


async def test_under_the_release_prompt_every_turn_continues_the_prefill_with_mask_0(small_fmt, scripted):
    fmt = chat_format(small_fmt.tokenizer, "release")
    turns = [tool_call_text("print(3 + 4)"), ANSWER]
    engine = scripted.engine(fmt, lambda seed, turn: turns[turn])
    state = AgentState(Trajectory(0, 0, fmt.prompt_ids("Compute 3 + 4.")), fmt, TurnLimits(5, 4096))
    traj = await run_agent(state, engine, scripted.sandbox())
    assert traj.finish_reason == "stop" and traj.final_answer == "7"
    assert fmt.decode(traj.prompt_ids).endswith(RELEASE_TURN_PREFILL)
    masked = fmt.decode([i for i, m in zip(traj.response_ids, traj.loss_mask, strict=True) if m == 0])
    assert masked.endswith("<|im_start|>assistant\n" + RELEASE_TURN_PREFILL)  # the feedback turn's prefill


def test_calls_past_the_limit_are_answered_invalid_or_skipped():
    text = "".join(tool_call_text(f"print({i})") for i in range(3))
    invalid = extract_tool_calls(text, max_calls=1)
    assert isinstance(invalid[0], ToolCall) and [type(c) for c in invalid[1:]] == [InvalidCall, InvalidCall]
    (only,) = extract_tool_calls(text, max_calls=1, extra="skip")
    assert only == ToolCall(code="print(0)")


async def test_the_loop_runs_only_the_first_call_under_skip(small_fmt, scripted):
    turns = [tool_call_text("print(1)") + tool_call_text("print(2)"), ANSWER]
    engine = scripted.engine(small_fmt, lambda seed, turn: turns[turn])
    sandbox = scripted.sandbox()
    limits = TurnLimits(5, 4096, max_tool_calls_per_turn=1, extra_tool_calls="skip")
    traj = await run_agent(AgentState(Trajectory(0, 0, small_fmt.prompt_ids("q")), small_fmt, limits), engine, sandbox)
    assert sandbox.calls == [ToolCall(code="print(1)")] and len(traj.tool_calls) == 1
    assert small_fmt.decode(traj.response_ids).count("<tool_response>") == 1  # one answer, no invalid-call one


def test_the_release_overlay_changes_only_the_release_values():
    paper = load_config(CONFIGS / "rstar2_agent_14b.yaml")
    release = load_config(CONFIGS / "rstar2_agent_14b_release.yaml")
    assert (release.sandbox.timeout_s, release.sandbox.max_output_chars) == (4.0, 256)
    assert (release.rollout.max_tool_calls_per_turn, release.rollout.extra_tool_calls) == (1, "skip")
    assert release.rollout.prompt == "release" and release.rl.truncated_reward == "score"
    assert release.rl.roc.penalties == "release"
    assert [s.max_turns for s in (release.rl.stage1, release.rl.stage2, release.rl.stage3)] == [5, 5, 5]
    assert (paper.rollout.prompt, paper.rl.truncated_reward, paper.rl.roc.penalties) == ("project", "zero", "paper")
    same = release.model_copy(update={"run": paper.run, "sandbox": paper.sandbox, "rollout": paper.rollout,
                                      "rl": paper.rl})
    assert same == paper  # nothing else differs
