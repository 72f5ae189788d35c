"""Project Euler problems with answers (SCHEMAS.md §10: our join of two public files).

Rows: `{id, problem_number, problem (markdown), answer (str), links: [str], ...}`.
Problems that need a file cannot be solved from the text alone: filtered as
`needs_attachment` when the text or `links` (a list, a dict or a JSON string) refers to
Project Euler's `resources/` in any link form, embeds an image, or names a data or image
file ("Using names.txt ..."). The answer goes through the same integer
normalisation as every source (the file's own `answer_is_integer` is not trusted); the
digit limit drops answers too large to verify.
"""

from __future__ import annotations

import json
import re

from datalib.records import FilteredRow, RawProblem, require, require_answer
from datalib.sources.format import SourceFormat

# A reference to a file the problem needs: Project Euler's resources folder in any link form
# (relative, absolute, `project/resources/`, escaped or percent-encoded slashes), an image,
# or a data file named in the text ("Using names.txt ...").
_ATTACHMENT = re.compile(
    r"resources(?:/|\\/|\\\\|%2f)|!\[[^\]]*\]\(|<img\b|\b[\w-]+\.(?:txt|csv|zip|json|png|gif|jpe?g|svg|bmp)\b",
    re.I)


def _strings(value: object) -> list[str]:
    """Every string inside `links`, however it is stored (a list, a dict, a JSON string)."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return [value]
        return [value, *(_strings(decoded) if not isinstance(decoded, str) else [])]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def normalise(row: dict) -> RawProblem:
    problem = require(row, "problem", str).strip()
    answer = require_answer(row, "answer")
    found = [m.group() for text in [problem, *_strings(row.get("links"))] for m in _ATTACHMENT.finditer(text)]
    if found:
        raise FilteredRow("needs_attachment", f"references {found[:3]}")
    return RawProblem(problem, answer)


FORMAT = SourceFormat(required_fields=("problem", "answer"), normalise=normalise)
