"""The one answer module (SPEC §5, §8): what the model answered, and what an answer means.

Used by the reward (rollout/reward.py), the RL labels and the agreement filter
(datalib/integers.py, data_prep/agreement.py) and evaluation, so that a label, a
filter-model sample and a scored rollout are read by the same rules:

- `final_answer(turns)`: the last `\\boxed{}` of the last `<answer>` block, else the last
  `\\boxed{}` of the model's own text; tool-call bodies never count (SPEC §5).
- `boxed_contents` / `last_boxed`: every complete `\\boxed{...}`, nested braces balanced
  in one pass; `\\{` and `\\}` are literal braces, as in LaTeX.
- `parse_integer(value, max_digits)`: one strict parser for labels and model answers;
  raises `NotAnInteger` with a reason (`empty_answer`, `not_integer`, `complex_format`,
  `too_large`, `inexact_float`). `answer_integer(answer)` reads an extracted answer the same
  way, None where it is no integer; `integer_answer(turns)` is the model-side shortcut.
- `IntegerReference`: a label matched by those integer rules instead of math-verify (the
  agreement filter of RL curation, SPEC §8).
- `choice_letter` / `letters_match` / `LetterReference`: GPQA-style letters (SPEC §5).
- `TOOL_CALL`: the canonical `<tool_call>` pattern (an unclosed call runs to the end of its turn).

Decisions (each pinned by tests/rollout/test_answer.py):

- `\\boxed{1, 2}`, `\\boxed{3,4,5}`, `1, 234`: no integer (`complex_format`), a list. Thousands
  are groups of three digits after a first group of 1-3, one separator throughout:
  `1,000`, `1{,}000`, `1\\,000`, `10 000`, `10,\\!080` (MATH-500's) are integers.
- `\\text{12}`, `$12$`, `\\$12`, `12.`, `12.0`, `007` are 12 or 7; `-0` is 0.
- `1e5`, `1.5\\times10^{3}`, `1200e-2` are 100000, 1500, 12 (computed on digit strings);
  `10^{3}`, `2^{10}`, `\\frac{24}{2}`, `12\\%`, `12 apples` are expressions, no integer.
- ASCII only: `١٢`, `１２`, `12\u00a0000`, `−5` (U+2212) are no integer.
- `1e999999999` and 19+ digit answers are `too_large` at once (never expanded); a float
  beyond 2^53 from JSON/Parquet is `inexact_float` (its digits were lost before us).
- A box only in a tool call's code (or in tool output) is no answer (SPEC §5). Of two
  `<answer>` blocks the last counts; an unclosed `\\boxed{` is no answer, an unclosed
  `<answer>` block still counts (the token budget may cut `</answer>`).
- Letters: `C`, `(c)`, `\\text{C}`, `C.` name C; `Option C`, `C and D`, `C: 3 eV` name none.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

# Group 1 is the call body. Applied to one turn at a time: an unclosed call ends with its turn.
TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)

INT64_DIGITS = 18  # every integer of at most 18 digits fits int64 (where labels are stored)

_BOX_TOKENS = re.compile(r"\\boxed\s*\{|\\.|[{}]", re.DOTALL)
_ANSWER_OPEN, _ANSWER_CLOSE = "<answer>", "</answer>"


def boxed_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the content of every complete `\\boxed{...}`, in order of opening.

    One pass with a stack, so ten thousand unclosed boxes cost what one does. An escaped
    brace (`\\{`, `\\}`) does not group, as in LaTeX; a box left open is no answer.
    """
    spans: list[tuple[int, int]] = []
    stack: list[int] = []  # content start of an open box, or -1 for a plain group
    for m in _BOX_TOKENS.finditer(text):
        token = m.group()
        if token == "{":
            stack.append(-1)
        elif token == "}":
            if stack and (start := stack.pop()) >= 0:
                spans.append((start, m.start()))
        elif token.startswith("\\boxed"):
            stack.append(m.end())
    spans.sort()
    return spans


