"""AoPS problems via OpenMathReasoning (`nvidia/OpenMathReasoning`, SCHEMAS.md §9).

Rows: `{problem, expected_answer, problem_type, problem_source, ...}`, many per problem
(one per generated solution; the stage's dedupe keeps one). Kept: problems whose answer
was extracted (`problem_type == has_answer_extracted`; a null type, seen in one dump,
is tolerated) from the AoPS forums (`problem_source` starts with `aops`, any case, SPEC §8 "AoPS
via OpenMathReasoning"; `MATH_training_set` rows are filtered, and so are rows whose
`problem_source` is null, missing or not text: nothing shows they are AoPS). These then go through
the agreement filter when the config enables it for this source.
"""

from __future__ import annotations

from datalib.records import FilteredRow, RawProblem, require, require_answer
from datalib.sources.format import SourceFormat


def normalise(row: dict) -> RawProblem:
    problem = require(row, "problem", str).strip()
    answer = require_answer(row, "expected_answer")
    kind = row.get("problem_type")
    if kind not in (None, "has_answer_extracted"):
        raise FilteredRow("no_extracted_answer", f"problem_type {kind!r}")
    origin = row.get("problem_source")
    if not isinstance(origin, str) or not origin.strip().lower().startswith("aops"):
        # null, missing or another type: the row cannot show it is AoPS, so it is not kept as AoPS
        raise FilteredRow("not_aops", f"problem_source {origin!r}")
    return RawProblem(problem, answer)


FORMAT = SourceFormat(required_fields=("problem", "expected_answer"), normalise=normalise,
                      columns=("problem", "expected_answer", "problem_type", "problem_source"))
