"""Glaive function calling v2 (`glaiveai/glaive-function-calling-v2`, SCHEMAS.md §3).

Rows are two flat strings: `system` ("SYSTEM: ... Use them if required -" followed by
pretty-printed JSON function definitions) and `chat` (turns `USER:`, `ASSISTANT:`,
`FUNCTION RESPONSE:` separated by blank lines; every assistant turn ends in
` <|endoftext|>`). A call is `<functioncall> {"name": "f", "arguments": '{"a": 1}'}`:
`arguments` is a single-quoted JSON string, so the payload is not JSON. We cut the
name and the quoted arguments with a regex and decode the arguments alone.
"""

from __future__ import annotations

import json
import re

from datalib.records import (
    FunctionCall,
    MalformedRow,
    Message,
    SFTExample,
    check_conversation,
    require,
    trim_to_last_assistant,
)
from datalib.sources.format import SourceFormat
from datalib.tool_schema import tools_from_definitions

_TURN = re.compile(r"(?:^|\n\n\n)(USER|ASSISTANT|FUNCTION RESPONSE):[ \t]?")
_ROLES = {"USER": "user", "ASSISTANT": "assistant", "FUNCTION RESPONSE": "tool"}
_QUOTED_CALL = re.compile(r'^\{\s*"name"\s*:\s*"([^"]+)"\s*,\s*"arguments"\s*:\s*\'(.*)\'\s*\}$', re.DOTALL)
_END = "<|endoftext|>"


def tools_and_preamble(system: str) -> tuple[str, tuple[dict, ...]]:
    text = system.removeprefix("SYSTEM:").strip()
    at = text.find("{")
    preamble = (text[:at] if at >= 0 else text).strip().removesuffix("-").strip()
    defs, decoder = [], json.JSONDecoder()
    while at >= 0:
        try:
            obj, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as e:
            raise MalformedRow("invalid_json", f"function definition in the system text: {e.msg}") from None
        defs.append(obj)
        nxt = text[end:].lstrip()
        at = end + (len(text[end:]) - len(nxt)) if nxt.startswith("{") else -1
    return preamble, tools_from_definitions(defs, "system functions")


def parse_call(payload: str) -> FunctionCall:
    payload = payload.strip()
    try:
        obj = json.loads(payload)  # some rows do carry valid JSON
        name, args = obj["name"], obj.get("arguments", {})
    except (json.JSONDecodeError, KeyError, TypeError):
        m = _QUOTED_CALL.match(payload)
        if m is None:
            raise MalformedRow("unparseable_call", f"functioncall payload {payload[:100]!r}") from None
        name, args = m.group(1), m.group(2)
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as e:
            raise MalformedRow("invalid_json", f"arguments of {name!r}: {e.msg}") from None
    if not isinstance(name, str) or not isinstance(args, dict):
        raise MalformedRow("wrong_type", f"functioncall name/arguments: {payload[:100]!r}")
    return FunctionCall(name, args)


def chat_messages(chat: str) -> list[Message]:
    parts = _TURN.split(chat)
    if parts[0].strip():
        raise MalformedRow("unparseable_chat", f"text before the first role marker: {parts[0][:80]!r}")
    messages = []
    for marker, body in zip(parts[1::2], parts[2::2], strict=True):
        role, text = _ROLES[marker], body.strip().removesuffix(_END).rstrip()
        if role == "assistant" and "<functioncall>" in text:
            prose, payload = text.split("<functioncall>", 1)
            messages.append(Message("assistant", prose.strip(), (parse_call(payload),)))
        else:
            messages.append(Message(role, text))
    return messages


def normalise(row: dict, example_id: str) -> SFTExample:
    preamble, tools = tools_and_preamble(require(row, "system", str))
    messages = trim_to_last_assistant(chat_messages(require(row, "chat", str)))
    if preamble:
        messages = [Message("system", preamble), *messages]
    return check_conversation(SFTExample(example_id, "glaive_fc_v2", tuple(messages), tools))


FORMAT = SourceFormat(required_fields=("system", "chat"), normalise=normalise)
