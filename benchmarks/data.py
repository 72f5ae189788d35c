"""Benchmark of data preparation (issue 5, point 6): rows/s of normalisation and of
8-gram decontamination on generated problems, against every benchmark in ../shared.

    python -m benchmarks.data [--problems 100000]

Generated problems are drawn from the benchmarks' own vocabulary (30-80 words, with
LaTeX), the worst case for the index: nearly every 8-word window has to be looked up.
1 % carry a planted 8-word span of a benchmark item; the run checks they are all found.
Normalisation is the RL curation path (DAPO layout: template stripping, integer answer
in varied formats, dedupe key, rejects) plus, for scale, the cold-start Glaive parser and
the synthetic demonstrations. Where ../shared is absent, generated benchmark texts stand
in (said in the output).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from functools import partial

from data_prep.intake import normalise_rows
from data_prep.ngrams import NgramIndex, words
from data_prep.reader import SourceRows
from data_prep.rejects import RejectLog
from data_prep.rl_curation import ProblemNormaliser
from data_prep.sources import COLD_START_SOURCES, RL_SOURCES
from data_prep.sources.dapo_math import TEMPLATE_HEAD, TEMPLATE_TAIL
from data_prep.synthetic import demonstration, failure_kind, generate_problems
from pipeline.paths import REPO_ROOT

BENCHMARK_DIR = REPO_ROOT.parent / "shared" / "data" / "benchmarks"
FIELDS = {"aime2024": ["problem"], "aime2025": ["problem"], "hmmt_feb_2025": ["problem"], "math500": ["problem"],
          "gpqa_diamond": ["question", "choices"], "ifeval": ["prompt"]}
ANSWER_FORMATS = ("{v}", "{v:,}", "\\boxed{{{v}}}", "0{v}", "${v}$", "{v}.0", "\\frac{{{v}}}{{7}}", "{v}.5")


def benchmark_items() -> tuple[list[tuple[str, str, str]], str]:
    """(benchmark, item id, text) for every indexed text, and where they came from."""
    if not BENCHMARK_DIR.exists():
        rng = random.Random(0)
        vocab = [f"w{i}" for i in range(5000)]
        items = [("generated", str(i), " ".join(rng.choices(vocab, k=rng.randint(20, 120)))) for i in range(1300)]
        return items, f"GENERATED stand-ins ({BENCHMARK_DIR} is absent)"
    items = []
    for name, fields in FIELDS.items():
        for k, line in enumerate((BENCHMARK_DIR / f"{name}.jsonl").read_text().splitlines()):
            row = json.loads(line)
            for f in fields:
                value = row[f]
                for text in value if isinstance(value, list) else [value]:
                    items.append((name, str(row.get("id", k)), text))
    return items, f"{len(FIELDS)} benchmarks in {BENCHMARK_DIR}"


def generated_problems(n: int, items: list[tuple[str, str, str]], seed: int = 0) -> tuple[list[str], set[int]]:
    rng = random.Random(seed)
    vocab = sorted({w for _, _, t in items for w in words(t)})
    long_items = [t for _, _, t in items if len(words(t)) >= 8]
    texts, planted = [], set()
    for i in range(n):
        body = " ".join(rng.choices(vocab, k=rng.randint(30, 80)))
        text = f"Let $x_{i % 97}$ be given. {body}?"
        if i % 100 == 0:
            ws = words(rng.choice(long_items))
            start = rng.randrange(len(ws) - 7)
            text += " zzqx " + " ".join(ws[start:start + 8]) + " zzqx"
            planted.add(i)
        texts.append(text)
    return texts, planted


def rate(n: int, seconds: float) -> str:
    return f"{n:>7} rows in {seconds:6.2f} s = {n / seconds:>9,.0f} rows/s"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.data")
    parser.add_argument("--problems", type=int, default=100_000)
    args = parser.parse_args()
    n = args.problems

    items, origin = benchmark_items()
    texts, planted = generated_problems(n, items)
    print(f"benchmarks: {origin}; {len(items)} texts indexed")

    # Normalisation, RL path: raw DAPO rows -> {problem, answer:int}, dedupe, rejects.
    rng = random.Random(1)
    raws = [{"prompt": [{"role": "user", "content": f"{TEMPLATE_HEAD} ...\n\n{t}\n\n{TEMPLATE_TAIL}"}],
             "reward_model": {"ground_truth": rng.choice(ANSWER_FORMATS).format(v=rng.randint(0, 10**6))}}
            for t in texts]
    rows = SourceRows.from_records("generated:dapo", raws)
    normaliser, extract, rejects = ProblemNormaliser(18), RL_SOURCES["dapo_math"].normalise, RejectLog()
    start = time.perf_counter()
    kept, _ = normalise_rows(rows, partial(normaliser, extract, "dapo"), "dapo", None, 0, rejects)
    elapsed = time.perf_counter() - start
    print(f"normalisation (RL, DAPO layout + integer answers): {rate(n, elapsed)}; "
          f"{len(kept)} kept, {dict(sorted(rejects.counts.items()))}")

    glaive = SourceRows(str(REPO_ROOT.parent / "shared/data/samples/glaive_function_calling_v2.jsonl")) \
        if BENCHMARK_DIR.exists() else None
    if glaive is not None:
        records = [r.data for r in glaive.iter()] * max(1, n // 50)
        start = time.perf_counter()
        for k, row in enumerate(records):
            COLD_START_SOURCES["glaive_fc_v2"].normalise(row, str(k))
        print(f"normalisation (cold start, Glaive text format):    {rate(len(records), time.perf_counter() - start)}")
    synth = generate_problems(max(1, n // 50), 0, "bench")
    start = time.perf_counter()
    for p in synth:
        demonstration(p.problem, p.answer, p.program, failure_kind(p.id, 0, 0.15))
    print(f"synthetic demonstrations (programs executed):       {rate(len(synth), time.perf_counter() - start)}")

    # Decontamination against every benchmark.
    start = time.perf_counter()
    index = NgramIndex(8)
    for bench, item, text in items:
        index.add(bench, item, text)
    build = time.perf_counter() - start
    start = time.perf_counter()
    hits = {i for i, t in enumerate(texts) if index.overlaps(t)}
    elapsed = time.perf_counter() - start
    print(f"decontamination index: {index.ngram_count} 8-grams from {index.items} texts in {build:.2f} s")
    print(f"decontamination (8-gram, all benchmarks):          {rate(n, elapsed)}; "
          f"{len(hits)} contaminated, planted {len(planted)} found {len(planted & hits)}")
    if not planted <= hits:
        raise SystemExit("a planted overlap was missed")


if __name__ == "__main__":
    main()
