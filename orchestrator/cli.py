"""Command line shared by every stage module: `python -m <pkg>.<stage> --config … --set …`.

Upstream artifacts are taken from the store as recorded for this config; a missing one
is an error, never an implicit recomputation. `--config-json` is how orchestrator/launcher.py
starts a long stage: the exact resolved config and upstream refs, so the child computes
the same key as its parent. On a terminal the stage draws a progress bar.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path

from configs.load import ConfigError, load_config
from configs.schema import PipelineConfig
from orchestrator.hardware import HardwareError, check_hardware
from orchestrator.keys import KeyMismatchError
from orchestrator.launcher import PROGRESS_ENV, RESULT_ENV
from orchestrator.runner import (
    MissingUpstreamError,
    StageNotImplementedError,
    ensure_implemented,
    rank,
    resolve_upstream,
    run_stage,
)
from orchestrator.stages import BY_NAME, StageSpec
from orchestrator.store import ArtifactRef, ArtifactStore
from stagekit import progress
from stagekit.errors import StageInputError
from stagekit.paths import REPO_ROOT
from stagekit.workdir import WorkDirBusyError


def stage_main(stage: str, argv: list[str] | None = None, registry: Mapping[str, StageSpec] | None = None) -> None:
    try:
        _stage_main(stage, argv, registry or BY_NAME)
    except (ConfigError, HardwareError, StageNotImplementedError, MissingUpstreamError, WorkDirBusyError,
            KeyMismatchError) as e:
        # Expected failures get one clear message, not a traceback.
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except (StageInputError, FileNotFoundError) as e:  # bad data: the file, row and field, in one line
        print(f"error: stage {stage}: {_one_line(e)} (traceback: {_traceback_log(stage)})", file=sys.stderr)
        raise SystemExit(2) from None
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        where = e.filename or "the artifacts root, the work dirs or the temporary directory"
        print(f"error: stage {stage}: no space left on the device writing {where} "
              f"(traceback: {_traceback_log(stage)})", file=sys.stderr)
        raise SystemExit(2) from None


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _traceback_log(stage: str) -> Path:
    """The current exception's traceback in a file under .rstar/logs/; its path."""
    folder = REPO_ROOT / ".rstar" / "logs"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{stage}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        path.write_text(traceback.format_exc())
    except OSError:  # a full disk: the traceback goes to the terminal after all
        traceback.print_exc()
        return Path("(not written: the disk is full)")
    return path


def _stage_main(stage: str, argv: list[str] | None, registry: Mapping[str, StageSpec]) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {registry[stage].module}")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="YAML under configs/")
    source.add_argument("--config-json", type=Path, help=argparse.SUPPRESS)  # written by the launcher
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override")
    parser.add_argument("--force", action="store_true", help="recompute even when cached")
    parser.add_argument("--stage", help=argparse.SUPPRESS)  # modules serving several stages
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    name = args.stage or stage
    if name not in registry:
        raise ConfigError(f"unknown stage {name!r}; stages are: {', '.join(registry)}")
    spec = registry[name]
    if args.config_json:
        request = json.loads(args.config_json.read_text())
        cfg = PipelineConfig.model_validate(request["config"])
        upstream = {n: ArtifactRef.model_validate(r) for n, r in request["upstream"].items()}
        force, config_name = bool(request["force"]) or args.force, str(args.config_json)
        expected_key = request.get("key")
    else:
        cfg = load_config(args.config, args.set)
        upstream, force, config_name, expected_key = None, args.force, args.config, None
    if spec.needs_gpus:  # checked where the stage runs; CPU stages of a GPU config run anywhere
        check_hardware(cfg.hardware, config_name, stage=spec.name)
    ensure_implemented(spec)
    store = ArtifactStore(cfg.run.artifacts_root)
    if upstream is None:
        upstream = resolve_upstream(spec, cfg, store, registry)
    with _progress_sink(spec.name):
        ref = run_stage(spec, cfg, upstream, store, force=force, expected_key=expected_key)
    if ref is None:
        return  # not rank 0: rank 0 reports the artifact
    if result := os.environ.get(RESULT_ENV):
        part = f"{result}.{os.getpid()}.part"
        Path(part).write_text(ref.model_dump_json())
        os.replace(part, result)
    print(ref.model_dump_json())  # one line, last: libraries may print to stdout before it


def _progress_sink(stage: str):
    if rank()[0] != 0:
        return nullcontext()  # one bar per stage, not one per process
    if os.environ.get(PROGRESS_ENV) == "1":
        return progress.marker_lines()
    return progress.terminal_bar(stage)
