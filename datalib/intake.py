"""Reading one configured source through its normaliser, with the bad-input policy.

Policy (issue 5, point 4): a source whose rows lack a required field altogether is the
wrong dataset, and the stage fails at once (`SourceSchemaError`, naming the source and
the fields). Anything wrong with single rows - not JSON, missing fields, wrong types,
unparseable calls, invalid JSON strings, and any other exception the normaliser raises on
a row's contents - sends that row to the rejects file; the stage goes on.

With a cap (`examples` / `problems`) rows are visited in a seeded random order until the
cap is reached, so a mixture samples the source uniformly without normalising all of it;
rejects then cover the rows visited.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from tqdm import tqdm

from datalib.reader import RawRow, SourceRows
from datalib.records import RowError
from datalib.rejects import RejectLog
from stagekit.errors import StageInputError

log = logging.getLogger(__name__)

T = TypeVar("T")
# A normaliser bug or a shape nobody anticipated surfaces as one of these on a row's data.
_ROW_EXCEPTIONS = (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError)


@dataclass
class SourceCounts:
    label: str  # the entry's name in the card: the source name, suffixed when repeated
    location: str
    rows_read: int = 0
    kept: int = 0
    rejected: Counter = field(default_factory=Counter)  # kind -> rows
    files_read: list[tuple[str, int, str]] = field(default_factory=list)  # (file, rows, note)
    files_skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why)

    @property
    def loss_warning(self) -> str:
        """Said in the log and on the card when a source loses most of the rows it read."""
        lost = self.rows_read - self.kept
        if self.rows_read == 0 or lost * 2 <= self.rows_read:
            return ""
        reasons = ", ".join(f"{k} {v}" for k, v in self.rejected.most_common())
        return f"{self.label} kept {self.kept} of the {self.rows_read} rows it read ({reasons})"

    def as_row(self) -> list[object]:
        return [self.label, self.location, self.rows_read, self.kept,
                self.rejected["malformed"], self.rejected["filtered"]]


COUNT_HEADERS = ["source", "location", "rows read", "kept", "malformed", "filtered"]


class EmptySourceError(StageInputError):
    """A source left with no row: the stage stops, unless the source is marked optional."""


def check_yield(counts: SourceCounts, optional: bool, rejects: RejectLog) -> None:
    """Fail on a source that gave nothing (unless optional); warn when it lost most of its rows.
    A source whose rows were all duplicates of an earlier source's is not broken: it warns."""
    reasons = {r: n for (_, s, r), n in rejects.counts.items() if s == counts.label}
    if counts.kept == 0 and not optional and not reasons.get("duplicate"):
        first = next((e for e in rejects.entries if e["source"] == counts.label), None)
        example = f"; first: {first['file']} row {first['row']}: {first['reason']} {first['detail']}" if first else ""
        files = f" from {len(counts.files_read)} file(s), {len(counts.files_skipped)} skipped" \
            if counts.files_read or counts.files_skipped else ""
        raise EmptySourceError(f"source {counts.label} ({counts.location}) gave no usable row: {counts.rows_read} "
                               f"rows read{files}, rejected {reasons or 'none'}{example}. Mark the source "
                               "`optional: true` to go on without it.")
    if counts.kept == 0:
        log.warning("optional source %s gave no usable row (%d read)", counts.label, counts.rows_read)
    elif counts.loss_warning:
        log.warning("source %s", counts.loss_warning)


def entry_labels(names: list[str]) -> list[str]:
    """Source names, with `.k` added to the k-th repeat of a name (ids stay unique)."""
    seen: Counter = Counter()
    labels = []
    for name in names:
        labels.append(name if seen[name] == 0 else f"{name}.{seen[name]}")
        seen[name] += 1
    return labels


def normalise_rows(
    rows: SourceRows,
    normalise: Callable[[dict, str], T],
    label: str,
    cap: int | None,
    seed: int,
    rejects: RejectLog,
) -> tuple[list[tuple[RawRow, T]], SourceCounts]:
    """(raw row, record) for every kept row, at most `cap`, and the counts."""
    counts = SourceCounts(label, rows.label, files_read=list(rows.files_read), files_skipped=list(rows.files_skipped))
    kept: list[tuple[RawRow, T]] = []
    order_seed = seed if cap is not None else None
    for raw in tqdm(rows.iter(order_seed), total=len(rows), desc=label, leave=False, mininterval=2.0,
                    disable=None):
        if cap is not None and len(kept) >= cap:
            break
        counts.rows_read += 1
        if raw.data is None:
            rejects.add(label, raw, "malformed", raw.reason or "invalid_json", raw.error)
            counts.rejected["malformed"] += 1
            continue
        try:
            record = normalise(raw.data, f"{label}-{raw.position}")
        except RowError as err:
            rejects.add_error(label, raw, err)
            counts.rejected[err.kind] += 1
            continue
        except _ROW_EXCEPTIONS as err:
            rejects.add(label, raw, "malformed", "unexpected_structure", f"{type(err).__name__}: {err}")
            counts.rejected["malformed"] += 1
            continue
        kept.append((replace(raw, data=None), record))  # the row's place is kept for rejects, not its data
    counts.kept = len(kept)
    if cap is not None and len(kept) < cap:
        log.warning("source %s: only %d usable rows for a cap of %d", label, len(kept), cap)
    log.info("source %s: %d rows read, %d kept, %s rejected", label, counts.rows_read, counts.kept,
             dict(counts.rejected) or 0)
    return kept, counts
