"""The flow's cache behaviour on toy stages, under a real (temporary) Prefect server:
rerun, changed config, only, force, missing upstream, overlapping runs, unfinished stages."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from toy_stages import GRAPH, TOY_STAGES, UNFINISHED, executions

from configs.load import apply_override, validate
from flows.rstar_full import rstar_full, run_pipeline


@pytest.fixture(autouse=True)
def _server(prefect_server):  # tests/orchestrator/conftest.py: one server for the session
    return prefect_server


@flow(name="toy-pipeline")
def toy_flow(root: str, overrides: list[str] | None = None, only: str | None = None,
             force: list[str] | None = None, until: str | None = None, unfinished: bool = False) -> dict:
    data: dict = {"run": {"artifacts_root": root}}
    for ov in overrides or []:
        apply_override(data, ov)
    return run_pipeline(validate(data, "toy"), UNFINISHED if unfinished else TOY_STAGES,
                        only=only, force=force, until=until)


@pytest.fixture()
def env(tmp_path, monkeypatch):
    log = tmp_path / "runs.log"
    monkeypatch.setenv("RSTAR_TOY_LOG", str(log))
    return str(tmp_path / "store"), log


def test_second_identical_run_is_all_cache_hits(env):
    root, log = env
    first = toy_flow(root)
    assert executions(log) == ["a", "b", "c"]
    assert toy_flow(root) == first
    assert executions(log) == ["a", "b", "c"]


def test_changed_section_reruns_that_stage_and_downstream_only(env):
    root, log = env
    first = toy_flow(root)
    second = toy_flow(root, overrides=["rl.stage2.steps=7"])
    assert executions(log) == ["a", "b", "c", "b", "c"]
    assert second["a"] == first["a"] and second["b"] != first["b"] and second["c"] != first["c"]


def test_only_runs_one_stage_on_recorded_upstreams(env):
    root, log = env
    first = toy_flow(root)
    out = toy_flow(root, only="b", overrides=["rl.stage2.steps=9"])
    assert list(out) == ["b"] and out["b"]["digest"] != first["b"]["digest"]
    assert executions(log) == ["a", "b", "c", "b"]
    toy_flow(root, only="b", force=["b"])
    assert executions(log)[-1] == "b" and len(executions(log)) == 5


def test_only_with_missing_upstream_fails_instead_of_recomputing(env):
    root, log = env
    with pytest.raises(Exception, match=r"needs the artifact of upstream stage 'a'.*nothing is recomputed"):
        toy_flow(root, only="c")
    assert executions(log) == []


def test_force_recomputes_one_stage(env):
    root, log = env
    first = toy_flow(root)
    again = toy_flow(root, force=["a"])
    # a is recomputed; its content is identical, so b and c stay cache hits
    assert executions(log) == ["a", "b", "c", "a"]
    assert again == first


def test_unknown_stage_name_is_rejected(env):
    root, _ = env
    with pytest.raises(ValueError, match="unknown stage 'z'; stages are: a, b, c"):
        toy_flow(root, force=["z"])


def test_deleted_artifacts_are_recomputed_not_returned_stale(env):
    root, log = env
    toy_flow(root)
    for stage in ("a", "b", "c", "index"):
        shutil.rmtree(f"{root}/{stage}")  # Prefect's cache records under _prefect survive
    out = toy_flow(root)
    assert executions(log) == ["a", "b", "c", "a", "b", "c"]
    assert all((Path(r["uri"]) / "manifest.json").exists() for r in out.values())


def _two_at_once(run) -> list:
    """Start `run` twice in overlapping threads; their results."""
    results: list = [None, None]

    def go(i: int) -> None:
        results[i] = run()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    return results


@pytest.mark.parametrize(("prefect_lock", "workdir_lock"), [(True, True), (False, True), (False, False)],
                         ids=["with-lock", "work-dir-lock-only", "without-lock"])
def test_overlapping_runs_compute_each_stage_once(env, monkeypatch, prefect_lock, workdir_lock):
    """With either lock (Prefect's on the record key, or the runner's on the stage's work dir)
    the second run waits and reuses; without both, both compute (the negative control)."""
    import contextlib
    import functools

    import tasks.cache
    from stagekit.workdir import WorkDir
    from tasks.cache import stage_task_for

    root, log = env
    monkeypatch.setenv("RSTAR_TOY_SLEEP_S", "4")
    monkeypatch.setattr(tasks.cache, "stage_task_for", functools.partial(stage_task_for, locked=prefect_lock))
    if not workdir_lock:
        monkeypatch.setattr(WorkDir, "lock", lambda self, wait=False: contextlib.nullcontext())
    results = _two_at_once(lambda: toy_flow(root))
    assert results[0] is not None and results[0] == results[1]
    if prefect_lock or workdir_lock:
        assert sorted(executions(log)) == ["a", "b", "c"]
    else:
        assert executions(log).count("a") == 2  # both runs computed the slow stage


def _cli_run(root: str, stage: str, force: bool) -> dict:
    """What `python -m <module> --force` does, without a new interpreter: run_stage on the index."""
    from orchestrator.runner import resolve_upstream, run_stage
    from orchestrator.store import ArtifactStore

    registry = {s.name: s for s in TOY_STAGES}
    cfg = validate({"run": {"artifacts_root": root}}, "toy")
    store = ArtifactStore(root)
    spec = registry[stage]
    return run_stage(spec, cfg, resolve_upstream(spec, cfg, store, registry), store, force=force).model_dump()


def _store_state(root: str) -> dict:
    base = Path(root)
    index = {p.relative_to(base).as_posix(): p.read_text() for p in sorted((base / "index").rglob("*.json"))}
    return {"index": {k: v.replace(root, "ROOT") for k, v in index.items()},
            "artifacts": sorted(p.relative_to(base).as_posix() for p in base.glob("[abc]/*"))}


def test_a_prefect_record_that_disagrees_with_the_index_is_never_returned(env, monkeypatch):
    root, log = env
    first = toy_flow(root)
    monkeypatch.setenv("RSTAR_TOY_SALT", "cli")
    forced = _cli_run(root, "a", force=True)  # the CLI recomputes a; Prefect's record still names the old one
    assert forced["digest"] != first["a"]["digest"]
    again = toy_flow(root)
    assert again["a"] == forced and again["b"] != first["b"]  # the index's artifact, and b follows it
    assert executions(log) == ["a", "b", "c", "a", "b", "c"]


def test_force_from_cli_and_from_flow_leave_the_same_state(tmp_path, monkeypatch):
    monkeypatch.setenv("RSTAR_TOY_LOG", str(tmp_path / "runs.log"))
    roots = [str(tmp_path / "via-cli"), str(tmp_path / "via-flow")]
    for root in roots:
        toy_flow(root)
    monkeypatch.setenv("RSTAR_TOY_SALT", "forced")
    _cli_run(roots[0], "b", force=True)
    toy_flow(roots[1], force=["b"], until="b")
    assert _store_state(roots[0]) == _store_state(roots[1])
    monkeypatch.delenv("RSTAR_TOY_SALT")
    assert toy_flow(roots[0]) == {k: {**v, "uri": v["uri"].replace(roots[1], roots[0])}
                                  for k, v in toy_flow(roots[1]).items()}


def test_unfinished_stage_fails_loudly_after_the_real_ones(env):
    root, log = env
    with pytest.raises(Exception, match=r"stage 'd' .* is not implemented yet; it is delivered by issue #99"):
        toy_flow(root, unfinished=True)
    assert executions(log) == ["a", "b", "c"]
    out = toy_flow(root, unfinished=True, until="c")  # stopping before it ends cleanly
    assert list(out) == ["a", "b", "c"]


def test_real_flow_refuses_paper_config_without_gpus(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has GPUs")
    # With every stage local (no work pools), the GPU stages need their GPUs here: it fails
    # before any work. (With the shipped pools, each GPU stage is checked on its pool's worker.)
    with pytest.raises(Exception, match=r"stage 'sft' of rstar2_agent_14b needs 8 GPU\(s\) per node"):
        rstar_full(config="configs/rstar2_agent_14b.yaml",
                   overrides=[f"run.artifacts_root={tmp_path}", "run.work_pools={}"])
    assert not any(tmp_path.iterdir())


RL_CUT = [f"rl.{stage}.{k}={v}" for stage in ("stage1", "stage2", "stage3")
          for k, v in (("steps", 1), ("max_response_tokens", 48), ("max_turns", 2))] + [
    "rl.stage3.problems=4", "rl.stage3_filter.rollouts_per_problem=2", "rl.stage3_filter.drop_when_solved=2",
    "rl.prompts_per_step=2"]
EVAL_CUT = ["eval.samples_per_problem=1", "eval.max_response_tokens=32", "eval.max_turns=2",
            "eval.benchmarks=[{name: synthetic_eval, location: synthetic, problems: 2}]"]


@pytest.mark.slow
def test_real_flow_runs_implemented_stages_on_tiny_config(tmp_path):
    """The real stages through the real flow: what `make demo` runs, minus the worker. Slow
    (2 min): CI runs `make demo` itself on a fresh clone, through a worker."""
    from orchestrator.stages import STAGES
    from orchestrator.status import last_implemented

    until = last_implemented()
    # SFT cut to a few steps without its held-out measurement, RL to one short step per
    # stage and the filter to 4 problems: the demo runs them at the tiny config's sizes.
    overrides = [f"run.artifacts_root={tmp_path}", "data.cold_start.sources=[{source: synthetic, examples: 64}]",
                 "sft.epochs=0.5", "sft.heldout.enabled=false", *RL_CUT, *EVAL_CUT]
    out = rstar_full(config="configs/tiny.yaml", overrides=overrides, until=until)
    ran = [s.name for s in STAGES][: len(out)]
    assert list(out) == ran and ran[-1] == until
    for ref in out.values():
        assert (Path(ref["uri"]) / "manifest.json").exists()
    again = rstar_full(config="configs/tiny.yaml", overrides=overrides, until=until)
    assert again == out  # all cache hits


@pytest.fixture()
def redis_url(tmp_path):
    """A private redis-server on a loopback port (CI installs Debian's `redis-server`)."""
    import socket
    import subprocess

    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server): the Redis lock is untested here")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import redis

        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                threading.Event().wait(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_overlapping_runs_on_a_remote_root_share_a_redis_lock(tmp_path, monkeypatch, redis_url):
    """Two runs sharing a remote (fsspec) artifact root, as two machines would: the Redis lock
    makes the second wait, and it finds the first one's artifacts in the shared index."""
    import uuid

    monkeypatch.setenv("RSTAR_TOY_LOG", str(tmp_path / "runs.log"))
    monkeypatch.setenv("RSTAR_TOY_SLEEP_S", "4")
    root = f"memory://rstar-{uuid.uuid4().hex}"
    overrides = ["run.lock_manager=redis", f"run.redis_url={redis_url}"]
    results = _two_at_once(lambda: toy_flow(root, overrides=overrides))
    assert results[0] is not None and results[0] == results[1]
    assert sorted(executions(tmp_path / "runs.log")) == ["a", "b", "c"]


def test_plots_and_curves_of_a_stage_are_prefect_artifacts(env, monkeypatch):
    """A stage's top-level PNGs become image artifacts (the PNG inside a data URL, since the
    browser cannot read the artifact store) and its curve CSVs table artifacts, thinned."""
    import base64
    import json

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    root, _ = env
    monkeypatch.setenv("RSTAR_TOY_FIGURES", "1")
    toy_flow(root, overrides=["rl.stage3.steps=11"])  # a key no other test makes: computed here
    png = next(Path(root).glob("c/*/curves.png")).read_bytes()
    keys = ArtifactFilter(key=ArtifactFilterKey(any_=["c-curves", "c-curves-table"]))
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=keys)
    by_type = {a.type: a for a in found}
    assert by_type["image"].key == "c-curves" and by_type["table"].key == "c-curves-table"
    assert base64.b64decode(by_type["image"].data.split(",", 1)[1]) == png
    table = json.loads(by_type["table"].data) if isinstance(by_type["table"].data, str) else by_type["table"].data
    steps = [int(r["step"]) for r in table]
    assert len(steps) == 200 and steps[0] == 1 and steps[-1] == 300 and steps == sorted(steps)


@flow(name="toy-graph")
def toy_graph_flow(root: str, threads: int, until: str | None = None) -> dict:
    return run_pipeline(validate({"run": {"artifacts_root": root}, "hardware": {"cpu_threads": threads}}, "toy"),
                        GRAPH, until=until)


def _task_spans(state) -> dict[str, tuple]:
    """Each stage task run of the flow run, as the UI shows it: (start, end)."""
    ids = FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))
    with get_client(sync_client=True) as client:
        return {t.name: (t.start_time, t.end_time) for t in client.read_task_runs(flow_run_filter=ids)}


@pytest.mark.parametrize("threads", [1, 2])
def test_the_flow_runs_the_graph_and_the_ui_shows_concurrent_stages(env, monkeypatch, threads):
    root, log = env
    monkeypatch.setenv("RSTAR_TOY_EACH_S", "1.5")
    state = toy_graph_flow(root, threads, return_state=True)
    assert state.is_completed() and sorted(executions(log)) == ["a", "b", "c", "d"]
    spans = _task_spans(state)
    (b0, b1), (c0, c1) = spans["b"], spans["c"]
    assert (b0 < c1 and c0 < b1) == (threads == 2)  # side by side only when the budget has room
    assert min(b0, c0) >= spans["a"][1] and spans["d"][0] >= max(b1, c1)
    assert toy_graph_flow(root, threads) == state.result()  # the rerun: all cache hits
    assert len(executions(log)) == 4


def test_until_runs_the_stages_up_to_it_in_table_order(env):
    root, log = env
    out = toy_graph_flow(root, 2, until="b")
    assert list(out) == ["a", "b"] and sorted(executions(log)) == ["a", "b"]
