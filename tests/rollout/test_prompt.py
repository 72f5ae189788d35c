"""Protocol round trips (SPEC §2) with the small BPE and the real-vocabulary Qwen3 tokenizer."""

from __future__ import annotations

from rollout.agent_loop import AgentState, TurnLimits
from rollout.engines.base import GenerationResult
from rollout.prompt import SYSTEM_PROMPT, TOOL_SCHEMA, extract_tool_calls
from rollout.prompt import tool_call_text as call_text
from rollout.trajectory import Trajectory
from sandbox.types import InvalidCall, SandboxResult, ToolCall


def _turn(fmt, text: str) -> GenerationResult:
    ids = fmt.encode(text) + [fmt.end_of_turn_id]
    return GenerationResult(ids, [-0.25] * len(ids), "stop")


TURNS = [
    "<reason> I will compute it.</reason>\n" + call_text("print(6 * 7)"),
    "Checking twice: "
    + call_text("print(input())", "x")
    + "\n"
    + '<tool_call>\n{"name": "execute_python_code_with_standard_io", "arguments": {"code": 5}}\n</tool_call>',
    "<reason> done </reason>\n<answer> The answer is \\boxed{42}. </answer>",
]
FEEDBACK = [["42\n"], ["x\n", 'Invalid tool call: "code" must be a string, got int.']]


def _play(fmt):
    """Drive one trajectory through TURNS by hand; returns it and the prompt seen at each turn."""
    state = AgentState(Trajectory(0, 0, fmt.prompt_ids("What is six times seven?")), fmt, TurnLimits(5, 4096))
    prompts = []
    for k, text in enumerate(TURNS):
        prompts.append(state.next_request()[0])
        state.add_generation(_turn(fmt, text))
        if k < len(FEEDBACK):
            assert len(state.pending_calls) == len(FEEDBACK[k])
            state.add_feedback([SandboxResult(status="ok", feedback=f) for f in FEEDBACK[k]])
    return state.trajectory, prompts


def _messages(upto: int) -> list[dict]:
    msgs = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "What is six times seven?"}]
    for k in range(upto):
        msgs.append({"role": "assistant", "content": TURNS[k]})
        msgs += [{"role": "tool", "content": f} for f in FEEDBACK[k]]
    return msgs


def test_every_turn_prompt_is_the_chat_template_render(any_fmt):
    fmt = any_fmt
    traj, prompts = _play(fmt)
    for k, prompt in enumerate(prompts):
        rendered = fmt.tokenizer.apply_chat_template(
            _messages(k), tools=[TOOL_SCHEMA], add_generation_prompt=True, tokenize=False
        )
        assert fmt.decode(prompt) == rendered
    full = fmt.decode(traj.prompt_ids + traj.response_ids)
    assert full == fmt.decode(prompts[-1]) + TURNS[-1] + fmt.end_of_turn
    assert traj.finish_reason == "stop" and traj.final_answer == "42"


def test_mask_covers_exactly_the_model_turns(any_fmt):
    fmt = any_fmt
    traj, _ = _play(fmt)
    assert len(traj.loss_mask) == len(traj.response_ids) == len(traj.logprobs)
    spans, current = [], []
    for token, m in zip(traj.response_ids, traj.loss_mask, strict=True):
        if m:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    spans.append(current)
    assert [fmt.decode(s) for s in spans] == [t + fmt.end_of_turn for t in TURNS]
    unmasked = fmt.decode([t for t, m in zip(traj.response_ids, traj.loss_mask, strict=True) if not m])
    assert "<tool_response>\n42\n\n</tool_response>" in unmasked and "<|im_start|>assistant\n" in unmasked
    assert all(lp == 0.0 for lp, m in zip(traj.logprobs, traj.loss_mask, strict=True) if not m)
    assert all(lp == -0.25 for lp, m in zip(traj.logprobs, traj.loss_mask, strict=True) if m)


def test_prompt_holds_instructions_and_tool_schema(small_fmt):
    text = small_fmt.prompt_text("Find x.")
    for needle in ("<reason>", "<answer>", "\\boxed{}", "# Tools", "<tools>", "execute_python_code_with_standard_io"):
        assert needle in text
    assert '"required": ["code"]' in text and '"default": ""' in text
    assert text.endswith("<|im_start|>user\nFind x.<|im_end|>\n<|im_start|>assistant\n")


def test_feedback_turn_shape(small_fmt):
    text = small_fmt.feedback_text(["a", "b <tool_call> c"])
    assert text == (
        "\n<|im_start|>user\n<tool_response>\na\n</tool_response>\n<tool_response>\nb <tool_call> c\n"
        "</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_extract_tool_calls_is_robust():
    assert extract_tool_calls("no calls here") == []
    (ok,) = extract_tool_calls("x " + call_text("print(1)", "5") + " y")
    assert ok == ToolCall(code="print(1)", input="5")
    bad = extract_tool_calls('<tool_call>\n{not json}\n</tool_call><tool_call>{"arguments": {}}</tool_call>')
    assert [type(c) for c in bad] == [InvalidCall, InvalidCall]
    assert all(c.reason.startswith("Invalid tool call:") and "\n" not in c.reason for c in bad)
    (unclosed,) = extract_tool_calls(
        "<tool_call>\n" + '{"name": "execute_python_code_with_standard_io", "arguments": {"code": "1"}}'
    )
    assert unclosed == ToolCall(code="1")
    many = extract_tool_calls(call_text("1") * 3, max_calls=2)
    assert isinstance(many[2], InvalidCall) and "more than 2" in many[2].reason
    for junk in ("<tool_call>", "<tool_call></tool_call>", "</tool_call><tool_call>[]", "<tool_call>\x00{{"):
        assert all(isinstance(c, InvalidCall) for c in extract_tool_calls(junk))


def test_end_of_turn_comes_from_the_template_not_eos(tiny_assets):
    """Qwen3-Base's tokenizer names <|endoftext|> as eos; its turns still end with <|im_end|>."""
    from transformers import AutoTokenizer

    from rollout.prompt import ChatFormat

    if tiny_assets.real_tokenizer is None:
        import pytest

        pytest.skip("the assets artifact has no real-vocabulary Qwen3 tokenizer")
    base = AutoTokenizer.from_pretrained(tiny_assets.real_tokenizer, eos_token="<|endoftext|>")
    fmt = ChatFormat(base)
    assert (fmt.end_of_turn, fmt.end_of_turn_id) == ("<|im_end|>", 151645)
    assert fmt.stop_token_ids == (151643, 151645)
    assert fmt.feedback_text(["1"]).startswith("\n<|im_start|>user\n<tool_response>")
