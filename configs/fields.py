"""Which config fields belong in a stage's cache key (issue 8, SPEC §1).

A field declared with `operational(...)` says how a stage runs, never what it computes:
server URLs and ports, worker/process/engine counts, batch windows, service timeouts,
retries, log levels, progress intervals. It stays out of the stage key, so moving a run
to another cluster allocation reruns nothing.

The rule for fields on the edge: a field is operational only when every allowed value
gives the same artifact, or for sampled work a draw from the same distribution with
the same seeds (float rounding from a different batch composition counts as the same).
A field that can change what a call returns (a per-call time or memory limit of the
code service, a security switch a program could observe, the engine kind, the dtype,
the tool-call cap per turn) is part of the result and stays in the key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

_MARK = "operational"


def operational(default: Any = ..., **kwargs: Any) -> Any:
    """`Field(default, **kwargs)` marked as not shaping the stage's output."""
    extra = dict(kwargs.pop("json_schema_extra", None) or {})
    extra[_MARK] = True
    return Field(default, json_schema_extra=extra, **kwargs)


def is_operational(model: type[BaseModel], name: str) -> bool:
    extra = model.model_fields[name].json_schema_extra
    return isinstance(extra, dict) and bool(extra.get(_MARK))


def operational_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted names of every operational field under `model`, nested models included."""
    found: list[str] = []
    for name, info in model.model_fields.items():
        dotted = f"{prefix}{name}"
        if is_operational(model, name):
            found.append(dotted)
            continue
        for sub in _nested_models(info.annotation):
            found.extend(operational_fields(sub, f"{dotted}."))
    return found


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _nested_models(arg)]


def key_view(value: Any) -> Any:
    """JSON-ready view of a config value with every operational field left out."""
    if isinstance(value, BaseModel):
        cls = type(value)
        return {
            name: key_view(getattr(value, name))
            for name in cls.model_fields
            if not is_operational(cls, name)
        }
    if isinstance(value, dict):
        return {str(k): key_view(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [key_view(v) for v in value]
    return to_jsonable_python(value)
