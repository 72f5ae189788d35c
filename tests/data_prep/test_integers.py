"""Integer normalisation of RL answers (SPEC §8)."""

from __future__ import annotations

import pytest

from data_prep.integers import last_boxed, parse_integer
from data_prep.records import FilteredRow


@pytest.mark.parametrize("text,value", [
    ("025", 25), ("1,000", 1000), ("1,234,567", 1234567), ("\\boxed{-7}", -7), ("$42$", 42), ("\\(14\\)", 14),
    ("12.0", 12), ("-3", -3), ("+5", 5), ("00", 0), ("1{,}000", 1000), ("1\\,000", 1000), ("10 000", 10000),
    ("1e6", 1000000), ("1.5e3", 1500), ("The answer is \\boxed{\\text{25}}.", 25), ("\\boxed{\\boxed{3}}", 3),
    (" 7. ", 7), (14, 14), ("999999999999999999", 999999999999999999),
])
def test_integer_answers(text, value):
    assert parse_integer(text, 18) == value


@pytest.mark.parametrize("text,reason", [
    ("0.464399", "not_integer"), ("123/59", "not_integer"), ("\\frac{1}{2}", "not_integer"),
    ("\\dfrac{3}{4}", "not_integer"), ("1.25e1", "not_integer"),
    ("3D58725572C62302", "complex_format"), ("1,13717420,8", "complex_format"), ("2^{25}", "complex_format"),
    ("\\sqrt{2}", "complex_format"), ("5 apples", "complex_format"), ("1,00", "complex_format"),
    ("x = 5", "complex_format"), (True, "complex_format"),
    ("", "empty_answer"), ("   ", "empty_answer"), (None, "empty_answer"),
    ("6.5e27330467", "too_large"), ("1234567890123456789", "too_large"), ("-1234567890123456789", "too_large"),
])
def test_non_integer_answers_are_dropped_with_a_reason(text, reason):
    with pytest.raises(FilteredRow) as err:
        parse_integer(text, 18)
    assert err.value.reason == reason


def test_digit_limit_is_configurable():
    assert parse_integer("12345", 5) == 12345
    with pytest.raises(FilteredRow, match="too_large"):
        parse_integer("123456", 5)
    assert parse_integer("000123", 3) == 123  # leading zeros are not digits of the value


def test_huge_exponent_is_never_expanded():
    with pytest.raises(FilteredRow, match="too_large"):
        parse_integer("6.5e27330467", 18)  # would need 27 million digits


def test_last_boxed_balances_braces():
    assert last_boxed("a \\boxed{1} b \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert last_boxed("no box") is None
    assert last_boxed("\\boxed{unclosed") is None
