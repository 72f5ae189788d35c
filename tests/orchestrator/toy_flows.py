"""A toy pipeline a -> b -> c deployed on a process work pool, for the work-pool test.

Each stage records `<stage>@<worker>` ($RSTAR_TOY_WORKER, set per worker) in
$RSTAR_TOY_LOG, so the test sees which pool's worker ran it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from prefect import flow

from configs.load import validate
from flows.rstar_full import run_pipeline
from orchestrator.stages import StageSpec


def run(cfg, inputs: dict[str, Path], out_dir: Path, name: str) -> dict:
    with open(os.environ["RSTAR_TOY_LOG"], "a") as log:
        log.write(f"{name}@{os.environ.get('RSTAR_TOY_WORKER', '?')}\n")
    upstream = {k: json.loads((v / "value.json").read_text()) for k, v in inputs.items()}
    (out_dir / "value.json").write_text(json.dumps({"name": name, "upstream": upstream}, sort_keys=True))
    return {}


POOL_STAGES = (
    StageSpec("a", "toy_flows", lambda c: {"cfg": c.rl.stage1, "name": "a"}),
    StageSpec("b", "toy_flows", lambda c: {"cfg": c.rl.stage2, "name": "b"}, inputs={"a": "a"}, needs_gpus=True),
    StageSpec("c", "toy_flows", lambda c: {"cfg": c.rl.stage3, "name": "c"}, inputs={"b": "b"}),
)


@flow(name="toy-pool-pipeline")
def toy_pool_flow(root: str, work_pools: dict[str, str]) -> dict:
    cfg = validate({"run": {"artifacts_root": root, "work_pools": work_pools}}, "toy")
    return run_pipeline(cfg, POOL_STAGES, stages_path="toy_flows:POOL_STAGES")
