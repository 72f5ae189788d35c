"""The generated synthetic task (datalib/synthetic.py) as a source like any other.

The stages turn generated `SyntheticProblem`s into raw rows
`{id, family, problem, answer, program, first_call_fails}` and normalise them here, so
synthetic data takes the same path (rejects, dedupe, data card) as downloaded data.
"""

from __future__ import annotations

from datalib import synthetic
from datalib.records import RawProblem, SFTExample, check_conversation, require
from datalib.sources.format import SourceFormat


def normalise_sft(row: dict, example_id: str) -> SFTExample:
    messages = synthetic.demonstration(require(row, "problem", str), require(row, "answer", int),
                                       require(row, "program", str), row.get("first_call_fails") or "")
    return check_conversation(SFTExample(example_id, "synthetic", tuple(messages), synthetic.tools()))


def normalise_rl(row: dict) -> RawProblem:
    return RawProblem(require(row, "problem", str), str(require(row, "answer", int)))


SFT_FORMAT = SourceFormat(required_fields=("problem", "answer", "program"), normalise=normalise_sft)
RL_FORMAT = SourceFormat(required_fields=("problem", "answer"), normalise=normalise_rl)
