"""Integer answers of RL problems (SPEC §8: "integer answers only").

The rules are `rollout.answer.parse_integer`, the same ones model answers are read by
(the agreement filter, evaluation), so a label and a sample that state the same number
always agree. Here a failure becomes a `FilteredRow` whose reason the data card counts:

- `empty_answer`: nothing there;
- `not_integer`: a decimal or a fraction (`0.464399`, `123/59`, `\\frac{1}{2}`; fractions are
  never integer labels, even `4/2`);
- `complex_format`: not a plain number (`2^{25}`, `\\sqrt{2}`, lists like `1,13717420,8` or
  `1, 2`, hex `3D58725572C62302`, text, non-ASCII digits): unverifiable as an integer label;
- `too_large`: more digits than the configured limit (`6.5e27330467`, the paper's
  example, is never expanded: its size is read off the exponent);
- `inexact_float`: a JSON/Parquet float beyond 2^53, whose digits the source already lost.
"""

from __future__ import annotations

from datalib.records import FilteredRow
from rollout.answer import NotAnInteger
from rollout.answer import parse_integer as _parse


def parse_integer(value: object, max_digits: int) -> int:
    """The integer a source answer states; raises FilteredRow with the reason otherwise."""
    try:
        return _parse(value, max_digits)
    except NotAnInteger as err:
        raise FilteredRow(err.reason, err.detail) from None
