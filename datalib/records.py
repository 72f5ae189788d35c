"""The records every source is normalised into (SPEC §8), and the errors a row can raise.

Cold start: `SFTExample` = `messages` (system/user/assistant/tool; assistant calls as
structured `tool_calls`) + `tools` (JSON schemas in the `{"type": "function",
"function": {...}}` form the Qwen3 template renders). RL: `RLProblem` with an int answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

from stagekit.errors import StageInputError

Role = Literal["system", "user", "assistant", "tool"]


class SourceSchemaError(StageInputError):
    """The rows do not look like the configured source at all: fail the stage at once."""


class RowError(Exception):
    """One row is unusable; it goes to the rejects file and the stage goes on."""

    kind = "malformed"

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason  # short category, counted in the data card
        self.detail = detail  # what exactly, for the rejects file


class MalformedRow(RowError):
    """Missing fields, wrong types, unparseable calls, invalid JSON strings."""


class FilteredRow(RowError):
    """A well-formed row our policy drops (non-integer answer, reasoning trace, ...)."""

    kind = "filtered"


@dataclass(frozen=True)
class FunctionCall:
    name: str
    arguments: dict  # decoded JSON object

    def to_row(self) -> dict:
        # OpenAI form; `arguments` as a JSON string keeps the parquet schema fixed across
        # tools, and the Qwen3 template prints a string argument verbatim.
        return {"type": "function",
                "function": {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False)}}


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    tool_calls: tuple[FunctionCall, ...] = ()

    def to_row(self) -> dict:
        calls = [c.to_row() for c in self.tool_calls] if self.tool_calls else None
        return {"role": self.role, "content": self.content, "tool_calls": calls}


@dataclass(frozen=True)
class SFTExample:
    id: str  # `<source>-<row index>` (stable across runs)
    source: str  # registry name of the normaliser
    messages: tuple[Message, ...]
    tools: tuple[dict, ...] = ()  # {"type": "function", "function": {name, description, parameters}}
    meta: dict = field(default_factory=dict, compare=False)  # e.g. {"rewritten": "response"}

    def to_row(self) -> dict:
        return {
            "id": self.id,
            "source": self.source,
            "messages": [m.to_row() for m in self.messages],
            # A JSON string: per-tool parameter names would otherwise become one huge,
            # null-padded parquet struct. TRL's SFTTrainer json-decodes a string `tools`.
            "tools": json.dumps(list(self.tools), ensure_ascii=False),
            "rewritten": self.meta.get("rewritten", ""),
        }


@dataclass(frozen=True)
class RLProblem:
    id: str
    source: str
    problem: str  # the question as the user turn shows it
    answer: int  # within the configured digit limit (fits int64)

    def to_row(self) -> dict:
        return {"id": self.id, "source": self.source, "problem": self.problem, "answer": self.answer}


@dataclass(frozen=True)
class RawProblem:
    """What an RL source normaliser extracts; the stage turns `answer` into an int."""

    problem: str
    answer: object  # as the source gives it ("025", "1,000", "\\boxed{7}", 25, 25.0, ...)


def require(row: dict, key: str, kind: type | tuple[type, ...] = str) -> object:
    """row[key], checked; raises MalformedRow (`missing_field` / `wrong_type`)."""
    if key not in row or row[key] is None:
        raise MalformedRow("missing_field", f"no {key!r}")
    value = row[key]
    if not isinstance(value, kind):
        raise MalformedRow("wrong_type", f"{key!r} is {type(value).__name__}")
    return value


def require_answer(row: dict, key: str) -> object:
    """row[key] as the source gives it, whatever its type: the integer rules
    (datalib/integers.py) judge every type the same way in every source, so 25, "25", 25.0
    and "025" are accepted, and a list, a boolean or a non-integral float refused, alike
    from JSON, Parquet or the hub."""
    if key not in row or row[key] is None:
        raise MalformedRow("missing_field", f"no {key!r}")
    return row[key]


def function_tool(name: str, description: str, parameters: dict) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


_CALL_MARKUP = re.compile(r"<\s*/?\s*(tool_call|functioncall|function_call)\s*>|<\|python_tag\|>", re.I)
_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S)


def _unclosed_json(text: str) -> bool:
    """True when `text` opens a JSON object or array it never closes (strings skipped): cut mid-content."""
    body = text.strip()
    if not body.startswith(("{", "[")):
        return False
    depth, in_string, escaped = 0, False, False
    for c in body:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
    return depth > 0 or in_string


def check_conversation(example: SFTExample) -> SFTExample:
    """Checks shared by every cold-start source (each normaliser calls it, and the stage again
    on whatever a normaliser returns); raises MalformedRow, or FilteredRow for a reasoning
    trace. Broken in meaning, though every field parses:
    - `empty_turn`: a user turn without text, an assistant turn with neither text nor a call;
    - `tool_call_without_response`: calls not each answered by a tool turn before the next
      user or assistant turn (a conversation may end on its last assistant's calls: the
      model learns to make them, and nothing after them is trained);
    - `truncated_tool_response`: a tool response that opens a JSON value and never closes it;
    - `tool_call_in_text`: call markup left in an assistant's text (never parsed, or cut);
    - `reasoning_trace`: a `<think>` block with content (the cold start is non-reasoning, SPEC §7)."""
    msgs = example.messages
    if not any(m.role == "assistant" for m in msgs):
        raise MalformedRow("no_assistant_turn", "nothing to train on")
    if any(m.role == "system" for m in msgs[1:]):
        raise MalformedRow("bad_role_order", "system message after the first position")
    tool_names = {t["function"]["name"] for t in example.tools}
    pending = 0  # calls of the last assistant turn not yet answered
    for i, m in enumerate(msgs):
        if not isinstance(m.content, str):
            raise MalformedRow("wrong_type", f"message {i} content is {type(m.content).__name__}")
        for call in m.tool_calls:
            if call.name not in tool_names:
                raise MalformedRow("unknown_tool", f"message {i} calls {call.name!r}, not among the tools")
        if m.role == "tool":
            if pending == 0:
                raise MalformedRow("bad_role_order", f"message {i}: tool result without a pending call")
            pending -= 1
            if _unclosed_json(m.content):
                raise MalformedRow("truncated_tool_response",
                                   f"message {i}: ends inside a JSON value: ...{m.content.strip()[-60:]!r}")
            continue
        if pending:
            raise MalformedRow("tool_call_without_response",
                               f"message {i} ({m.role}): {pending} call(s) of the turn before have no response")
        if m.role == "user" and not m.content.strip():
            raise MalformedRow("empty_turn", f"message {i} (user): no text")
        if m.role == "assistant":
            if not m.content.strip() and not m.tool_calls:
                raise MalformedRow("empty_turn", f"message {i} (assistant): neither text nor a call")
            if markup := _CALL_MARKUP.search(m.content):
                raise MalformedRow("tool_call_in_text", f"message {i}: {markup.group()!r} in the assistant's text: "
                                                        "a call that was not parsed, or was cut")
            if any(block.group(1).strip() for block in _THINK.finditer(m.content)):
                raise FilteredRow("reasoning_trace", f"message {i}: a <think> block with content; the cold start "
                                                     "is non-reasoning (SPEC §7)")
            pending = len(m.tool_calls)
    first = next(m for m in msgs if m.role != "system")
    if first.role != "user":
        raise MalformedRow("bad_role_order", f"the conversation starts with {first.role!r}, not 'user'")
    return example


def trim_to_last_assistant(messages: list[Message]) -> list[Message]:
    """Drop trailing user/tool turns: they carry no training signal (nothing answers them)."""
    end = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    return messages[: end + 1]
