"""Data crossing the sandbox boundary (SPEC §2, §3).

Owned by the sandbox package; rollout/ and data_prep/ import these types only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

CallStatus = Literal["ok", "error", "timeout", "invalid_call", "resource_limit"]
VerifyStatus = Literal["ok", "timeout", "error"]


@dataclass(frozen=True)
class ToolCall:
    """One well-formed call of `execute_python_code_with_standard_io`."""

    code: str  # Python source to run
    input: str = ""  # stdin given to the program


@dataclass(frozen=True)
class InvalidCall:
    """A `<tool_call>` body that could not be turned into a ToolCall."""

    reason: str  # one line: what is wrong (not JSON, no name, unknown tool, ...)
    raw: str = ""  # the text between the tags, as the model wrote it


@dataclass(frozen=True)
class SandboxResult:
    """The answer to one call: feedback text for the model plus structured status."""

    status: CallStatus
    feedback: str  # text placed inside <tool_response> (SPEC §2)
    elapsed_s: float = 0.0  # wall time inside the service, seconds
    stdout_chars: int = 0  # size of the program's stdout before truncation
    stderr_chars: int = 0  # size of its stderr before truncation
    extra: dict = field(default_factory=dict)  # e.g. which limit was hit


@dataclass(frozen=True)
class VerifyResult:
    """Score of one model answer against a reference (SPEC §5)."""

    score: float  # 1.0 correct, 0.0 otherwise
    status: VerifyStatus  # timeout scores 0 and is counted by the caller
    elapsed_s: float = 0.0