def boxed_contents(text: str) -> list[str]:
    """Contents of every complete `\\boxed{...}` in order, nested braces balanced."""
    return [text[a:b] for a, b in boxed_spans(text)]


def last_boxed(text: str) -> str | None:
    """Content of the `\\boxed{...}` opened last, or None."""
    spans = boxed_spans(text)
    return text[spans[-1][0]:spans[-1][1]] if spans else None


def _without_tool_calls(turns: str | Sequence[str]) -> str:
    # Per turn: an unclosed call in one turn must not swallow the turns after it.
    if isinstance(turns, str):
        turns = [turns]
    return " ".join(TOOL_CALL.sub(" ", t) for t in turns)


def _last_answer_block(text: str) -> str | None:
    start = text.rfind(_ANSWER_OPEN)
    if start < 0:
        return None
    body = text[start + len(_ANSWER_OPEN):]
    end = body.find(_ANSWER_CLOSE)
    return body if end < 0 else body[:end]  # an unclosed block (the budget ran out) still counts


def final_answer(turns: str | Sequence[str]) -> str | None:
    """The model's final answer (SPEC §5), stripped, or None when it boxed nothing.

    `turns` are the model's own turns (`Trajectory.turns`; a joined string also works,
    but then an unclosed tool call hides everything after it). Tool-call bodies are
    skipped: code the model sends (`print("\\boxed{...}")`) is an action, and what it
    prints comes back as feedback, which is never part of the model's text.
    """
    text = _without_tool_calls(turns)
    block = _last_answer_block(text)
    if block is not None and (inside := last_boxed(block)) is not None:
        return inside.strip()
    everywhere = last_boxed(text)
    return everywhere.strip() if everywhere is not None else None


