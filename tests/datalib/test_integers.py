"""Integer normalisation of RL answers (SPEC §8): rollout.answer's rules, reasons for the card."""

from __future__ import annotations

import pytest

from datalib.integers import parse_integer
from datalib.records import FilteredRow


@pytest.mark.parametrize("text,value", [
    ("025", 25), ("1,000", 1000), ("1,234,567", 1234567), ("\\boxed{-7}", -7), ("$42$", 42), ("\\(14\\)", 14),
    ("12.0", 12), ("-3", -3), ("+5", 5), ("00", 0), ("1{,}000", 1000), ("1\\,000", 1000), ("10 000", 10000),
    ("1e6", 1000000), ("1.5e3", 1500), ("The answer is \\boxed{\\text{25}}.", 25), ("\\boxed{\\boxed{3}}", 3),
    (" 7. ", 7), (14, 14), ("999999999999999999", 999999999999999999),
    ("10,\\!080", 10080), ("11,\\! 111,\\! 111,\\! 100", 11111111100), ("\\$32,\\!348", 32348),  # MATH-500's
    (12.0, 12), (-3.0, -3), ("1200e-2", 12), ("1,234.00", 1234), ("-0", 0),
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
    ("1, 2", "complex_format"), ("3,4,5", "complex_format"), ("1, 234", "complex_format"),  # lists, not 12/345
    ("١٢", "complex_format"), ("１２", "complex_format"), ([1], "complex_format"),
    ("1e999999999", "too_large"), ("1e-5", "not_integer"), ("1,234.5", "not_integer"),
    (float("inf"), "too_large"), (float("nan"), "complex_format"), (2.5, "not_integer"),
    (1e20, "too_large"), (123456789012345678.0, "inexact_float"),  # a float's digits past 2^53 are lost
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
