"""8-gram decontamination: planted overlaps are all found, nothing else is removed."""

from __future__ import annotations

import json
import random
import re

import pytest

from configs.data import BenchmarkSource, DecontaminateConfig
from data_prep import decontaminate
from datalib.ngrams import NgramIndex, words
from datalib.records import RLProblem
from datalib.synthetic import generate_problems
from datalib.tables import read_problems, write_problems

BENCH_A = [
    {"id": "a-1", "problem": "Find the number of ordered pairs of positive integers whose product equals the "
                             "perimeter of a rectangle with integer sides."},
    {"id": "a-2", "problem": "Let $\\triangle ABC$ have circumcenter $O$ and incenter $I$ with "
                             "$\\overline{IA}\\perp\\overline{OI}$; find $AB\\cdot AC$."},
]
BENCH_B = [  # GPQA-like: the question and each choice are indexed separately
    {"id": "b-1", "question": "Which enzyme unwinds the double helix during DNA replication in bacteria?",
     "choices": ["Helicase moves ahead of the fork and separates both parental strands", "Ligase", "4", "RNase H"]},
]
SENTINEL = "zzqx"  # a word no benchmark has: stops a near miss from borrowing its neighbours' words


def _span(text: str, start: int, length: int) -> str:
    return " ".join(words(text)[start:start + length])


def _plant(rng: random.Random, base: list[RLProblem], sources: list[tuple[str, str, str]]):
    """Problems with planted 8-word spans (expected hits) and 7-word near misses."""
    planted, near = {}, set()
    out = []
    for i, p in enumerate(base):
        bench, item, text = sources[i % len(sources)]
        n = len(words(text))
        if i % 5 == 0:
            start = rng.randrange(0, n - 8 + 1)
            span = _span(text, start, 8).upper()  # case and spacing differ from the benchmark copy
            out.append(RLProblem(p.id, p.source, f"{p.problem} {SENTINEL}, {span}!? {SENTINEL}", p.answer))
            planted[p.id] = bench
        elif i % 5 == 1:
            start = rng.randrange(0, n - 7 + 1)
            out.append(RLProblem(p.id, p.source, f"{p.problem} {SENTINEL} {_span(text, start, 7)} {SENTINEL}",
                                 p.answer))
            near.add(p.id)
        else:
            out.append(p)
    return out, planted, near


def _sources() -> list[tuple[str, str, str]]:
    return ([("bench_a", r["id"], r["problem"]) for r in BENCH_A] + [("bench_b", "b-1", BENCH_B[0]["question"]),
                                                                      ("bench_b", "b-1", BENCH_B[0]["choices"][0])])


def test_index_finds_planted_spans_and_only_those():
    index = NgramIndex(8)
    for bench, item, text in _sources():
        index.add(bench, item, text)
    base = [RLProblem(p.id, "synthetic", p.problem, p.answer) for p in generate_problems(200, 0, "planted")]
    problems, planted, near = _plant(random.Random(0), base, _sources())
    found = {p.id: {o.benchmark for o in index.overlaps(p.problem)} for p in problems}
    found = {k: v for k, v in found.items() if v}
    assert found == {pid: {bench} for pid, bench in planted.items()}
    assert len(planted) == 40 and len(near) == 40


def test_a_short_item_is_matched_by_containment_and_a_short_choice_alone_by_nothing():
    index = NgramIndex(8)
    index.add("b", "1", "4", part=True)  # a GPQA choice: says nothing about which item
    index.add("b", "2", "Compute 12 squared plus 5 squared.")
    assert index.overlaps("What is 2 + 2? 4") == []
    assert [o.item_id for o in index.overlaps("compute 12 SQUARED plus 5 squared")] == ["2"]
    # the whole short item inside a longer text: contained, so contaminated
    assert [o.item_id for o in index.overlaps("First, compute 12 squared plus 5 squared. Then add 1.")] == ["2"]
    assert index.overlaps("compute 12 squared plus 6 squared") == []


