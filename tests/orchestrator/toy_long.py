"""Toy long stages for the launcher, resume and progress tests: `long` here, `resumable` and
`ranks` (which take a work dir) in toy_resume.py. Run as `python -m toy_long` with
tests/pipeline on PYTHONPATH (the launcher starts them that way).

Behaviour comes from the environment, which the launched child inherits:
- RSTAR_TOY_FAIL: `long` raises RuntimeError with this text after its first lines;
- RSTAR_TOY_SPAWN: a directory; `long` starts two grandchildren (one in a session of its
  own, as a daemon would), writes their pids there, then sleeps;
- RSTAR_TOY_STEPS: a file `resumable` appends each step it computes to;
- RSTAR_TOY_STEP_S: seconds each step of `resumable` takes;
- RSTAR_TOY_TQDM: `long` draws a tqdm bar, as a library would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.stages import StageSpec
from stagekit import progress

MARKER = "rstar-toy-grandchild"  # in the grandchildren's command lines, for the survivor scan


def run(cfg, inputs: dict[str, Path], out_dir: Path) -> dict:
    print("toy-long: started, writing to stdout", flush=True)
    print("toy-long: a line on stderr", file=sys.stderr, flush=True)
    if message := os.environ.get("RSTAR_TOY_FAIL"):
        raise RuntimeError(message)
    if spawn := os.environ.get("RSTAR_TOY_SPAWN"):
        sleeper = [sys.executable, "-c", "import time, sys; time.sleep(600)", MARKER, spawn]
        kids = [subprocess.Popen(sleeper), subprocess.Popen(sleeper, start_new_session=True)]
        (Path(spawn) / "pids.json").write_text(json.dumps([os.getpid(), *(k.pid for k in kids)]))
        time.sleep(600)
    if os.environ.get("RSTAR_TOY_TQDM"):  # a library's bar, as transformers draws when it saves
        from tqdm.auto import tqdm

        for _ in tqdm(range(3), desc="Writing model shards"):
            time.sleep(0.01)
    for i in range(cfg.steps):
        with progress.step(i, cfg.steps, f"step {i}"):
            for batch in range(4):
                progress.report(batch + 1, 4, f"batch {batch}")
    (out_dir / "value.json").write_text(json.dumps({"steps": cfg.steps}))
    return {"steps": cfg.steps, "omp_threads": int(os.environ.get("OMP_NUM_THREADS", "0"))}


LONG = StageSpec("long", "toy_long", lambda c: {"cfg": c.rl.stage1}, long_running=True, distributed=True)
RESUMABLE = StageSpec("resumable", "toy_resume", lambda c: {"cfg": c.rl.stage2, "name": "resumable"},
                      long_running=True)
RANKS = StageSpec("ranks", "toy_resume", lambda c: {"cfg": c.rl.stage3, "name": "ranks"}, long_running=True,
                  distributed=True)
REGISTRY = {s.name: s for s in (LONG, RESUMABLE, RANKS)}


def main() -> None:
    from orchestrator.cli import stage_main

    stage_main("long", registry=REGISTRY)


if __name__ == "__main__":
    main()
