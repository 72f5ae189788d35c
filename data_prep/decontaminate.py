"""Stage `decontaminate`: drop RL problems that share an 8-gram with a benchmark (SPEC §8).

Words are normalised (datalib/ngrams.py); a problem sharing any n-gram (n = 8) with any
benchmark item is removed. Benchmarks are hub ids or local files; the tiny default is
the generated held-out synthetic eval set (written here as `synthetic_eval.parquet`, the
set evaluation scores). A benchmark that cannot be loaded fails the stage unless it is
marked `optional`, in which case the card records it as skipped. Writes
`problems.parquet` (the clean set the RL stages read), `removed.jsonl` (every removed
problem with the benchmark items and n-grams it shares) and `card.md`.

    python -m data_prep.decontaminate --config configs/tiny.yaml
    python -m data_prep.decontaminate --config configs/rstar2_agent_14b.yaml
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

from tqdm import tqdm

from configs.data import DecontaminateConfig
from datalib.card import DataCard
from datalib.eval_texts import BenchmarkTexts, benchmark_texts, load_or_skip, synthetic_eval_set
from datalib.ngrams import NgramIndex, Overlap
from datalib.records import RLProblem
from datalib.tables import read_problems, write_problems
from stagekit import artifacts, progress

log = logging.getLogger(__name__)


Index = tuple[NgramIndex, dict[str, int], dict[str, str], dict[str, BenchmarkTexts]]


def build_index(cfg: DecontaminateConfig) -> Index:
    """The index, items indexed per benchmark, the benchmarks skipped with the reason, and what
    each benchmark gave (its rows not indexed, by reason)."""
    index, items, skipped, given = NgramIndex(cfg.ngram_words), {}, {}, {}
    for bench in cfg.benchmarks:
        texts = load_or_skip(bench, lambda b=bench: benchmark_texts(b, cfg.synthetic_eval_problems,
                                                                     cfg.synthetic_eval_seed), skipped)
        if texts is None:
            continue
        indexed = {item_id for item_id, text, part in texts.texts if index.add(bench.name, item_id, text, part)}
        items[bench.name] = len(indexed)
        given[bench.name] = texts
        if not indexed:
            raise RuntimeError(f"benchmark {bench.name!r} ({bench.location}) gave nothing to index "
                               f"({dict(texts.not_indexed) or 'no row'}): check `text_fields` {bench.text_fields}")
    return index, items, skipped, given


def run(cfg: DecontaminateConfig, inputs: dict[str, Path], out_dir: Path, **_: object) -> dict[str, float]:
    problems = read_problems(inputs["problems"] / artifacts.PROBLEMS)
    progress.report(0, 2, "decontaminate: indexing benchmarks")
    index, items, skipped, given = build_index(cfg)
    progress.report(1, 2, f"decontaminate: checking {len(problems)} problems")
    clean: list[RLProblem] = []
    removed: list[tuple[RLProblem, list[Overlap]]] = []
    for problem in tqdm(problems, desc="decontaminate", leave=False, mininterval=2.0, disable=None):
        overlaps = index.overlaps(problem.problem)
        if overlaps:
            removed.append((problem, overlaps))
        else:
            clean.append(problem)

    write_problems(out_dir / artifacts.PROBLEMS, clean)
    with (out_dir / artifacts.REMOVED).open("w", encoding="utf-8") as fh:
        for problem, overlaps in removed:
            fh.write(json.dumps({**problem.to_row(), "overlaps": [o.__dict__ for o in overlaps]},
                                ensure_ascii=False) + "\n")
    if any(b.is_synthetic for b in cfg.benchmarks):
        write_problems(out_dir / "synthetic_eval.parquet",
                       [RLProblem(p.id, "synthetic_eval", p.problem, p.answer)
                        for p in synthetic_eval_set(cfg.synthetic_eval_problems, cfg.synthetic_eval_seed)])
    by_bench = Counter(b for _, ov in removed for b in {o.benchmark for o in ov})
    _card(cfg, problems, clean, removed, items, skipped, by_bench, given).write(out_dir / artifacts.CARD)
    progress.report(2, 2, f"decontaminate: removed {len(removed)} of {len(problems)}")
    metrics: dict[str, float] = {
        "problems_in": len(problems), "problems_out": len(clean), "removed": len(removed),
        "benchmarks_indexed": len(items), "benchmarks_skipped": len(skipped), "benchmark_ngrams": index.ngram_count,
    }
    metrics.update({f"removed_{b}": by_bench[b] for b in items})
    metrics["benchmark_rows_not_indexed"] = sum(sum(t.not_indexed.values()) for t in given.values())
    return metrics


def _card(cfg: DecontaminateConfig, problems: list[RLProblem], clean: list[RLProblem],
          removed: list[tuple[RLProblem, list[Overlap]]], items: dict[str, int], skipped: dict[str, str],
          by_bench: Counter, given: dict[str, BenchmarkTexts]) -> DataCard:
    card = DataCard("Decontaminated RL problems",
                    f"A problem sharing any {cfg.ngram_words}-gram of normalised words with a benchmark item is "
                    f"removed (SPEC §8). {len(problems)} problems in, **{len(clean)} out**, {len(removed)} removed. "
                    "File: `problems.parquet`; removed ones with their overlaps in `removed.jsonl`.")
    card.heading("Counts per source")
    n_in, n_out = Counter(p.source for p in problems), Counter(p.source for p in clean)
    card.table(["source", "after rl_curation", "removed", "final"],
               [[s, n_in[s], n_in[s] - n_out[s], n_out[s]] for s in sorted(n_in)])
    card.heading("Benchmarks")
    rows = [[b.name, b.location, items.get(b.name, "-"), by_bench[b.name] if b.name in items else "-",
             "skipped: " + skipped[b.name] if b.name in skipped else "indexed"] for b in cfg.benchmarks]
    card.table(["benchmark", "location", "items", "problems removed", "status"], rows)
    missed = [[name, reason, n, t.examples[reason]] for name, t in given.items() for reason, n in t.not_indexed.items()]
    if missed:
        card.text(f"**{sum(r[2] for r in missed)} benchmark rows not indexed** (their n-grams are not checked):")
        card.table(["benchmark", "why", "rows", "first"], missed)
    if any(b.is_synthetic for b in cfg.benchmarks):
        card.text("`synthetic` is the generated held-out set this config evaluates on "
                  f"({cfg.synthetic_eval_problems} problems, seed {cfg.synthetic_eval_seed}), written here as "
                  "`synthetic_eval.parquet`." + ("" if len(cfg.benchmarks) > 1 else
                  " No public benchmark is checked by this config: add them under `benchmarks` (hub ids, or "
                  "local paths) to decontaminate against them."))
    card.heading("Removed per benchmark and source")
    pairs = Counter((o.benchmark, p.source) for p, ov in removed for o in {x.benchmark: x for x in ov}.values())
    card.table(["benchmark", "source", "problems"], [[b, s, n] for (b, s), n in sorted(pairs.items())])
    card.heading("Examples")
    shown: Counter = Counter()
    for problem, overlaps in removed:
        first = overlaps[0]
        if shown[first.benchmark] >= cfg.card_examples_per_benchmark:
            continue
        shown[first.benchmark] += 1
        card.text(f"`{problem.id}` shares \"{first.ngram}\" with {first.benchmark} item `{first.item_id}`")
        card.code(problem.problem)
    return card


def main() -> None:
    from orchestrator.cli import stage_main

    stage_main("decontaminate")


if __name__ == "__main__":
    main()
