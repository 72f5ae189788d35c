"""Tables and plots of evaluation results: one checkpoint, and checkpoints side by side.

`results.json` of an evaluation holds, per benchmark, the metrics of
evaluation/metrics.py; the comparison puts the checkpoints in pipeline order (SFT,
stage 1, 2, 3) beside the paper's pass@1 (SPEC §9).
"""

from __future__ import annotations

import math
from pathlib import Path

from configs.eval import PAPER_PASS1


def _pct(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def _num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def checkpoint_table(results: dict) -> str:
    """Benchmarks × metrics, in percent where the metric is a rate."""
    benches = results["benchmarks"]
    ks = sorted({k for m in benches.values() for k in m if k.startswith(("pass@", "maj@")) and k != "pass@1"
                 and not k.endswith("stderr")}, key=lambda k: (k[:4], int(k.split("@")[1])))
    head = ["benchmark", "problems", "samples", "pass@1 (%)", *(f"{k} (%)" for k in ks), "length (tokens)",
            "tool calls", "tool errors (%)", "truncated (%)", "failed"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, m in benches.items():
        row = [name, str(m.get("problems", 0)), str(m.get("samples", 0)),
               f"{_pct(m.get('pass@1'))} ± {_pct(m.get('pass@1_stderr'))}", *(_pct(m.get(k)) for k in ks),
               _num(m.get("response_tokens_mean"), 0), _num(m.get("tool_calls_per_trajectory")),
               _pct(m.get("tool_error_ratio")), _pct(m.get("truncation_ratio")), str(m.get("failed", 0))]
        lines.append("| " + " | ".join(row) + " |")
    for name, reason in results.get("skipped", {}).items():
        lines.append(f"| {name} | skipped: {reason[:300]} |" + " |" * (len(head) - 2))
    return "\n".join(lines)


def general_table(general: dict) -> str:
    if not general:
        return ""
    lines = ["| lm-eval task | status | metrics |", "|---|---|---|"]
    for task, r in general.items():
        if r["status"] == "ok":
            shown = ", ".join(f"{k} {v:.3f}" for k, v in r["metrics"].items() if "stderr" not in k)
            lines.append(f"| {task} | ok ({r.get('documents')} documents) | {shown} |")
        else:
            lines.append(f"| {task} | unavailable | {r['reason']} |")
    return "\n".join(lines)


def checkpoint_card(results: dict) -> str:
    cfg = results["settings"]
    parts = [f"# Evaluation of `{results['checkpoint']}`\n",
             f"{cfg['samples_per_problem']} samples per problem at temperature {cfg['temperature']}, "
             f"up to {cfg['max_response_tokens']} tokens and {cfg['max_turns']} turns, with the tool. "
             "pass@1 is the mean correctness over samples and problems (± standard error over problems). "
             f"Samples drawn this run: {results['drawn']}, reused from earlier runs: {results['reused']}.\n",
             checkpoint_table(results)]
    if rejects := {k: v for k, v in results.get("rejects", {}).items() if v}:
        parts.append("\nRows not usable (see rejects/): " + ", ".join(f"{k} {v}" for k, v in rejects.items()))
    if general := general_table(results.get("general", {})):
        parts.append("\n## General abilities (lm-eval)\n\n" + general)
    return "\n".join(parts) + "\n"


def comparison_table(runs: list[tuple[str, dict]], metric: str = "pass@1") -> str:
    """Benchmarks × checkpoints for one metric; pass@1 also shows the paper's number."""
    names = list(dict.fromkeys(b for _, r in runs for b in r["benchmarks"]))
    paper = metric == "pass@1"
    head = ["benchmark", *(label for label, _ in runs), *(["rStar2-Agent-14B (paper)"] if paper else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b in names:
        cells = []
        for _, r in runs:
            m = r["benchmarks"].get(b)
            if m is None:
                cells.append("–")
            elif metric == "pass@1":
                cells.append(f"{_pct(m.get('pass@1'))} ± {_pct(m.get('pass@1_stderr'))}")
            else:
                cells.append(_num(m.get(metric), 0 if metric == "response_tokens_mean" else 2))
        lines.append("| " + " | ".join([b, *cells, *([_num(PAPER_PASS1.get(b), 1)] if paper else [])]) + " |")
    return "\n".join(lines)


def comparison_card(runs: list[tuple[str, dict]]) -> str:
    return ("# Checkpoints compared\n\npass@1 (%), ± standard error over problems; the paper's column is "
            "rStar2-Agent-14B (SPEC §9), for orientation.\n\n" + comparison_table(runs)
            + "\n\n## Mean response length (tokens)\n\n" + comparison_table(runs, "response_tokens_mean")
            + "\n\n## Tool calls per trajectory\n\n" + comparison_table(runs, "tool_calls_per_trajectory") + "\n")


def plot(runs: list[tuple[str, dict]], png: Path) -> None:
    """pass@1 with error bars and mean response length, per benchmark, one bar per checkpoint."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(b for _, r in runs for b in r["benchmarks"]))
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / max(len(runs), 1)
    for n, (label, r) in enumerate(runs):
        xs = [i + n * width for i in range(len(names))]
        get = [r["benchmarks"].get(b, {}) for b in names]
        axes[0].bar(xs, [100 * (m.get("pass@1") or 0) for m in get], width,
                    yerr=[100 * (m.get("pass@1_stderr") or 0) for m in get], label=label, capsize=3)
        axes[1].bar(xs, [m.get("response_tokens_mean") or 0 for m in get], width, label=label)
    for ax, title in zip(axes, ("pass@1 (%)", "mean response length (tokens)"), strict=True):
        ax.set_xticks([i + width * (len(runs) - 1) / 2 for i in range(len(names))], names, rotation=20)
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
