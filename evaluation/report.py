"""Tables and plots of evaluation results: one checkpoint, and checkpoints side by side.

An evaluation's results (evaluation/results.py) hold, per benchmark, the numbers of
rollout/metrics.py; the comparison puts the checkpoints in pipeline order (SFT, stage 1,
2, 3) beside the paper's pass@1 (SPEC §9).
"""

from __future__ import annotations

import math
from pathlib import Path

from configs.eval import PAPER_PASS1
from evaluation.results import EvalResults, GeneralTaskResult
from rollout.metrics import SampleSummary


def pct(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _estimators(benches: dict[str, SampleSummary]) -> list[str]:
    """pass@k (k > 1) and maj@k names any benchmark reports, in order."""
    names = {f"pass@{k}" for m in benches.values() for k in m.pass_at}
    names |= {f"maj@{m.maj_k}" for m in benches.values() if m.maj_k is not None}
    return sorted(names, key=lambda k: (k[:4], int(k.split("@")[1])))


def checkpoint_table(results: EvalResults) -> str:
    """Benchmarks × metrics, in percent where the metric is a rate."""
    benches = results.benchmarks
    ks = _estimators(benches)
    head = ["benchmark", "problems", "samples", "pass@1 (%)", *(f"{k} (%)" for k in ks), "length (tokens)",
            "tool calls", "tool errors (%)", "truncated (%)", "failed"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, m in benches.items():
        row = [name, str(m.problems), str(m.samples), f"{pct(m.pass1)} ± {pct(m.pass1_stderr)}",
               *(pct(m.number(k)) for k in ks), num(m.response_tokens_mean, 0), num(m.tool_calls_per_trajectory),
               pct(m.tool_error_ratio), pct(m.truncation_ratio), str(m.failed)]
        lines.append("| " + " | ".join(row) + " |")
    for name, reason in results.skipped.items():
        lines.append(f"| {name} | skipped: {reason[:300]} |" + " |" * (len(head) - 2))
    return "\n".join(lines)


def general_table(general: dict[str, GeneralTaskResult]) -> str:
    if not general:
        return ""
    lines = ["| lm-eval task | status | metrics |", "|---|---|---|"]
    for task, r in general.items():
        if r.status == "ok":
            shown = ", ".join(f"{k} {v:.3f}" for k, v in r.metrics.items() if "stderr" not in k)
            lines.append(f"| {task} | ok ({r.documents} documents) | {shown} |")
        else:
            lines.append(f"| {task} | unavailable | {r.reason} |")
    return "\n".join(lines)


def checkpoint_card(results: EvalResults) -> str:
    cfg = results.settings
    parts = [f"# Evaluation of `{results.checkpoint}`\n",
             f"{cfg.samples_per_problem} samples per problem at temperature {cfg.temperature}, "
             f"up to {cfg.max_response_tokens} tokens and {cfg.max_turns} turns, with the tool. "
             "pass@1 is the mean correctness over samples and problems (± standard error over problems). "
             f"Samples drawn this run: {results.drawn}, reused from earlier runs: {results.reused}.\n",
             checkpoint_table(results)]
    if rejects := {k: v for k, v in results.rejects.items() if v}:
        parts.append("\nRows not usable (see rejects/): " + ", ".join(f"{k} {v}" for k, v in rejects.items()))
    if general := general_table(results.general):
        parts.append("\n## General abilities (lm-eval)\n\n" + general)
    return "\n".join(parts) + "\n"


def comparison_table(runs: list[tuple[str, EvalResults]], metric: str = "pass@1") -> str:
    """Benchmarks × checkpoints for one metric; pass@1 also shows the paper's number."""
    names = list(dict.fromkeys(b for _, r in runs for b in r.benchmarks))
    paper = metric == "pass@1"
    head = ["benchmark", *(label for label, _ in runs), *(["rStar2-Agent-14B (paper)"] if paper else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b in names:
        cells = []
        for _, r in runs:
            m = r.benchmarks.get(b)
            if m is None:
                cells.append("–")
            elif metric == "pass@1":
                cells.append(f"{pct(m.pass1)} ± {pct(m.pass1_stderr)}")
            else:
                cells.append(num(m.number(metric), 0 if metric == "response_tokens_mean" else 2))
        lines.append("| " + " | ".join([b, *cells, *([num(PAPER_PASS1.get(b), 1)] if paper else [])]) + " |")
    return "\n".join(lines)


def comparison_card(runs: list[tuple[str, EvalResults]], gains: str = "") -> str:
    """The comparison; `gains` is a section placed after pass@1 (evaluation/paired.py writes it)."""
    return ("# Checkpoints compared\n\npass@1 (%), ± standard error over problems; the paper's column is "
            "rStar2-Agent-14B (SPEC §9), for orientation.\n\n" + comparison_table(runs)
            + gains
            + "\n\n## Mean response length (tokens)\n\n" + comparison_table(runs, "response_tokens_mean")
            + "\n\n## Tool calls per trajectory\n\n" + comparison_table(runs, "tool_calls_per_trajectory") + "\n")


def plot(runs: list[tuple[str, EvalResults]], png: Path) -> None:
    """pass@1 with error bars and mean response length, per benchmark, one bar per checkpoint."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(b for _, r in runs for b in r.benchmarks))
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / max(len(runs), 1)
    for n, (label, r) in enumerate(runs):
        xs = [i + n * width for i in range(len(names))]
        get = [r.benchmarks.get(b, SampleSummary()) for b in names]
        axes[0].bar(xs, [100 * _zero(m.pass1) for m in get], width,
                    yerr=[100 * _zero(m.pass1_stderr) for m in get], label=label, capsize=3)
        axes[1].bar(xs, [_zero(m.response_tokens_mean) for m in get], width, label=label)
    for ax, title in zip(axes, ("pass@1 (%)", "mean response length (tokens)"), strict=True):
        ax.set_xticks([i + width * (len(runs) - 1) / 2 for i in range(len(names))], names, rotation=20)
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def _zero(x: float) -> float:
    """A bar's height: nothing measured draws no bar."""
    return 0.0 if math.isnan(x) else x
