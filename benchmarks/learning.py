"""The learning proof (issue 13): does the pipeline train, and does RoC act as the paper says?

    python -m benchmarks.learning [--config configs/learning.yaml] [--set KEY=VALUE ...] [--out DIR]

It runs the pipeline's own stages into the config's store, nothing of its own:
  1. assets, cold_start, rl_curation, decontaminate (in this process: seconds);
  2. sft, a watched child process using every core;
  3. at once, one process each: eval_sft; rl_stage1 with GRPO-RoC then its eval_rl_stage1;
     rl_stage1 with plain GRPO then its eval_rl_stage1.
The two RL arms start from the same SFT checkpoint with the same `rl.seed`, so they train on
the same problems in the same order and draw their rollouts with the same seeds; plain GRPO
gets a group as large as RoC's 2G rollouts and trains on all of them, so both generate the
same number of trajectories per step (RoC trains on the G it keeps). All evaluations score
the same test problems with the same sample seeds, so differences are paired by problem.

Every stage is cached in the store: a rerun with more RL steps redoes only RL and its
evaluation, and a killed run resumes each stage from its last checkpoint. The report
(`learning.md`, `learning.csv`, `learning.png`) goes to `--out`
(default `<artifacts_root>/../learning_report`); benchmarks/learning_report.py writes it.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from configs.load import load_config
from configs.schema import PipelineConfig
from orchestrator.launcher import LaunchHooks, launch_stage
from orchestrator.runner import run_stage
from orchestrator.stages import get_stage
from orchestrator.store import ArtifactRef, ArtifactStore
from stagekit import progress

ARMS = ("grpo_roc", "grpo")
DATA_STAGES = ("assets", "cold_start", "rl_curation", "decontaminate")


def arm_overrides(cfg: PipelineConfig, arm: str) -> list[str]:
    """The config of one RL arm. Plain GRPO's group is RoC's 2G, so both generate as many."""
    if arm == "grpo_roc":
        return ["rl.algorithm=grpo_roc"]
    if arm == "grpo":
        return ["rl.algorithm=grpo", f"rl.kept_per_prompt={cfg.rl.rollouts_per_prompt}"]
    raise ValueError(f"unknown arm {arm!r}; arms are {ARMS}")


class _Runner:
    """Launches stages as watched children, each with its own bar and log file."""

    def __init__(self, store: ArtifactStore, logs: Path, quiet: bool) -> None:
        self.store, self.logs, self.quiet = store, logs, quiet
        self._position = 0
        self._lock = threading.Lock()
        logs.mkdir(parents=True, exist_ok=True)

    def launch(self, label: str, stage: str, cfg: PipelineConfig, upstream: dict[str, ArtifactRef],
               threads: int) -> ArtifactRef:
        with self._lock:
            position, self._position = self._position, self._position + 1
            bar = tqdm(total=100, desc=f"{label:<16}", position=position, disable=self.quiet, leave=True,
                       bar_format="{desc} {percentage:5.1f}% |{bar}| {elapsed} {postfix}")
        log_file = (self.logs / f"{label}.log").open("a")

        def sink(percent: float, message: str) -> None:
            bar.n = percent
            bar.set_postfix_str(message[:50], refresh=True)

        progress.set_sink(sink)  # this thread's context only: one bar per arm
        started = time.perf_counter()
        try:
            ref = launch_stage(get_stage(stage), cfg, upstream, self.store,
                               hooks=LaunchHooks(on_line=lambda line: print(line, file=log_file, flush=True)),
                               env={"OMP_NUM_THREADS": str(threads)})
        finally:
            log_file.close()
            progress.set_sink(None)
        sink(100.0, f"done in {time.perf_counter() - started:.0f} s")
        bar.close()
        return ref


def run(config: str, overrides: list[str], out: Path | None = None, quiet: bool = False) -> Path:
    """Run the experiment; returns the report directory."""
    from benchmarks.learning_report import write_report

    base = load_config(config, overrides)
    store = ArtifactStore(base.run.artifacts_root)
    out = out or Path(base.run.artifacts_root).parent / "learning_report"
    cores = len(os.sched_getaffinity(0))
    timings: dict[str, float] = {}
    started = time.perf_counter()

    refs: dict[str, ArtifactRef] = {}
    for name in DATA_STAGES:
        spec = get_stage(name)
        refs[name] = run_stage(spec, base, {u: refs[u] for u in spec.upstream}, store)
    timings["data"] = time.perf_counter() - started

    runner = _Runner(store, out / "logs", quiet)
    mark = time.perf_counter()
    refs["sft"] = runner.launch("sft", "sft", base, {u: refs[u] for u in ("assets", "cold_start")}, cores)
    timings["sft"] = time.perf_counter() - mark

    arm_cfgs = {arm: load_config(config, [*overrides, *arm_overrides(base, arm)]) for arm in ARMS}
    per_process = max(1, cores // (1 + len(ARMS)))

    def arm_chain(arm: str) -> Callable[[], tuple[ArtifactRef, ArtifactRef]]:
        def chain() -> tuple[ArtifactRef, ArtifactRef]:
            t0 = time.perf_counter()
            rl = runner.launch(f"rl {arm}", "rl_stage1", arm_cfgs[arm],
                               {"sft": refs["sft"], "decontaminate": refs["decontaminate"]}, per_process)
            timings[f"rl {arm}"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            ev = runner.launch(f"eval {arm}", "eval_rl_stage1", arm_cfgs[arm], {"rl_stage1": rl}, per_process)
            timings[f"eval {arm}"] = time.perf_counter() - t1
            return rl, ev
        return chain

    def eval_sft() -> ArtifactRef:
        t0 = time.perf_counter()
        ref = runner.launch("eval sft", "eval_sft", base, {"sft": refs["sft"]}, per_process)
        timings["eval sft"] = time.perf_counter() - t0
        return ref

    mark = time.perf_counter()
    with ThreadPoolExecutor(max_workers=1 + len(ARMS)) as pool:
        sft_eval = pool.submit(eval_sft)
        chains = {arm: pool.submit(arm_chain(arm)) for arm in ARMS}
        evals = {"sft": sft_eval.result()}
        rl_refs = {}
        for arm, future in chains.items():
            rl_refs[arm], evals[arm] = future.result()
    timings["rl and evaluations"] = time.perf_counter() - mark
    timings["total"] = time.perf_counter() - started
    return write_report(store, base, refs, rl_refs, evals, timings, cores, out)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.learning", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/learning.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override")
    parser.add_argument("--out", type=Path, help="report directory (default: beside the store)")
    args = parser.parse_args()
    report = run(args.config, args.set, args.out)
    print((report / "learning.md").read_text())


if __name__ == "__main__":
    main()
