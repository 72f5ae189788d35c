"""ToolACE (`Team-ACE/ToolACE`, SCHEMAS.md §1): tools inside the system text, bracketed calls.

Raw rows: `{system, conversations: [{from: user|assistant|tool, value}]}`.
- Tools: the JSON list after "...that you can invoke:" in `system` (decoded with
  `raw_decode`, so the trailing instructions do not matter), converted to JSON Schema.
- The system message keeps ToolACE's role text before the tool list; the list and the
  bracketed-call format instructions go, since the chat template prints the tools and
  the calls become JSON `<tool_call>`s.
- Assistant turns `[Name With Spaces(a=1), Other(b="x")]` -> structured calls, parsed
  against the declared names (python_calls.py). Tool turns hold a JSON list with one
  `{name, results}` per call -> one tool message per call.
The derived copy in ../shared (ShareGPT roles, calls re-encoded as JSON with names cut
to their last word: `Market Trends API` -> `API`) is read too: a cut name is resolved to
the unique declared tool ending with it, else to the name its observation reports.
"""

from __future__ import annotations

import json

from datalib.python_calls import looks_like_call_list, parse_call_list
from datalib.records import MalformedRow, Message, SFTExample, check_conversation, require, trim_to_last_assistant
from datalib.sources.format import SourceFormat
from datalib.sources.sharegpt import messages_from_sharegpt, tool_messages, turns_of
from datalib.tool_schema import tools_from_definitions

_TOOLS_MARKER = "that you can invoke:"
_PREAMBLE_END = "Here is a list of functions"
_RAW_ROLES = {"user", "assistant", "tool"}


def tools_from_system(system: str) -> tuple[dict, ...]:
    at = system.find(_TOOLS_MARKER)
    if at < 0:
        raise MalformedRow("missing_field", "no tool list in the system text")
    text = system[at + len(_TOOLS_MARKER):].lstrip()
    try:
        defs, _ = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as e:
        raise MalformedRow("invalid_json", f"tool list in the system text: {e.msg}") from None
    return tools_from_definitions(defs, "system tool list")


def system_preamble(system: str) -> str:
    head = system.split(_PREAMBLE_END, 1)[0]
    # split("\n"), not splitlines(): a U+2028 or U+0085 inside the text is content, not a line end
    return "\n".join(line.strip() for line in head.strip().split("\n"))


def _raw_messages(conversations: list, names: list[str]) -> list[Message]:
    messages: list[Message] = []
    pending = 0
    for i, turn in enumerate(conversations):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise MalformedRow("wrong_type", f"turn {i} is not {{from, value: str}}")
        role, value = turn.get("from"), turn["value"]
        if role == "assistant" and looks_like_call_list(value):
            calls = tuple(parse_call_list(value, names))
            messages.append(Message("assistant", "", calls))
            pending = len(calls)
        elif role == "tool":
            messages.extend(tool_messages(value, pending))
            pending = 0
        else:
            messages.append(Message(role, value))
            pending = 0
    return messages


def _resolver(tools: tuple[dict, ...]):
    params = {t["function"]["name"]: set(t["function"]["parameters"].get("properties") or ()) for t in tools}

    def resolve(name: str, arguments: dict, index: int, observation: str | None) -> str:
        if name in params:
            return name
        ending = [n for n in params if n.endswith(" " + name)]
        if len(ending) > 1:  # several tools end with the cut name: the arguments decide
            ending = [n for n in ending if set(arguments) <= params[n]]
        if len(ending) == 1:
            return ending[0]
        try:  # the observation names the tool that answered, call by call
            reported = json.loads(observation)[index]["name"] if observation else None
        except (json.JSONDecodeError, LookupError, TypeError):
            reported = None
        return reported if reported in params else name  # unresolved: check_conversation rejects it
    return resolve


def normalise(row: dict, example_id: str) -> SFTExample:
    system = require(row, "system", str)
    conversations = require(row, "conversations", list)
    tools = tools_from_system(system)
    names = [t["function"]["name"] for t in tools]
    roles = {t.get("from") for t in conversations if isinstance(t, dict)}
    if roles <= _RAW_ROLES:
        messages = _raw_messages(conversations, names)
    else:
        messages = messages_from_sharegpt(turns_of(conversations), _resolver(tools))
    messages = [Message("system", system_preamble(system)), *trim_to_last_assistant(messages)]
    return check_conversation(SFTExample(example_id, "toolace", tuple(messages), tools))


FORMAT = SourceFormat(required_fields=("system", "conversations"), normalise=normalise)
