"""Stage `rl_curation`: RL problems with integer answers (SPEC §8 table 2).

Each source (DAPO-Math-17k, AoPS problems of OpenMathReasoning, Project Euler, or the
synthetic task) is normalised to `{id, source, problem, answer: int}`: answers that are
not plain integers, or longer than `max_answer_digits`, are removed and counted by
reason; so are duplicates (same normalised words, within or across sources; the first
in config order is kept). Problems of sources with `agreement_filter: true` then go
through the agreement filter (data_prep/agreement.py), sampling the filter model through
the rollout runtime. Writes `problems.parquet`, `agreement.parquet`, `rejects.jsonl`
and `card.md`.

    python -m data_prep.rl_curation --config configs/tiny.yaml
    python -m data_prep.rl_curation --config configs/rstar2_agent_14b.yaml
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from assets.paths import asset_paths
from configs.data import AgreementFilterConfig, RLCurationConfig, RLSource
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from data_prep.agreement import Agreement, run_agreement_filter
from datalib import synthetic
from datalib.card import DataCard
from datalib.intake import COUNT_HEADERS, SourceCounts, check_yield, entry_labels, normalise_rows
from datalib.integers import parse_integer
from datalib.ngrams import words
from datalib.reader import RawRow, SourceRows
from datalib.records import FilteredRow, RawProblem, RLProblem
from datalib.rejects import RejectLog
from datalib.sources import RL_SOURCES
from datalib.tables import write_problems
from stagekit import artifacts, progress

log = logging.getLogger(__name__)


def open_rows(src: RLSource, cfg: RLCurationConfig, label: str) -> SourceRows:
    fmt = RL_SOURCES[src.source]
    if src.is_synthetic:
        problems = synthetic.generate_problems(src.problems, cfg.seed, stream=f"rl-{label}")
        rows = SourceRows.from_records(f"synthetic:rl-{label}",
                                       [{"id": p.id, "problem": p.problem, "answer": p.answer} for p in problems])
    else:
        rows = SourceRows(src.location, src.hub_config, src.split, list(fmt.columns) if fmt.columns else None,
                          revision=src.revision)
    rows.check_fields(src.source, fmt.required_fields)
    return rows


class ProblemNormaliser:
    """Source row -> RLProblem: the source's extractor, integer answer, cross-source dedupe."""

    def __init__(self, max_answer_digits: int):
        self.max_answer_digits = max_answer_digits
        self.first_seen: dict[str, str] = {}  # normalised words -> id of the problem kept

    def __call__(self, extract: Callable[[dict], RawProblem], label: str, row: dict, problem_id: str) -> RLProblem:
        raw = extract(row)
        answer = parse_integer(raw.answer, self.max_answer_digits)
        key = " ".join(words(raw.problem))
        if key in self.first_seen:
            raise FilteredRow("duplicate", f"same problem as {self.first_seen[key]}")
        self.first_seen[key] = problem_id
        return RLProblem(problem_id, label, raw.problem, answer)


def filter_model(cfg: AgreementFilterConfig, inputs: dict[str, Path]) -> tuple[str, str]:
    if cfg.model is not None:
        return cfg.model, cfg.tokenizer or cfg.model
    paths = asset_paths(inputs["filter_model"])
    return paths.model, cfg.tokenizer or paths.tokenizer


