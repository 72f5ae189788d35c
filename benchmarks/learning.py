"""The learning proof (issues 13, 24, 26): does the pipeline train, does RoC act as the paper
says, and does asynchronous RL (`rl.max_staleness_steps: 1`) learn as well, faster?

    python -m benchmarks.learning [--config configs/learning.yaml] [--set KEY=VALUE ...] [--out DIR]
    python -m benchmarks.learning --seeds 3        # three seeds, each claim per seed and pooled

It runs the pipeline's own stages into the config's store, nothing of its own, as a graph
(orchestrator/graph.py, the flow's scheduler) under a budget of the machine's cores:
  1. assets, cold_start, rl_curation, decontaminate (in this process: seconds);
  2. sft, a watched child process with every thread;
  3. as threads free up: rl_stage1 with GRPO-RoC, synchronous and asynchronous (k = 1), each
     alone with every thread (two cores: generation and training each on its own in the
     asynchronous arm); then rl_stage1 with plain GRPO, eval_sft and each arm's
     eval_rl_stage1, one thread each.
The two RL arms start from the same SFT checkpoint with the same `rl.seed`, so they train on
the same problems in the same order and draw their rollouts with the same seeds; plain GRPO
gets a group as large as RoC's 2G rollouts and trains on all of them, so both generate the
same number of trajectories per step (RoC trains on the G it keeps). The asynchronous arm is
GRPO-RoC with the same seeds and the same trajectories per step; only its rollouts run up to
one step ahead of the trainer. All evaluations score
the same test problems with the same sample seeds, so differences are paired by problem.

A seed (`--seeds N`: 0 .. N-1) sets the tiny model's initial weights, SFT's data order and
RL's problem order and sampling (`model.tiny.init_seed`, `sft.seed`, `rl.seed`); the
demonstrations, RL problems and test split stay the same, so every seed is scored on the
same problems. Seed 0 is the plain run.

Every stage is cached in the store: a rerun with more RL steps redoes only RL and its
evaluation, a second seed reuses the data stages, and a killed run resumes each stage from
its last checkpoint. The report (`learning.md`, `learning.csv`, `learning.png`; with seeds,
one per `seed-<n>/` and `seeds.md`, `seeds.png` over them) goes to `--out` (default
`<artifacts_root>/../learning_report`); benchmarks/learning_report.py writes it.
"""

from __future__ import annotations

import argparse
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from tqdm import tqdm

from benchmarks.learning_async import ASYNC as ASYNC_ARM
from configs.load import load_config
from configs.schema import PipelineConfig
from orchestrator.graph import import_stage_modules, run_graph
from orchestrator.launcher import LaunchHooks, launch_stage, thread_env
from orchestrator.runner import run_stage
from orchestrator.stages import StageSpec, get_stage
from orchestrator.store import ArtifactRef, ArtifactStore
from stagekit import progress

ARMS = ("grpo_roc", "grpo", ASYNC_ARM)  # the last: GRPO-RoC with its rollouts a step ahead (issue 26)
DATA_STAGES = ("assets", "cold_start", "rl_curation", "decontaminate")


def arm_overrides(cfg: PipelineConfig, arm: str) -> list[str]:
    """The config of one RL arm. Plain GRPO's group is RoC's 2G, so both generate as many."""
    if arm == "grpo_roc":
        return ["rl.algorithm=grpo_roc"]
    if arm == "grpo":
        return ["rl.algorithm=grpo", f"rl.kept_per_prompt={cfg.rl.rollouts_per_prompt}"]
    if arm == ASYNC_ARM:
        return ["rl.algorithm=grpo_roc", "rl.max_staleness_steps=1"]
    raise ValueError(f"unknown arm {arm!r}; arms are {ARMS}")


