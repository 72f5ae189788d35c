"""The one answer module (SPEC §5, §8): extraction, strict integers, letters, on every
reference answer of the five benchmarks and on adversarial strings."""

from __future__ import annotations

import json
import re

import pytest

from rollout.answer import (
    TOOL_CALL,
    LetterReference,
    NotAnInteger,
    boxed_contents,
    choice_letter,
    final_answer,
    integer_answer,
    last_boxed,
    letters_match,
    parse_integer,
)
from rollout.prompt import tool_call_text

BENCHMARKS = ("aime2024", "aime2025", "hmmt_feb_2025", "math500", "gpqa_diamond")
# Reference answers that are integers without being plain digit strings (MATH-500's typesetting).
FORMATTED_INTEGERS = {"10,\\!080": 10080, "11,\\! 111,\\! 111,\\! 100": 11111111100, "\\$32,\\!348": 32348,
                      "58,500": 58500, "\\$36": 36}


@pytest.fixture(scope="module")
def references(shared_data) -> dict[str, list[str]]:
    return {name: [json.loads(line)["answer"] for line in (shared_data / "benchmarks" / f"{name}.jsonl")
                   .read_text(encoding="utf-8").splitlines()] for name in BENCHMARKS}


def model_turns(answer: str) -> list[str]:
    """A model-style response: a draft box, a call whose code prints a box, then the answer."""
    return ["<reason>A first guess is \\boxed{0}; let me check.</reason>\n"
            + tool_call_text("print('\\\\boxed{999}')"),
            f"<reason>The program agrees.</reason>\n<answer>The answer is \\boxed{{{answer}}}.</answer>"]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_reference_answer_comes_back_exactly(references, name):
    answers = references[name]
    assert len(answers) == {"aime2024": 30, "aime2025": 30, "hmmt_feb_2025": 30, "math500": 500,
                            "gpqa_diamond": 198}[name]
    for answer in answers:
        assert final_answer(model_turns(answer)) == answer.strip(), answer
        assert final_answer(f"<reason>so</reason> the answer is \\boxed{{{answer}}}") == answer.strip()
        assert last_boxed(f"\\boxed{{{answer}}}") == answer


@pytest.mark.parametrize("name", BENCHMARKS)
def test_integer_references_parse_and_nothing_else_does(references, name):
    """Plain digit strings parse to themselves; of the rest only the listed typeset integers parse."""
    parsed = {}
    for answer in references[name]:
        try:
            parsed[answer] = parse_integer(answer)
        except NotAnInteger:
            continue
        assert integer_answer(model_turns(answer)) == parsed[answer]
    plain = [a for a in references[name] if re.fullmatch(r"-?[0-9]+", a)]
    assert all(parsed.get(a) == int(a) for a in plain)
    if name.startswith("aime"):
        assert len(plain) == 30  # every AIME answer is an integer
    assert {a: v for a, v in parsed.items() if a not in plain} == (FORMATTED_INTEGERS if name == "math500" else {})


def test_every_gpqa_reference_is_a_letter_that_matches_itself(references):
    for letter in references["gpqa_diamond"]:
        assert choice_letter(letter) == letter
        assert letters_match(final_answer(model_turns(f"\\text{{({letter.lower()})}}")), letter)
        assert not letters_match(final_answer(model_turns("E")), letter)


@pytest.mark.parametrize(("text", "expected"), [
    ("\\boxed{1, 2}", "complex_format"),  # a list, not 12
    ("\\boxed{3,4,5}", "complex_format"),  # not 345
    ("\\boxed{1, 234}", "complex_format"),  # comma + plain space: a list
    ("1,000", 1000), ("1{,}000", 1000), ("1\\,000", 1000), ("10 000", 10000), ("10,\\! 000", 10000),
    ("1,0000", "complex_format"), ("1,000 000", "complex_format"),  # mixed separators
    ("\\boxed{\\text{12}}", 12), ("\\textbf{12}", 12), ("$12$", 12), ("\\$12", 12), ("12.", 12),
    ("-0", 0), ("+7", 7), ("007", 7),
    ("1e5", 100000), ("1.5e3", 1500), ("1200e-2", 12), ("2\\times 10^{3}", 2000), ("1.25e1", "not_integer"),
    ("10^{3}", "complex_format"), ("2^{10}", "complex_format"),  # a power is an expression
    ("١٢٣", "complex_format"), ("１２", "complex_format"), ("12\u00a0000", "complex_format"),  # ASCII only
    ("−5", "complex_format"),  # U+2212
    ("1e999999999", "too_large"), ("1e99999999999999", "too_large"), ("-1e999999999", "too_large"),
    ("1e-999999999", "not_integer"), ("0e999999999", 0), ("9" * 19, "too_large"), ("9" * 18, int("9" * 18)),
    ("1" * 100_000, "too_large"),  # never converted: Python refuses int() beyond 4300 digits
    ("12\\%", "complex_format"), ("12 apples", "complex_format"), ("x = 12", "complex_format"),
    ("\\frac{24}{2}", "not_integer"), ("0.5", "not_integer"), (".5", "not_integer"),
    ("", "empty_answer"), ("  ", "empty_answer"), (None, "empty_answer"),
])
def test_strict_integers(text, expected):
    if isinstance(expected, int):
        assert parse_integer(text) == expected
        return
    with pytest.raises(NotAnInteger) as err:
        parse_integer(text)
    assert err.value.reason == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("<answer>\\boxed{1, 2}</answer>", None), ("<answer>\\boxed{3,4,5}</answer>", None),
    ("<answer>\\boxed{1,000}</answer>", 1000), ("\\boxed{99999999999999999999}", None),  # beyond int64
    ("<answer>\\boxed{\\text{12}}.</answer>", 12), ("<answer>12</answer>", None),
])
def test_model_answers_are_read_like_labels(text, expected):
    assert integer_answer(text) == expected


