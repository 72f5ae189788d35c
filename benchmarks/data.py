"""Benchmark of data preparation (issue 5, point 6): rows/s of normalisation and of
8-gram decontamination on generated problems, against every benchmark in ../shared.

    python -m benchmarks.data [--problems 100000] [--against HEAD]

`--against REV` also times answer parsing of this checkout against the `datalib/integers.py`
of git revision REV, interleaved, best of five in CPU time (the speed check of a change to it
on a noisy machine). Reading files, speed and memory, against a revision: benchmarks/reading.py.

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
import subprocess
import sys
import tempfile
import time
import types
from functools import partial
from pathlib import Path

from data_prep.rl_curation import ProblemNormaliser
from datalib.intake import normalise_rows
from datalib.ngrams import NgramIndex, words
from datalib.reader import SourceRows
from datalib.rejects import RejectLog
from datalib.sources import COLD_START_SOURCES, RL_SOURCES
from datalib.sources.dapo_math import TEMPLATE_HEAD, TEMPLATE_TAIL
from datalib.synthetic import demonstration, failure_kind, generate_problems
from stagekit.paths import REPO_ROOT

BENCHMARK_DIR = REPO_ROOT.parent / "shared" / "data" / "benchmarks"
FIELDS = {"aime2024": ["problem"], "aime2025": ["problem"], "hmmt_feb_2025": ["problem"], "math500": ["problem"],
          "gpqa_diamond": ["question", "choices"], "ifeval": ["prompt"]}
ANSWER_FORMATS = ("{v}", "{v:,}", "\\boxed{{{v}}}", "0{v}", "${v}$", "{v}.0", "\\frac{{{v}}}{{7}}", "{v}.5")


def benchmark_items() -> tuple[list[tuple[str, str, str, bool]], str]:
    """(benchmark, item id, text, part of a list field) for every indexed text, and where they came from."""
    if not BENCHMARK_DIR.exists():
        rng = random.Random(0)
        vocab = [f"w{i}" for i in range(5000)]
        items = [("generated", str(i), " ".join(rng.choices(vocab, k=rng.randint(20, 120))), False)
                 for i in range(1300)]
        return items, f"GENERATED stand-ins ({BENCHMARK_DIR} is absent)"
    items = []
    for name, fields in FIELDS.items():
        for k, line in enumerate((BENCHMARK_DIR / f"{name}.jsonl").read_text().splitlines()):
            row = json.loads(line)
            for f in fields:
                value = row[f]
                for text in value if isinstance(value, list) else [value]:
                    items.append((name, str(row.get("id", k)), text, isinstance(value, list)))
    return items, f"{len(FIELDS)} benchmarks in {BENCHMARK_DIR}"


def generated_problems(n: int, items: list[tuple[str, str, str, bool]], seed: int = 0) -> tuple[list[str], set[int]]:
    rng = random.Random(seed)
    vocab = sorted({w for _, _, t, _ in items for w in words(t)})
    long_items = [t for _, _, t, _ in items if len(words(t)) >= 8]
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


def module_at(rev: str, path: str) -> types.ModuleType:
    """A module of this repository as it was at git revision `rev` (read-only `git show`)."""
    source = subprocess.run(["git", "-C", str(REPO_ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True,
                            check=True).stdout
    name = f"_at_{rev}_{path.replace('/', '_').removesuffix('.py')}"
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)
    return module


def cpu_timed(fn) -> tuple[object, float]:  # noqa: ANN001
    """fn() and the CPU seconds it took: other jobs on a shared machine move those far less than wall time."""
    start = time.process_time()
    result = fn()
    return result, time.process_time() - start


def compare_with(rev: str, answers: list[str]) -> None:
    from datalib.integers import parse_integer

    old_integers = module_at(rev, "datalib/integers.py")

    def parse_all(parse) -> None:  # noqa: ANN001
        for a in answers:
            try:
                parse(a, 18)
            except Exception:  # noqa: BLE001, S110 (FilteredRow: a rejected answer is a result here)
                pass

    t_new, t_old = [], []
    for _ in range(5):
        t_old.append(cpu_timed(lambda: parse_all(old_integers.parse_integer))[1])
        t_new.append(cpu_timed(lambda: parse_all(parse_integer))[1])
    n = len(answers)
    print(f"parse answers ({n} rows) vs {rev}: this checkout {n / min(t_new):>9,.0f} rows/s, "
          f"{rev} {n / min(t_old):>9,.0f} rows/s (CPU time), speed ratio {min(t_old) / min(t_new):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.data")
    parser.add_argument("--problems", type=int, default=100_000)
    parser.add_argument("--against", metavar="REV", help="also time answer parsing against this git revision")
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

    # Reading a local JSONL file (issue 9: bytes judged per row, lines cut at \n only), against a
    # bare `json.loads` per line of the same file, the floor any reader pays.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dapo.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in raws), encoding="utf-8")
        bare, floor = cpu_timed(lambda: [json.loads(x) for x in path.read_text(encoding="utf-8").split("\n") if x])
        read, elapsed = cpu_timed(lambda: list(SourceRows(str(path)).iter()))
    assert len(read) == len(bare) == n
    print(f"reading a JSONL source (SourceRows, CPU time):     {rate(n, elapsed)}; "
          f"bare json.loads loop {n / floor:,.0f} rows/s, ratio {floor / elapsed:.2f}")

    if args.against:
        compare_with(args.against, [r["reward_model"]["ground_truth"] for r in raws])

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
    for bench, item, text, part in items:
        index.add(bench, item, text, part)  # as the stage does: a GPQA choice is matched by its n-grams only
    build = time.perf_counter() - start
    start = time.perf_counter()
    hits = {i for i, t in enumerate(texts) if index.overlaps(t)}
    elapsed = time.perf_counter() - start
    print(f"decontamination index: {index.ngram_count} 8-grams from {index.items} texts in {build:.2f} s")
    print(f"decontamination (8-gram, all benchmarks):          {rate(n, elapsed)}; "
          f"{len(hits)} contaminated, planted {len(planted)} found {len(planted & hits)}, "
          f"{len(hits - planted)} others")
    if not planted <= hits:
        raise SystemExit("a planted overlap was missed")
    if len(hits - planted) > n // 100:  # random text of benchmark words shares no 8-gram by chance
        raise SystemExit(f"{len(hits - planted)} problems flagged without a planted overlap: false positives")


if __name__ == "__main__":
    main()
