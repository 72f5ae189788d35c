"""Stage `eval_report`: the evaluated checkpoints side by side, beside the paper (SPEC §9).

Its inputs are the evaluation artifacts, by checkpoint label (`base`, `sft`, `rl_stage1`, …,
in report order, as orchestrator/stages.py wires them). Reads their `results.json` and
samples and writes `comparison.md` (also the card), `comparison.csv`, `gains.csv` (each
checkpoint's pass@1 gain over the base model and over SFT, paired by problem) and
`comparison.png` (pass@1 with error bars and mean response length per benchmark and
checkpoint).

    python -m evaluation.compare --config configs/tiny.yaml
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from evaluation.paired import REFERENCES, Gain, gains_section, paired_gain, read_samples, z_score
from evaluation.report import comparison_card, plot
from evaluation.results import EvalResults
from stagekit import artifacts

CSV_NUMBERS = ("pass@1", "pass@1_stderr", "response_tokens_mean", "tool_calls_per_trajectory", "tool_error_ratio")


def run(inputs: dict[str, Path], out_dir: Path) -> dict:
    runs = [(label, EvalResults.read(path)) for label, path in inputs.items()]
    gains = paired_gains(inputs, runs)
    card = comparison_card(runs, gains_section(gains))
    (out_dir / artifacts.COMPARISON).write_text(card)
    (out_dir / artifacts.CARD).write_text(card)
    plot(runs, out_dir / artifacts.COMPARISON_PLOT)
    with (out_dir / artifacts.COMPARISON_TABLE).open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["checkpoint", "benchmark", *CSV_NUMBERS])
        for label, r in runs:
            for bench, m in r.benchmarks.items():
                writer.writerow([label, bench, *(_cell(m.number(k)) for k in CSV_NUMBERS)])
    with (out_dir / artifacts.GAINS_TABLE).open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["benchmark", "checkpoint", "over", "gain", "stderr", "problems", "z"])
        writer.writerows([g.benchmark, g.checkpoint, g.reference, g.gain, _cell(g.stderr), g.problems, _cell(g.z)]
                         for g in gains)
    metrics = {f"{label}_{bench}_pass@1": round(m.pass1, 4)
               for label, r in runs for bench, m in r.benchmarks.items() if not math.isnan(m.pass1)}
    metrics |= {f"{g.checkpoint}_{g.benchmark}_gain_over_{g.reference}": round(g.gain, 4) for g in gains}
    return metrics


def paired_gains(inputs: dict[str, Path], runs: list[tuple[str, EvalResults]]) -> list[Gain]:
    """Every later checkpoint over `base` and over `sft`, per benchmark, where both kept samples."""
    refs = [label for label in REFERENCES if label in inputs]
    out = []
    for bench in dict.fromkeys(b for _, r in runs for b in r.benchmarks):
        samples = {label: read_samples(path, bench) for label, path in inputs.items()}
        for n, (label, _) in enumerate(runs):
            for ref in refs:
                if label == ref or list(inputs).index(ref) > n or samples[label] is None or samples[ref] is None:
                    continue
                gain, se, problems = paired_gain(samples[label], samples[ref])
                out.append(Gain(bench, label, ref, gain, se, problems, z_score(gain, se)))
    return out



def _cell(x: float) -> float | None:
    return None if math.isnan(x) else x


def main() -> None:
    from orchestrator.cli import stage_main

    stage_main("eval_report")


if __name__ == "__main__":
    main()