class NotAnInteger(ValueError):
    """The answer is not a plain integer within the digit limit; `reason` is the category."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


_A = re.ASCII  # other digit scripts (`١٢`, `１２`) and Unicode spaces are not integers here
_INT = re.compile(r"([+-]?)(\d+)", _A)
# Digit groups of three after a first group of 1-3, the same separator throughout. A comma
# followed by a plain space is a list (`\boxed{1, 234}`); `,\!` (MATH's own style) is not.
_THOUSANDS = re.compile(r"([+-]?)(\d{1,3}(?:(,|\s|\\,|\{,\})\d{3})(?:\3\d{3})*)(?:\.(\d*))?", _A)
_DECIMAL = re.compile(r"([+-]?)(\d+)\.(\d*)", _A)
_BARE_FRACTION = re.compile(r"[+-]?\.\d+", _A)
_SCIENTIFIC = re.compile(
    r"([+-]?)(\d+)(?:\.(\d*))?\s*(?:[eE]|(?:\\times|\\cdot|\*)\s*10\s*(?:\^|\*\*)\s*)\{?([+-]?)(\d+)\}?", _A)
_FRACTION = re.compile(r"[+-]?(?:\d+\s*/\s*\d+|\\[dt]?frac\s*\{?\s*\d+\s*\}?\s*\{?\s*\d+\s*\}?)", _A)
_WRAPPERS = tuple((left, right, len(left), len(right)) for left, right in (
    ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("\\text{", "}"), ("\\textbf{", "}"), ("\\mathrm{", "}"),
    ("\\mathbf{", "}"), ("{", "}")))
_LOOSE_THIN_SPACE = re.compile(r",\s*\\!\s*")  # `10,\! 080`: the thousands comma of MATH-500
_FLOAT_EXACT = 2 ** 53  # beyond it a float no longer holds every integer


def _unwrap(text: str) -> str:
    """Strip a surrounding box, math delimiters, `\\text{}` and a final full stop; linear time."""
    boxed = last_boxed(text) if "\\boxed" in text else None
    s = boxed if boxed is not None else text
    i, j = 0, len(s)
    while True:  # moves two indices, never slices: 200,000 nested braces cost what one does
        while i < j and s[i].isspace():
            i += 1
        while i < j and (s[j - 1].isspace() or s[j - 1] == "."):
            j -= 1
        if i == j or s[i] not in "$\\{":  # every wrapper starts with one of these
            break
        for left, right, n_left, n_right in _WRAPPERS:
            if j - i >= n_left + n_right and s.startswith(left, i, j) and s.endswith(right, i, j):
                i, j = i + n_left, j - n_right
                break
        else:
            break
    s = s[i:j]
    if "\\" not in s:
        return s
    s = _LOOSE_THIN_SPACE.sub(",", s).replace("\\!", "").replace("\\ ", " ").strip()
    return s[2:].lstrip() if s.startswith("\\$") else s  # a currency sign, not a delimiter


def _checked(sign: str, digits: str, max_digits: int, shown: str) -> int:
    significant = digits.lstrip("0") or "0"
    if len(significant) > max_digits:
        raise NotAnInteger("too_large", f"{shown} has {len(significant)} digits > {max_digits}")
    return int(sign + significant)


def _scientific(sign: str, whole: str, frac: str, exp_sign: str, exp: str, max_digits: int, shown: str) -> int:
    """mantissa x 10^exp on digit strings: `6.5e27330467` is judged from its exponent, never expanded."""
    digits = (whole + frac).lstrip("0")
    if not digits:
        return 0
    exp = exp.lstrip("0") or "0"
    if len(exp) > 9:  # |exponent| >= 10^9: too large, or (negative) far below 1
        reason = "not_integer" if exp_sign == "-" else "too_large"
        raise NotAnInteger(reason, f"{shown} has exponent {exp_sign}{exp[:12]}…")
    shift = (-int(exp) if exp_sign == "-" else int(exp)) - len(frac)
    if shift >= 0:
        if len(digits) + shift > max_digits:
            raise NotAnInteger("too_large", f"{shown} has {len(digits) + shift} digits > {max_digits}")
        return int(sign + digits + "0" * shift)
    if len(digits) - len(digits.rstrip("0")) < -shift:
        raise NotAnInteger("not_integer", shown)
    return _checked(sign, digits[:shift], max_digits, shown)


def _parse_number(value: float, max_digits: int) -> int:
    if math.isnan(value):
        raise NotAnInteger("complex_format", "NaN")
    if math.isinf(value):
        raise NotAnInteger("too_large", f"{value}")
    if not value.is_integer():
        raise NotAnInteger("not_integer", f"{value!r}")
    if abs(value) >= 10.0 ** max_digits:
        raise NotAnInteger("too_large", f"{value!r} has more than {max_digits} digits")
    if abs(value) >= _FLOAT_EXACT:  # 1.2345678901234568e+17: the source's digits are already lost
        raise NotAnInteger("inexact_float", f"{value!r} is a float beyond 2^53")
    n = int(value)
    return _checked("-" if n < 0 else "", str(abs(n)), max_digits, repr(value))


def parse_integer(value: object, max_digits: int = INT64_DIGITS) -> int:
    """The integer an answer states (a label, or a model's boxed answer); raises NotAnInteger.

    Accepted: `025`, `-0`, `1,000`, `1{,}000`, `1\\,000`, `10 000`, `10,\\!080`, `12.0`, `1e6`,
    `1.5\\times10^{3}`, `\\$12`, `$42$`, `\\text{12}`, `\\boxed{7}`. Lists (`1, 2`, `3,4,5`), powers
    (`10^{3}`), fractions, decimals, units and non-ASCII digits are not plain integers.
    """
    if isinstance(value, bool):
        raise NotAnInteger("complex_format", f"a boolean answer {value!r}")
    if isinstance(value, Decimal):  # a Parquet decimal column: judged as the integer it is, if it is one
        if not value.is_finite() or value != value.to_integral_value():
            raise NotAnInteger("not_integer" if value.is_finite() else "complex_format", f"{value}")
        value = int(value)
    if isinstance(value, int):
        return _checked("-" if value < 0 else "", str(abs(value)), max_digits, "answer")
    if isinstance(value, float):
        return _parse_number(value, max_digits)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise NotAnInteger("empty_answer", f"answer {value!r}")
    if not isinstance(value, str):
        raise NotAnInteger("complex_format", f"answer of type {type(value).__name__}")
    if value.isdigit() and value.isascii():  # the common case, before any pattern
        return _checked("", value, max_digits, "answer")
    shown = repr(value.strip()[:60])
    s = _unwrap(value)
    if m := _INT.fullmatch(s):
        return _checked(m.group(1), m.group(2), max_digits, shown)
    if m := _THOUSANDS.fullmatch(s):
        sign, body, _, frac = m.groups()
        if frac and frac.strip("0"):
            raise NotAnInteger("not_integer", shown)
        return _checked(sign, re.sub(r"\D", "", body, flags=_A), max_digits, shown)
    if m := _DECIMAL.fullmatch(s):
        if m.group(3).strip("0"):
            raise NotAnInteger("not_integer", shown)
        return _checked(m.group(1), m.group(2), max_digits, shown)
    if m := _SCIENTIFIC.fullmatch(s):
        sign, whole, frac, exp_sign, exp = m.groups()
        return _scientific(sign, whole, frac or "", exp_sign, exp, max_digits, shown)
    if _BARE_FRACTION.fullmatch(s) or _FRACTION.fullmatch(s):
        raise NotAnInteger("not_integer", shown)
    raise NotAnInteger("complex_format", shown)


def answer_integer(answer: str | None, max_digits: int = INT64_DIGITS) -> int | None:
    """An extracted answer as an integer, by the rules labels follow; None for no answer, a
    non-integer, or one longer than `max_digits` (no int64 label can equal it)."""
    if answer is None:
        return None
    try:
        return parse_integer(answer, max_digits)
    except NotAnInteger:
        return None


def integer_answer(turns: str | Sequence[str], max_digits: int = INT64_DIGITS) -> int | None:
    """The model's final answer as an integer, by the rules labels follow; None otherwise."""
    return answer_integer(final_answer(turns), max_digits)


_LETTER = re.compile(r"[(\[]?\s*([A-Za-z])\s*[)\]]?\s*[.:]?", _A)


def choice_letter(answer: str | None, letters: str = "ABCD") -> str | None:
    """The option letter an answer names, upper case: `C`, `(c)`, `\\text{C}`, `C.`; else None.

    Strict on purpose: `Option C`, `C and D` or `C: 3 eV` name no single letter.
    """
    if answer is None:
        return None
    m = _LETTER.fullmatch(_unwrap(answer))
    letter = m.group(1).upper() if m else None
    return letter if letter is not None and letter in letters else None


def letters_match(answer: str | None, reference: str, letters: str = "ABCD") -> bool:
    """A GPQA-style answer is right when it names exactly the reference letter (SPEC §5)."""
    ref = choice_letter(reference, letters)
    if ref is None:
        raise ValueError(f"reference {reference!r} is not one of the letters {letters}")
    return choice_letter(answer, letters) == ref


@dataclass(frozen=True)
class LetterReference:
    """A multiple-choice reference: `rollout.reward.score` matches it by letter, not math-verify."""

    letter: str  # e.g. "C"
    letters: str = "ABCD"  # the options offered

    def __post_init__(self) -> None:
        if choice_letter(self.letter, self.letters) is None:
            raise ValueError(f"reference {self.letter!r} is not one of the letters {self.letters}")


@dataclass(frozen=True)
class IntegerReference:
    """An integer label: `rollout.reward` scores 1 when the answer reads as this integer
    (`answer_integer`), without math-verify (SPEC §8's agreement rule)."""

    value: int
