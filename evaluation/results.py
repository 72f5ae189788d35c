"""The results of one evaluation, as a typed object (`results.json` on disk).

Per benchmark, the numbers of rollout/metrics.py (`SampleSummary`; in JSON `pass@1`,
`pass@1_stderr`, `pass@k`, `maj@k` keep their usual names). NaN ("nothing to measure":
no tool call, no sample) is null in the file and NaN again once read.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rollout.metrics import Rate, SampleSummary
from stagekit import artifacts

# The numbers of a benchmark the manifest carries as `<benchmark>_<name>`.
MANIFEST_NUMBERS = ("pass@1", "pass@1_stderr", "response_tokens_mean", "tool_calls_per_trajectory", "tool_error_ratio",
                    "tool_error_ratio_correct", "truncation_ratio", "problems", "samples", "failed")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GeneralTaskResult(_Model):
    """One lm-eval task (evaluation/general.py)."""

    status: Literal["ok", "unavailable"]
    metrics: dict[str, Rate] = {}  # lm-eval's metric name (without ",none") -> value
    documents: int | None = None
    reason: str | None = None  # why it is unavailable


class EvalSettings(_Model):
    samples_per_problem: int
    temperature: float
    max_response_tokens: int
    max_turns: int
    seed: int


class EvalResults(_Model):
    checkpoint: str  # its label in reports
    identity: str  # what names its weights in the sample store (evaluation/checkpoint.py)
    benchmarks: dict[str, SampleSummary]
    skipped: dict[str, str] = {}  # optional benchmarks that could not be loaded, and why
    rejects: dict[str, int] = {}  # rows not usable, per benchmark (rejects/<benchmark>.jsonl)
    general: dict[str, GeneralTaskResult] = {}
    drawn: int = 0  # samples drawn by this run
    reused: int = 0  # samples found in the store
    sample_store: str = ""
    settings: EvalSettings | None = None

    def write(self, out_dir: Path) -> Path:
        path = out_dir / artifacts.RESULTS
        path.write_text(self.model_dump_json(indent=2))
        return path

    @classmethod
    def read(cls, artifact: Path) -> EvalResults:
        """The results of an evaluation artifact (or any directory holding results.json)."""
        return cls.model_validate_json((artifact / artifacts.RESULTS).read_text())

    def manifest_metrics(self) -> dict[str, float]:
        """`<benchmark>_<metric>` for the numbers a person compares, and lm-eval's as `lm_eval_<task>_<metric>`."""
        out: dict[str, float] = {"samples_drawn": self.drawn, "samples_reused": self.reused}
        for name, m in self.benchmarks.items():
            for key in MANIFEST_NUMBERS:
                value = m.number(key)
                if not math.isnan(value):
                    out[f"{name}_{key}"] = round(value, 4)
        for task, r in self.general.items():
            for key, v in r.metrics.items():
                if "stderr" not in key and not math.isnan(v):
                    out[f"lm_eval_{task}_{key}"] = round(v, 4)
        return out
