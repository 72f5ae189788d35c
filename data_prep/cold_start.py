"""Stage `cold_start`: the cold-start SFT mixture in one chat schema (SPEC §8 table 1).

Each configured source (ToolACE, APIGen-MT, Glaive function calling v2, Magicoder
OSS/Evol, Tulu 3, Llama-Nemotron chat, or the generated synthetic task) goes through its
normaliser (datalib/sources/) into `messages` + `tools`; a capped source is sampled in
a seeded order. Tulu 3 responses and Nemotron prompts are optionally rewritten by an
OpenAI-compatible endpoint. Writes `sft.parquet`, `rejects.jsonl` and `card.md`.

    python -m data_prep.cold_start --config configs/tiny.yaml
    python -m data_prep.cold_start --config configs/rstar2_agent_14b.yaml
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

from configs.data import ColdStartConfig, ColdStartSource
from data_prep.rewriter import Rewriter
from datalib import synthetic
from datalib.card import DataCard, render_chat
from datalib.intake import COUNT_HEADERS, SourceCounts, check_yield, entry_labels, normalise_rows
from datalib.reader import SourceRows
from datalib.records import SFTExample, check_conversation
from datalib.rejects import RejectLog
from datalib.sources import COLD_START_SOURCES
from datalib.tables import write_sft
from stagekit import artifacts, progress

log = logging.getLogger(__name__)


def open_rows(src: ColdStartSource, cfg: ColdStartConfig, label: str) -> SourceRows:
    fmt = COLD_START_SOURCES[src.source]
    if src.is_synthetic:
        problems = synthetic.generate_problems(src.examples, cfg.seed, stream=f"sft-{label}")
        records = [{"id": p.id, "family": p.family, "problem": p.problem, "answer": p.answer, "program": p.program,
                    "first_call_fails": synthetic.failure_kind(p.id, cfg.seed,
                                                               cfg.synthetic_failed_first_call_fraction)}
                   for p in problems]
        rows = SourceRows.from_records(f"synthetic:sft-{label}", records)
    else:
        rows = SourceRows(src.location, src.hub_config, src.split, list(fmt.columns) if fmt.columns else None,
                          revision=src.revision)
    rows.check_fields(src.source, fmt.required_fields)
    return rows


def _checked(normalise: Callable[[dict, str], SFTExample], row: dict, example_id: str) -> SFTExample:
    return check_conversation(normalise(row, example_id))  # every source, whether its normaliser checks or not


def run(cfg: ColdStartConfig, inputs: dict[str, Path], out_dir: Path, **_: object) -> dict[str, float]:
    rejects = RejectLog()
    examples: list[SFTExample] = []
    counts: list[SourceCounts] = []
    labels = entry_labels([s.source for s in cfg.sources])
    for k, (src, label) in enumerate(zip(cfg.sources, labels, strict=True)):
        progress.report(k, len(cfg.sources) + 1, f"cold start: normalising {label}")
        rows = open_rows(src, cfg, label)
        kept, source_counts = normalise_rows(rows, partial(_checked, COLD_START_SOURCES[src.source].normalise), label,
                                             src.examples, cfg.seed, rejects)
        examples += [example for _, example in kept]
        check_yield(source_counts, src.optional, rejects)
        counts.append(source_counts)

    rewriter = Rewriter(cfg.rewrite) if cfg.rewrite.endpoint_url else None
    if rewriter is not None:
        progress.report(len(cfg.sources), len(cfg.sources) + 1, "cold start: rewriting")
        examples = rewriter.rewrite(examples)
        rewriter.close()

    n = write_sft(out_dir / artifacts.CHATS, examples)
    rejects.write(out_dir / artifacts.REJECTS)
    rewritten = sum(1 for e in examples if e.meta.get("rewritten"))
    failures = rewriter.failures if rewriter else 0
    _card(cfg, counts, rejects, examples, rewritten, failures).write(out_dir / artifacts.CARD)
    progress.report(1, 1, f"cold start: {n} examples")
    metrics: dict[str, float] = {
        "examples": n,
        "rejected_malformed": rejects.count(kind="malformed"),
        "rejected_filtered": rejects.count(kind="filtered"),
        "rewrite_ran": int(rewriter is not None),
        "rewritten_examples": rewritten,
        "rewrite_failures": failures,
        "examples_with_tool_calls": sum(1 for e in examples if any(m.tool_calls for m in e.messages)),
    }
    metrics.update({f"examples_{c.label}": c.kept for c in counts})
    return metrics


def _card(cfg: ColdStartConfig, counts: list[SourceCounts], rejects: RejectLog,
          examples: list[SFTExample], rewritten: int, failures: int) -> DataCard:
    card = DataCard("Cold-start SFT data", "The non-reasoning cold start of SPEC §7-8: every source in one schema, "
                    "`messages` (system/user/assistant/tool, structured `tool_calls`) plus `tools` (JSON schemas). "
                    "File: `sft.parquet`.")
    card.heading("Counts per source")
    card.table(COUNT_HEADERS + ["cap"], [c.as_row() + [s.examples or "all"]
                                         for c, s in zip(counts, cfg.sources, strict=True)])
    card.text(f"**{len(examples)} examples** in total.")
    calls = Counter(len([c for m in e.messages for c in m.tool_calls]) for e in examples)
    card.heading("Tool use")
    card.table(["tool calls per example", "examples"], [[k, v] for k, v in sorted(calls.items())])
    synthetic_failed = sum(1 for e in examples if e.source == "synthetic"
                           and sum(1 for m in e.messages if m.role == "tool") > 1)
    if any(e.source == "synthetic" for e in examples):
        card.text(f"Synthetic demonstrations whose first call fails and is then fixed: {synthetic_failed} "
                  f"(configured share {cfg.synthetic_failed_first_call_fraction:.0%}).")
    card.heading("Rewriting")
    if cfg.rewrite.endpoint_url:
        card.text(f"Ran with `{cfg.rewrite.model}` at `{cfg.rewrite.endpoint_url}`, modes {cfg.rewrite.modes}: "
                  f"{rewritten} examples rewritten, {failures} kept as they were after failed requests.")
    else:
        card.text("Did not run (`rewrite.endpoint_url` is not set): responses and prompts are the sources' own.")
    card.files(counts)
    card.rejects(rejects)
    card.heading("Rendered examples (Qwen3 chat template)")
    shown: Counter = Counter()
    for example in examples:
        if shown[example.source] < cfg.card_examples_per_source:
            shown[example.source] += 1
            card.text(f"`{example.id}`" + (f" (rewritten: {example.meta['rewritten']})"
                                           if example.meta.get("rewritten") else ""))
            card.code(render_chat(example.to_row()))
    return card


def main() -> None:
    from orchestrator.cli import stage_main

    stage_main("cold_start")


if __name__ == "__main__":
    main()
