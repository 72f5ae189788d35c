"""Command line shared by every stage module: `python -m <pkg>.<stage> --config … --set …`.

Upstream artifacts are taken from the store as recorded for this config; a missing one
is an error, never an implicit recomputation.
"""

from __future__ import annotations

import argparse
import logging
import sys

from configs.load import ConfigError, load_config
from pipeline.hardware import HardwareError, check_hardware
from pipeline.runner import (
    MissingUpstreamError,
    StageNotImplementedError,
    ensure_implemented,
    resolve_upstream,
    run_stage,
)
from pipeline.stages import get_stage
from pipeline.store import ArtifactStore


def stage_main(stage: str, argv: list[str] | None = None) -> None:
    try:
        _stage_main(stage, argv)
    except (ConfigError, HardwareError, StageNotImplementedError, MissingUpstreamError) as e:
        # Expected failures get one clear message, not a traceback.
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def _stage_main(stage: str, argv: list[str] | None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {get_stage(stage).module}")
    parser.add_argument("--config", required=True, help="YAML under configs/")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override")
    parser.add_argument("--force", action="store_true", help="recompute even when cached")
    parser.add_argument("--stage", help=argparse.SUPPRESS)  # modules serving several stages
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = load_config(args.config, args.set)
    check_hardware(cfg.hardware, args.config)
    spec = get_stage(stage)
    ensure_implemented(spec)
    store = ArtifactStore(cfg.run.artifacts_root)
    ref = run_stage(spec, cfg, resolve_upstream(spec, cfg, store), store, force=args.force)
    print(ref.model_dump_json())  # one line, last: libraries may print to stdout before it
