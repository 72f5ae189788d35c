"""The toy stages that take a work dir (`resumable`, `ranks`); see toy_long.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from stagekit import progress
from stagekit.workdir import WorkDir


def run(cfg, inputs: dict[str, Path], out_dir: Path, work: WorkDir, name: str) -> dict:
    return (_resumable if name == "resumable" else _ranks)(cfg, inputs, out_dir, work)


def _resumable(cfg, inputs: dict[str, Path], out_dir: Path, work: WorkDir) -> dict:
    ckpt = work.latest()
    state = ckpt.state() if ckpt else {"values": []}
    log = Path(os.environ["RSTAR_TOY_STEPS"])
    for step in range(ckpt.step if ckpt else 0, cfg.steps):
        with log.open("a") as fh:
            fh.write(f"{step}\n")
        time.sleep(float(os.environ.get("RSTAR_TOY_STEP_S", "0")))
        state["values"].append((state["values"][-1] if state["values"] else 1) * 3 % 1009 + step)
        work.save(step + 1, state)
        progress.report(step + 1, cfg.steps)
    (out_dir / "values.json").write_text(json.dumps(state["values"]))
    return {"steps": cfg.steps, "last": state["values"][-1]}


def _ranks(cfg, inputs: dict[str, Path], out_dir: Path, work: WorkDir) -> dict:
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    (out_dir / f"rank-{rank}.txt").write_text(f"{rank} of {world}")
    deadline = time.time() + 120
    while rank == 0 and len(list(out_dir.glob("rank-*.txt"))) < world and time.time() < deadline:
        time.sleep(0.1)  # a file barrier: rank 0 commits only after every rank wrote
    return {"world_size": world}


def main() -> None:
    from toy_long import REGISTRY

    from orchestrator.cli import stage_main

    stage_main("resumable", registry=REGISTRY)


if __name__ == "__main__":
    main()
