"""The learning proof's report: test pass@1 before and after RL, paired by problem, the RL
curves of both arms side by side, and whether the two claims of issue 13 hold.

Claim 1, RL raises test pass@1: the per-problem difference (RL arm - SFT) averaged over the
test problems, with its standard error over problems; it holds when the gain is at least
`Z_HOLDS` standard errors. Claim 2, the tool-error ratio within correct trajectories falls
faster under RoC (the paper's Figure 4): both arms start from the same SFT checkpoint, so
falling faster over the same steps means a lower value after them. It is decided on the
test split, RoC minus GRPO, with a paired bootstrap over problems (the ratio is errors over
calls in correct samples); the least-squares slopes over the training steps are reported
beside it, but a step has only a few correct trajectories with an error, so they are noisy.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import learning_async
from benchmarks.learning_async import fmt
from configs.schema import PipelineConfig
from datalib.eval_texts import synthetic_eval_set
from datalib.tables import read_problems
from evaluation.evaluate import sample_outcomes
from evaluation.paired import Z_HOLDS, holds, paired_gain, z_score
from evaluation.results import EvalResults
from orchestrator.store import ArtifactRef, ArtifactStore
from rollout.metrics import tool_error_ratio_estimate, tool_errors
from stagekit import artifacts

CURVES = (("accuracy", "training accuracy (rolled-out groups)"),
          ("tool_error_ratio_correct", "tool-error ratio: within correct trajectories (solid), all (dashed)"),
          ("response_len_mean", "response length (tokens)"),
          ("kept", "kept group: positives / negatives per step"))


def _errors_and_calls(samples: pd.DataFrame) -> pd.DataFrame:
    """Per problem with a correct sample: failed tool calls and tool calls within the correct samples."""
    per = {pid: tool_errors(g, correct_only=True) for pid, g in sample_outcomes(samples).items()
           if any(o.reward > 0 for o in g)}
    return pd.DataFrame(list(per.values()), index=list(per), columns=["errors", "calls"])


def paired_error_ratio_diff(a: pd.DataFrame, b: pd.DataFrame, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Within-correct tool-error ratio of `a` minus `b` on the same test problems, and its
    standard error by a paired bootstrap over problems (a ratio of sums: no closed form)."""
    both = _errors_and_calls(a).join(_errors_and_calls(b), how="outer", lsuffix="_a", rsuffix="_b").fillna(0)
    e_a, c_a, e_b, c_b = (both[c].to_numpy(float) for c in ("errors_a", "calls_a", "errors_b", "calls_b"))
    if c_a.sum() == 0 or c_b.sum() == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(both), size=(draws, len(both)))
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = e_a[idx].sum(1) / c_a[idx].sum(1) - e_b[idx].sum(1) / c_b[idx].sum(1)
    return float(e_a.sum() / c_a.sum() - e_b.sum() / c_b.sum()), float(np.nanstd(boot, ddof=1))


def error_ratio_correct(samples: pd.DataFrame) -> tuple[float, float, int]:
    """Failed calls / calls within correct samples, its standard error (clustered by problem), calls."""
    r = tool_error_ratio_estimate(list(sample_outcomes(samples).values()), correct_only=True)
    return r.mean, r.stderr, r.units


