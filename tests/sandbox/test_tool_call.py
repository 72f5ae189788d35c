"""parse_tool_call: well-formed calls, the model quirks we accept, one-line reasons otherwise (SPEC §2)."""

from __future__ import annotations

import json

import pytest

from sandbox.tool_call import TOOL_NAME, parse_tool_call
from sandbox.types import InvalidCall, ToolCall


def body(**obj) -> str:
    return json.dumps(obj)


def test_well_formed_call_with_and_without_input():
    assert parse_tool_call(body(name=TOOL_NAME, arguments={"code": "print(1)"})) == ToolCall("print(1)", "")
    text = body(name=TOOL_NAME, arguments={"code": "x", "input": "3\n"})
    call = parse_tool_call("\n  " + text + "\n")
    assert call == ToolCall("x", "3\n")


def test_arguments_given_as_a_json_string():
    args = json.dumps({"code": "print(2)", "input": "a"})
    assert parse_tool_call(body(name=TOOL_NAME, arguments=args)) == ToolCall("print(2)", "a")


def test_null_input_means_empty():
    assert parse_tool_call(body(name=TOOL_NAME, arguments={"code": "1", "input": None})) == ToolCall("1", "")


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"name": "execute_python_code_with_standard_io", "arguments": {"code": "x"', "not valid JSON"),
        ("", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        (body(arguments={"code": "x"}), 'missing "name"'),
        (body(name="python", arguments={"code": "x"}), 'unknown tool "python"'),
        (body(name=TOOL_NAME), 'missing "arguments"'),
        (body(name=TOOL_NAME, arguments="{not json"), "not valid JSON"),
        (body(name=TOOL_NAME, arguments=[1]), "must be an object"),
        (body(name=TOOL_NAME, arguments={"input": "1"}), 'missing "code"'),
        (body(name=TOOL_NAME, arguments={"code": 12}), '"code" must be a string, got int'),
        (body(name=TOOL_NAME, arguments={"code": "x", "input": 5}), '"input" must be a string'),
    ],
)
def test_malformed_calls_get_a_one_line_reason(raw: str, fragment: str):
    res = parse_tool_call(raw)
    assert isinstance(res, InvalidCall)
    assert fragment in res.reason
    assert "\n" not in res.reason and res.reason.startswith("Invalid tool call: ")
    assert res.raw == raw
