"""Rows that parse but are broken in meaning are rejected with reasons, whatever the source
(issue 23, point 2): each conversation below failed no check before."""

from __future__ import annotations

import pytest

from datalib.records import (
    FilteredRow,
    FunctionCall,
    MalformedRow,
    Message,
    SFTExample,
    check_conversation,
    function_tool,
)
from datalib.sources.dapo_math import normalise as dapo

TOOL = function_tool("lookup", "Look a thing up.", {"type": "object", "properties": {"q": {"type": "string"}}})
CALL = (FunctionCall("lookup", {"q": "x"}),)
U, A = Message("user", "Find x."), Message("assistant", "x is 3.")


def _ex(*messages: Message) -> SFTExample:
    return SFTExample("t-0", "test", tuple(messages), (TOOL,))


@pytest.mark.parametrize(("messages", "reason"), [
    ((U, Message("assistant", "", CALL), Message("user", "and?"), A), "tool_call_without_response"),
    ((U, Message("assistant", "", CALL * 2), Message("tool", "1"), A), "tool_call_without_response"),
    ((U, Message("assistant", "", CALL), Message("assistant", "done"),), "tool_call_without_response"),
    ((U, Message("assistant", "", CALL), Message("tool", '{"result": [1, 2, {"deep": "cut'), A),
     "truncated_tool_response"),
    ((U, Message("assistant", "", CALL), Message("tool", "[1, 2, 3"), A), "truncated_tool_response"),
    ((U, Message("assistant", 'Let me check. <tool_call>{"name": "lookup", "argu'), ), "tool_call_in_text"),
    ((U, Message("assistant", "<functioncall> lookup(q='x')"),), "tool_call_in_text"),
    ((Message("user", "  \n"), A), "empty_turn"),
    ((U, Message("assistant", " "),), "empty_turn"),
])
def test_broken_conversations_are_malformed(messages, reason):
    with pytest.raises(MalformedRow) as err:
        check_conversation(_ex(*messages))
    assert err.value.reason == reason


def test_a_reasoning_trace_is_filtered_and_an_empty_think_block_is_not():
    with pytest.raises(FilteredRow) as err:
        check_conversation(_ex(U, Message("assistant", "<think>\nFirst, x...\n</think>\n\nx is 3.")))
    assert err.value.reason == "reasoning_trace"
    with pytest.raises(FilteredRow):  # an unclosed block too
        check_conversation(_ex(U, Message("assistant", "<think>let me see")))
    check_conversation(_ex(U, Message("assistant", "<think>\n\n</think>\n\nx is 3.")))  # Qwen3's empty block


def test_sound_conversations_pass():
    check_conversation(_ex(U, Message("assistant", "", CALL), Message("tool", '{"result": "a \\"}\\" b"}'), A))
    check_conversation(_ex(U, Message("assistant", "Checking.", CALL)))  # ends on its call: allowed
    check_conversation(_ex(U, Message("assistant", "", CALL), Message("tool", "plain text [with a bracket"), A))


def test_a_chat_prompt_is_read_by_role():
    row = {"prompt": [{"role": "system", "content": "Please reason step by step."},
                      {"role": "user", "content": "What is 6 * 7?"}], "solution": "42"}
    assert dapo(row).problem == "What is 6 * 7?"
    with pytest.raises(MalformedRow, match="2 user turns"):
        dapo({"prompt": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "solution": "1"})
    with pytest.raises(MalformedRow, match="0 user turns"):
        dapo({"prompt": [{"role": "system", "content": "only a system turn"}], "solution": "1"})