def slope(steps: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """Least-squares slope per step and its standard error (NaN rows left out)."""
    ok = ~np.isnan(values)
    x, y = steps[ok].astype(float), values[ok]
    if len(x) < 3:
        return math.nan, math.nan
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    se = math.sqrt((resid ** 2).sum() / (len(x) - 2) / ((x - x.mean()) ** 2).sum())
    return float(b), se


def _overlap(store: ArtifactStore, cfg: PipelineConfig, refs: dict[str, ArtifactRef]) -> dict[str, int]:
    """Test problems whose text is also an SFT demonstration's or an RL problem's."""
    test = {p.problem for p in synthetic_eval_set(cfg.data.decontaminate.synthetic_eval_problems,
                                                  cfg.data.decontaminate.synthetic_eval_seed)}
    sft = pd.read_parquet(store.local_path(refs["cold_start"]) / artifacts.CHATS)
    demos = {m["content"] for msgs in sft["messages"] for m in msgs if m["role"] == "user"}
    rl = {p.problem for p in read_problems(store.local_path(refs["decontaminate"]) / artifacts.PROBLEMS)}
    return {"test": len(test), "sft_demos": len(demos), "rl_problems": len(rl),
            "test_in_sft": len(test & demos), "test_in_rl": len(test & rl)}


def _plot(curves: dict[str, pd.DataFrame], tests: dict[str, float], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    colors = {"grpo_roc": "tab:blue", "grpo": "tab:orange", "grpo_roc_async": "tab:green"}
    for ax, (key, title) in zip(axes.flat, CURVES, strict=True):
        for arm, df in curves.items():
            if key == "kept":
                ax.plot(df["step"], df["positives_kept"], color=colors[arm], label=f"{arm} positives")
                ax.plot(df["step"], df["negatives_kept"], color=colors[arm], linestyle="--", label=f"{arm} negatives")
                continue
            ax.plot(df["step"], df[key], color=colors[arm], alpha=0.3, linewidth=1)
            smooth = df[key].rolling(5, min_periods=1, center=True).mean()
            ax.plot(df["step"], smooth, color=colors[arm], label=f"{arm} (5-step mean)")
            if key == "tool_error_ratio_correct":
                ax.plot(df["step"], df["tool_error_ratio"].rolling(5, min_periods=1, center=True).mean(),
                        color=colors[arm], linestyle="--", label=f"{arm}, all trajectories")
        if key == "accuracy":
            last = max(int(df["step"].max()) for df in curves.values())
            ax.axhline(tests["sft"], color="gray", linestyle=":", label=f"test pass@1 after SFT {tests['sft']:.3f}")
            for arm in curves:
                ax.plot([last], [tests[arm]], marker="*", markersize=12, color=colors[arm],
                        label=f"test pass@1 after {arm} {tests[arm]:.3f}")
        learning_async.finish_axis(ax, title)
    learning_async.save(fig, png)


def write_report(store: ArtifactStore, cfg: PipelineConfig, refs: dict[str, ArtifactRef],
                 rl_refs: dict[str, ArtifactRef], evals: dict[str, ArtifactRef], timings: dict[str, float],
                 cores: int, out: Path) -> Path:
    """Write learning.md, learning.csv, learning.png and learning.json into `out`; returns `out`."""
    out.mkdir(parents=True, exist_ok=True)
    bench = cfg.eval.benchmarks[0].name
    samples = {k: pd.read_parquet(store.local_path(r) / artifacts.SAMPLES / f"{bench}.parquet")
               for k, r in evals.items()}
    results = {k: EvalResults.read(store.local_path(r)).benchmarks[bench] for k, r in evals.items()}
    curves = {arm: pd.read_csv(store.local_path(r) / artifacts.CURVES) for arm, r in rl_refs.items()}
    long = pd.concat([df.assign(arm=arm) for arm, df in curves.items()])
    long.to_csv(out / "learning.csv", index=False)
    _plot(curves, {k: m.pass1 for k, m in results.items()}, out / "learning.png")

    gains = {arm: paired_gain(samples[arm], samples["sft"]) for arm in curves}
    roc_vs_grpo = paired_gain(samples["grpo_roc"], samples["grpo"])
    errors = {k: error_ratio_correct(s) for k, s in samples.items()}
    slopes = {arm: slope(df["step"].to_numpy(), df["tool_error_ratio_correct"].to_numpy(dtype=float))
              for arm, df in curves.items()}
    slopes_all = {arm: slope(df["step"].to_numpy(), df["tool_error_ratio"].to_numpy(dtype=float))
                  for arm, df in curves.items()}
    ends = {arm: {key: (float(df[key].head(5).mean()), float(df[key].tail(5).mean()))
                  for key in ("tool_error_ratio_correct", "tool_error_ratio")} for arm, df in curves.items()}
    updates = {arm: int(df["loss"].notna().sum()) if "loss" in df else 0 for arm, df in curves.items()}
    finite = {arm: bool(np.isfinite(df["reward"]).all()
                        and (updates[arm] == 0 or np.isfinite(df["loss"].dropna()).all()))
              for arm, df in curves.items()}
    overlap = _overlap(store, cfg, refs)
    durations = {name: json.loads((store.local_path(ref) / artifacts.MANIFEST).read_text())["duration_s"]
                 for name, ref in {"sft": refs["sft"], **{f"rl {a}": r for a, r in rl_refs.items()},
                                   **{f"eval {a}": r for a, r in evals.items()}}.items()}
    rl = cfg.rl
    n_test = results["sft"].problems
    k = cfg.eval.samples_per_problem
    lines = [
        "# The learning proof (issue 13)", "",
        f"Test split: {n_test} generated problems x {k} samples (T {cfg.eval.temperature}); "
        f"{overlap['test_in_sft']} of them also among the {overlap['sft_demos']} SFT demonstrations, "
        f"{overlap['test_in_rl']} among the {overlap['rl_problems']} RL problems.",
        f"RL: {int(max(df['step'].max() for df in curves.values()))} steps x {rl.prompts_per_step} prompts x "
        f"{rl.rollouts_per_prompt} rollouts per arm, lr {rl.lr}, T {rl.temperature}; GRPO-RoC keeps "
        f"{rl.kept_per_prompt} of {rl.rollouts_per_prompt}, plain GRPO trains on all {rl.rollouts_per_prompt}.",
        f"This run on {cores} cores: "
        + ", ".join(f"{name} {seconds / 60:.1f} min" for name, seconds in timings.items())
        + " (a stage found in the store takes no time).",
        "Each stage's own duration when it ran (its manifest): " + ", ".join(
            f"{name} {seconds / 60:.1f} min" for name, seconds in durations.items()) + ".", "",
        f"| checkpoint | test pass@1 | ± se | pass@{k} | gain over SFT (paired) | z | tool-error ratio in correct "
        "| response tokens | tool calls |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in results.items():
        gain, se, _ = gains.get(name, (math.nan, math.nan, 0))
        err, err_se, _ = errors[name]
        lines.append(f"| {name} | {fmt(m.pass1)} | {fmt(m.pass1_stderr)} | {fmt(m.number(f'pass@{k}'))} | "
                     f"{fmt(gain)} ± {fmt(se)} | {fmt(z_score(gain, se), 1)} | "
                     f"{fmt(err)} ± {fmt(err_se)} | {fmt(m.response_tokens_mean, 1)} | "
                     f"{fmt(m.tool_calls_per_trajectory, 2)} |")
    claim1 = {arm: holds(*gains[arm][:2]) for arm in curves}
    (sr, sr_se), (sg, sg_se) = slopes["grpo_roc"], slopes["grpo"]
    z_slope = (sg - sr) / math.sqrt(sr_se ** 2 + sg_se ** 2) if sr_se and sg_se else math.nan
    err_diff, err_diff_se = paired_error_ratio_diff(samples["grpo_roc"], samples["grpo"])
    claim2 = "holds" if holds(-err_diff, err_diff_se) else (
        "same direction, under 3 standard errors" if err_diff < 0 else "does not hold")
    lines += [
        "", f"GRPO-RoC - plain GRPO on the test split (paired): {fmt(roc_vs_grpo[0])} ± {fmt(roc_vs_grpo[1])}.",
        "", "## Claims", "",
        *(f"- RL ({arm}) raises test pass@1 by at least {Z_HOLDS:g} standard errors: "
          f"**{'holds' if claim1[arm] else 'does not hold'}** ({fmt(gains[arm][0])} ± {fmt(gains[arm][1])})."
          for arm in curves),
        f"- The tool-error ratio within correct trajectories falls faster under RoC: "
        f"**{claim2}**. Both arms start from the same SFT value ({fmt(errors['sft'][0])} on the test split), "
        f"so the fall over the run is compared by the value after it: RoC {fmt(errors['grpo_roc'][0])}, "
        f"GRPO {fmt(errors['grpo'][0])}, RoC - GRPO {fmt(err_diff)} ± {fmt(err_diff_se)} (paired bootstrap "
        f"over problems). Slope per RL step during training (noisier: a few correct trajectories per step): "
        f"RoC {sr:+.5f} ± {sr_se:.5f}, GRPO {sg:+.5f} ± {sg_se:.5f} (difference {fmt(z_slope, 1)} standard errors).",
        "- Tool-error ratio during training, mean of the first 5 steps -> of the last 5, within correct "
        "trajectories / over all trajectories (slope per step over all): " + "; ".join(
            f"{arm} {fmt(e['tool_error_ratio_correct'][0], 4)} -> {fmt(e['tool_error_ratio_correct'][1], 4)} / "
            f"{fmt(e['tool_error_ratio'][0])} -> {fmt(e['tool_error_ratio'][1])} "
            f"({slopes_all[arm][0]:+.5f} ± {slopes_all[arm][1]:.5f})" for arm, e in ends.items()) + ".",
        "- Reward and loss finite at every step: " + ", ".join(
            f"{a} {'yes' if f else 'NO'} ({updates[a]} of {len(curves[a])} steps updated the policy)"
            for a, f in finite.items()) + ".", "", "![learning curves](learning.png)", "",
    ]
    asynchronous = None
    if learning_async.ASYNC in curves:
        asynchronous = learning_async.compare(curves, samples, durations)
        lines += learning_async.report_lines(asynchronous)
        learning_async.plot(curves, out / "async.png")
    (out / "learning.md").write_text("\n".join(lines))
    summary = {"results": {k: m.model_dump(mode="json") for k, m in results.items()},
               "gains": gains, "roc_minus_grpo": roc_vs_grpo, "error_ratio_correct": errors,
               "slopes": slopes, "slopes_all": slopes_all, "ends": ends, "finite": finite, "updates": updates,
               "overlap": overlap, "timings_s": timings, "durations_s": durations, "cores": cores,
               "claims": {"rl_raises_pass1": claim1, "roc_lowers_errors_faster": claim2},
               "error_ratio_correct_roc_minus_grpo": (err_diff, err_diff_se), "async": asynchronous,
               "artifacts": {"sft": refs["sft"].uri, **{f"rl_{a}": r.uri for a, r in rl_refs.items()},
                             **{f"eval_{a}": r.uri for a, r in evals.items()}}}
    (out / "learning.json").write_text(json.dumps(summary, indent=1, default=str))
    return out