class _Runner:
    """Launches stages as watched children, each with its own bar and log file."""

    def __init__(self, store: ArtifactStore, logs: Path, quiet: bool) -> None:
        self.store, self.logs, self.quiet = store, logs, quiet
        self._position = 0
        self._lock = threading.Lock()
        logs.mkdir(parents=True, exist_ok=True)

    def launch(self, label: str, spec: StageSpec, cfg: PipelineConfig, upstream: dict[str, ArtifactRef],
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
            ref = launch_stage(spec, cfg, upstream, self.store,
                               hooks=LaunchHooks(on_line=lambda line: print(line, file=log_file, flush=True)),
                               env=thread_env(spec, cfg, threads))
        finally:
            log_file.close()
            progress.set_sink(None)
        sink(100.0, f"done in {time.perf_counter() - started:.0f} s")
        bar.close()
        return ref


# The graph starts ready stages in this order. The two RoC arms first, each alone on every core
# (their wall time per step is compared), then the single-thread stages side by side.
GRAPH_ORDER = ("sft", "rl grpo_roc", "rl grpo_roc_async", "rl grpo", "eval sft", "eval grpo_roc",
               "eval grpo_roc_async", "eval grpo")
WHOLE_MACHINE = ("sft", "rl grpo_roc", "rl grpo_roc_async")


@dataclass(frozen=True)
class Node:
    """One run of a pipeline stage in the benchmark's graph: which stage, under which arm's
    config (None: the base one), and which node feeds each of the stage's upstream names."""

    stage: str
    arm: str | None
    feeds: dict[str, str]


def graph_nodes() -> dict[str, Node]:
    nodes = {name: Node(name, None, {u: u for u in get_stage(name).upstream}) for name in DATA_STAGES}
    nodes["sft"] = Node("sft", None, {"assets": "assets", "cold_start": "cold_start"})
    nodes["eval sft"] = Node("eval_sft", None, {"sft": "sft"})
    for arm in ARMS:
        nodes[f"rl {arm}"] = Node("rl_stage1", arm, {"sft": "sft", "decontaminate": "decontaminate"})
        nodes[f"eval {arm}"] = Node("eval_rl_stage1", arm, {"rl_stage1": f"rl {arm}"})
    return {name: nodes[name] for name in (*DATA_STAGES, *GRAPH_ORDER)}


def seed_overrides(seed: int) -> list[str]:
    return [f"model.tiny.init_seed={seed}", f"sft.seed={seed}", f"rl.seed={seed}"]


def run(config: str, overrides: list[str], out: Path | None = None, quiet: bool = False) -> Path:
    """Run the experiment once; returns the report directory."""
    from benchmarks.learning_report import write_report

    base = load_config(config, overrides)
    store = ArtifactStore(base.run.artifacts_root)
    out = out or Path(base.run.artifacts_root).parent / "learning_report"
    cores = base.hardware.thread_budget()
    cfgs = {None: base, **{arm: load_config(config, [*overrides, *arm_overrides(base, arm)]) for arm in ARMS}}
    nodes = graph_nodes()
    specs = [replace(get_stage(n.stage), name=name, inputs={role: n.feeds[up] for role, up in
                                                            get_stage(n.stage).inputs.items()})
             for name, n in nodes.items()]
    runner = _Runner(store, out / "logs", quiet)
    timings: dict[str, float] = {}
    started = time.perf_counter()

    def run_node(spec: StageSpec, ups: dict[str, ArtifactRef], threads: int) -> ArtifactRef:
        node = nodes[spec.name]
        real, cfg = get_stage(node.stage), cfgs[node.arm]
        upstream = {up: ups[feed] for up, feed in node.feeds.items()}
        t0 = time.perf_counter()
        if node.stage in DATA_STAGES:
            ref = run_stage(real, cfg, upstream, store)
        else:
            ref = runner.launch(spec.name, real, cfg, upstream, threads)
        timings[spec.name] = time.perf_counter() - t0
        return ref

    import_stage_modules([get_stage(name) for name in DATA_STAGES])
    refs = run_graph(specs, run_node, budget=cores, threads=lambda s: cores if s.name in WHOLE_MACHINE else 1)
    timings["total"] = time.perf_counter() - started
    stage_refs = {name: refs[name] for name in (*DATA_STAGES, "sft")}
    rl_refs = {arm: refs[f"rl {arm}"] for arm in ARMS}
    evals = {"sft": refs["eval sft"], **{arm: refs[f"eval {arm}"] for arm in ARMS}}
    return write_report(store, base, stage_refs, rl_refs, evals, timings, cores, out)


def run_seeds(config: str, overrides: list[str], seeds: int, out: Path | None = None) -> Path:
    """`run` once per seed, then the claims per seed and pooled; returns the report directory."""
    from benchmarks.learning_seeds import write_seeds_report

    base = load_config(config, overrides)
    out = out or Path(base.run.artifacts_root).parent / "learning_report"
    reports = {seed: run(config, [*overrides, *seed_overrides(seed)], out / f"seed-{seed}") for seed in range(seeds)}
    return write_seeds_report(reports, out)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.learning", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/learning.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override")
    parser.add_argument("--out", type=Path, help="report directory (default: beside the store)")
    parser.add_argument("--seeds", type=int, default=1, help="run seeds 0 .. N-1 and pool the claims over them")
    args = parser.parse_args()
    if args.seeds > 1:
        report = run_seeds(args.config, args.set, args.seeds, args.out)
        print((report / "seeds.md").read_text())
    else:
        report = run(args.config, args.set, args.out)
        print((report / "learning.md").read_text())


if __name__ == "__main__":
    main()
