"""Three toy stages a -> b -> c for testing the runner, the store and the flow's caching.

Each run appends its name to the file in $RSTAR_TOY_LOG, so tests count executions.
$RSTAR_TOY_SLEEP_S makes stage `a` write half its output, then sleep (kill tests).
$RSTAR_TOY_SALT goes into every output: a recompute under another salt differs.
$RSTAR_TOY_FIGURES makes stage `c` write a plot and a 300-step curve as a trainer would.
$RSTAR_TOY_EACH_S makes every stage take that long (the graph test).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from orchestrator.stages import StageSpec


def run(cfg, inputs: dict[str, Path], out_dir: Path, name: str) -> dict[str, float]:
    with open(os.environ["RSTAR_TOY_LOG"], "a") as log:
        log.write(name + "\n")
    upstream = {k: json.loads((v / "value.json").read_text()) for k, v in inputs.items()}
    (out_dir / "part1.txt").write_text("first half")
    time.sleep(float(os.environ.get("RSTAR_TOY_EACH_S", "0")))
    sleep_s = float(os.environ.get("RSTAR_TOY_SLEEP_S", "0"))
    if name == "a" and sleep_s:
        (out_dir.parent / "STARTED").write_text(str(out_dir))
        time.sleep(sleep_s)
    value = {"name": name, "steps": cfg.steps, "upstream": upstream, "salt": os.environ.get("RSTAR_TOY_SALT", "")}
    (out_dir / "value.json").write_text(json.dumps(value, sort_keys=True))
    if name == "c" and os.environ.get("RSTAR_TOY_FIGURES"):
        _figures(out_dir)
    return {"steps": cfg.steps}


def _figures(out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([1, 2, 3], [3, 1, 2])
    fig.savefig(out_dir / "curves.png")
    plt.close(fig)
    rows = "".join(f"{s},{1 / s:.4f}\n" for s in range(1, 301))
    (out_dir / "curves.csv").write_text("step,loss\n" + rows)


TOY_STAGES = (
    StageSpec("a", "toy_stages", lambda c: {"cfg": c.rl.stage1, "name": "a"}),
    StageSpec("b", "toy_stages", lambda c: {"cfg": c.rl.stage2, "name": "b"}, inputs={"a": "a"}),
    StageSpec("c", "toy_stages", lambda c: {"cfg": c.rl.stage3, "name": "c"}, inputs={"b": "b"}),
)
GRAPH = (  # a diamond: b and c both read a; d reads both
    TOY_STAGES[0],
    StageSpec("b", "toy_stages", lambda c: {"cfg": c.rl.stage2, "name": "b"}, inputs={"a": "a"}),
    StageSpec("c", "toy_stages", lambda c: {"cfg": c.rl.stage3, "name": "c"}, inputs={"a": "a"}),
    StageSpec("d", "toy_stages", lambda c: {"cfg": c.rl.stage1, "name": "d"}, inputs={"b": "b", "c": "c"}),
)
UNFINISHED = (
    *TOY_STAGES,
    StageSpec("d", "toy_stages", lambda c: {"cfg": c.eval, "name": "d"}, inputs={"c": "c"},
              delivered_by="issue #99 (toy)"),
)


def executions(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []
