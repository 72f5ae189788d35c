"""The rejects file: every row a stage drops, with its file, row and reason (issue 5, point 4).

`malformed` rows (missing fields, wrong types, unparseable calls, invalid JSON) and
`filtered` rows (well formed, dropped by policy: non-integer answer, duplicate, ...) go
to the same `rejects.jsonl`; the data card counts them per kind, source and reason.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from datalib.reader import RawRow
from datalib.records import RowError

_DETAIL_CHARS = 300  # a detail is a pointer into the row, not a copy of it


class RejectLog:
    def __init__(self) -> None:
        self.entries: list[dict] = []
        self.counts: Counter[tuple[str, str, str]] = Counter()  # (kind, source, reason)

    def add(self, source: str, raw: RawRow, kind: str, reason: str, detail: str = "") -> None:
        self.counts[(kind, source, reason)] += 1
        self.entries.append({
            "source": source, "file": raw.file, "row": raw.row, "kind": kind,
            "reason": reason, "detail": detail[:_DETAIL_CHARS],
        })

    def add_error(self, source: str, raw: RawRow, err: RowError) -> None:
        self.add(source, raw, err.kind, err.reason, err.detail)

    def count(self, kind: str | None = None, source: str | None = None, reason: str | None = None) -> int:
        return sum(n for (k, s, r), n in self.counts.items()
                   if kind in (None, k) and source in (None, s) and reason in (None, r))

    def write(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as fh:
            for entry in self.entries:
                fh.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def table(self) -> list[tuple[str, str, str, int]]:
        """(kind, source, reason, count) rows, largest first, for the data card."""
        return sorted(((k, s, r, n) for (k, s, r), n in self.counts.items()), key=lambda t: (t[0], -t[3], t[1], t[2]))
