"""Flow `rstar-full`: every stage of SPEC §1 as cached Prefect tasks, run as a graph: a stage
starts as soon as its upstream stages are done and the config's thread budget has room
(`hardware.cpu_threads`, `hardware.stage_threads`; orchestrator/graph.py), so the data stages
run side by side and each evaluation beside the next RL stage.

    python -m flows.watch --start rstar-full/tiny                  # tiny config, watched
    prefect deployment run rstar-full/rstar-full                   # the paper's config
    prefect deployment run rstar-full/tiny -p only=cold_start      # one stage, recorded upstreams
    prefect deployment run rstar-full/tiny -p force='["assets"]'   # recompute one stage
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.states import Cancelled

from configs.load import load_config
from configs.schema import PipelineConfig
from flows.rstar_stage import dispatch
from orchestrator.graph import import_stage_modules, run_graph
from orchestrator.hardware import check_hardware
from orchestrator.launcher import StageCancelledError
from orchestrator.runner import resolve_upstream
from orchestrator.stages import STAGES, StageSpec
from orchestrator.store import ArtifactRef, ArtifactStore
from stagekit.paths import REPO_ROOT
from tasks.cache import run_cached
from tasks.summaries import artifact_key


# No log_prints: it reroutes print() to the logger, and stages that capture program output
# (the synthetic task runs its generated programs) would see nothing.
@flow(name="rstar-full", flow_run_name="{config}")
def rstar_full(
    config: str = "configs/tiny.yaml",
    overrides: list[str] | None = None,
    only: str | None = None,
    force: list[str] | None = None,
    until: str | None = None,
) -> dict[str, dict]:
    """Run the pipeline. `only`: one stage on recorded upstreams; `force`: stages to
    recompute; `until`: stop after this stage."""
    cfg = load_config(REPO_ROOT / config, overrides or [])
    try:
        return run_pipeline(cfg, STAGES, only=only, force=force, until=until)
    except StageCancelledError as e:  # else the engine would end a cancelled run Failed
        return Cancelled(message=str(e))


def run_pipeline(
    cfg: PipelineConfig,
    stages: tuple[StageSpec, ...],
    only: str | None = None,
    force: list[str] | None = None,
    until: str | None = None,
    stages_path: str = "orchestrator.stages:STAGES",
) -> dict[str, dict]:
    """The flow's body, over any ordered stage list (tests use toy stages, importable as
    `stages_path` by the workers of other pools)."""
    log = get_run_logger()
    registry = {s.name: s for s in stages}
    forced = set(force or [])
    for name in [*forced, *(x for x in (only, until) if x), *cfg.run.work_pools, *cfg.hardware.stage_threads]:
        if name not in registry:
            raise ValueError(f"unknown stage {name!r}; stages are: {', '.join(registry)}")
    _check_local_hardware(cfg, [registry[only]] if only else list(stages))
    store = ArtifactStore(cfg.run.artifacts_root)

    def run(spec: StageSpec, ups: dict[str, ArtifactRef], threads: int) -> ArtifactRef:
        pool = cfg.run.work_pools.get(spec.name)
        if pool is None:
            return run_cached(spec, cfg, ups, spec.name in forced, threads)
        return dispatch(spec, cfg, ups, spec.name in forced, pool, stages_path)

    budget = cfg.hardware.thread_budget()
    if only:
        spec = registry[only]
        return {only: run(spec, resolve_upstream(spec, cfg, store, registry), stage_threads(cfg, spec, budget))
                .model_dump()}
    names = [s.name for s in stages]
    chosen = stages[: names.index(until) + 1] if until else stages  # `until`: the stages up to it, in table order
    import_stage_modules([s for s in chosen if not s.long_running and s.name not in cfg.run.work_pools])
    refs = run_graph(chosen, run, budget, lambda spec: stage_threads(cfg, spec, budget),
                     on_start=lambda spec, n: log.info("stage %s: starting with %d of %d threads", spec.name, n,
                                                       budget))
    refs = {s.name: refs[s.name] for s in chosen}  # table order, as the summary lists them
    pending = [s for s in stages if s.name not in refs]
    _summary(refs, pending, store)
    if pending:
        log.info("stopped after %r; stages still to come: %s", until,
                 ", ".join(f"{s.name} ({s.delivered_by or 'implemented'})" for s in pending))
    return {name: ref.model_dump() for name, ref in refs.items()}


def stage_threads(cfg: PipelineConfig, spec: StageSpec, budget: int) -> int:
    """Threads `spec` takes from the budget. SGLang servers serve one model at a time, so a stage
    that rolls out on them takes the whole budget: such stages never run side by side."""
    if cfg.rollout.engine == "sglang" and "rollout" in spec.select(cfg):
        return budget
    return cfg.hardware.stage_threads.get(spec.name, 1)


def _check_local_hardware(cfg: PipelineConfig, stages: list[StageSpec]) -> None:
    """GPU stages that run in this process need their GPUs here: fail before any work.
    Stages sent to another work pool are checked there (flows/rstar_stage.py)."""
    for spec in stages:
        if spec.needs_gpus and spec.name not in cfg.run.work_pools:
            check_hardware(cfg.hardware, cfg.run.name, stage=spec.name)


def _summary(refs: dict[str, ArtifactRef], pending: list[StageSpec], store: ArtifactStore) -> None:
    done = "\n".join(f"| {n} | `{r.digest[:12]}` | `{r.uri}` |" for n, r in refs.items())
    todo = "\n".join(f"| {s.name} | {s.delivered_by or 'implemented, not run (until)'} |" for s in pending)
    md = f"# rstar-full\n\nArtifacts under `{store.root}`\n\n| stage | digest | artifact |\n|---|---|---|\n{done}\n"
    if pending:
        md += f"\n## Stages not run\n| stage | status |\n|---|---|\n{todo}\n"
    create_markdown_artifact(key=artifact_key("pipeline", "summary"), markdown=md)