ITEM = "Let $x$ be the largest real number such that $\\frac{x^2+1}{x} = 7$. Find $x$ rounded down."


def _each_word(text: str, change) -> str:  # noqa: ANN001
    return re.sub(r"[A-Za-z]{2,}", lambda m: change(m.group()), text)


@pytest.mark.parametrize("copy", [  # each changes every word, so no 8-gram of plain words survives
    _each_word(ITEM, lambda w: w[0] + "\u200b" + w[1:]),  # a zero-width space inside every word
    _each_word(ITEM, lambda w: w[0] + "\u00ad" + w[1:-1] + "\u2060" + w[-1]),  # soft hyphen, word joiner
    _each_word(ITEM, lambda w: "".join(c + "\u0301" if c in "aeiou" else c for c in w)),  # combining accents
    _each_word(ITEM, lambda w: "\\textbf{" + w + "}").replace("\\frac", "\\dfrac"),  # LaTeX formatting
    "\ufeff" + ITEM.upper().replace("FIND", "ＦＩＮＤ"),  # BOM, case, full-width letters
])
def test_format_and_invisible_characters_cannot_dodge_the_index(copy):
    index = NgramIndex(8)
    index.add("aime", "i1", ITEM)
    assert [o.item_id for o in index.overlaps("Warm-up. " + copy + " Good luck.")] == ["i1"]


def test_benchmark_rows_that_give_nothing_are_counted_on_the_card(tmp_path):
    bench = tmp_path / "bench.jsonl"
    good = {"id": "g", "problem": ITEM}
    bench.write_text(json.dumps(good) + "\n" + json.dumps({"id": "q", "question": "a row of another layout"})
                     + "\n{not json\n" + json.dumps({"id": "e", "problem": "   "}) + "\n")
    upstream = tmp_path / "rl"
    upstream.mkdir()
    write_problems(upstream / "problems.parquet", [RLProblem("p1", "dapo", "Solve. " + ITEM, 7),
                                                   RLProblem("p2", "dapo", "Something else entirely here.", 3)])
    out = tmp_path / "out"
    out.mkdir()
    cfg = DecontaminateConfig(benchmarks=[BenchmarkSource(name="b", location=str(bench))])
    metrics = decontaminate.run(cfg, {"problems": upstream}, out)
    assert metrics["removed"] == 1 and metrics["benchmark_rows_not_indexed"] == 3
    card = (out / "card.md").read_text()
    assert "**3 benchmark rows not indexed**" in card
    assert "| b | no text in problem | 2 |" in card and "| b | unreadable (invalid_json) | 1 |" in card
    bench.write_text(json.dumps({"id": "q", "problem": ""}) + "\n")
    with pytest.raises(RuntimeError, match=r"benchmark 'b' .* gave nothing to index"):
        decontaminate.run(cfg, {"problems": upstream}, out)


@pytest.fixture
def bench_files(tmp_path):
    a, b = tmp_path / "bench_a.jsonl", tmp_path / "bench_b.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in BENCH_A))
    b.write_text("".join(json.dumps(r) + "\n" for r in BENCH_B))
    return a, b


