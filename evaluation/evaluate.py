"""Evaluate one checkpoint on every configured benchmark (SPEC §9), with or without the pipeline.

For each benchmark: load the problems, draw the samples the store lacks (one model load
for all benchmarks), score every sample against its reference through the code
service's isolated verifiers, and compute the metrics. Writes into `out_dir`:
`samples/<benchmark>.parquet` (one row per sample, the whole trajectory as text),
`rejects/<benchmark>.jsonl`, `results.json`, `card.md` and `accuracy.png`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from pathlib import Path

import pandas as pd

from configs.eval import EvalConfig
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from data_prep.benchmark_texts import load_or_skip
from evaluation.benchmarks import LoadedBenchmark, load_benchmark
from evaluation.checkpoint import Checkpoint
from evaluation.general import run_general_tasks
from evaluation.metrics import benchmark_metrics
from evaluation.report import checkpoint_card, plot
from evaluation.samples import SampleStore, draw, generation_key, missing_samples
from pipeline import progress
from rollout.reward import score
from rollout.runtime import build_runtime
from rollout.trajectory import Trajectory

log = logging.getLogger(__name__)


def _load_all(cfg: EvalConfig, out_dir: Path) -> tuple[list[LoadedBenchmark], dict[str, str]]:
    loaded, skipped = [], {}
    (out_dir / "rejects").mkdir(parents=True, exist_ok=True)
    for bench in cfg.benchmarks:
        b = load_or_skip(bench, lambda b=bench: load_benchmark(b, cfg.choice_seed), skipped)
        if b is None:
            continue
        b.rejects.write(out_dir / "rejects" / f"{bench.name}.jsonl")
        if b.rejects.count():
            log.warning("benchmark %s: %d rows not usable, written to rejects/%s.jsonl", bench.name,
                        b.rejects.count(), bench.name)
        loaded.append(b)
    return loaded, skipped


def _table(bench: LoadedBenchmark, k: int, have: dict) -> pd.DataFrame:
    rows = []
    for p in bench.problems:
        for j in range(k):
            s = have.get((p.prompt_sha, j))
            if s is not None:
                rows.append({"problem_id": p.id, "sample": j, "reference": p.reference, "choices": list(p.choices),
                             "answer": s["final_answer"],
                             "response_tokens": int(s["response_tokens"]), "tool_calls": len(s["tool_statuses"]),
                             "tool_statuses": list(s["tool_statuses"]), "finish_reason": s["finish_reason"],
                             "num_turns": int(s["num_turns"]), "seed": int(s["seed"]), "text": s["text"]})
    return pd.DataFrame(rows)


async def _score(tables: dict[str, pd.DataFrame], benches: list[LoadedBenchmark], sandbox) -> None:
    """Add `score` to each table: the reward rules of training (rollout/reward.py) on the stored answers."""
    for b in benches:
        df = tables[b.name]
        if df.empty:
            df["score"] = []
            continue
        refs = {p.id: p.scoring_reference() for p in b.problems}
        trajs = [Trajectory(0, int(j), [], final_answer=a if isinstance(a, str) else None)
                 for j, a in zip(df["sample"], df["answer"], strict=True)]
        df["score"] = await score(trajs, [refs[pid] for pid in df["problem_id"]], sandbox)


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
            async with build_runtime(rollout, sandbox_cfg, ckpt.model, ckpt.tokenizer, sandbox=sandbox) as rt:
                for n, b in enumerate(benches):
                    with progress.step(n, len(benches)):
                        counts["failed"][b.name] = await draw(rt, b.problems, todo[b.name], cfg, store)
            have = store.load()
        tables = {b.name: _table(b, k, have) for b in benches}
        await _score(tables, benches, sandbox)
    return tables, counts


def evaluate_checkpoint(ckpt: Checkpoint, cfg: EvalConfig, rollout: RolloutConfig, sandbox: SandboxConfig,
                        out_dir: Path, sample_root: Path) -> dict:
    """Run the evaluation into `out_dir`; returns the results (also written as results.json)."""
    benches, skipped = _load_all(cfg, out_dir)
    store = SampleStore(sample_root / generation_key(ckpt.identity, cfg, rollout, sandbox))
    tables, counts = asyncio.run(_evaluate(ckpt, cfg, rollout, sandbox, benches, store))
    (out_dir / "samples").mkdir(exist_ok=True)
    metrics = {}
    for b in benches:
        df = tables[b.name]
        df.to_parquet(out_dir / "samples" / f"{b.name}.parquet", index=False)
        metrics[b.name] = benchmark_metrics(df, cfg.pass_k) | {"failed": counts["failed"].get(b.name, 0)}
    general = run_general_tasks(cfg.lm_eval, ckpt.model, ckpt.tokenizer)
    results = {
        "checkpoint": ckpt.label, "identity": ckpt.identity, "benchmarks": metrics, "skipped": skipped,
        "rejects": {b.name: b.rejects.count() for b in benches}, "general": general,
        "drawn": counts["drawn"], "reused": counts["reused"], "sample_store": str(store.root),
        "settings": {"samples_per_problem": cfg.samples_per_problem, "temperature": cfg.temperature,
                     "max_response_tokens": cfg.max_response_tokens, "max_turns": cfg.max_turns, "seed": cfg.seed},
    }
    (out_dir / "results.json").write_text(json.dumps(_no_nan(results), indent=2))
    (out_dir / "card.md").write_text(checkpoint_card(results))
    plot([(ckpt.label, results)], out_dir / "accuracy.png")
    return results


def _no_nan(x: object) -> object:
    """Strict JSON: a metric with nothing to measure (no tool call, no sample) is null."""
    if isinstance(x, dict):
        return {k: _no_nan(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_no_nan(v) for v in x]
    return None if isinstance(x, float) and math.isnan(x) else x


def flat_metrics(results: dict) -> dict[str, float]:
    """The manifest's metrics: `<benchmark>_<metric>` for the numbers a person compares."""
    out: dict[str, float] = {"samples_drawn": results["drawn"], "samples_reused": results["reused"]}
    for b, m in results["benchmarks"].items():
        for key in ("pass@1", "pass@1_stderr", "response_tokens_mean", "tool_calls_per_trajectory",
                    "tool_error_ratio", "tool_error_ratio_correct", "truncation_ratio", "problems", "samples",
                    "failed"):
            if key in m and not (isinstance(m[key], float) and math.isnan(m[key])):
                out[f"{b}_{key}"] = round(float(m[key]), 4)
    for task, r in results["general"].items():
        for key, v in r.get("metrics", {}).items():
            if "stderr" not in key and not math.isnan(v):
                out[f"lm_eval_{task}_{key}"] = round(v, 4)
    return out
