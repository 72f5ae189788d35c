"""APIGen-MT-5k (`Salesforce/APIGen-MT-5k`, SCHEMAS.md §2): multi-turn agent trajectories.

Rows: `{conversations: [{from: human|gpt|function_call|observation, value}], system: str,
tools: str}` with `tools` a JSON-encoded list of `{name, description, parameters}` and
each `function_call` a JSON `{"name", "arguments": {...}}`. No real row was available to
us (gated dataset): this follows the card and four public converters; the tests use rows
built to that description. τ-bench's `think` tool is kept as an ordinary tool call.
"""

from __future__ import annotations

from datalib.records import Message, SFTExample, check_conversation, require, trim_to_last_assistant
from datalib.sources.format import SourceFormat
from datalib.sources.sharegpt import decode_json, messages_from_sharegpt, turns_of
from datalib.tool_schema import tools_from_definitions


def normalise(row: dict, example_id: str) -> SFTExample:
    conversations = require(row, "conversations", list)
    raw_tools = require(row, "tools", (str, list))
    tools = tools_from_definitions(decode_json(raw_tools, "tools") if isinstance(raw_tools, str) else raw_tools)
    messages = trim_to_last_assistant(messages_from_sharegpt(turns_of(conversations)))
    system = row.get("system")
    if isinstance(system, str) and system.strip():
        messages = [Message("system", system.strip()), *messages]
    return check_conversation(SFTExample(example_id, "apigen_mt", tuple(messages), tools))


FORMAT = SourceFormat(required_fields=("conversations", "tools"), normalise=normalise)
