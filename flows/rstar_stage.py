"""Flow `rstar-stage`: one stage of the pipeline on the work pool its config names (SPEC §10).

`rstar-full` runs on a CPU worker; a stage that `run.work_pools` assigns to a pool (GPU
stages in the paper config) is sent as a run of the deployment `rstar-stage/<pool>`,
linked in the UI as a subflow of the pipeline run. The pipeline then reads the stage's
artifact from the store's index, like any other stage's.

    prefect deployment run rstar-stage/rstar-gpu -p stage=sft -p config=...   # normally by rstar-full
"""

from __future__ import annotations

from prefect import flow
from prefect.deployments import run_deployment
from prefect.states import Cancelled

from configs.schema import PipelineConfig
from orchestrator.hardware import check_hardware
from orchestrator.keys import check_key, stage_key
from orchestrator.launcher import StageCancelledError
from orchestrator.stages import StageSpec, load_stages
from orchestrator.store import ArtifactRef, ArtifactStore
from tasks.cache import run_cached

DEPLOYMENT_FLOW = "rstar-stage"


@flow(name=DEPLOYMENT_FLOW, flow_run_name="{stage}")
def rstar_stage(
    stage: str, config: dict, upstream: dict[str, dict], force: bool = False,
    stages: str = "orchestrator.stages:STAGES", key: str | None = None,
) -> dict:
    """Run one stage here, on this pool's worker; `stages` names the stage registry, `key` the
    stage key the sending flow computed (this machine must compute the same: keys.check_key)."""
    spec = {s.name: s for s in load_stages(stages)}[stage]
    cfg = PipelineConfig.model_validate(config)
    if spec.needs_gpus:
        check_hardware(cfg.hardware, cfg.run.name, stage=spec.name)  # on the machine that runs it
    ups = {name: ArtifactRef.model_validate(r) for name, r in upstream.items()}
    check_key(spec.name, stage_key(spec, cfg, ups), key)  # before any work, not after hours of it
    try:
        return run_cached(spec, cfg, ups, force).model_dump()
    except StageCancelledError as e:  # else the engine would end a cancelled run Failed
        return Cancelled(message=str(e))


def dispatch(
    spec: StageSpec, cfg: PipelineConfig, ups: dict[str, ArtifactRef], force: bool, pool: str, stages: str
) -> ArtifactRef:
    """Run `spec` as a run of `rstar-stage/<pool>`, wait for it, and return its artifact."""
    deployment = f"{DEPLOYMENT_FLOW}/{pool}"
    key = stage_key(spec, cfg, ups)  # once: files edited during the run must not move the lookup below
    run = run_deployment(
        deployment, timeout=None, poll_interval=2,
        parameters={"stage": spec.name, "config": cfg.model_dump(mode="json"),
                    "upstream": {n: r.model_dump() for n, r in ups.items()}, "force": force, "stages": stages,
                    "key": key},
    )
    if run.state is None or not run.state.is_completed():
        state = run.state.name if run.state else "no state"
        raise RuntimeError(f"stage {spec.name!r} on work pool {pool!r} (run {run.name} of {deployment}) ended "
                           f"{state}: {run.state.message if run.state else ''}")
    store = ArtifactStore(cfg.run.artifacts_root)
    ref = store.lookup(spec.name, key)
    if ref is None:
        raise RuntimeError(f"stage {spec.name!r} completed on work pool {pool!r}, but the store at {store.root} has "
                           "no artifact for it: do the pool's machines see the same artifacts root?")
    return ref