def run(cfg: RLCurationConfig, inputs: dict[str, Path], out_dir: Path, rollout: RolloutConfig,
        sandbox: SandboxConfig, **_: object) -> dict[str, float]:
    rejects = RejectLog()
    normaliser = ProblemNormaliser(cfg.max_answer_digits)
    kept: list[tuple[str, RawRow, RLProblem]] = []  # (label, raw row, problem)
    counts: list[SourceCounts] = []
    to_filter: set[str] = set()
    labels = entry_labels([s.source for s in cfg.sources])
    for k, (src, label) in enumerate(zip(cfg.sources, labels, strict=True)):
        progress.report(k, len(cfg.sources) + 1, f"rl curation: normalising {label}")
        normalise = partial(normaliser, RL_SOURCES[src.source].normalise, label)
        rows, source_counts = normalise_rows(open_rows(src, cfg, label), normalise, label, src.problems, cfg.seed,
                                             rejects)
        kept += [(label, raw, problem) for raw, problem in rows]
        check_yield(source_counts, src.optional, rejects)
        counts.append(source_counts)
        if src.agreement_filter:
            to_filter.update(problem.id for _, problem in rows)

    agreements: list[Agreement] = []
    filtering = [p for _, _, p in kept if p.id in to_filter]
    if filtering and cfg.agreement.enabled:
        progress.report(len(cfg.sources), len(cfg.sources) + 1, f"rl curation: agreement filter on {len(filtering)}")
        model, tokenizer = filter_model(cfg.agreement, inputs)
        agreements = run_agreement_filter(filtering, cfg.agreement, rollout, sandbox, model, tokenizer)
        write_agreements(out_dir / artifacts.AGREEMENT, agreements)
        dropped = {a.problem_id: a for a in agreements if not a.kept}
        for label, raw, problem in kept:
            if (a := dropped.get(problem.id)) is not None:
                rejects.add(label, raw, "filtered", "filter_disagreement",
                            f"{a.agreeing}/{len(a.answers)} samples gave {a.label}; answers {list(a.answers)[:16]}")
        kept = [(label, raw, p) for label, raw, p in kept if p.id not in dropped]

    problems = [p for _, _, p in kept]
    n = write_problems(out_dir / artifacts.PROBLEMS, problems)
    rejects.write(out_dir / artifacts.REJECTS)
    _card(cfg, counts, rejects, problems, agreements, len(filtering)).write(out_dir / artifacts.CARD)
    progress.report(1, 1, f"rl curation: {n} problems")
    per_source = Counter(p.source for p in problems)
    metrics: dict[str, float] = {
        "problems": n,
        "rejected_malformed": rejects.count(kind="malformed"),
        "rejected_filtered": rejects.count(kind="filtered"),
        "duplicates": rejects.count(reason="duplicate"),
        "filter_ran": int(bool(agreements)),
        "filter_problems": len(filtering),
        "filter_kept": sum(a.kept for a in agreements) if agreements else len(filtering),
        "filter_failed_samples": sum(a.failed_samples for a in agreements),  # counted as no answer
    }
    metrics.update({f"problems_{c.label}": per_source[c.label] for c in counts})
    return metrics


def write_agreements(path: Path, agreements: list[Agreement]) -> None:
    schema = pa.schema([("problem_id", pa.string()), ("label", pa.int64()), ("answers", pa.list_(pa.int64())),
                        ("answer_texts", pa.list_(pa.string())), ("agreeing", pa.int64()), ("kept", pa.bool_()),
                        ("tool_calls", pa.int64()), ("failed_samples", pa.int64())])
    rows = [{"problem_id": a.problem_id, "label": a.label, "answers": list(a.answers),
             "answer_texts": list(a.answer_texts), "agreeing": a.agreeing, "kept": a.kept,
             "tool_calls": a.tool_calls, "failed_samples": a.failed_samples} for a in agreements]
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _card(cfg: RLCurationConfig, counts: list[SourceCounts], rejects: RejectLog, problems: list[RLProblem],
          agreements: list[Agreement], n_filtering: int) -> DataCard:
    card = DataCard("RL problems", "Problems with integer answers (SPEC §8), before decontamination. "
                    "File: `problems.parquet` (`id, source, problem, answer:int64`).")
    card.heading("Counts per source")
    final = Counter(p.source for p in problems)
    card.table(COUNT_HEADERS + ["agreement filter", "final"],
               [c.as_row() + ["yes" if s.agreement_filter else "no", final[c.label]]
                for c, s in zip(counts, cfg.sources, strict=True)])
    card.text(f"**{len(problems)} problems** in total. Answers longer than {cfg.max_answer_digits} digits are "
              "dropped as `too_large`; duplicates (same normalised words) keep the first in config order.")
    card.heading("Agreement filter")
    a = cfg.agreement
    if agreements:
        hist = Counter(x.agreeing for x in agreements)
        card.text(f"{len(agreements)} problems sampled {a.samples_per_problem} times each by "
                  f"`{a.model or 'the assets model'}` (max {a.max_turns} turns, {a.max_response_tokens} tokens, "
                  f"temperature {a.temperature}); kept when >= {a.min_agreeing} answers equal the label: "
                  f"**{sum(x.kept for x in agreements)} kept**. Tool calls made: "
                  f"{sum(x.tool_calls for x in agreements)}. Per-problem answers: `agreement.parquet`.")
        card.table(["samples agreeing", "problems"], [[k, v] for k, v in sorted(hist.items())])
    elif n_filtering:
        card.text(f"Disabled (`agreement.enabled: false`): {n_filtering} problems of filtered sources kept unchecked.")
    else:
        card.text("No configured source goes through the filter.")
    card.heading("Answer sizes")
    digits = Counter(len(str(abs(p.answer))) for p in problems)
    card.table(["digits", "problems"], [[k, v] for k, v in sorted(digits.items())])
    card.files(counts)
    card.rejects(rejects)
    card.heading("Examples")
    shown: Counter = Counter()
    for p in problems:
        if shown[p.source] < cfg.card_examples_per_source:
            shown[p.source] += 1
            card.text(f"`{p.id}` answer **{p.answer}**")
            card.code(p.problem)
    return card


def main() -> None:
    from orchestrator.cli import stage_main

    stage_main("rl_curation")


if __name__ == "__main__":
    main()
