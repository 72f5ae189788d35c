"""What an RL step reports (issue 11 point 7): one row per step in `curves.csv`, TensorBoard
scalars beside it, and `curves.png` drawn at the end of the stage.

Tool-error ratio is the share of tool calls whose status is not `ok`, over every
trajectory and within the correct ones (the paper's Figure 4: RoC lowers the second);
it and p_format are rollout/metrics.py's, as everywhere.
The time split is wall clock per phase of the step; rollout time is shared between
generation and tool calls in proportion to the seconds trajectories spent awaiting each
(they interleave, so the wall clock alone cannot separate them).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

from rollout.metrics import p_format, tool_error_ratio
from rollout.trajectory import Trajectory
from stagekit import artifacts
from training.selection import GroupSelection

PLOTS = (
    ("reward", ("reward", "accuracy")),
    ("kept group", ("positives_kept", "negatives_kept", "groups_dropped")),
    ("tool calls / trajectory", ("tool_calls_per_trajectory",)),
    ("tool-error ratio", ("tool_error_ratio", "tool_error_ratio_correct")),
    ("p_format", ("p_format",)),
    ("response length (tokens)", ("response_len_mean", "response_len_p50", "response_len_p90")),
    ("truncated share", ("truncation_ratio",)),
    ("turns", ("turns_mean",)),
    ("time split (s)", ("generation_s", "tool_s", "verification_s", "selection_s", "update_s")),
    ("tokens/s", ("tokens_per_s",)),
    ("loss", ("loss",)),
    ("grad norm", ("grad_norm",)),
    ("staleness (steps)", ("staleness_mean", "staleness_max")),
    ("PPO ratio", ("ratio_mean", "ratio_min", "ratio_max")),
    ("clipped share", ("clip_ratio",)),
)


def _quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def rollout_metrics(scored: Sequence[Trajectory], failed: int, selections: Sequence[GroupSelection],
                    accuracy_rewards: Sequence[float]) -> dict[str, float]:
    """Metrics of the rolled-out trajectories (failed ones left out, counted) and the kept groups."""
    n = max(len(scored), 1)
    lengths = [t.response_tokens for t in scored]
    outcomes = [t.outcome() for t in scored]
    return {
        "trajectories": len(scored), "failed": failed,
        "reward": sum(t.reward or 0.0 for t in scored) / n,
        "accuracy": sum(accuracy_rewards) / n,
        "positives_kept": sum(s.positives_kept for s in selections),
        "negatives_kept": sum(s.negatives_kept for s in selections),
        "groups_dropped": sum(s.dropped is not None for s in selections),
        "tool_calls_per_trajectory": sum(len(t.tool_calls) for t in scored) / n,
        "tool_error_ratio": tool_error_ratio(outcomes),
        "tool_error_ratio_correct": tool_error_ratio(outcomes, correct_only=True),
        "p_format": sum(p_format(t.turns) for t in scored) / n,
        "response_len_mean": sum(lengths) / n,
        "response_len_p50": _quantile(lengths, 0.5),
        "response_len_p90": _quantile(lengths, 0.9),
        "truncation_ratio": sum(t.finish_reason == "length" for t in scored) / n,
        "turns_mean": sum(t.num_turns for t in scored) / n,
    }


def time_split(scored: Sequence[Trajectory], rollout_s: float) -> dict[str, float]:
    waiting_gen = sum(t.timings.generation_s for t in scored)
    waiting_tool = sum(t.timings.tool_s for t in scored)
    share = waiting_gen / (waiting_gen + waiting_tool) if waiting_gen + waiting_tool > 0 else 1.0
    tokens = sum(t.generated_tokens for t in scored)
    return {"generation_s": rollout_s * share, "tool_s": rollout_s * (1 - share),
            "tokens_per_s": tokens / rollout_s if rollout_s > 0 else math.nan}


class RLCurves:
    """`curves.csv` (appended step by step, so a killed run keeps its rows) and TensorBoard."""

    def __init__(self, out_dir: Path, resume_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.csv_path = out_dir / artifacts.CURVES
        self.rows: list[dict] = []
        if self.csv_path.exists():
            with self.csv_path.open() as f:
                self.rows = [r for r in csv.DictReader(f) if int(r["step"]) <= resume_step]
        self.writer = SummaryWriter(str(out_dir / artifacts.TENSORBOARD))

    def log(self, row: dict) -> None:
        self.rows.append(row)
        columns = list(dict.fromkeys(k for r in self.rows for k in r))
        with self.csv_path.open("w", newline="") as f:  # rewritten: columns can appear mid-run (a first update)
            writer = csv.DictWriter(f, columns)
            writer.writeheader()
            writer.writerows(self.rows)
        for key, value in row.items():
            if isinstance(value, int | float) and key != "step":
                self.writer.add_scalar(f"rl/{key}", value, row["step"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def plot_rl_curves(csv_path: Path, png_path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    cols = 4
    fig, axes = plt.subplots(math.ceil(len(PLOTS) / cols), cols, figsize=(16, 3 * math.ceil(len(PLOTS) / cols)))
    steps = [int(r["step"]) for r in rows]
    for ax, (name, keys) in zip(axes.flat, PLOTS, strict=False):
        for key in keys:
            values = [float(r[key]) if r.get(key) not in ("", None) else math.nan for r in rows]
            ax.plot(steps, values, marker=".", linewidth=1, label=key)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if len(keys) > 1:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(PLOTS):]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
