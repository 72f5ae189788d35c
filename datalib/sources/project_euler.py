"""Project Euler problems with answers (SCHEMAS.md §10: our join of two public files).

Rows: `{id, problem_number, problem (markdown), answer (str), links: [str], ...}`.
Problems that link a data file or an image (`resources/...`) cannot be solved from the
text alone: filtered as `needs_attachment`. The answer goes through the same integer
normalisation as every source (the file's own `answer_is_integer` is not trusted); the
digit limit drops answers too large to verify.
"""

from __future__ import annotations

from datalib.records import FilteredRow, RawProblem, require
from datalib.sources.format import SourceFormat


def normalise(row: dict) -> RawProblem:
    problem = require(row, "problem", str).strip()
    answer = require(row, "answer", (str, int))
    links = row.get("links") or []
    if not isinstance(links, list):
        links = [links]
    attachments = [link for link in links if isinstance(link, str) and "resources/" in link]
    if attachments or "resources/documents/" in problem:
        raise FilteredRow("needs_attachment", f"links {attachments[:2]}")
    return RawProblem(problem, answer)


FORMAT = SourceFormat(required_fields=("problem", "answer"), normalise=normalise)
