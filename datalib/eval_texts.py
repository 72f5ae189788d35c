"""The texts of one benchmark that decontamination indexes (SPEC §8, §9).

Which fields: `text_fields` of the config entry; a list-valued field (GPQA's `choices`)
indexes each item separately, so no n-gram spans two fields. `synthetic` is the generated
held-out eval set of the synthetic task (the tiny config's benchmark).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from configs.data import BenchmarkSource
from configs.eval import EvalBenchmark
from datalib import synthetic
from datalib.reader import SourceRows

log = logging.getLogger(__name__)

T = TypeVar("T")


def load_or_skip(bench: BenchmarkSource | EvalBenchmark, load: Callable[[], T], skipped: dict[str, str]) -> T | None:
    """`load()`, or, for an `optional` benchmark that cannot be loaded, None with the reason in
    `skipped`; a required one fails with a message saying how to go on."""
    try:
        return load()
    except Exception as e:  # a missing file, an unreachable hub, a wrong schema: all the same to us
        if not bench.optional:
            raise RuntimeError(f"benchmark {bench.name!r} ({bench.location}) could not be loaded: {e}. "
                               "Fix its location, or mark it `optional: true` to skip it.") from e
        log.warning("optional benchmark %s skipped: %s", bench.name, e)
        skipped[bench.name] = str(e)
        return None

SYNTHETIC_EVAL_STREAM = "eval"  # the stream of datalib.synthetic the eval set is drawn from


def synthetic_eval_set(n: int, seed: int) -> list[synthetic.SyntheticProblem]:
    return synthetic.generate_problems(n, seed, stream=SYNTHETIC_EVAL_STREAM)


@dataclass
class BenchmarkTexts:
    """What one benchmark gives the index: (item id, text, part of a list field) triples, and
    the rows that gave nothing, by reason, which the decontamination card and metrics show."""

    texts: list[tuple[str, str, bool]] = field(default_factory=list)
    not_indexed: Counter = field(default_factory=Counter)  # reason -> rows
    examples: dict[str, str] = field(default_factory=dict)  # reason -> where its first row is

    def skip(self, reason: str, where: str) -> None:
        self.not_indexed[reason] += 1
        self.examples.setdefault(reason, where)


def benchmark_texts(bench: BenchmarkSource, synthetic_problems: int, synthetic_seed: int) -> BenchmarkTexts:
    """The texts to index; raises FileNotFoundError for a local path that is absent. A row that
    cannot be read, or has none of `text_fields` as text (a file that mixes field names), is
    counted by reason, never only logged: its n-grams go unchecked."""
    out = BenchmarkTexts()
    if bench.is_synthetic:
        out.texts = [(p.id, p.problem, False) for p in synthetic_eval_set(synthetic_problems, synthetic_seed)]
        return out
    rows = SourceRows(bench.location, bench.hub_config, bench.split, revision=bench.revision)
    rows.check_fields(f"benchmark {bench.name}", tuple(bench.text_fields))
    for raw in rows.iter():
        where = f"{raw.file} row {raw.row}"
        if raw.data is None:
            out.skip(f"unreadable ({raw.reason})", f"{where}: {raw.error}")
            continue
        item = str(raw.data.get("id", raw.data.get("unique_id", raw.position)))
        found = False
        for name in bench.text_fields:
            value = raw.data.get(name)
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str) and text.strip():
                    out.texts.append((item, text, isinstance(value, list)))
                    found = True
        if not found:
            present = sorted(k for k in raw.data if isinstance(k, str))[:8]
            out.skip(f"no text in {'/'.join(bench.text_fields)}", f"{where} (fields: {present})")
    for reason, n in out.not_indexed.items():
        log.warning("benchmark %s: %d rows not indexed: %s (first: %s)", bench.name, n, reason, out.examples[reason])
    return out