@pytest.mark.parametrize(("text", "reason"), [
    ("1e" + "9" * 5000, "too_large"),  # the exponent alone has 5000 digits
    ("{" * 200_000 + "1" + "}" * 200_000, None),  # unwrapping is linear: 200,000 brace pairs
    ("1" * 1_000_000, "too_large"),
])
def test_absurd_answers_are_judged_without_expanding_them(text, reason):
    """Each of these would hang or raise outside the parser's reasons if handled naively."""
    if reason is None:
        assert parse_integer(text) == 1
        return
    with pytest.raises(NotAnInteger) as err:
        parse_integer(text)
    assert err.value.reason == reason


def test_many_unclosed_boxes_are_one_pass():
    """A quadratic scan (each box reading to the end of the text) would not finish here."""
    assert final_answer("\\boxed{" * 100_000 + "7}") == "7"
    assert final_answer("\\boxed{" + "{" * 100_000) is None


@pytest.mark.parametrize(("turns", "expected"), [
    ("<answer> \\boxed{42} </answer>", "42"),
    ("\\boxed{1} then <answer>so \\boxed{2} and \\boxed{3}</answer> \\boxed{4}", "3"),
    ("<answer>no box</answer> but \\boxed{5} and \\boxed{6}", "6"),
    ("<answer>\\boxed{1}</answer> <answer>\\boxed{2}</answer>", "2"),  # two blocks: the last
    ("<answer>\\boxed{1}</answer> <answer>none</answer>", "1"),  # the last block has no box: the last box
    ("<answer>\\boxed{9} (budget ran out", "9"),  # an unclosed block still counts
    ("<answer>\\boxed{9", None),  # an unclosed box does not
    ("\\boxed{unclosed \\boxed{7}", "7"),
    ("\\boxed{\\boxed{3}}", "3"),  # the box opened last
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("\\boxed{\\{1, \\{2\\}\\}}", "\\{1, \\{2\\}\\}"),
    ("\\boxed{\\left\\{ x \\right.}", "\\left\\{ x \\right."),  # an escaped brace does not group
    ("\\boxed {10}", "10"),
    ("\\\\boxed{5}", None),  # a LaTeX line break followed by the word boxed
    ("nothing at all", None),
    (['<tool_call>{"code": "print(\'\\\\boxed{1}\')"}</tool_call>', "<answer>none</answer>"], None),
    (["<answer>\\boxed{2}</answer>", '<tool_call>{"code": "<answer>\\boxed{3}</answer>"}'], "2"),
    # An unclosed call ends with its turn: the next turn's answer still counts...
    (['<tool_call>{"name": "python", "arguments": {"code": "1"}}', "<answer>\\boxed{8}</answer>"], "8"),
    # ...but joined into one string it would swallow it.
    ('<tool_call>{"name": "python", "arguments": {"code": "1"}}<answer>\\boxed{8}</answer>', None),
])
def test_final_answer(turns, expected):
    assert final_answer(turns) == expected


def test_boxed_contents_in_order_of_opening():
    assert boxed_contents("\\boxed{a{b}c} x \\boxed{{d}} \\boxed{e\\boxed{f}}") == ["a{b}c", "{d}", "e\\boxed{f}", "f"]


def test_boxed_only_in_tool_output_is_no_answer():
    """Tool output never enters the model's turns; a box its code would print is skipped too."""
    assert final_answer([tool_call_text("print('\\\\boxed{7}')"), "<answer>as printed above</answer>"]) is None
    assert integer_answer(["The tool said 7.", "<answer>\\boxed{7}</answer>"]) == 7


@pytest.mark.parametrize(("answer", "letter"), [
    ("C", "C"), ("c", "C"), ("(C)", "C"), ("C)", "C"), ("[B]", "B"), ("\\text{C}", "C"), ("\\textbf{(D)}", "D"),
    ("$A$", "A"), ("C.", "C"), ("Option C", None), ("C and D", None), ("C: 3 eV", None), ("E", None),
    ("", None), (None, None),
])
def test_choice_letters(answer, letter):
    assert choice_letter(answer) == letter


def test_letter_references():
    assert letters_match("(b)", "B") and not letters_match("B and C", "B") and not letters_match(None, "B")
    assert choice_letter("E", letters="ABCDE") == "E"
    with pytest.raises(ValueError, match="not one of the letters"):
        LetterReference("E")


def test_tool_call_pattern_is_the_protocols():
    turn = "a " + tool_call_text("print(1)") + " b <tool_call>open to the end"
    bodies = [m.group(1) for m in TOOL_CALL.finditer(turn)]
    assert len(bodies) == 2 and json.loads(bodies[0])["arguments"] == {"code": "print(1)"}
    assert bodies[1] == "open to the end"
