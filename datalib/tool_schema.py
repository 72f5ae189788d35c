"""Tool definitions of the sources, as JSON Schema in the form the Qwen3 template prints.

ToolACE writes parameter containers as `"type": "dict"` and property types the Python
way (`int`, `float`, `bool`, `list`); it also carries `"required": null` at the top of
every tool (SCHEMAS.md §1). We map those onto JSON Schema so every source's tools look
alike to the model; unknown type names are kept as they are (the model sees them as text).
"""

from __future__ import annotations

from datalib.records import MalformedRow, function_tool

# Python-style and other non-JSON-Schema type names seen in the sources -> JSON Schema.
_TYPE_NAMES = {
    "dict": "object", "object": "object", "int": "integer", "integer": "integer", "float": "number",
    "double": "number", "number": "number", "str": "string", "string": "string", "bool": "boolean",
    "boolean": "boolean", "list": "array", "array": "array", "tuple": "array", "null": "null", "any": "string",
}


def _json_type(value: object) -> object:
    if isinstance(value, str):
        return _TYPE_NAMES.get(value.strip().lower(), value)
    if isinstance(value, list):  # e.g. ["string", "null"]
        return [_json_type(v) for v in value]
    return value


def to_json_schema(schema: object) -> object:
    """Recursively rename types; everything else (descriptions, enums, defaults) stays."""
    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "type":
            out[key] = _json_type(value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: to_json_schema(prop) for name, prop in value.items()}
        elif key == "required" and value is None:
            continue  # ToolACE's top-level `"required": null`
        else:
            out[key] = to_json_schema(value)
    return out


def tool_from_definition(defn: object, where: str = "tool") -> dict:
    """One source tool definition -> `{"type": "function", "function": {...}}`."""
    if isinstance(defn, dict) and defn.get("type") == "function" and isinstance(defn.get("function"), dict):
        defn = defn["function"]  # already in OpenAI form
    if not isinstance(defn, dict):
        raise MalformedRow("wrong_type", f"{where} is {type(defn).__name__}, not an object")
    name = defn.get("name")
    if not isinstance(name, str) or not name.strip():
        raise MalformedRow("missing_field", f"{where} has no name")
    description = defn.get("description") or ""
    if not isinstance(description, str):
        raise MalformedRow("wrong_type", f"{where} {name!r}: description is {type(description).__name__}")
    params = defn.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(params, dict):
        raise MalformedRow("wrong_type", f"{where} {name!r}: parameters is {type(params).__name__}")
    params = to_json_schema(params)
    params.setdefault("type", "object")
    return function_tool(name, description, params)


def tools_from_definitions(defs: object, where: str = "tools") -> tuple[dict, ...]:
    if not isinstance(defs, list):
        raise MalformedRow("wrong_type", f"{where} is {type(defs).__name__}, not a list")
    tools: dict[str, dict] = {}
    for i, d in enumerate(defs):
        tool = tool_from_definition(d, f"{where}[{i}]")
        tools.setdefault(tool["function"]["name"], tool)  # a repeated definition: keep the first
    return tuple(tools.values())
