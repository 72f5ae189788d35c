"""The learning proof over seeds: each claim per seed and pooled (`python -m benchmarks.learning --seeds N`).

Each seed's report (benchmarks/learning_report.py, `seed-<n>/learning.json`) holds its paired
estimates. Pooled, a claim's estimate is the mean over seeds and its standard error
sqrt(sum of the seeds' squared errors) / seeds: the seeds train independently, and each
seed's error already holds the test problems' spread, since every seed is scored on the same
problems. A pooled claim holds at the same 3 standard errors as a single run's; the table
also counts the seeds where it held on its own.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from benchmarks.learning import ARMS
from benchmarks.learning_async import ASYNC, SPEEDUP_GOAL, SYNC, WITHIN_SE, fmt
from evaluation.paired import Z_HOLDS, holds, z_score


def pooled(estimates: list[tuple[float, float]]) -> tuple[float, float]:
    """Mean of independent estimates and its standard error."""
    k = len(estimates)
    return sum(m for m, _ in estimates) / k, math.sqrt(sum(se ** 2 for _, se in estimates)) / k


def _plot(per_seed: dict[int, dict], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = sorted(per_seed)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    labels = ("sft", *ARMS)
    width = 0.8 / len(labels)
    for n, label in enumerate(labels):
        xs = [i + n * width for i in range(len(seeds))]
        res = [per_seed[s]["results"][label] for s in seeds]
        axes[0].bar(xs, [r["pass@1"] for r in res], width, yerr=[r["pass@1_stderr"] for r in res],
                    capsize=3, label=label)
        err = [per_seed[s]["error_ratio_correct"][label] for s in seeds]
        axes[1].bar(xs, [e[0] for e in err], width, yerr=[e[1] for e in err], capsize=3, label=label)
    for ax, title in zip(axes, ("test pass@1", "tool-error ratio within correct test samples"), strict=True):
        ax.set_xticks([i + width * (len(labels) - 1) / 2 for i in range(len(seeds))], [f"seed {s}" for s in seeds])
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def _async_lines(per_seed: dict[int, dict], summary: dict) -> list[str]:
    """Issue 26's two goals per seed and pooled: wall time per step, and pass@1 against the synchronous arm."""
    runs = {seed: s["async"] for seed, s in sorted(per_seed.items()) if s.get("async")}
    if not runs:
        return []
    diffs = [tuple(c["pass1_async_minus_sync"][:2]) for c in runs.values()]
    mean, se = pooled(diffs)
    speedups = [c["speedup"] for c in runs.values()]
    speedup = sum(speedups) / len(speedups)
    within = not math.isnan(se) and abs(mean) <= WITHIN_SE * se
    summary["async"] = {"speedup_per_seed": speedups, "speedup": speedup, "pass1_diff_per_seed": diffs,
                        "pass1_diff": (mean, se), "within": within}
    lines = ["", f"Asynchronous GRPO-RoC (`rl.max_staleness_steps: 1`) against the synchronous arm (issue 26; goals: "
             f"at least {SPEEDUP_GOAL:g}x faster per step, test pass@1 within {WITHIN_SE:g} standard errors).", "",
             "| seed | wall time per step, sync -> async (s) | speedup | pass@1 async - sync (z) | max staleness |",
             "|---|---|---|---|---|"]
    for seed, c in runs.items():
        d, d_se = c["pass1_async_minus_sync"][:2]
        lines.append(f"| {seed} | {c['step_s'][SYNC]:.2f} -> {c['step_s'][ASYNC]:.2f} | {c['speedup']:.2f}x | "
                     f"{fmt(d)} ± {fmt(d_se)} ({fmt(z_score(d, d_se), 1)}) | {c['staleness_max']:.0f} |")
    lines.append(f"| pooled | | **{speedup:.2f}x** (mean) | {fmt(mean)} ± {fmt(se)} ({fmt(z_score(mean, se), 1)}): "
                 f"**{'within' if within else 'not within'} {WITHIN_SE:g} se** | |")
    return lines


def write_seeds_report(reports: dict[int, Path], out: Path) -> Path:
    """Write seeds.md, seeds.json and seeds.png into `out` from each seed's report directory."""
    per_seed = {seed: json.loads((path / "learning.json").read_text()) for seed, path in reports.items()}
    claims: dict[str, list[tuple[float, float]]] = {f"RL ({arm}) - SFT, test pass@1": [] for arm in ARMS}
    claims["GRPO-RoC - GRPO, tool-error ratio in correct test samples"] = []
    for s in per_seed.values():
        for arm in ARMS:
            gain, se, _ = s["gains"][arm]
            claims[f"RL ({arm}) - SFT, test pass@1"].append((gain, se))
        claims["GRPO-RoC - GRPO, tool-error ratio in correct test samples"].append(
            tuple(s["error_ratio_correct_roc_minus_grpo"][:2]))
    seeds = sorted(per_seed)
    lines = ["# The learning proof over seeds", "",
             f"Seeds {', '.join(map(str, seeds))} (`model.tiny.init_seed`, `sft.seed`, `rl.seed`), the same "
             "demonstrations, RL problems and test split. Each cell: estimate ± standard error (z); pooled: mean "
             f"over seeds, error sqrt(sum se^2) / seeds. A claim holds at {Z_HOLDS:g} standard errors "
             "(the tool-error claim in the falling direction).", "",
             "| claim | " + " | ".join(f"seed {s}" for s in seeds)
             + " | pooled | holds (pooled) | seeds where it holds |",
             "|---|" + "---|" * (len(seeds) + 3)]
    summary = {}
    for name, ests in claims.items():
        sign = -1.0 if name.startswith("GRPO-RoC") else 1.0  # errors should fall
        mean, se = pooled(ests)
        held = sum(holds(sign * m, s) for m, s in ests)
        cells = [f"{fmt(m)} ± {fmt(s)} ({fmt(z_score(m, s), 1)})" for m, s in ests]
        verdict = "**holds**" if holds(sign * mean, se) else "does not hold"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {fmt(mean)} ± {fmt(se)} "
                     f"({fmt(z_score(mean, se), 1)}) | {verdict} | {held} of {len(ests)} |")
        summary[name] = {"per_seed": ests, "pooled": (mean, se), "holds": holds(sign * mean, se), "seeds_held": held}
    lines += ["", "| seed | SFT pass@1 | " + " | ".join(f"{a} pass@1" for a in ARMS) + " | wall time |",
              "|---|---|" + "---|" * (len(ARMS) + 1)]
    for seed in seeds:
        r = per_seed[seed]["results"]
        total = per_seed[seed]["timings_s"].get("total", math.nan)
        lines.append(f"| {seed} | " + " | ".join(f"{fmt(r[k]['pass@1'])} ± {fmt(r[k]['pass@1_stderr'])}"
                                                for k in ("sft", *ARMS)) + f" | {total / 60:.1f} min |")
    lines += _async_lines(per_seed, summary)
    lines += ["", "Per-seed reports: " + ", ".join(f"[seed {s}](seed-{s}/learning.md)" for s in seeds) + ".", "",
              "![per seed](seeds.png)", ""]
    out.mkdir(parents=True, exist_ok=True)
    (out / "seeds.md").write_text("\n".join(lines))
    (out / "seeds.json").write_text(json.dumps(summary, indent=1))
    _plot(per_seed, out / "seeds.png")
    return out
