"""Stage `eval_report`: the evaluated checkpoints side by side, beside the paper (SPEC §9).

Its inputs are the evaluation artifacts, by checkpoint label (`sft`, `rl_stage1`, …, in
pipeline order, as orchestrator/stages.py wires them). Reads their `results.json` and writes
`comparison.md` (also the card), `comparison.csv` and `comparison.png` (pass@1 with
error bars and mean response length per benchmark and checkpoint).

    python -m evaluation.compare --config configs/tiny.yaml
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from evaluation.report import comparison_card, plot
from evaluation.results import EvalResults
from stagekit import artifacts

CSV_NUMBERS = ("pass@1", "pass@1_stderr", "response_tokens_mean", "tool_calls_per_trajectory", "tool_error_ratio")


def run(inputs: dict[str, Path], out_dir: Path) -> dict:
    runs = [(label, EvalResults.read(path)) for label, path in inputs.items()]
    card = comparison_card(runs)
    (out_dir / artifacts.COMPARISON).write_text(card)
    (out_dir / artifacts.CARD).write_text(card)
    plot(runs, out_dir / artifacts.COMPARISON_PLOT)
    with (out_dir / artifacts.COMPARISON_TABLE).open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["checkpoint", "benchmark", *CSV_NUMBERS])
        for label, r in runs:
            for bench, m in r.benchmarks.items():
                writer.writerow([label, bench, *(_cell(m.number(k)) for k in CSV_NUMBERS)])
    return {f"{label}_{bench}_pass@1": round(m.pass1, 4)
            for label, r in runs for bench, m in r.benchmarks.items() if not math.isnan(m.pass1)}



def _cell(x: float) -> float | None:
    return None if math.isnan(x) else x


def main() -> None:
    from orchestrator.cli import stage_main

    stage_main("eval_report")


if __name__ == "__main__":
    main()