def test_stage_removes_planted_reports_per_benchmark_and_skips_absent(tmp_path, bench_files):
    base = [RLProblem(p.id, "synthetic", p.problem, p.answer) for p in generate_problems(300, 1, "planted")]
    problems, planted, _ = _plant(random.Random(1), base, _sources())
    # One training problem is a verbatim item of the synthetic eval set: found through the eval benchmark.
    eval_item = generate_problems(5, 0, "eval")[3]
    problems.append(RLProblem("dup-eval", "synthetic", eval_item.problem, eval_item.answer))
    planted["dup-eval"] = "synthetic_eval"
    upstream = tmp_path / "rl_curation"
    upstream.mkdir()
    write_problems(upstream / "problems.parquet", problems)
    cfg = DecontaminateConfig(benchmarks=[
        BenchmarkSource(name="synthetic_eval", location="synthetic"),
        BenchmarkSource(name="bench_a", location=str(bench_files[0])),
        BenchmarkSource(name="bench_b", location=str(bench_files[1]), text_fields=["question", "choices"]),
        BenchmarkSource(name="absent", location=str(tmp_path / "nope.jsonl"), optional=True),
    ], synthetic_eval_problems=50)
    out = tmp_path / "out"
    out.mkdir()
    metrics = decontaminate.run(cfg, {"problems": upstream}, out)

    expected = {b: sum(1 for v in planted.values() if v == b) for b in ("bench_a", "bench_b", "synthetic_eval")}
    assert metrics["removed"] == len(planted) == 61
    assert {b: metrics[f"removed_{b}"] for b in expected} == expected
    assert metrics["benchmarks_skipped"] == 1 and metrics["benchmarks_indexed"] == 3
    kept = read_problems(out / "problems.parquet")
    assert {p.id for p in kept} == {p.id for p in problems} - set(planted)
    removed = [json.loads(line) for line in (out / "removed.jsonl").read_text().splitlines()]
    assert {r["id"]: r["overlaps"][0]["benchmark"] for r in removed} == planted
    card = (out / "card.md").read_text()
    assert "skipped" in card and "bench_b" in card and "shares" in card
    assert len(read_problems(out / "synthetic_eval.parquet")) == 50


def test_missing_benchmark_fails_unless_optional(tmp_path):
    upstream = tmp_path / "rl"
    upstream.mkdir()
    write_problems(upstream / "problems.parquet", [])
    cfg = DecontaminateConfig(benchmarks=[BenchmarkSource(name="x", location=str(tmp_path / "nope.jsonl"))])
    with pytest.raises(RuntimeError, match=r"benchmark 'x' .*nope.jsonl.* could not be loaded.*optional"):
        decontaminate.run(cfg, {"problems": upstream}, tmp_path)


def test_no_default_config_names_a_path_outside_the_repository():
    from configs.load import load_config
    from stagekit.paths import REPO_ROOT

    def locations(node: object) -> list[str]:
        if isinstance(node, dict):
            return [v for k, v in node.items() if k == "location" and isinstance(v, str)] + \
                [x for v in node.values() for x in locations(v)]
        return [x for v in node for x in locations(v)] if isinstance(node, list) else []

    for cfg_file in sorted((REPO_ROOT / "configs").rglob("*.yaml")):
        if "accelerate" in cfg_file.parts:
            continue
        for loc in locations(load_config(cfg_file).model_dump(mode="json")):
            path = (REPO_ROOT / loc).resolve()
            assert "://" in loc or not loc.startswith(("/", ".")) or path.is_relative_to(REPO_ROOT), \
                f"{cfg_file.name} names {loc}, outside the repository"


def test_real_benchmarks_planted(shared_data):
    """Spans of the real benchmark copies planted into synthetic problems: all found, nothing else."""
    index = NgramIndex(8)
    sources = []
    for name, field in [("aime2024", "problem"), ("aime2025", "problem"), ("hmmt_feb_2025", "problem"),
                        ("math500", "problem"), ("gpqa_diamond", "question")]:
        rows = [json.loads(x) for x in (shared_data / "benchmarks" / f"{name}.jsonl").read_text().splitlines()]
        for r in rows:
            index.add(name, r["id"], r[field])
        sources += [(name, r["id"], r[field]) for r in rows[:6] if len(words(r[field])) >= 8]
    base = [RLProblem(p.id, "synthetic", p.problem, p.answer) for p in generate_problems(300, 2, "planted")]
    problems, planted, _ = _plant(random.Random(2), base, sources)
    hits = {p.id for p in problems if index.overlaps(p.problem)}
    assert hits == set(planted)
