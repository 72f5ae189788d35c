"""Sources without a real sample row (APIGen-MT, Nemotron) and ToolACE's raw layout, on
rows built to the layouts SCHEMAS.md documents; rendered with the project chat template."""

from __future__ import annotations

import json

import pytest

from datalib.python_calls import parse_call_list
from datalib.records import MalformedRow, RowError
from datalib.sources import COLD_START_SOURCES

TOOLACE_SYSTEM = (
    "You are an expert in composing functions. You are given a question and a set of possible functions. \n"
    "Based on the question, you will need to make one or more function/tool calls to achieve the purpose. \n"
    "Here is a list of functions in JSON format that you can invoke:\n"
    + json.dumps([
        {"name": "Market Trends API", "description": "Latest market trends.", "parameters": {
            "type": "dict", "properties": {"trend_type": {"type": "string"}, "limit": {"type": "int"}},
            "required": ["trend_type"]}, "required": None},
        {"name": "SEC Filings", "description": "Filings of a company.", "parameters": {
            "type": "dict", "properties": {"identifier": {"type": "string"}}, "required": ["identifier"]},
         "required": None},
    ])
    + ". \nShould you decide to return the function call(s). \n"
    "Put it in the format of [func1(params_name=params_value, params_name2=params_value2...), func2(params)]\n\n"
    "NO other text MUST be included. \n"
)
TOOLACE_RAW = {"system": TOOLACE_SYSTEM, "conversations": [
    {"from": "user", "value": "Market trends and Apple's filings, please."},
    {"from": "assistant", "value": '[Market Trends API(trend_type="MARKET_INDEXES", limit=3), '
                                   'SEC Filings(identifier="AAPL")]'},
    {"from": "tool", "value": json.dumps([{"name": "Market Trends API", "results": {"trends": ["S&P 500"]}},
                                          {"name": "SEC Filings", "results": {"filings": ["10-K"]}}])},
    {"from": "assistant", "value": "The S&P 500 leads; Apple filed a 10-K."},
]}

APIGEN_ROW = {
    "system": "You are a retail agent. Follow the domain policy.",
    "tools": json.dumps([
        {"name": "find_user_id_by_email", "description": "Find a user.", "parameters": {
            "type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}},
        {"name": "think", "description": "Think.", "parameters": {
            "type": "object", "properties": {"thought": {"type": "string"}}, "required": ["thought"]}},
    ]),
    "conversations": [
        {"from": "human", "value": "Hi, my email is a@b.c."},
        {"from": "function_call", "value": json.dumps({"name": "think", "arguments": {"thought": "Look it up."}})},
        {"from": "observation", "value": ""},
        {"from": "function_call", "value": json.dumps({"name": "find_user_id_by_email",
                                                       "arguments": {"email": "a@b.c"}})},
        {"from": "observation", "value": "user_42"},
        {"from": "gpt", "value": "Found you: user_42."},
    ],
}

NEMOTRON_TEMPLATE = {
    "input": "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\ndetailed thinking off<|eot_id|>"
             "<|start_header_id|>user<|end_header_id|>\n\nWrite a haiku about rain.<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "output": "Soft rain on the roof<|eot_id|>", "reasoning": "off", "category": "chat",
    "system_prompt": "detailed thinking off",
}
NEMOTRON_LIST = {
    "input": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
              {"role": "user", "content": "Name a colour."}],
    "output": "Blue.", "reasoning": "off", "category": "chat", "system_prompt": "detailed thinking off",
}


def test_toolace_raw_bracketed_calls_with_spaces(assert_renders):
    example = COLD_START_SOURCES["toolace"].normalise(TOOLACE_RAW, "toolace-0")
    calls = example.messages[2].tool_calls
    assert [(c.name, c.arguments) for c in calls] == [
        ("Market Trends API", {"trend_type": "MARKET_INDEXES", "limit": 3}), ("SEC Filings", {"identifier": "AAPL"})]
    assert [m.role for m in example.messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert "Put it in the format" not in example.messages[0].content  # bracket instructions removed
    params = example.tools[0]["function"]["parameters"]
    assert params["type"] == "object" and params["properties"]["limit"]["type"] == "integer"
    assert "required" not in example.tools[0]["function"]  # ToolACE's top-level "required": null dropped
    assert_renders(example.to_row())


@pytest.mark.parametrize("text,expected", [
    ('[Market Trends API(trend_type="X")]', [("Market Trends API", {"trend_type": "X"})]),
    ("[SEC Filings(identifier='A,SEC Filings(b)', flag=true, n=None)]",
     [("SEC Filings", {"identifier": "A,SEC Filings(b)", "flag": True, "n": None})]),
    ('[Market Trends API(trend_type="X", opts={"a": [1, 2]})]', [("Market Trends API", {"trend_type": "X",
                                                                                        "opts": {"a": [1, 2]}})]),
])
def test_bracketed_call_parsing(text, expected):
    calls = parse_call_list(text, ["Market Trends API", "SEC Filings", "API"])
    assert [(c.name, c.arguments) for c in calls] == expected


@pytest.mark.parametrize("text,reason", [
    ('[Market Trends API(trend_type="X"]', "unparseable_call"),
    ('[Unknown Tool(a=1)]', "unparseable_call"),
    ("[Lookup(a=1)]", "unknown_tool"),
    ('[SEC Filings("AAPL")]', "unparseable_call"),
    ("[SEC Filings(identifier=os.system('x'))]", "unparseable_call"),
])
def test_bracketed_call_errors(text, reason):
    with pytest.raises(MalformedRow) as err:
        parse_call_list(text, ["Market Trends API", "SEC Filings"])
    assert err.value.reason == reason


def test_apigen_mt(assert_renders):
    example = COLD_START_SOURCES["apigen_mt"].normalise(APIGEN_ROW, "apigen_mt-0")
    assert [m.role for m in example.messages] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                  "assistant"]
    assert example.messages[4].tool_calls[0].arguments == {"email": "a@b.c"}
    assert_renders(example.to_row())


@pytest.mark.parametrize("row", [NEMOTRON_TEMPLATE, NEMOTRON_LIST], ids=["template_string", "message_list"])
def test_nemotron_both_input_forms(assert_renders, row):
    example = COLD_START_SOURCES["nemotron_chat"].normalise(row, "nemotron_chat-0")
    roles = [m.role for m in example.messages]
    assert "system" not in roles  # the reasoning toggle is dropped
    assert roles[-1] == "assistant" and "<|eot_id|>" not in example.messages[-1].content
    assert_renders(example.to_row())


def test_nemotron_reasoning_rows_are_filtered():
    with pytest.raises(RowError) as err:
        COLD_START_SOURCES["nemotron_chat"].normalise({**NEMOTRON_LIST, "reasoning": "on",
                                                       "output": "<think>hm</think>Blue."}, "x")
    assert err.value.kind == "filtered" and err.value.reason == "reasoning_trace"


def test_synthetic_demonstrations_render(assert_renders):
    from datalib.sources.synthetic import normalise_sft
    from datalib.synthetic import generate_problems

    for failure in ("", "syntax", "name"):
        p = generate_problems(1, 0, "test")[0]
        row = {"problem": p.problem, "answer": p.answer, "program": p.program, "first_call_fails": failure}
        text = assert_renders(normalise_sft(row, "s").to_row())
        assert text.count("<tool_call>") == (2 if failure else 1) + 2  # + the template's format example
        assert f"\\boxed{{{p.answer}}}" in text
