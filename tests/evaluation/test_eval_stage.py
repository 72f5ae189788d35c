"""The evaluation stage on the tiny model: what it writes, k topped up without redrawing,
a killed run resumed from its saved chunks, the comparison, the command lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from configs.eval import EvalBenchmark, EvalConfig
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from evaluation import compare, math_eval, show
from evaluation.samples import SampleStore
from stagekit.workdir import WorkDir

REPO = Path(__file__).resolve().parents[2]
SHORT = {"max_response_tokens": 40, "max_turns": 2, "pass_k": [1, 2, 4],
         "benchmarks": [EvalBenchmark(name="synthetic_eval", location="synthetic", problems=3)]}


def _run(cfg: EvalConfig, checkpoint_dir: Path, root: Path, name: str) -> tuple[dict, Path]:
    work = WorkDir(root / "work", "eval_sft", name)
    work.out_dir.mkdir(parents=True)
    metrics = math_eval.run(cfg, RolloutConfig(), SandboxConfig(), "sft", {"checkpoint": checkpoint_dir},
                            work.out_dir, work)
    return metrics, work.out_dir


@pytest.fixture(scope="module")
def first(tiny_assets_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    metrics, out = _run(EvalConfig(samples_per_problem=2, **SHORT), tiny_assets_dir, root, "k2")
    return root, metrics, out


def test_evaluation_writes_samples_results_card_and_plot(first):
    _, metrics, out = first
    assert metrics["samples_drawn"] == 6 and metrics["samples_reused"] == 0
    df = pd.read_parquet(out / "samples" / "synthetic_eval.parquet")
    assert len(df) == 6 and set(df["sample"]) == {0, 1}
    for column in ("problem_id", "sample", "answer", "score", "response_tokens", "tool_calls", "tool_statuses",
                   "finish_reason", "text", "reference", "seed"):
        assert column in df.columns
    assert df["text"].str.contains("<|im_start|>user", regex=False).all()  # the whole trajectory, readable
    results = json.loads((out / "results.json").read_text())
    m = results["benchmarks"]["synthetic_eval"]
    assert m["problems"] == 3 and m["samples"] == 6 and 0.0 <= m["pass@1"] <= 1.0
    assert "pass@2" in m and "pass@4" not in m
    assert metrics["synthetic_eval_pass@1"] == m["pass@1"]
    assert "| synthetic_eval | 3 | 6 |" in (out / "card.md").read_text()
    assert (out / "accuracy.png").stat().st_size > 1000


def test_raising_k_draws_only_the_new_samples(first, tiny_assets_dir):
    root, _, out2 = first
    metrics, out4 = _run(EvalConfig(samples_per_problem=4, **SHORT), tiny_assets_dir, root, "k4")
    assert (metrics["samples_drawn"], metrics["samples_reused"]) == (6, 6)
    two = pd.read_parquet(out2 / "samples" / "synthetic_eval.parquet")
    four = pd.read_parquet(out4 / "samples" / "synthetic_eval.parquet")
    assert len(four) == 12
    assert list(four[four["sample"] < 2]["text"]) == list(two["text"])
    # drawn together or topped up, sample j of a problem is the same draw
    fresh, out_fresh = _run(EvalConfig(samples_per_problem=4, **SHORT), tiny_assets_dir, root / "fresh", "k4")
    assert fresh["samples_drawn"] == 12
    assert list(pd.read_parquet(out_fresh / "samples" / "synthetic_eval.parquet")["text"]) == list(four["text"])


def test_a_killed_evaluation_resumes_from_its_saved_chunks(tiny_assets_dir, tmp_path, monkeypatch):
    cfg = EvalConfig(samples_per_problem=2, chunk_trajectories=2, **SHORT)
    real_add, calls = SampleStore.add, []

    def add_then_die(self, rows):
        real_add(self, rows)
        calls.append(len(rows))
        if len(calls) == 2:
            raise KeyboardInterrupt("killed after two chunks")

    monkeypatch.setattr(SampleStore, "add", add_then_die)
    with pytest.raises(KeyboardInterrupt):
        _run(cfg, tiny_assets_dir, tmp_path, "a")
    monkeypatch.setattr(SampleStore, "add", real_add)
    metrics, _ = _run(cfg, tiny_assets_dir, tmp_path, "b")
    assert (metrics["samples_drawn"], metrics["samples_reused"]) == (2, 4)


def test_comparison_puts_checkpoints_side_by_side_beside_the_paper(first, tmp_path):
    _, _, out = first
    results = json.loads((out / "results.json").read_text())
    other = tmp_path / "other"
    other.mkdir()
    results["benchmarks"]["aime24"] = {"pass@1": 0.25, "pass@1_stderr": 0.05, "response_tokens_mean": 900.0}
    (other / "results.json").write_text(json.dumps(results))
    names = ["sft", "rl_stage1", "rl_stage2", "rl_stage3"]  # the eval_report's input roles, in pipeline order
    inputs = {n: out for n in names[:3]} | {"rl_stage3": other}
    metrics = compare.run(inputs, tmp_path)
    card = (tmp_path / "comparison.md").read_text()
    assert "| benchmark | sft | rl_stage1 | rl_stage2 | rl_stage3 | rStar2-Agent-14B (paper) |" in card
    assert "| aime24 | – | – | – | 25.0 ± 5.0 | 80.6 |" in card
    assert (tmp_path / "comparison.png").exists() and (tmp_path / "comparison.csv").exists()
    assert metrics["rl_stage3_aime24_pass@1"] == 0.25


def test_show_renders_one_problem(first, capsys):
    _, _, out = first
    path = out / "samples" / "synthetic_eval.parquet"
    pid = pd.read_parquet(path)["problem_id"][0]
    show.main([str(path), "--problem", pid])
    text = capsys.readouterr().out
    assert text.count(f"===== problem {pid}, sample") == 2 and "----- trajectory -----" in text
    with pytest.raises(SystemExit):
        show.main([str(path), "--problem", "no-such-problem"])


def test_command_line_outside_prefect(tiny_assets_dir, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "evaluation", "--checkpoint", str(tiny_assets_dir), "--config", "configs/tiny.yaml",
         "--set", f"run.artifacts_root={tmp_path / 'store'}", "--set", "eval.max_response_tokens=32",
         "--set", "eval.samples_per_problem=1", "--set",
         "eval.benchmarks=[{name: synthetic_eval, location: synthetic, problems: 2}]", "--out", str(tmp_path / "o")],
        capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "| synthetic_eval | 2 | 2 |" in out.stdout
    assert (tmp_path / "o" / "results.json").exists() and "prefect" not in out.stderr.lower()


def _artifact(root: Path, name: str, results: str, scores: list[list[float]]) -> Path:
    """An evaluation artifact holding `results` and samples with these scores, problem by problem."""
    d = root / name
    (d / "samples").mkdir(parents=True)
    (d / "results.json").write_text(results)
    rows = [{"problem_id": f"p{i}", "sample": j, "score": s, "tool_statuses": [], "answer": "1",
             "response_tokens": 5, "finish_reason": "stop"} for i, ss in enumerate(scores) for j, s in enumerate(ss)]
    pd.DataFrame(rows).to_parquet(d / "samples" / "synthetic_eval.parquet")
    return d


def test_comparison_pairs_gains_by_problem_over_base_and_sft(first, tmp_path):
    _, _, out = first
    results = (out / "results.json").read_text()
    inputs = {"base": _artifact(tmp_path, "b", results, [[0, 0], [0, 0], [0, 0], [0, 0]]),
              "sft": _artifact(tmp_path, "s", results, [[1, 0], [0, 0], [1, 1], [0, 0]]),
              # p4 is only in this one: a gain pairs the problems both evaluations hold
              "rl_stage1": _artifact(tmp_path, "r", results, [[1, 1], [1, 0], [1, 1], [0, 0], [1, 1]])}
    (tmp_path / "report").mkdir()
    metrics = compare.run(inputs, tmp_path / "report")
    gains = pd.read_csv(tmp_path / "report" / "gains.csv")
    rl_over_sft = gains[(gains.checkpoint == "rl_stage1") & (gains.over == "sft")].iloc[0]
    # per-problem differences 0.5, 0.5, 0, 0: mean 0.25, unbiased sd 0.2887, over sqrt(4)
    assert rl_over_sft.gain == pytest.approx(0.25) and rl_over_sft.stderr == pytest.approx(0.1443, abs=1e-4)
    assert rl_over_sft.problems == 4 and rl_over_sft.z == pytest.approx(1.732, abs=1e-3)
    assert set(zip(gains.checkpoint, gains.over, strict=True)) == {("sft", "base"), ("rl_stage1", "base"),
                                                                   ("rl_stage1", "sft")}
    assert metrics["rl_stage1_synthetic_eval_gain_over_base"] == pytest.approx(0.625)
    card = (tmp_path / "report" / "comparison.md").read_text()
    assert "| synthetic_eval | rl_stage1 | +62.5 ± 23.9 (z 2.6) | +25.0 ± 14.4 (z 1.7) |" in card
    assert "rl_stage1 over SFT by at least 3 paired standard errors: **does not hold**" in card
    # over SFT: differences 0.5, 0.5, 0, 0.5, 0.5, 0.5, mean 0.417 ± 0.083, z 5; base has p0-p3 only
    inputs["rl_stage1"] = _artifact(tmp_path, "r2", results, [[1, 1], [1, 0], [1, 1], [1, 0], [1, 0], [1, 0]])
    inputs["sft"] = _artifact(tmp_path, "s2", results, [[1, 0], [0, 0], [1, 1], [0, 0], [0, 0], [0, 0]])
    (tmp_path / "report2").mkdir()
    compare.run(inputs, tmp_path / "report2")
    card = (tmp_path / "report2" / "comparison.md").read_text()
    assert "| synthetic_eval | rl_stage1 | +75.0 ± 14.4 (z 5.2) | +41.7 ± 8.3 (z 5.0) |" in card and "**holds**" in card
