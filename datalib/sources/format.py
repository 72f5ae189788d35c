"""What the stages need to know about a source format besides its normaliser."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from datalib.records import RawProblem, SFTExample


@dataclass(frozen=True)
class SourceFormat:
    # Fields a row of this source must carry ("a|b": either). Absent from the data as a
    # whole, they mean the wrong dataset: the stage fails fast naming them.
    required_fields: tuple[str, ...]
    normalise: Callable[..., SFTExample | RawProblem]  # cold start (row, example_id); RL (row,)
    columns: tuple[str, ...] | None = None  # read only these from hub/parquet data (None: all)
