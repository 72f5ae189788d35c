"""Flow `rstar-full`: every stage of SPEC §1, in order, as cached Prefect tasks.

    prefect deployment run rstar-full/tiny --watch                 # tiny config
    prefect deployment run rstar-full/rstar-full                   # the paper's config
    prefect deployment run rstar-full/tiny -p only=cold_start      # one stage, recorded upstreams
    prefect deployment run rstar-full/tiny -p force='["assets"]'   # recompute one stage
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from configs.load import load_config
from configs.schema import PipelineConfig
from pipeline.hardware import check_hardware
from pipeline.keys import stage_key
from pipeline.paths import REPO_ROOT
from pipeline.runner import resolve_upstream
from pipeline.stages import STAGES, StageSpec
from pipeline.store import ArtifactRef, ArtifactStore
from tasks.cache import stage_task_for
from tasks.summaries import artifact_key


def _state_dir(store: ArtifactStore) -> Path:
    return Path(store.root) / "_prefect" if store.is_local else REPO_ROOT / ".rstar" / "prefect-state"


def _run(spec: StageSpec, cfg: PipelineConfig, ups: dict[str, ArtifactRef], force: bool) -> ArtifactRef:
    store = ArtifactStore(cfg.run.artifacts_root)
    key = stage_key(spec, cfg, ups)
    # The index decides (tasks/cache.py): a Prefect record is read only when it is keyed by
    # the digest the index holds now; with nothing indexed (or forced) it is refreshed.
    indexed = None if force else store.lookup(spec.name, key)
    record_key = f"{key}-{indexed.digest}" if indexed else key
    task = stage_task_for(_state_dir(store), cfg.run).with_options(name=spec.name, task_run_name=spec.name)
    ref = ArtifactRef.model_validate(task.with_options(refresh_cache=indexed is None)(
        spec=spec, key=record_key, config=cfg.model_dump(mode="json"),
        upstream={n: r.model_dump() for n, r in ups.items()}, force=force,
    ))
    current = store.lookup(spec.name, key)
    if current is None:
        raise RuntimeError(f"stage {spec.name!r} returned {ref.uri}, but the store at {store.root} has no "
                           f"artifact for key {key}: was it deleted during the run?")
    return current  # another run may have forced a recompute meanwhile: the index wins


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
    check_hardware(cfg.hardware, config)
    return run_pipeline(cfg, STAGES, only=only, force=force, until=until)


def run_pipeline(
    cfg: PipelineConfig,
    stages: tuple[StageSpec, ...],
    only: str | None = None,
    force: list[str] | None = None,
    until: str | None = None,
) -> dict[str, dict]:
    """The flow's body, over any ordered stage list (tests use toy stages)."""
    log = get_run_logger()
    registry = {s.name: s for s in stages}
    forced = set(force or [])
    for name in [*forced, *(x for x in (only, until) if x)]:
        if name not in registry:
            raise ValueError(f"unknown stage {name!r}; stages are: {', '.join(registry)}")
    store = ArtifactStore(cfg.run.artifacts_root)
    if only:
        spec = registry[only]
        ref = _run(spec, cfg, resolve_upstream(spec, cfg, store, registry), only in forced)
        return {only: ref.model_dump()}
    refs: dict[str, ArtifactRef] = {}
    for spec in stages:
        refs[spec.name] = _run(spec, cfg, {n: refs[n] for n in spec.upstream}, spec.name in forced)
        if spec.name == until:
            break
    pending = [s for s in stages if s.name not in refs]
    _summary(refs, pending, store)
    if pending:
        log.info("stopped after %r; stages still to come: %s", until,
                 ", ".join(f"{s.name} ({s.delivered_by or 'implemented'})" for s in pending))
    return {name: ref.model_dump() for name, ref in refs.items()}


def _summary(refs: dict[str, ArtifactRef], pending: list[StageSpec], store: ArtifactStore) -> None:
    done = "\n".join(f"| {n} | `{r.digest[:12]}` | `{r.uri}` |" for n, r in refs.items())
    todo = "\n".join(f"| {s.name} | {s.delivered_by or 'implemented, not run (until)'} |" for s in pending)
    md = f"# rstar-full\n\nArtifacts under `{store.root}`\n\n| stage | digest | artifact |\n|---|---|---|\n{done}\n"
    if pending:
        md += f"\n## Stages not run\n| stage | status |\n|---|---|\n{todo}\n"
    create_markdown_artifact(key=artifact_key("pipeline", "summary"), markdown=md)
