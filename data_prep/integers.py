"""Integer answers of RL problems (SPEC §8: "integer answers only").

`parse_integer("025") == 25`, `"1,000" -> 1000`, `"\\boxed{-7}" -> -7`, `"$42$" -> 42`,
`"12.0" -> 12`. Everything else is dropped with a reason the data card counts:

- `empty_answer`: nothing there;
- `not_integer`: a decimal or a fraction (`0.464399`, `123/59`, `\\frac{1}{2}`; fractions are
  never integer labels, even `4/2`);
- `complex_format`: not a plain number (`2^{25}`, `\\sqrt{2}`, lists like `1,13717420,8`,
  hex `3D58725572C62302`, text): unverifiable as an integer label;
- `too_large`: more digits than the configured limit (`6.5e27330467`, the paper's
  example, is never expanded: its size is read off the exponent).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from data_prep.records import FilteredRow

_INT = re.compile(r"[+-]?\d+")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:(,|\s|\\,|\{,\})\d{3})(?:\1\d{3})*")
_INT_VALUED_DECIMAL = re.compile(r"([+-]?\d+)\.0*")
_DECIMAL = re.compile(r"[+-]?\d*\.\d+")
_SCIENTIFIC = re.compile(r"([+-]?)(\d+(?:\.\d+)?)\s*(?:[eE]\+?|\\times\s*10\^\{?|\*\s*10\s*\*\*\s*)(\d+)\}?")
_FRACTION = re.compile(r"[+-]?(?:\d+\s*/\s*\d+|\\[dt]?frac\{?\d+\}?\{?\d+\}?)")
_WRAPPERS = (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("\\text{", "}"), ("\\mathrm{", "}"), ("{", "}"))


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (braces balanced), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1: j]
    return None


def _unwrap(text: str) -> str:
    s = text.strip()
    boxed = last_boxed(s)
    if boxed is not None:
        s = boxed.strip()
    changed = True
    while changed:
        changed = False
        s = s.strip().rstrip(".").strip()
        for left, right in _WRAPPERS:
            if s.startswith(left) and s.endswith(right) and len(s) >= len(left) + len(right):
                s, changed = s[len(left): len(s) - len(right)], True
    return s.replace("\\!", "").replace("\\ ", " ").strip()


def _checked(digits: str, sign: str, max_digits: int) -> int:
    significant = digits.lstrip("0") or "0"
    if len(significant) > max_digits:
        raise FilteredRow("too_large", f"{len(significant)} digits > {max_digits}")
    return int(sign + significant)


def parse_integer(text: object, max_digits: int) -> int:
    """The integer a source answer states; raises FilteredRow with the reason otherwise."""
    if isinstance(text, bool):
        raise FilteredRow("complex_format", f"a boolean answer {text!r}")
    if isinstance(text, int):
        return _checked(str(abs(text)), "-" if text < 0 else "", max_digits)
    if not isinstance(text, str) or not text.strip():
        raise FilteredRow("empty_answer", f"answer {text!r}")
    s = _unwrap(text)
    if _INT.fullmatch(s):
        sign = "-" if s.startswith("-") else ""
        return _checked(s.lstrip("+-"), sign, max_digits)
    if _THOUSANDS.fullmatch(s):
        return parse_integer(re.sub(r"\\,|\{,\}|[,\s]", "", s), max_digits)
    if m := _INT_VALUED_DECIMAL.fullmatch(s):
        return parse_integer(m.group(1), max_digits)
    if m := _SCIENTIFIC.fullmatch(s):
        sign, mantissa, exponent = m.groups()
        whole, _, frac = mantissa.partition(".")
        if len(whole.lstrip("0")) + int(exponent[:12]) > max_digits and int(mantissa.replace(".", "") or 0):
            raise FilteredRow("too_large", f"{text.strip()[:40]!r} has about {exponent} digits")
        try:
            value = Decimal(mantissa).scaleb(int(exponent))
        except InvalidOperation:
            raise FilteredRow("complex_format", f"answer {text.strip()[:80]!r}") from None
        if value != value.to_integral_value():
            raise FilteredRow("not_integer", f"answer {text.strip()[:80]!r}")
        return parse_integer(sign + str(int(value)), max_digits)
    if _DECIMAL.fullmatch(s) or _FRACTION.fullmatch(s):
        raise FilteredRow("not_integer", f"answer {text.strip()[:80]!r}")
    raise FilteredRow("complex_format", f"answer {text.strip()[:80]!r}")
