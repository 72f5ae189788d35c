"""Tulu 3 SFT mixture (`allenai/tulu-3-sft-mixture`, SCHEMAS.md §6): already chat messages.

Rows: `{id, messages: [{role, content}], source}`. Roles are user/assistant with an
occasional system turn; anything else is rejected. Trailing user turns are dropped.
The final response may be rewritten by an OpenAI-compatible endpoint (rewriter.py).
"""

from __future__ import annotations

from datalib.records import MalformedRow, Message, SFTExample, check_conversation, require, trim_to_last_assistant
from datalib.sources.format import SourceFormat

_ROLES = {"system", "user", "assistant"}


def chat_messages(items: list) -> list[Message]:
    messages = []
    for i, m in enumerate(items):
        if not isinstance(m, dict):
            raise MalformedRow("wrong_type", f"message {i} is {type(m).__name__}")
        role, content = m.get("role"), m.get("content")
        if role not in _ROLES:
            raise MalformedRow("unknown_role", f"message {i} has role {role!r}")
        if not isinstance(content, str):
            raise MalformedRow("wrong_type", f"message {i} content is {type(content).__name__}")
        messages.append(Message(role, content))
    return messages


def normalise(row: dict, example_id: str) -> SFTExample:
    messages = trim_to_last_assistant(chat_messages(require(row, "messages", list)))
    return check_conversation(SFTExample(example_id, "tulu3", tuple(messages)))


FORMAT = SourceFormat(required_fields=("messages",), normalise=normalise, columns=("id", "messages", "source"))
