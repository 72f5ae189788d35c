"""Parquet files of the data stages, with fixed schemas (what SFT and RL stages read).

- `sft.parquet` (cold_start): id, source, messages (role, content, tool_calls in the
  OpenAI form with `arguments` a JSON string), tools (a JSON string: TRL's SFTTrainer
  decodes it), rewritten ('' or the rewrite mode).
- `problems.parquet` (rl_curation, decontaminate): id, source, problem, answer (int64).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from datalib.records import RLProblem, SFTExample

_CALL = pa.struct([("type", pa.string()),
                   ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())]))])
_MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(_CALL))])
SFT_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("messages", pa.list_(_MESSAGE)),
                        ("tools", pa.string()), ("rewritten", pa.string())])
PROBLEM_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("problem", pa.string()),
                            ("answer", pa.int64())])


def write_sft(path: Path, examples: Iterable[SFTExample]) -> int:
    table = pa.Table.from_pylist([e.to_row() for e in examples], schema=SFT_SCHEMA)
    pq.write_table(table, path)
    return table.num_rows


def write_problems(path: Path, problems: Iterable[RLProblem]) -> int:
    table = pa.Table.from_pylist([p.to_row() for p in problems], schema=PROBLEM_SCHEMA)
    pq.write_table(table, path)
    return table.num_rows


def read_problems(path: Path) -> list[RLProblem]:
    return [RLProblem(**row) for row in pq.read_table(path, schema=PROBLEM_SCHEMA).to_pylist()]


def read_sft_rows(path: Path) -> list[dict]:
    """Rows as the SFT stage sees them: messages for apply_chat_template, tools as JSON text."""
    return pq.read_table(path).to_pylist()
