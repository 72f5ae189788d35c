"""Fixtures of the data_prep tests: the project chat template, and a render check."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from transformers import AutoTokenizer


@pytest.fixture(scope="session")
def tokenizer(tiny_assets):
    """The small BPE tokenizer carrying the project's Qwen3 chat template."""
    return AutoTokenizer.from_pretrained(tiny_assets.tokenizer)


def _assert_renders(tokenizer, row: dict) -> str:
    """The chat template accepts the row and shows every message, call and tool in it."""
    tools = json.loads(row["tools"]) or None
    text = tokenizer.apply_chat_template(row["messages"], tools=tools, tokenize=False)
    for m in row["messages"]:
        assert m["content"].strip() in text, (row["id"], m["role"], m["content"][:80])
        for call in m["tool_calls"] or ():
            fn = call["function"]
            assert f'{{"name": "{fn["name"]}", "arguments": {fn["arguments"]}}}' in text
            assert isinstance(json.loads(fn["arguments"]), dict)
    for tool in tools or ():
        assert json.dumps(tool["function"]["name"]) in text
    return text


@pytest.fixture(scope="session")
def assert_renders(tokenizer) -> Callable[[dict], str]:
    return lambda row: _assert_renders(tokenizer, row)
