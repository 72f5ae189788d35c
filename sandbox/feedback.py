"""The feedback text of one call (SPEC §2): what the model reads inside <tool_response>.

Rules, in order (each is deterministic given what the program did):
- timeout: exactly one line naming the wall-clock limit; partial output is not shown
  because how much of it exists depends on timing.
- otherwise: the program's stdout; if it printed nothing and its last top-level
  statement is an expression whose value is not None, that value as IPython shows it;
  then its stderr (warnings, messages); then the traceback limited to the user's frames;
  then one line for an abnormal end (exit code, signal, the limit that stopped it).
- "(no output)" when all of that is empty.
- text longer than `max_output_chars` keeps its first and last halves around a line
  `[... N characters cut ...]`.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import signal
from dataclasses import dataclass

NO_OUTPUT = "(no output)"


@dataclass
class Clip:
    """A text that may have lost its middle: enough of both ends to cut it later.

    `head` holds the whole text when `total <= len(head)`; else the first `keep` chars,
    and `tail` the last `keep` chars (`keep` >= the feedback limit, see `cut_middle`).
    """

    head: str = ""
    tail: str = ""
    total: int = 0  # characters in the whole text

    @classmethod
    def of(cls, text: str, keep: int) -> Clip:
        if len(text) <= 2 * keep:
            return cls(head=text, total=len(text))
        return cls(head=text[:keep], tail=text[-keep:], total=len(text))

    @property
    def complete(self) -> bool:
        return self.total <= len(self.head)

    def as_dict(self) -> dict:
        return {"head": self.head, "tail": self.tail, "total": self.total}

    @classmethod
    def from_dict(cls, d: object) -> Clip:
        """Read a clip a sandbox child sent; anything malformed becomes a visible note."""
        if isinstance(d, dict) and isinstance(d.get("head"), str) and isinstance(d.get("tail"), str):
            total = d.get("total")
            if type(total) is int and len(d["head"]) <= total < MAX_COUNT:
                return cls(head=clean_text(d["head"]), tail=clean_text(d["tail"]), total=total)
        return cls.of("[malformed output record]", 64)


MAX_COUNT = 2**53  # any count from a child beyond this is forged (and would not survive a JSON double)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """A string from a child with lone surrogates replaced: `json` decodes `\\ud800` escapes into
    them, and no UTF-8 encoder downstream (tokenizers, Parquet, logs) accepts one."""
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


class StreamCapture:
    """Decodes one output stream as it arrives, keeping only both ends (bytes -> UTF-8)."""

    def __init__(self, keep_chars: int, max_bytes: int):
        self._keep = keep_chars
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head: list[str] = []
        self._head_len = 0
        self._tail = ""
        self.total_chars = 0
        self.total_bytes = 0
        self.max_bytes = max_bytes

    @property
    def over_limit(self) -> bool:
        return self.total_bytes > self.max_bytes

    def feed(self, data: bytes) -> None:
        self.total_bytes += len(data)
        self._add(self._decoder.decode(data))

    def _add(self, text: str) -> None:
        self.total_chars += len(text)
        if self._head_len < 2 * self._keep:
            take = text[: 2 * self._keep - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
        self._tail = (self._tail + text)[-self._keep :]

    def clip(self) -> Clip:
        self._add(self._decoder.decode(b"", final=True))
        head = "".join(self._head)
        if self.total_chars <= len(head):
            return Clip(head=head, total=self.total_chars)
        return Clip(head=head[: self._keep], tail=self._tail, total=self.total_chars)


def cut_middle(pieces: list[Clip], max_chars: int) -> str:
    """Join pieces; when longer than max_chars keep both ends and say how much was cut.

    Every clipped piece must keep at least max_chars at each end, so the first and last
    halves of the joined text are always known.
    """
    total = sum(p.total for p in pieces)
    if total <= max_chars and all(p.complete for p in pieces):
        return "".join(p.head for p in pieces)
    n_head = max_chars // 2
    n_tail = max_chars - n_head
    prefix, need = [], n_head
    for p in pieces:
        if need <= 0:
            break
        prefix.append(p.head[:need])
        need -= len(prefix[-1])
    suffix, need = [], n_tail
    for p in reversed(pieces):
        if need <= 0:
            break
        src = p.head if p.complete else p.tail
        suffix.append(src[-need:])
        need -= len(suffix[-1])
    cut = total - n_head - n_tail
    return f"{''.join(prefix)}\n[... {cut} characters cut ...]\n{''.join(reversed(suffix))}"


def timeout_line(limit_s: float) -> str:
    return f"Timeout: the program did not finish within the {limit_s:g} s wall-clock limit and was stopped."


def output_limit_line(max_mb: int) -> str:
    return f"Output limit: the program wrote more than {max_mb} MB and was stopped."


def signal_line(signum: int, cpu_time_s: int, file_size_mb: int) -> tuple[str, str]:
    """(status, one line) for a call whose process was ended by a signal it did not handle."""
    if signum == signal.SIGXCPU:
        return "resource_limit", f"CPU time limit: the program used more than {cpu_time_s} s of CPU."
    if signum == signal.SIGXFSZ:
        return "resource_limit", f"File size limit: the program wrote a file larger than {file_size_mb} MB."
    try:
        name = signal.Signals(signum).name
        desc = signal.strsignal(signum) or name
    except ValueError:
        name, desc = f"signal {signum}", f"signal {signum}"
    return "error", f"Process terminated by {name} ({desc})."


def finish(pieces: list[Clip], max_chars: int) -> str:
    text = cut_middle([p for p in pieces if p.total], max_chars).rstrip("\n")
    # Lone surrogates (from a custom __repr__) would break tokenizers downstream.
    return text.encode("utf-8", "replace").decode("utf-8") if text else NO_OUTPUT


def parse_record(raw: bytes | None) -> dict | None:
    """The result record a child sent, checked field by field (the program can write to the
    record's fd, so every value is a child's claim): None unless it is exactly what
    `runner.run_program` writes; strings cleaned, numbers bounded, other keys dropped."""
    if not raw:
        return None
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
        return None
    if not isinstance(record, dict) or record.get("status") not in ("ok", "error", "resource_limit"):
        return None
    code, note = record.get("exit_code"), record.get("note")
    if type(code) is not int or not -(2**31) <= code < 2**31 or not (note is None or isinstance(note, str)):
        return None
    usage = record.get("usage")
    return {"status": record["status"], "exit_code": code, "note": clean_text(note) if note else note,
            "repr": record.get("repr"), "traceback": record.get("traceback"),
            "usage": usage if _usage_ok(usage) else None}


USAGE_KEYS = ("setup_us", "end_us", "setup_flt", "end_flt")


def _usage_ok(usage: object) -> bool:
    if not isinstance(usage, dict) or not all(type(usage.get(k)) is int and 0 <= usage[k] < MAX_COUNT
                                              for k in USAGE_KEYS):
        return False
    return usage["end_us"] >= usage["setup_us"] and usage["end_flt"] >= usage["setup_flt"]


def memory_line(memory_mb: int) -> str:
    return f"Memory limit: the program needed more than {memory_mb} MB."


def record_line(record: dict, memory_mb: int) -> str:
    if record.get("note") == "memory":
        return memory_line(memory_mb)
    if isinstance(record.get("note"), str):
        return record["note"]  # sys.exit("message") prints the message, like the interpreter
    if record["exit_code"] and record.get("traceback") is None:
        return f"Process exited with code {record['exit_code']}."
    return ""


def ended_without_record(wait_status: int | None, cpu_time_s: int, file_size_mb: int) -> tuple[str, str]:
    if wait_status is None:
        return "error", "Process ended without a result."
    if os.WIFSIGNALED(wait_status):
        return signal_line(os.WTERMSIG(wait_status), cpu_time_s, file_size_mb)
    code = os.waitstatus_to_exitcode(wait_status)
    return ("ok", "") if code == 0 else ("error", f"Process exited with code {code}.")


def with_line(pieces: list[Clip], last_line: str) -> list[Clip]:
    """Pieces joined so each starts on its own line, then the closing line if any."""
    out: list[Clip] = []
    for piece in [p for p in pieces if p.total] + ([Clip.of(last_line, len(last_line))] if last_line else []):
        if out:
            prev = out[-1].head if out[-1].complete else out[-1].tail
            if not prev.endswith("\n"):
                out.append(Clip.of("\n", 1))
        out.append(piece)
    return out
