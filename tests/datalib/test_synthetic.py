"""The synthetic tool-use task (SPEC §8)."""

from __future__ import annotations

import pytest

from datalib.ngrams import words
from datalib.synthetic import (
    ANSWER_RANGE,
    FAMILIES,
    broken_program,
    demonstration,
    failure_kind,
    generate_problems,
    run_program,
)
from sandbox.tool_call import TOOL_NAME


def test_problems_are_deterministic_distinct_and_in_range():
    a, b = generate_problems(300, 0, "x"), generate_problems(300, 0, "x")
    assert a == b
    assert len({p.problem for p in a}) == 300
    assert {p.family for p in a} == set(FAMILIES)
    assert all(ANSWER_RANGE[0] <= p.answer <= ANSWER_RANGE[1] for p in a)
    assert all(run_program(p.program) == (True, str(p.answer)) for p in a)


def test_streams_and_seeds_give_different_sets():
    base = {p.problem for p in generate_problems(200, 0, "rl-synthetic")}
    assert len(base & {p.problem for p in generate_problems(200, 0, "eval")}) <= 1
    assert len(base & {p.problem for p in generate_problems(200, 1, "rl-synthetic")}) <= 1


def test_every_eight_word_window_holds_a_drawn_number():
    """So 8-gram decontamination against the synthetic eval set only flags shared numbers."""
    for p in generate_problems(120, 3, "w"):
        ws = words(p.problem)
        for i in range(len(ws) - 7):
            assert any(w.isdigit() and len(w) >= 2 for w in ws[i:i + 8]), p.problem


@pytest.mark.parametrize("kind,error", [("syntax", "SyntaxError"), ("name", "NameError")])
def test_failed_first_call_is_fixed(kind, error):
    p = generate_problems(1, 0, "f")[0]
    ok, feedback = run_program(broken_program(p.program, kind))
    assert not ok and error in feedback and 'File "main.py"' in feedback
    messages = demonstration(p.problem, p.answer, p.program, kind)
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert error in messages[3].content and error in messages[4].content
    assert messages[4].tool_calls[0].arguments == {"code": p.program, "input": ""}
    assert messages[5].content == str(p.answer)
    assert messages[6].content.endswith(f"<answer>The answer is \\boxed{{{p.answer}}}.</answer>")
    assert all(c.name == TOOL_NAME for m in messages for c in m.tool_calls)


def test_failure_share_follows_the_fraction():
    ids = [p.id for p in generate_problems(2000, 0, "share")]
    share = sum(bool(failure_kind(i, 0, 0.15)) for i in ids) / len(ids)
    assert 0.13 <= share <= 0.17
    assert not any(failure_kind(i, 0, 0.0) for i in ids)


async def test_demonstration_feedback_matches_the_real_sandbox():
    """The tool responses of demonstrations are byte-identical to what the sandbox answers."""
    from configs.sandbox import SandboxConfig
    from sandbox.client import build_sandbox
    from sandbox.types import ToolCall

    problems = generate_problems(6, 0, "fidelity")
    programs = [p.program for p in problems] + [broken_program(p.program, k) for p in problems for k in ("syntax",
                                                                                                        "name")]
    async with build_sandbox(SandboxConfig()) as sandbox:
        results = await sandbox.run_batch([ToolCall(code=c) for c in programs])
    for code, result in zip(programs, results, strict=True):
        ok, feedback = run_program(code)
        assert (feedback, ok) == (result.feedback, result.status == "ok"), code
