"""Training curves: one CSV row per logged step and a PNG per metric (issue 10 point 5).

`CurveLogger` is a transformers `TrainerCallback`: it keeps loss, learning rate, grad
norm and tokens/s (from TRL's cumulative `num_tokens` and the wall clock between logs),
appends them to `curves.csv` as they come (a killed run keeps what it logged) and draws
`curves.png` at the end. TensorBoard event files go beside them (`tensorboard/`, through
transformers' `TensorBoardCallback`); the Prefect task shows the PNG and the table.
"""

from __future__ import annotations

import csv
import math
import time
from pathlib import Path

from transformers import TrainerCallback

from stagekit import artifacts, progress

COLUMNS = ("step", "epoch", "loss", "learning_rate", "grad_norm", "tokens_per_s", "num_tokens")


class CurveLogger(TrainerCallback):
    def __init__(self, out_dir: Path) -> None:
        self.csv_path = out_dir / artifacts.CURVES
        self.rows: list[dict] = []
        self._last: tuple[float, float] | None = None  # (time, num_tokens) at the previous log

    def on_train_begin(self, args, state, control, **kwargs):
        if self.csv_path.exists():  # resumed: keep the curve of the first attempt up to here
            with self.csv_path.open() as f:
                self.rows = [r for r in csv.DictReader(f) if int(r["step"]) <= state.global_step]
        self._write_all()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs or not state.is_world_process_zero:
            return
        now, tokens = time.monotonic(), float(logs.get("num_tokens", math.nan))
        rate = math.nan
        if self._last is not None and now > self._last[0]:
            rate = (tokens - self._last[1]) / (now - self._last[0])
        self._last = (now, tokens)
        row = {"step": state.global_step, "epoch": logs.get("epoch"), "loss": logs.get("loss"),
               "learning_rate": logs.get("learning_rate"), "grad_norm": logs.get("grad_norm"),
               "tokens_per_s": rate, "num_tokens": tokens}
        self.rows.append(row)
        with self.csv_path.open("a", newline="") as f:
            csv.DictWriter(f, COLUMNS).writerow(row)
        progress.report(state.global_step, state.max_steps, f"sft: step {state.global_step}/{state.max_steps}")

    def _write_all(self) -> None:
        with self.csv_path.open("w", newline="") as f:
            writer = csv.DictWriter(f, COLUMNS)
            writer.writeheader()
            writer.writerows(self.rows)


def plot_curves(csv_path: Path, png_path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.2))
    steps = [int(r["step"]) for r in rows]
    for ax, key in zip(axes, ("loss", "learning_rate", "grad_norm", "tokens_per_s"), strict=True):
        values = [float(r[key]) if r[key] not in ("", None) else math.nan for r in rows]
        ax.plot(steps, values, marker=".", linewidth=1)
        ax.set_title(key.replace("_", " "))
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
