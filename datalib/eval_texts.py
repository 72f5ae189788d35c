"""The texts of one benchmark that decontamination indexes (SPEC §8, §9).

Which fields: `text_fields` of the config entry; a list-valued field (GPQA's `choices`)
indexes each item separately, so no n-gram spans two fields. `synthetic` is the generated
held-out eval set of the synthetic task (the tiny config's benchmark).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
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


def benchmark_texts(bench: BenchmarkSource, synthetic_problems: int, synthetic_seed: int) -> list[tuple[str, str]]:
    """(item id, text) pairs; raises FileNotFoundError for a local path that is absent."""
    if bench.is_synthetic:
        return [(p.id, p.problem) for p in synthetic_eval_set(synthetic_problems, synthetic_seed)]
    rows = SourceRows(bench.location, bench.hub_config, bench.split, revision=bench.revision)
    rows.check_fields(f"benchmark {bench.name}", tuple(bench.text_fields))
    out: list[tuple[str, str]] = []
    for raw in rows.iter():
        if raw.data is None:  # said, since its n-grams then go unchecked
            log.warning("benchmark %s: %s row %d unreadable (%s: %s), not indexed", bench.name, raw.file, raw.row,
                        raw.reason, raw.error)
            continue
        item = raw.data.get("id", raw.data.get("unique_id", raw.position))
        for name in bench.text_fields:
            value = raw.data.get(name)
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str) and text.strip():
                    out.append((str(item), text))
    return out
