"""RL curation: the agreement filter's rule, source counts and the digit limit."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager

import pyarrow.parquet as pq

import rollout.runtime
from configs.data import AgreementFilterConfig, RLCurationConfig, RLSource
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from data_prep import rl_curation
from datalib.tables import read_problems
from rollout.answer import final_answer
from rollout.groups import ScoredGroup, ScoredGroups
from rollout.reward import score
from rollout.trajectory import Trajectory


class ScriptedRuntime:
    """Answers problem i with `script[i]`: the model texts of its samples, scored as the runtime scores."""

    def __init__(self, script: dict[str, list[str]]):
        self.script = script
        self.calls: list[dict] = []

    async def sample_and_score(self, problems, samples_per_problem, settings):
        self.calls.append({"n": len(problems), "samples": samples_per_problem, "turns": settings.max_turns})
        groups = []
        for i, problem in enumerate(problems):
            texts = self.script[problem.text]
            assert len(texts) == samples_per_problem
            # "FAILED:<text>": a trajectory no engine finished, its partial text kept
            trajs = [Trajectory(i, j, [0], turns=[t.removeprefix("FAILED:")],
                                failure="engine 0: HTTP 503" if t.startswith("FAILED:") else None)
                     for j, t in enumerate(texts)]
            for t in trajs:
                t.final_answer = None if t.failed else final_answer(t.turns)
            await score([t for t in trajs if not t.failed], [problem.reference] * sum(not t.failed for t in trajs),
                        sandbox=None)  # integer labels need no verifier
            groups.append(ScoredGroup(i, problem, trajs))
        return ScoredGroups(groups)


def test_agreement_filter_keeps_problems_with_two_agreeing_samples(tmp_path, monkeypatch):
    rows = [{"problem": f"Problem {k}?", "expected_answer": str(100 + k), "problem_type": "has_answer_extracted",
             "problem_source": "aops_c4_high_school_math"} for k in range(4)]
    path = tmp_path / "omr.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def boxed(v: object) -> str:
        return f"<reason>r</reason><answer>\\boxed{{{v}}}</answer>"

    tool_only = '<tool_call>\n{"name": "execute_python_code_with_standard_io"}\n</tool_call>'  # no answer given
    script = {
        "Problem 0?": [boxed(100), boxed(100), boxed(7), boxed(8)],    # 2 agree: kept
        # 1 agrees: dropped (the failed trajectory's box does not count)
        "Problem 1?": [boxed(101), tool_only, "FAILED:" + boxed(101), boxed(9)],
        # 2 agree: "102.0" is 102, "1{,}02" is no thousands grouping (labels are read the same way)
        "Problem 2?": [boxed("1{,}02"), boxed(102), boxed("102.0"), "no answer"],
        "Problem 3?": [boxed(3), boxed(10**25), boxed("1, 03"), boxed(3)],  # 0 agree; 10^25 is beyond int64
    }
    runtime = ScriptedRuntime(script)
    seen = {}

    @asynccontextmanager
    async def fake_build_runtime(rollout_cfg, sandbox_cfg, model_path, tokenizer_path, **_):
        seen.update(model=model_path, tokenizer=tokenizer_path, urls=rollout_cfg.sglang_urls)
        yield runtime

    monkeypatch.setattr(rollout.runtime, "build_runtime", fake_build_runtime)
    cfg = RLCurationConfig(
        sources=[RLSource(source="openmathreasoning", location=str(path), agreement_filter=True),
                 RLSource(source="synthetic", problems=5)],
        agreement=AgreementFilterConfig(model="Qwen/Qwen3-32B", samples_per_problem=4, max_turns=3,
                                        sglang_urls=["http://filter-model:30000"]))
    metrics = rl_curation.run(cfg, {}, tmp_path, rollout=RolloutConfig(), sandbox=SandboxConfig())

    assert seen == {"model": "Qwen/Qwen3-32B", "tokenizer": "Qwen/Qwen3-32B", "urls": ["http://filter-model:30000"]}
    assert runtime.calls == [{"n": 4, "samples": 4, "turns": 3}]  # synthetic problems bypass the filter
    kept = {p.problem for p in read_problems(tmp_path / "problems.parquet")}
    assert {"Problem 0?", "Problem 2?"} <= kept and not {"Problem 1?", "Problem 3?"} & kept
    assert metrics["problems"] == 7 and metrics["filter_kept"] == 2 and metrics["problems_synthetic"] == 5
    assert metrics["filter_failed_samples"] == 1
    agreement = {a["problem_id"]: a for a in pq.read_table(tmp_path / "agreement.parquet").to_pylist()}
    assert [a["agreeing"] for a in agreement.values()] == [2, 1, 2, 0]
    assert [a["failed_samples"] for a in agreement.values()] == [0, 1, 0, 0]
    assert agreement["openmathreasoning-1"]["answers"] == [101, None, None, 9]
    assert agreement["openmathreasoning-2"]["answers"] == [None, 102, 102, None]
    assert agreement["openmathreasoning-3"]["answers"] == [3, None, None, 3]
    assert agreement["openmathreasoning-3"]["answer_texts"] == ["3", str(10**25), "1, 03", "3"]
    rejects = [json.loads(x) for x in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert sorted(r["row"] for r in rejects if r["reason"] == "filter_disagreement") == [1, 3]


def test_agreement_filter_switch_off_keeps_problems_unchecked(tmp_path):
    cfg = RLCurationConfig(sources=[RLSource(source="synthetic", problems=6, agreement_filter=True)],
                           agreement=AgreementFilterConfig(enabled=False))
    metrics = rl_curation.run(cfg, {}, tmp_path, rollout=RolloutConfig(), sandbox=SandboxConfig())
    assert metrics["problems"] == 6 and metrics["filter_ran"] == 0
    assert "Disabled" in (tmp_path / "card.md").read_text()


def test_project_euler_with_digit_limit(shared_data, tmp_path):
    cfg = RLCurationConfig(sources=[RLSource(source="project_euler",
                                             location=str(shared_data / "samples" / "project_euler.jsonl"))],
                           max_answer_digits=10)
    metrics = rl_curation.run(cfg, {}, tmp_path, rollout=RolloutConfig(), sandbox=SandboxConfig())
    reasons = [json.loads(x)["reason"] for x in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    # 20 rows: 3 need an attachment, 3 are not integers, 4 have more than 10 digits.
    assert sorted(reasons) == sorted(["needs_attachment"] * 3 + ["complex_format"] * 2 + ["not_integer"]
                                     + ["too_large"] * 4)
    assert metrics["problems"] == 10
    card = (tmp_path / "card.md").read_text()
    assert "| filtered | project_euler | too_large | 4 |" in card


def test_duplicates_across_sources_keep_the_first(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps({"prompt": "Find  X, if X = 2*3.", "solution": "6"}) + "\n")
    b.write_text(json.dumps({"problem": "find x if x 2 3", "answer": "6"}) + "\n")  # same words
    cfg = RLCurationConfig(sources=[RLSource(source="dapo_math", location=str(a)),
                                    RLSource(source="project_euler", location=str(b))])
    metrics = rl_curation.run(cfg, {}, tmp_path, rollout=RolloutConfig(), sandbox=SandboxConfig())
    assert metrics["problems_dapo_math"] == 1 and metrics["problems_project_euler"] == 0
    assert metrics["duplicates"] == 1
