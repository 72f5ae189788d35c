"""The records every source is normalised into (SPEC §8), and the errors a row can raise.

Cold start: `SFTExample` = `messages` (system/user/assistant/tool; assistant calls as
structured `tool_calls`) + `tools` (JSON schemas in the `{"type": "function",
"function": {...}}` form the Qwen3 template renders). RL: `RLProblem` with an int answer.
"""

from __future__ import annotations

import json
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


def function_tool(name: str, description: str, parameters: dict) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def check_conversation(example: SFTExample) -> SFTExample:
    """Structural checks shared by every cold-start source; raises MalformedRow."""
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
        if m.role == "assistant":
            pending = len(m.tool_calls)
        elif m.role == "tool":
            if pending == 0:
                raise MalformedRow("bad_role_order", f"message {i}: tool result without a pending call")
            pending -= 1
        else:
            pending = 0
    first = next(m for m in msgs if m.role != "system")
    if first.role != "user":
        raise MalformedRow("bad_role_order", f"the conversation starts with {first.role!r}, not 'user'")
    return example


def trim_to_last_assistant(messages: list[Message]) -> list[Message]:
    """Drop trailing user/tool turns: they carry no training signal (nothing answers them)."""
    end = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    return messages[: end + 1]
