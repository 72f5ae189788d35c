"""The learning proof's asynchronous arm (issue 26 point 5): GRPO-RoC with its rollouts up to
one step ahead of the trainer (`rl.max_staleness_steps: 1`) against the same run in step.

Both arms start from the same SFT checkpoint with the same seeds and generate the same
trajectories per step, each alone on the machine's cores. Two goals: wall time per step at
least `SPEEDUP_GOAL` times lower asynchronously (the mean of the stage's `step_s` over its
steps, the first included), and test pass@1 after the same steps within `WITHIN_SE` paired
standard errors of the synchronous arm's.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from evaluation.paired import paired_gain, z_score

SYNC, ASYNC = "grpo_roc", "grpo_roc_async"  # the arms of benchmarks/learning.py
SPEEDUP_GOAL = 1.5
WITHIN_SE = 2.0
# Where a step's time goes, per arm (curves.csv, training/rl.py): the trainer's wait for the
# step's rollouts, the update; and the rollouts' own time from their start (asynchronously
# it overlaps the step before), split into generation and tool calls by the trajectories' shares.
TIME_SPLIT = (("step_s", "step"), ("rollout_wall_s", "trainer waits for rollouts"), ("update_s", "update"),
              ("generation_s", "rollouts: generation"), ("tool_s", "rollouts: tool calls"))
PANELS = (("step_s", "wall time per step (s)"), ("staleness_mean", "staleness of trained trajectories (steps)"),
          ("ratio_std", "PPO ratio: standard deviation over loss tokens"), ("clip_ratio", "clipped share of tokens"))


def fmt(x: float | None, digits: int = 3) -> str:
    """A figure of the learning reports; "n/a" for a missing one (None, NaN)."""
    return "n/a" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _mean(df: pd.DataFrame, key: str) -> float:
    return float(df[key].mean()) if key in df and df[key].notna().any() else math.nan


def compare(curves: dict[str, pd.DataFrame], samples: dict[str, pd.DataFrame], durations: dict[str, float],
            sync: str = SYNC, async_: str = ASYNC) -> dict:
    """The figures of the comparison, as learning.json keeps them."""
    per_step = {arm: _mean(curves[arm], "step_s") for arm in (sync, async_)}
    diff, se, n = paired_gain(samples[async_], samples[sync])
    return {
        "step_s": per_step, "speedup": per_step[sync] / per_step[async_],
        "stage_s": {arm: durations.get(f"rl {arm}", math.nan) for arm in (sync, async_)},
        "pass1_async_minus_sync": (diff, se, n), "z": z_score(diff, se),
        "staleness_mean": {arm: _mean(curves[arm], "staleness_mean") for arm in (sync, async_)},
        "staleness_max": float(curves[async_]["staleness_max"].max()),
        "ratio_std": {arm: _mean(curves[arm], "ratio_std") for arm in (sync, async_)},
        "clip_ratio": {arm: _mean(curves[arm], "clip_ratio") for arm in (sync, async_)},
        "time_split": time_split(curves, (sync, async_)),
        "faster": per_step[sync] / per_step[async_] >= SPEEDUP_GOAL,
        "as_good": not math.isnan(se) and abs(diff) <= WITHIN_SE * se,
    }


def report_lines(c: dict, sync: str = SYNC, async_: str = ASYNC) -> list[str]:
    diff, se, _ = c["pass1_async_minus_sync"]
    return [
        "## Asynchronous RL (issue 26)", "",
        f"{async_} is {sync} with `rl.max_staleness_steps: 1`: same seeds, same trajectories per step, its "
        "rollouts up to one step ahead of the trainer. Each ran alone on every core.", "",
        "| | wall time per step (s, mean) | RL stage (min) | mean staleness | PPO ratio std | clipped share |",
        "|---|---|---|---|---|---|",
        *(f"| {arm} | {fmt(c['step_s'][arm], 2)} | {fmt(c['stage_s'][arm] / 60, 1)} | "
          f"{fmt(c['staleness_mean'][arm], 2)} | {fmt(c['ratio_std'][arm], 4)} | "
          f"{fmt(c['clip_ratio'][arm], 4)} |" for arm in (sync, async_)), "",
        f"- Faster per step by at least {SPEEDUP_GOAL:g}x: **{'yes' if c['faster'] else 'no'}** "
        f"({fmt(c['speedup'], 2)}x; the stage as a whole {fmt(c['stage_s'][sync] / c['stage_s'][async_], 2)}x).",
        f"- Test pass@1 within {WITHIN_SE:g} paired standard errors of the synchronous arm: "
        f"**{'yes' if c['as_good'] else 'no'}** ({async_} - {sync}: {fmt(diff)} ± {fmt(se)}, "
        f"z {fmt(c['z'], 1)}). No trained trajectory was more than {fmt(c['staleness_max'], 0)} step stale.",
        "", *time_split_lines(c["time_split"]),
        "", "![asynchronous against synchronous](async.png)", "",
    ]


def time_split(curves: dict[str, pd.DataFrame], arms: tuple[str, ...] = (SYNC, ASYNC)) -> dict[str, dict[str, float]]:
    return {arm: {key: _mean(curves[arm], key) for key, _ in TIME_SPLIT} for arm in arms}


def time_split_lines(split: dict[str, dict[str, float]]) -> list[str]:
    return ["Mean seconds per step:", "",
            "| arm | " + " | ".join(label for _, label in TIME_SPLIT) + " |", "|---|" + "---|" * len(TIME_SPLIT),
            *(f"| {arm} | " + " | ".join(fmt(row[key], 2) for key, _ in TIME_SPLIT) + " |"
              for arm, row in split.items())]


def main() -> None:
    """Print the time split of a written report: python -m benchmarks.learning_async REPORT_DIR."""
    import sys

    df = pd.read_csv(Path(sys.argv[1]) / "learning.csv")
    curves = {arm: g for arm, g in df.groupby("arm")}
    print("\n".join(time_split_lines(time_split(curves, tuple(a for a in (SYNC, ASYNC) if a in curves)))))


if __name__ == "__main__":
    main()


def plot(curves: dict[str, pd.DataFrame], png: Path, sync: str = SYNC, async_: str = ASYNC) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3.4))
    for ax, (key, title) in zip(axes, PANELS, strict=True):
        for arm, color in ((sync, "tab:blue"), (async_, "tab:green")):
            df = curves[arm]
            if key in df:
                ax.plot(df["step"], df[key], marker=".", color=color, label=arm)
        finish_axis(ax, title, fontsize=9)
    save(fig, png)


def finish_axis(ax, title: str, fontsize: float | None = None) -> None:  # noqa: ANN001
    """Title, step axis, grid and legend, as every panel of the learning report has them."""
    ax.set_title(title, fontsize=fontsize)
    ax.set_xlabel("RL step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def save(fig, png: Path) -> None:  # noqa: ANN001
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
