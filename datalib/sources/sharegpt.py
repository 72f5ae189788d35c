"""ShareGPT-style conversations (`[{"from": ..., "value": ...}]`) -> messages.

APIGen-MT uses LLaMA-Factory's ShareGPT roles (`human`, `gpt`, `function_call`,
`observation`); ToolACE's raw rows use `user`, `assistant`, `tool` with bracketed calls
(handled in toolace.py), and the derived copy of ToolACE in ../shared uses the former.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from datalib.records import FunctionCall, MalformedRow, Message

SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "function_call": "call", "observation": "tool", "tool": "tool", "system": "system"}

# (name as written, its arguments, index of the call in its turn, the following
# observation's text) -> tool name
NameResolver = Callable[[str, dict, int, str | None], str]


def turns_of(conversations: list) -> list[tuple[str, str]]:
    """(role, text) pairs with roles checked; raises MalformedRow."""
    out = []
    for i, turn in enumerate(conversations):
        if not isinstance(turn, dict):
            raise MalformedRow("wrong_type", f"turn {i} is {type(turn).__name__}")
        role, value = turn.get("from", turn.get("role")), turn.get("value", turn.get("content"))
        if role not in SHAREGPT_ROLES:
            raise MalformedRow("unknown_role", f"turn {i} has role {role!r}")
        if not isinstance(value, str):
            raise MalformedRow("wrong_type", f"turn {i} value is {type(value).__name__}")
        out.append((SHAREGPT_ROLES[role], value))
    return out


def decode_json(text: str, what: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise MalformedRow("invalid_json", f"{what}: {e.msg} in {text[:100]!r}") from None


def calls_from_json(text: str, resolve: NameResolver | None = None, observation: str | None = None
                    ) -> tuple[FunctionCall, ...]:
    """`{"name", "arguments"}` or a list of them; `arguments` an object or a JSON string."""
    payload = decode_json(text, "function call")
    items = payload if isinstance(payload, list) else [payload]
    calls = []
    for k, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise MalformedRow("unparseable_call", f"call {k} has no name: {text[:100]!r}")
        args = item.get("arguments", {})
        if isinstance(args, str):
            args = decode_json(args, f"arguments of {item['name']!r}") if args.strip() else {}
        if not isinstance(args, dict):
            raise MalformedRow("wrong_type", f"arguments of {item['name']!r} are {type(args).__name__}")
        name = resolve(item["name"], args, k, observation) if resolve else item["name"]
        calls.append(FunctionCall(name, args))
    return tuple(calls)


def tool_messages(text: str, pending_calls: int) -> list[Message]:
    """One observation -> one tool message per call when it is a list with one entry each."""
    if pending_calls > 1:
        try:
            payload = json.loads(text)
        except json.JSONDecodeError:
            payload = None
        if isinstance(payload, list) and len(payload) == pending_calls:
            return [Message("tool", json.dumps(p, ensure_ascii=False)) for p in payload]
    return [Message("tool", text)]


def messages_from_sharegpt(turns: list[tuple[str, str]], resolve: NameResolver | None = None) -> list[Message]:
    messages: list[Message] = []
    pending = 0
    for i, (role, text) in enumerate(turns):
        if role == "call":
            following = turns[i + 1][1] if i + 1 < len(turns) and turns[i + 1][0] == "tool" else None
            calls = calls_from_json(text, resolve, following)
            messages.append(Message("assistant", "", calls))
            pending = len(calls)
        elif role == "tool":
            messages.extend(tool_messages(text, pending))
            pending = 0
        else:
            messages.append(Message(role, text))
            pending = 0
    return messages
