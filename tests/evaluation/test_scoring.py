"""Scoring on the real benchmark answers (issue 12, point 6), through the code service's
isolated math-verify workers and the letter rules, exactly as evaluation scores samples."""

from __future__ import annotations

import random

import pytest

from configs.sandbox import SandboxConfig
from evaluation.problem_sets import load_benchmark
from rollout.reward import score
from rollout.trajectory import Trajectory
from sandbox.client import build_sandbox


def model_turns(answer: str) -> list[str]:
    return ["<reason>I will compute it.</reason>\n<tool_call>\n{\"name\": \"python\", \"arguments\": "
            "{\"code\": \"print(1)\"}}\n</tool_call>",
            f"<reason>The program printed 1.</reason>\n<answer>The answer is \\boxed{{{answer}}}.</answer>"]


def trajectory(turns: list[str]) -> Trajectory:
    from rollout.answer import final_answer

    return Trajectory(0, 0, [], turns=turns, final_answer=final_answer(turns))


async def _scores(problems, answers: list[str]) -> list[float]:
    async with build_sandbox(SandboxConfig()) as sb:
        return await score([trajectory(model_turns(a)) for a in answers],
                           [p.scoring_reference() for p in problems], sb)


def _wrong(reference: str, problem, rng: random.Random) -> str:
    if problem.choices:
        return next(x for x in "ABCD"[: len(problem.choices)] if x != reference)
    if reference.lstrip("-").isdigit():
        return str(int(reference) + rng.randint(1, 50))
    return f"{reference} + 1"


async def test_every_reference_answer_scores_one(benchmark_configs):
    total = 0
    for bench in benchmark_configs:
        problems = load_benchmark(bench, choice_seed=0).problems
        assert len(problems) == {"aime24": 30, "aime25": 30, "hmmt25": 30, "math500": 500,
                                 "gpqa_diamond": 198}[bench.name]
        scores = await _scores(problems, [p.reference for p in problems])
        failed = [(p.id, p.reference) for p, s in zip(problems, scores, strict=True) if s != 1.0]
        assert not failed, f"{bench.name}: references that do not score 1 against themselves: {failed}"
        total += len(problems)
    assert total == 788


async def test_wrong_answers_score_zero(benchmark_configs):
    rng = random.Random(0)
    for bench in benchmark_configs:
        problems = load_benchmark(bench, choice_seed=0).problems
        chosen = rng.sample(problems, min(25, len(problems)))
        scores = await _scores(chosen, [_wrong(p.reference, p, rng) for p in chosen])
        assert scores == [0.0] * len(chosen), bench.name


async def test_an_answer_only_in_tool_output_scores_zero(benchmark_configs):
    problems = load_benchmark(benchmark_configs[0], choice_seed=0).problems[:5]
    trajs = []
    for p in problems:
        # the model prints the answer from its program but never writes it itself
        turns = [f"<reason>Compute.</reason>\n<tool_call>\n{{\"name\": \"python\", \"arguments\": "
                 f"{{\"code\": \"print('\\\\\\\\boxed{{{p.reference}}}')\"}}}}\n</tool_call>",
                 "<reason>Done.</reason>"]
        t = trajectory(turns)
        t.response_ids = [1, 2, 3]
        trajs.append(t)
        assert t.final_answer is None
    async with build_sandbox(SandboxConfig()) as sb:
        assert await score(trajs, [p.scoring_reference() for p in problems], sb) == [0.0] * 5


@pytest.mark.parametrize("seed", [0, 1])
def test_gpqa_options_are_shuffled_by_the_recorded_seed(benchmark_configs, seed):
    bench = benchmark_configs[4]
    a = load_benchmark(bench, choice_seed=seed).problems
    b = load_benchmark(bench, choice_seed=seed).problems
    other = load_benchmark(bench, choice_seed=seed + 10).problems
    assert [p.prompt for p in a] == [p.prompt for p in b]
    assert sum(p.choices != q.choices for p, q in zip(a, other, strict=True)) > 100
    letters = [p.reference for p in a]
    assert set(letters) == set("ABCD") and max(letters.count(x) for x in "ABCD") < 80  # not always "A"
    for p in a:  # the reference letter points at the correct option, and the prompt shows every option
        assert p.choices[ord(p.reference) - 65] in p.prompt
        assert all(f"{x}) {c}" in p.prompt for x, c in zip("ABCD", p.choices, strict=True))
