"""Stage `eval_report`: the evaluated checkpoints side by side, beside the paper (SPEC §9).

Reads `results.json` of every evaluation stage, in pipeline order, and writes
`comparison.md` (also the card), `comparison.csv` and `comparison.png` (pass@1 with
error bars and mean response length per benchmark and checkpoint).

    python -m evaluation.compare --config configs/tiny.yaml
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from evaluation.report import comparison_card, plot


def run(checkpoints: list[str], inputs: dict[str, Path], out_dir: Path) -> dict:
    runs = [(name.removeprefix("eval_"), json.loads((inputs[name] / "results.json").read_text()))
            for name in checkpoints]
    card = comparison_card(runs)
    (out_dir / "comparison.md").write_text(card)
    (out_dir / "card.md").write_text(card)
    plot(runs, out_dir / "comparison.png")
    with (out_dir / "comparison.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["checkpoint", "benchmark", "pass@1", "pass@1_stderr", "response_tokens_mean",
                         "tool_calls_per_trajectory", "tool_error_ratio"])
        for label, r in runs:
            for bench, m in r["benchmarks"].items():
                writer.writerow([label, bench, m.get("pass@1"), m.get("pass@1_stderr"), m.get("response_tokens_mean"),
                                 m.get("tool_calls_per_trajectory"), m.get("tool_error_ratio")])
    return {f"{label}_{bench}_pass@1": round(m["pass@1"], 4)
            for label, r in runs for bench, m in r["benchmarks"].items() if m.get("pass@1") is not None}


def main() -> None:
    from pipeline.cli import stage_main

    stage_main("eval_report")


if __name__ == "__main__":
    main()
