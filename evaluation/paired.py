"""Gains between two evaluations of the same test set, paired by problem.

Two checkpoints scored on the same problems with the same sample seeds differ by much less
noise than their separate standard errors suggest: the per-problem difference of pass@1,
averaged over problems, has a standard error over problems of its own. A gain "holds" at
`Z_HOLDS` of them (the learning proof and the demo's report use the same rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from evaluation.evaluate import sample_outcomes
from evaluation.report import num, pct
from rollout.metrics import paired_difference
from stagekit import artifacts

Z_HOLDS = 3.0


def pass1_by_problem(samples: pd.DataFrame) -> dict[str, float]:
    return {pid: sum(o.reward for o in g) / len(g) for pid, g in sample_outcomes(samples).items()}


def paired_gain(after: pd.DataFrame, before: pd.DataFrame) -> tuple[float, float, int]:
    """Mean per-problem pass@1 difference, its standard error over problems, and n."""
    d = paired_difference(pass1_by_problem(after), pass1_by_problem(before))
    return d.mean, d.stderr if d.units > 1 else math.nan, d.units


def holds(gain: float, se: float) -> bool:
    """A gain at least `Z_HOLDS` standard errors above zero (a gain with no spread at all counts)."""
    return gain > 0 and (se == 0 or gain / se >= Z_HOLDS)


def z_score(gain: float, se: float) -> float:
    return gain / se if se and not math.isnan(se) else math.nan


def read_samples(artifact: Path, benchmark: str) -> pd.DataFrame | None:
    """An evaluation artifact's samples of one benchmark, or None where it kept none."""
    path = artifact / artifacts.SAMPLES / f"{benchmark}.parquet"
    return pd.read_parquet(path) if path.exists() else None


REFERENCES = ("base", "sft")  # the checkpoints every later one is compared with, paired by problem


@dataclass(frozen=True)
class Gain:
    """pass@1 of `checkpoint` minus that of `reference` on `benchmark`, paired by problem."""

    benchmark: str
    checkpoint: str
    reference: str
    gain: float
    stderr: float
    problems: int
    z: float


def gains_section(gains: list[Gain]) -> str:
    """The paired gains as a table, and whether the last checkpoint beats SFT by Z_HOLDS errors."""
    if not gains:
        return ""
    refs = list(dict.fromkeys(g.reference for g in gains))
    head = ["benchmark", "checkpoint", *(f"over {r}" for r in refs)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    cells: dict[tuple[str, str], dict[str, Gain]] = {}
    for g in gains:
        cells.setdefault((g.benchmark, g.checkpoint), {})[g.reference] = g
    for (bench, label), by_ref in cells.items():
        row = [f"{100 * g.gain:+.1f} ± {pct(g.stderr)} (z {num(g.z, 1)})" if (g := by_ref.get(r)) else "–"
               for r in refs]
        lines.append("| " + " | ".join([bench, label, *row]) + " |")
    verdicts = []
    for bench in dict.fromkeys(g.benchmark for g in gains):
        over_sft = [g for g in gains if g.benchmark == bench and g.reference == "sft"]
        if over_sft:
            last = over_sft[-1]
            verdict = "holds" if holds(last.gain, last.stderr) else "does not hold"
            verdicts.append(f"- {bench}: {last.checkpoint} over SFT by at least {Z_HOLDS:g} paired standard "
                            f"errors: **{verdict}** ({100 * last.gain:+.1f} ± {pct(last.stderr)} points, "
                            f"{last.problems} problems).")
    return ("\n\n## Gains, paired by problem\n\npass@1 percentage points, ± standard error of the per-problem "
            "difference (the same problems and sample seeds in every evaluation), and z = gain / error.\n\n"
            + "\n".join(lines) + ("\n\n" + "\n".join(verdicts) if verdicts else ""))
