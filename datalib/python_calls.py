"""Parse ToolACE's bracketed Python-style calls into structured function calls.

`[Market Trends API(trend_type="MARKET_INDEXES", country="us"), Filings(identifier="AAPL")]`

Tool names may contain spaces (78 % of ToolACE's do, SCHEMAS.md §1), so a `(\\w+)\\(`
regex cuts `Market Trends API` down to `API` (the lossy converter behind our sample file
did exactly that). We match the tool names the row's system text declares, longest
first, swap each for a placeholder identifier and let Python's own parser read the
argument list, so quoting, nesting and escapes are handled by `ast`, not by regexes.
"""

from __future__ import annotations

import ast
import re

from datalib.records import FunctionCall, MalformedRow

_PLACEHOLDER = "__tool_{}"
_JSON_WORDS = {"true": True, "false": False, "null": None}  # JSON literals written in a call


def looks_like_call_list(text: str) -> bool:
    t = text.strip()
    return t.startswith("[") and t.endswith("]") and "(" in t


def _value(node: ast.expr, restore: dict[str, str]) -> object:
    if isinstance(node, ast.Name) and node.id in _JSON_WORDS:
        return _JSON_WORDS[node.id]
    if isinstance(node, ast.List | ast.Tuple):
        return [_value(e, restore) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_value(k, restore): _value(v, restore)
                for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    value = ast.literal_eval(node)
    if isinstance(value, str) and "__tool_" in value:  # a tool name inside a string was swapped too
        for placeholder, name in restore.items():
            value = value.replace(placeholder + "(", name + "(")
    return value


def parse_call_list(text: str, tool_names: list[str]) -> list[FunctionCall]:
    """Calls in `text`; raises MalformedRow (`unparseable_call` / `unknown_tool`)."""
    names = sorted(set(tool_names), key=len, reverse=True)
    if not names:
        raise MalformedRow("unknown_tool", "a call list but the row declares no tools")
    by_placeholder = {_PLACEHOLDER.format(i): n for i, n in enumerate(names)}
    pattern = re.compile(r"(?<=[\[,])(\s*)(" + "|".join(re.escape(n) for n in names) + r")\s*\(")
    index = {n: i for i, n in enumerate(names)}
    rewritten = pattern.sub(lambda m: m.group(1) + _PLACEHOLDER.format(index[m.group(2)]) + "(", text.strip())
    try:
        tree = ast.parse(rewritten, mode="eval").body
    except SyntaxError as e:
        raise MalformedRow("unparseable_call", f"{e.msg}: {text[:120]!r}") from None
    if not isinstance(tree, ast.List):
        raise MalformedRow("unparseable_call", f"not a list of calls: {text[:120]!r}")
    calls = []
    for node in tree.elts:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise MalformedRow("unparseable_call", f"not a call: {ast.unparse(node)[:120]!r}")
        name = by_placeholder.get(node.func.id)
        if name is None:
            raise MalformedRow("unknown_tool", f"{node.func.id!r} is not among the declared tools")
        if node.args:
            raise MalformedRow("unparseable_call", f"{name!r} called with positional arguments")
        try:
            arguments = {kw.arg: _value(kw.value, by_placeholder) for kw in node.keywords if kw.arg is not None}
        except (ValueError, TypeError, SyntaxError) as e:
            raise MalformedRow("unparseable_call", f"{name!r}: an argument is not a literal ({e})") from None
        calls.append(FunctionCall(name, arguments))
    if not calls:
        raise MalformedRow("unparseable_call", "an empty call list")
    return calls
