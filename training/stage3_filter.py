"""Stage `stage3_filter`: keep the problems the latest policy has not mastered (SPEC §7).

Inputs, by role: `policy` (the stage-2 policy) and `problems` (the curated set). The
policy rolls out `rollouts_per_problem` trajectories per problem (the first
`rl.stage3.problems` of the curated set, stage 3's turn and length limits, RL
temperature) and every problem it solved at least `drop_when_solved` times is removed.
Failed trajectories (engine errors) are left out of a problem's count, and a problem with
any of them is kept: it was not shown to be solved.
Writes `problems.parquet` (what stage 3 trains on), `solve_rates.csv` (every problem's
solved / scored count), `solve_rates.png` (the histogram) and `card.md`.

    python -m training.stage3_filter --config configs/tiny.yaml
"""

from __future__ import annotations

import asyncio
import csv
import logging
from collections import Counter
from pathlib import Path

from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from configs.schema import RLStageConfig, Stage3FilterConfig
from datalib.tables import read_problems, write_problems
from rollout.groups import Problem
from rollout.runtime import build_runtime
from stagekit import artifacts, progress

log = logging.getLogger(__name__)


async def _solve_counts(model: str, problems: list, cfg: Stage3FilterConfig, limits: RLStageConfig,
                        rollout: RolloutConfig, sandbox: SandboxConfig, temperature: float,
                        seed: int) -> list[tuple[int, int, int]]:
    """(solved, scored, failed) per problem."""
    settings = rollout.sampling(temperature, limits.max_response_tokens, limits.max_turns, seed)
    async with build_runtime(rollout, sandbox, model, model, progress=progress.report) as rt:
        groups = await rt.sample_and_score([Problem(p.problem, str(p.answer)) for p in problems],
                                           cfg.rollouts_per_problem, settings)
    return [(g.solved, len(g.scored), g.failed) for g in groups]


def _histogram(counts: list[tuple[int, int, int]], rollouts: int, png: Path) -> Counter:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hist = Counter(solved for solved, _, _ in counts)
    xs = list(range(rollouts + 1))
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar(xs, [hist.get(x, 0) for x in xs])
    ax.set_xlabel(f"times solved out of {rollouts}")
    ax.set_ylabel("problems")
    ax.set_title("stage 3 filter: solve counts of the stage-2 policy")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return hist


def run(cfg: Stage3FilterConfig, limits: RLStageConfig, rollout: RolloutConfig, sandbox: SandboxConfig,
        temperature: float, seed: int, inputs: dict[str, Path], out_dir: Path) -> dict:
    problems = read_problems(inputs["problems"] / artifacts.PROBLEMS)[: limits.problems]  # None: all
    model = str(inputs["policy"] / artifacts.MODEL)
    counts = asyncio.run(_solve_counts(model, problems, cfg, limits, rollout, sandbox, temperature, seed))
    kept = [p for p, (solved, _, failed) in zip(problems, counts, strict=True)
            if failed or solved < cfg.drop_when_solved]
    write_problems(out_dir / artifacts.PROBLEMS, kept)
    with (out_dir / artifacts.SOLVE_RATES).open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "solved", "scored", "failed", "kept"])
        for p, (solved, scored, failed) in zip(problems, counts, strict=True):
            writer.writerow([p.id, solved, scored, failed, int(failed > 0 or solved < cfg.drop_when_solved)])
    hist = _histogram(counts, cfg.rollouts_per_problem, out_dir / artifacts.SOLVE_RATES_PLOT)
    removed = len(problems) - len(kept)
    (out_dir / artifacts.CARD).write_text(
        f"# Stage 3 filter\n\n{len(problems)} problems, {cfg.rollouts_per_problem} rollouts each by `{model}`; "
        f"{removed} solved at least {cfg.drop_when_solved} times were removed, {len(kept)} remain.\n\n"
        "| times solved | problems |\n|---|---|\n"
        + "".join(f"| {k} | {hist.get(k, 0)} |\n" for k in range(cfg.rollouts_per_problem + 1)))
    log.info("stage3_filter: %d of %d problems remain", len(kept), len(problems))
    return {"problems_in": len(problems), "problems_kept": len(kept), "problems_removed": removed,
            "failed_trajectories": sum(c[2] for c in counts),
            **{f"solved_{k}_of_{cfg.rollouts_per_problem}": hist.get(k, 0)
               for k in range(cfg.rollouts_per_problem + 1)}}


def main() -> None:
    from orchestrator.cli import stage_main

    stage_main("stage3_filter")


if __name__ == "__main__":
    main()
