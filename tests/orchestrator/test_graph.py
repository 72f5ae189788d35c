"""The stage graph runner (orchestrator/graph.py), without Prefect: who starts when, with how
many threads, and what a failure stops. The flow-level behaviour is in test_flow_cache.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from toy_long import LONG

from configs.schema import PipelineConfig
from orchestrator.graph import run_graph
from orchestrator.launcher import launch_stage, thread_env
from orchestrator.stages import StageSpec
from orchestrator.store import ArtifactRef, ArtifactStore


def spec(name: str, *upstream: str) -> StageSpec:
    return StageSpec(name, "toy", lambda c: {}, inputs={u: u for u in upstream})


DIAMOND = (spec("a"), spec("b", "a"), spec("c", "a"), spec("d", "b", "c"))


class Recorder:
    """A stage body that sleeps and records (name, start, end, threads, upstream names)."""

    def __init__(self, sleep_s: float = 0.3, fail: str | None = None) -> None:
        self.sleep_s, self.fail = sleep_s, fail
        self.rows: dict[str, tuple[float, float, int, tuple[str, ...]]] = {}
        self.lock = threading.Lock()

    def __call__(self, s: StageSpec, ups: dict[str, ArtifactRef], threads: int) -> ArtifactRef:
        start = time.monotonic()
        time.sleep(self.sleep_s)
        with self.lock:
            self.rows[s.name] = (start, time.monotonic(), threads, tuple(sorted(ups)))
        if s.name == self.fail:
            raise RuntimeError(f"{s.name} failed")
        return ArtifactRef(stage=s.name, key=s.name, digest=s.name * 8, uri=f"/store/{s.name}")

    def overlap(self, x: str, y: str) -> bool:
        (s1, e1, *_), (s2, e2, *_) = self.rows[x], self.rows[y]
        return s1 < e2 and s2 < e1


def test_independent_stages_run_side_by_side_and_a_join_waits_for_both():
    rec = Recorder()
    refs = run_graph(DIAMOND, rec, budget=2)
    assert set(refs) == {"a", "b", "c", "d"} and rec.rows["d"][3] == ("b", "c")
    assert rec.overlap("b", "c")
    assert rec.rows["b"][0] >= rec.rows["a"][1] and rec.rows["c"][0] >= rec.rows["a"][1]
    assert rec.rows["d"][0] >= max(rec.rows["b"][1], rec.rows["c"][1])


def test_a_budget_of_one_runs_them_one_at_a_time_in_table_order():
    rec = Recorder(sleep_s=0.05)
    run_graph(DIAMOND, rec, budget=1)
    order = sorted(rec.rows, key=lambda n: rec.rows[n][0])
    assert order == ["a", "b", "c", "d"]
    assert not any(rec.overlap(x, y) for x, y in (("a", "b"), ("b", "c"), ("c", "d")))


def test_a_stage_takes_its_threads_from_the_budget_and_at_most_all_of_it():
    rec = Recorder(sleep_s=0.1)
    wide = {"b": 2, "c": 5}  # c asks for more than the budget: it gets all of it, alone
    run_graph(DIAMOND, rec, budget=2, threads=lambda s: wide.get(s.name, 1))
    assert {n: r[2] for n, r in rec.rows.items()} == {"a": 1, "b": 2, "c": 2, "d": 1}
    assert not rec.overlap("b", "c")
    three = (*DIAMOND[:3], spec("e", "a"))  # three ready stages of one thread each on two threads
    rec = Recorder(sleep_s=0.2)
    run_graph(three, rec, budget=2)
    running_at = lambda t: sum(s <= t < e for s, e, *_ in rec.rows.values())  # noqa: E731
    assert max(running_at(r[0]) for r in rec.rows.values()) == 2


def test_a_failure_stops_new_starts_lets_siblings_finish_and_is_raised():
    rec = Recorder(sleep_s=0.2, fail="b")
    slow_c = (*DIAMOND[:2], spec("c", "a"), DIAMOND[3])
    with pytest.raises(RuntimeError, match="b failed"):
        run_graph(slow_c, rec, budget=2)
    assert set(rec.rows) == {"a", "b", "c"}  # c finished; d never started


def test_a_run_missing_an_upstream_is_refused_before_any_work():
    rec = Recorder()
    with pytest.raises(ValueError, match=r"'b' needs \['a'\]"):
        run_graph(DIAMOND[1:], rec, budget=2)
    assert rec.rows == {}


def test_a_launched_stage_runs_with_its_threads_split_over_its_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent))  # the child imports toy_long
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cfg = PipelineConfig.model_validate({"run": {"artifacts_root": str(tmp_path / "store")},
                                         "rl": {"stage1": {"steps": 1}}})
    assert thread_env(LONG, cfg, None) == {}
    store = ArtifactStore(cfg.run.artifacts_root)
    ref = launch_stage(LONG, cfg, {}, store, env=thread_env(LONG, cfg, 2))
    assert store.manifest(ref)["metrics"]["omp_threads"] == 2
    two = cfg.model_copy(update={"hardware": cfg.hardware.model_copy(update={"processes_per_node": 2})})
    assert thread_env(LONG, two, 2) == {"OMP_NUM_THREADS": "1"}  # two ranks of one thread each


def test_an_interrupted_graph_stops_its_launched_stages_instead_of_waiting(tmp_path, monkeypatch):
    """Ctrl-C, or the SIGTERM a worker sends (the flow engine raises it in the flow's thread),
    arrives in the graph's thread while a launched stage sleeps for 600 s."""
    from test_launcher import survivors, wait_until

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent))
    monkeypatch.setenv("RSTAR_TOY_SPAWN", str(tmp_path))
    cfg = PipelineConfig.model_validate({"run": {"artifacts_root": str(tmp_path / "store")},
                                         "rl": {"stage1": {"steps": 1}}})
    store = ArtifactStore(cfg.run.artifacts_root)
    long = StageSpec("long", LONG.module, LONG.select, long_running=True)
    later = spec("later")

    def run(s: StageSpec, ups: dict, threads: int) -> ArtifactRef:
        return launch_stage(s, cfg, ups, store)

    def on_start(s: StageSpec, _n: int) -> None:  # runs in the graph's own thread
        if s.name == "later":
            assert wait_until((tmp_path / "pids.json").exists, 120), "toy stage never started"
            raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_graph((long, later), run, budget=2, on_start=on_start)
    assert time.monotonic() - started < 120
    assert wait_until(lambda: not survivors(str(tmp_path)), 15), survivors(str(tmp_path))
