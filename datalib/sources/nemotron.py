"""Llama-Nemotron post-training, chat split (`nvidia/Llama-Nemotron-Post-Training-Dataset`,
config `SFT`, split `chat`; SCHEMAS.md §7).

Rows: `{input, output, reasoning: on|off, system_prompt, ...}`. `input` is either a
Llama-3 template string (`<|start_header_id|>user<|end_header_id|>\\n\\n...<|eot_id|>`,
the v1 files) or a list of `{role, content}` messages (later files); both are read.
The cold start is non-reasoning (SPEC §7): rows with `reasoning: on` or a `<think>`
block in the output are filtered (`reasoning_trace`). Nemotron's reasoning toggle
("detailed thinking on/off", as `system_prompt` or a system turn) means nothing to our
model and is dropped. No real row was available to us; the tests use rows built to the
card. The prompt may be rewritten by an OpenAI-compatible endpoint (rewriter.py).
"""

from __future__ import annotations

import re

from datalib.records import FilteredRow, MalformedRow, Message, SFTExample, check_conversation, require
from datalib.sources.format import SourceFormat
from datalib.sources.tulu import chat_messages

_HEADER = re.compile(r"<\|start_header_id\|>(\w+)<\|end_header_id\|>\n*(.*?)(?=<\|eot_id\|>|<\|start_header_id\|>|$)",
                     re.DOTALL)
_SPECIAL = re.compile(r"<\|(?:begin_of_text|end_of_text|eot_id)\|>")
_TOGGLE = re.compile(r"^\s*detailed thinking (on|off)\s*$", re.IGNORECASE)


def template_messages(text: str) -> list[Message]:
    turns = _HEADER.findall(text)
    if not turns:  # a plain prompt (some conversions stripped the template)
        return [Message("user", _SPECIAL.sub("", text).strip())]
    out = []
    for role, body in turns:
        if role not in ("system", "user", "assistant"):
            raise MalformedRow("unknown_role", f"template turn with role {role!r}")
        out.append(Message(role, _SPECIAL.sub("", body).strip()))
    return out


def normalise(row: dict, example_id: str) -> SFTExample:
    raw_input, output = require(row, "input", (str, list)), require(row, "output", str)
    if row.get("reasoning") == "on" or "<think>" in output:
        raise FilteredRow("reasoning_trace", "the cold start is non-reasoning (SPEC §7)")
    prompt = template_messages(raw_input) if isinstance(raw_input, str) else chat_messages(raw_input)
    prompt = [m for m in prompt if not (m.role == "system" and _TOGGLE.match(m.content))]
    while prompt and prompt[-1].role == "assistant" and not prompt[-1].content:
        prompt.pop()  # the template's open assistant header
    answer = _SPECIAL.sub("", output).strip()
    if not answer:
        raise MalformedRow("empty_output", "no response text")
    messages = (*prompt, Message("assistant", answer))
    return check_conversation(SFTExample(example_id, "nemotron_chat", messages))


FORMAT = SourceFormat(required_fields=("input", "output"), normalise=normalise,
                      columns=("input", "output", "reasoning", "system_prompt", "category"))
