"""A flow around the toy `long` stage (toy_long.py), for the in-process and worker
cancellation tests; deployable by entrypoint `tests/orchestrator/toy_long_flow.py:long_flow`."""

from __future__ import annotations

from prefect import flow
from prefect.states import Cancelled
from toy_long import LONG

from configs.load import validate
from flows.rstar_full import run_pipeline
from orchestrator.launcher import StageCancelledError


@flow(name="toy-long", flow_run_name="{tag}")
def long_flow(root: str, tag: str):
    try:
        return run_pipeline(validate({"run": {"artifacts_root": root}, "rl": {"stage1": {"steps": 3}}}, "toy"),
                            (LONG,))
    except StageCancelledError as e:
        return Cancelled(message=str(e))  # else the engine records the cancel as Failed
