"""Magicoder OSS-Instruct-75K and Evol-Instruct-110K (SCHEMAS.md §4-5) as function calls.

The paper turns these code instructions into JSON function-calling examples, so the
model practises what the RL protocol needs most: putting a whole program, newlines
and quotes included, inside a JSON string argument. Our conversion:

    user       the instruction (`problem` / `instruction`)
    assistant  the solution's prose before its first fenced code block, then a call
               submit_code({"language": <fence tag, else the row's `lang`>, "code": <block>})
    tool       {"status": "received"}  (a fixed receipt: nothing is executed, and the
               receipt claims nothing about the code's behaviour)
    assistant  the rest of the solution after that block (explanation, usage, ...)

When nothing follows the block the conversation ends on the call (no receipt, no
final turn). A solution without a fenced block is rejected (`no_code_block`): it has
nothing to put in a call. Only the first block becomes the call; later blocks stay as
markdown in the final turn.
"""

from __future__ import annotations

import json
import re

from datalib.records import (
    FilteredRow,
    FunctionCall,
    Message,
    SFTExample,
    check_conversation,
    function_tool,
    require,
)
from datalib.sources.format import SourceFormat

SUBMIT_CODE_TOOL = function_tool(
    "submit_code",
    "Submit the complete source code that solves the user's programming task.",
    {
        "type": "object",
        "properties": {
            "language": {"type": "string", "description": "Programming language of the code, e.g. python, cpp."},
            "code": {"type": "string", "description": "The full source code."},
        },
        "required": ["language", "code"],
    },
)
RECEIPT = json.dumps({"status": "received"})
_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)```", re.DOTALL)


def code_task_example(example_id: str, source: str, prompt: str, solution: str, lang: str | None) -> SFTExample:
    m = _FENCE.search(solution)
    if m is None or not m.group(2).strip():
        raise FilteredRow("no_code_block", "the solution has no fenced code block to submit")
    language = (m.group(1) or lang or "unspecified").lower()
    call = FunctionCall("submit_code", {"language": language, "code": m.group(2).rstrip("\n")})
    before, after = solution[: m.start()].strip(), solution[m.end():].strip()
    messages = [Message("user", prompt), Message("assistant", before, (call,))]
    if after:
        messages += [Message("tool", RECEIPT), Message("assistant", after)]
    return check_conversation(SFTExample(example_id, source, tuple(messages), (SUBMIT_CODE_TOOL,)))


def normalise_oss(row: dict, example_id: str) -> SFTExample:
    lang = row.get("lang") if isinstance(row.get("lang"), str) else None
    return code_task_example(example_id, "magicoder_oss", require(row, "problem", str),
                             require(row, "solution", str), lang)


def normalise_evol(row: dict, example_id: str) -> SFTExample:
    return code_task_example(example_id, "magicoder_evol", require(row, "instruction", str),
                             require(row, "response", str), None)


OSS_FORMAT = SourceFormat(required_fields=("problem", "solution"), normalise=normalise_oss,
                          columns=("problem", "solution", "lang"))
EVOL_FORMAT = SourceFormat(required_fields=("instruction", "response"), normalise=normalise_evol)
