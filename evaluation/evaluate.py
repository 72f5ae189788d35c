"""Evaluate one checkpoint on every configured benchmark (SPEC §9), with or without the pipeline.

For each benchmark: load the problems, draw the samples the store lacks (one model load
for all benchmarks), score every sample against its reference through the code
service's isolated verifiers, and compute the metrics. Writes into `out_dir`:
`samples/<benchmark>.parquet` (one row per sample, the whole trajectory as text),
`rejects/<benchmark>.jsonl`, `results.json`, `card.md` and `accuracy.png`.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pandas as pd

from configs.eval import EvalConfig
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from datalib.eval_texts import load_or_skip
from evaluation.checkpoint import Checkpoint
from evaluation.general import run_general_tasks
from evaluation.problem_sets import LoadedBenchmark, load_benchmark
from evaluation.report import checkpoint_card, plot
from evaluation.results import EvalResults, EvalSettings
from evaluation.samples import SampleStore, draw, generation_key, missing_samples
from rollout.metrics import Outcome, summarise
from rollout.reward import verify_answers
from rollout.runtime import build_runtime
from stagekit import artifacts, progress

log = logging.getLogger(__name__)

TABLE_COLUMNS = ["problem_id", "sample", "reference", "choices", "answer", "response_tokens", "tool_calls",
                 "tool_statuses", "finish_reason", "num_turns", "seed", "text", "score"]


def _load_all(cfg: EvalConfig, out_dir: Path) -> tuple[list[LoadedBenchmark], dict[str, str]]:
    loaded, skipped = [], {}
    (out_dir / artifacts.REJECTS_DIR).mkdir(parents=True, exist_ok=True)
    for bench in cfg.benchmarks:
        b = load_or_skip(bench, lambda b=bench: load_benchmark(b, cfg.choice_seed), skipped)
        if b is None:
            continue
        b.rejects.write(out_dir / artifacts.REJECTS_DIR / f"{bench.name}.jsonl")
        if b.rejects.count():
            log.warning("benchmark %s: %d rows not usable, written to rejects/%s.jsonl", bench.name,
                        b.rejects.count(), bench.name)
        loaded.append(b)
    return loaded, skipped


def _table(bench: LoadedBenchmark, k: int, have: dict) -> pd.DataFrame:
    """One row per stored sample of the benchmark's problems, in problem order. `score` is
    None where the sample was scored against another reference (or never): `_rescore` fills it."""
    rows = []
    for p in bench.problems:
        for j in range(k):
            s = have.get((p.prompt_sha, j))
            if s is not None:
                current = s.get("scored_against") == p.reference_key and s.get("score") is not None
                rows.append({"problem_id": p.id, "sample": j, "reference": p.reference, "choices": list(p.choices),
                             "answer": s["final_answer"],
                             "response_tokens": int(s["response_tokens"]), "tool_calls": len(s["tool_statuses"]),
                             "tool_statuses": list(s["tool_statuses"]), "finish_reason": s["finish_reason"],
                             "num_turns": int(s["num_turns"]), "seed": int(s["seed"]), "text": s["text"],
                             "score": float(s["score"]) if current else None})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


async def _rescore(tables: dict[str, pd.DataFrame], benches: list[LoadedBenchmark], sandbox) -> int:
    """Score the stored answers whose reference changed since they were drawn; how many."""
    done = 0
    for b in benches:
        df = tables[b.name]
        stale = df.index[df["score"].isna()]
        if len(stale):
            refs = {p.id: p.scoring_reference() for p in b.problems}
            answers = [a if isinstance(a, str) else None for a in df.loc[stale, "answer"]]
            verdicts = await verify_answers(answers, [refs[pid] for pid in df.loc[stale, "problem_id"]], sandbox)
            df.loc[stale, "score"] = [v.reward for v in verdicts]
            done += len(stale)
        tables[b.name] = df.astype({"score": float})
    return done


async def _evaluate(ckpt: Checkpoint, cfg: EvalConfig, rollout: RolloutConfig, sandbox_cfg: SandboxConfig,
                    benches: list[LoadedBenchmark], store: SampleStore) -> tuple[dict[str, pd.DataFrame], dict]:
    from sandbox.client import build_sandbox

    k = cfg.samples_per_problem
    have = store.load()
    todo = {b.name: missing_samples(b.problems, k, have) for b in benches}
    drawn = sum(map(len, todo.values()))
    counts = {"drawn": drawn, "reused": sum(len(b.problems) * k for b in benches) - drawn, "failed": {}}
    log.info("evaluation of %s: %d samples to draw, %d reused from the store %s", ckpt.label, counts["drawn"],
             counts["reused"], store.root)
    async with build_sandbox(sandbox_cfg) as sandbox:
        if counts["drawn"]:
            async with build_runtime(rollout, sandbox_cfg, ckpt.model, ckpt.tokenizer, sandbox=sandbox,
                                     progress=progress.report) as rt:
                for n, b in enumerate(benches):
                    with progress.step(n, len(benches)):
                        counts["failed"][b.name] = await draw(rt, b.problems, todo[b.name], cfg, store)
            have = store.load()
        tables = {b.name: _table(b, k, have) for b in benches}
        if rescored := await _rescore(tables, benches, sandbox):
            log.info("evaluation of %s: %d stored samples rescored against changed references", ckpt.label, rescored)
    return tables, counts


def evaluate_checkpoint(ckpt: Checkpoint, cfg: EvalConfig, rollout: RolloutConfig, sandbox: SandboxConfig,
                        out_dir: Path, sample_root: Path) -> EvalResults:
    """Run the evaluation into `out_dir`; returns the results (also written as results.json)."""
    benches, skipped = _load_all(cfg, out_dir)
    store = SampleStore(sample_root / generation_key(ckpt.identity, cfg, rollout, sandbox))
    tables, counts = asyncio.run(_evaluate(ckpt, cfg, rollout, sandbox, benches, store))
    (out_dir / artifacts.SAMPLES).mkdir(exist_ok=True)
    summaries = {}
    for b in benches:
        df = tables[b.name]
        df.to_parquet(out_dir / artifacts.SAMPLES / f"{b.name}.parquet", index=False)
        outcomes = list(sample_outcomes(df).values())
        summaries[b.name] = summarise(outcomes, cfg.pass_k, failed=counts["failed"].get(b.name, 0))
    results = EvalResults(
        checkpoint=ckpt.label, identity=ckpt.identity, benchmarks=summaries, skipped=skipped,
        rejects={b.name: b.rejects.count() for b in benches},
        general=run_general_tasks(cfg.lm_eval, ckpt.model, ckpt.tokenizer),
        drawn=counts["drawn"], reused=counts["reused"], sample_store=str(store.root),
        settings=EvalSettings(samples_per_problem=cfg.samples_per_problem, temperature=cfg.temperature,
                              max_response_tokens=cfg.max_response_tokens, max_turns=cfg.max_turns, seed=cfg.seed),
    )
    results.write(out_dir)
    (out_dir / artifacts.CARD).write_text(checkpoint_card(results))
    plot([(ckpt.label, results)], out_dir / artifacts.ACCURACY_PLOT)
    return results


def sample_outcomes(samples: pd.DataFrame) -> dict[str, list[Outcome]]:
    """The samples table of one benchmark as rollout.metrics sees it: problem id -> its scored
    samples, problems in table order."""
    groups: dict[str, list[Outcome]] = {}
    for r in samples.itertuples(index=False):
        groups.setdefault(r.problem_id, []).append(Outcome(
            float(r.score), tuple(r.tool_statuses), r.answer if isinstance(r.answer, str) else None,
            int(r.response_tokens), r.finish_reason))
    return groups
