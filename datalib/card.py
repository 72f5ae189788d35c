"""The data card: a markdown summary each data stage writes as `card.md` (issue 5, point 5).

The Prefect layer publishes `card.md` as a markdown artifact; outside Prefect it is a
file in the artifact directory. Counts come from the stage; this module only lays out.
"""

from __future__ import annotations

import json
from pathlib import Path

from datalib.rejects import RejectLog
from rollout.chat_template import qwen3_templates
from stagekit import artifacts

_EXAMPLE_CHARS = 3000  # a rendered example is cut to this many characters


class DataCard:
    def __init__(self, title: str, intro: str = ""):
        self._parts = [f"# {title}\n"] + ([intro.strip() + "\n"] if intro else [])

    def heading(self, text: str) -> None:
        self._parts.append(f"\n## {text}\n")

    def text(self, text: str) -> None:
        self._parts.append(text.strip() + "\n")

    def table(self, headers: list[str], rows: list[list[object]]) -> None:
        if not rows:
            self._parts.append("_none_\n")
            return
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
        self._parts.append("\n".join(lines) + "\n")

    def files(self, counts: list) -> None:
        """Every file each source read (rows, and what its bytes said against its name) and
        every file it skipped, with why (`SourceCounts`)."""
        read = [[c.label, f, rows, note or ""] for c in counts for f, rows, note in c.files_read]
        skipped = [[c.label, f, why] for c in counts for f, why in c.files_skipped]
        warnings = [c.loss_warning for c in counts if c.loss_warning]
        if warnings:
            self.heading("Warnings")
            self.text("\n".join(f"- **lost most of its rows:** {w}" for w in warnings))
        self.heading("Files")
        if read:
            self.table(["source", "file read", "rows", "note"], read)
        else:
            self.text("Every source is a hub dataset or generated: no local file was read.")
        if skipped:
            self.text(f"**{len(skipped)} file(s) skipped:**")
            self.table(["source", "file skipped", "why"], skipped)

    def code(self, text: str, language: str = "") -> None:
        if len(text) > _EXAMPLE_CHARS:
            text = text[:_EXAMPLE_CHARS] + f"\n[... {len(text) - _EXAMPLE_CHARS} characters cut ...]"
        fence = "````" if "```" in text else "```"
        self._parts.append(f"{fence}{language}\n{text}\n{fence}\n")

    def rejects(self, log: RejectLog, file_name: str = artifacts.REJECTS) -> None:
        self.heading("Rejected rows")
        self.text(f"Every dropped row is in `{file_name}` with its file, row and reason. `malformed`: the row "
                  "could not be read as its source; `filtered`: well formed, dropped by policy.")
        self.table(["kind", "source", "reason", "rows"], [list(r) for r in log.table()])

    def write(self, path: Path) -> None:
        path.write_text("\n".join(self._parts), encoding="utf-8")


def _cell(value: object) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def render_chat(row: dict) -> str:
    """An sft.parquet row as the Qwen3 chat template renders it (what SFT trains on)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    tools = json.loads(row["tools"]) or None
    rendered, _ = render_jinja_template(conversations=[row["messages"]], tools=tools,
                                        chat_template=qwen3_templates()["default"])
    return rendered[0]
