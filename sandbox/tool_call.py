"""Turn the text between `<tool_call>` and `</tool_call>` into a ToolCall (SPEC §2).

Anything that is not a well-formed call becomes an InvalidCall whose `reason` is the
one-line feedback the model receives, so a malformed call is answered, never dropped.
"""

from __future__ import annotations

import json

from sandbox.types import InvalidCall, ToolCall

TOOL_NAME = "execute_python_code_with_standard_io"


def _invalid(reason: str, raw: str) -> InvalidCall:
    return InvalidCall(reason=f"Invalid tool call: {reason}", raw=raw)


def parse_tool_call(body: str) -> ToolCall | InvalidCall:
    """Validate one call body; `arguments` may also be a JSON-encoded string (a common model quirk)."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError) as exc:
        # json's message holds line/column, which helps the model find its mistake.
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return _invalid(f"the body is not valid JSON ({msg}).", body)
    if not isinstance(obj, dict):
        return _invalid(f"expected a JSON object, got {type(obj).__name__}.", body)
    if "name" not in obj:
        return _invalid('missing "name".', body)
    name = obj["name"]
    if name != TOOL_NAME:
        shown = name if isinstance(name, str) else json.dumps(name)
        return _invalid(f'unknown tool "{shown[:100]}"; the only tool is "{TOOL_NAME}".', body)
    args = obj.get("arguments", obj.get("parameters"))
    if args is None:
        return _invalid('missing "arguments".', body)
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return _invalid('"arguments" is a string that is not valid JSON.', body)
    if not isinstance(args, dict):
        return _invalid('"arguments" must be an object.', body)
    if "code" not in args:
        return _invalid('missing "code" in "arguments".', body)
    code = args["code"]
    if not isinstance(code, str):
        return _invalid(f'"code" must be a string, got {type(code).__name__}.', body)
    stdin = args.get("input", "")
    if stdin is None:
        stdin = ""
    if not isinstance(stdin, str):
        return _invalid(f'"input" must be a string, got {type(stdin).__name__}.', body)
    return ToolCall(code=code, input=stdin)
