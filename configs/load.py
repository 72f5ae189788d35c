"""Load the pipeline config: YAML file, then dotted overrides (`--set rl.stage1.steps=5`).

A YAML may start from another one: `base: rstar2_agent_14b.yaml` (a path relative to the
file) loads that first and merges this file's sections over it, key by key; a list or a
scalar replaces the base's value whole. So an overlay holds only what differs
(configs/rehearsal.yaml differs from the paper config in numbers only).

Errors name the file, the dotted key and the allowed keys or values; a key written twice in
one mapping (which YAML would resolve silently to the last) names the file and both lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from configs.schema import PipelineConfig


class ConfigError(ValueError):
    pass


class _StrictLoader(yaml.SafeLoader):
    """yaml.safe_load keeps the last of two equal keys without a word; a config refuses them."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)  # merge keys (`<<:`) may repeat a key on purpose
    seen: dict[object, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise ConfigError(f"{loader.name}, line {line}: duplicate key {key!r} (first on line {seen[key]}); "
                              "YAML would keep only the last one")
        seen[key] = line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def parse_yaml(text: str, name: str) -> object:
    """YAML text, duplicate keys refused; every error names `name` (a file, or `--set …`) and the line."""
    loader = _StrictLoader(text)
    loader.name = name
    try:
        return loader.get_single_data()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{name}{where}: not valid YAML: {getattr(e, 'problem', None) or e}") from None
    finally:
        loader.dispose()


def _model_for(path: list[str]) -> type[BaseModel] | None:
    """The pydantic model that holds the key at `path` (None past a leaf)."""
    model: type[BaseModel] = PipelineConfig
    for part in path:
        field = model.model_fields.get(part)
        if field is None:
            return None
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:
            return None
    return model


def apply_override(data: dict, override: str, source: str = "--set") -> None:
    if "=" not in override:
        raise ConfigError(f"{source}: override {override!r} must look like key.path=value")
    dotted, raw = override.split("=", 1)
    parts = dotted.strip().split(".")
    parent = _model_for(parts[:-1])
    if parent is None or (parts[-1] not in parent.model_fields and parent.model_config.get("extra") == "forbid"):
        known = parent or _model_for(_longest_known_prefix(parts))
        where = ".".join(parts[:-1]) or "the top level"
        allowed = ", ".join(known.model_fields) if known else "?"
        raise ConfigError(f"{source}: unknown key {dotted!r}; keys allowed under {where}: {allowed}")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{source}: {dotted!r} goes through a value that is not a section")
    node[parts[-1]] = parse_yaml(raw, source) if raw.strip() else ""


def _longest_known_prefix(parts: list[str]) -> list[str]:
    for i in range(len(parts) - 1, -1, -1):
        if _model_for(parts[:i]) is not None:
            return parts[:i]
    return []


def _describe(err: dict) -> str:
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        parent = _model_for([str(p) for p in err["loc"][:-1]])
        allowed = ", ".join(parent.model_fields) if parent else "?"
        return f"{loc}: unknown key; allowed keys here: {allowed}"
    given = err.get("input")
    return f"{loc}: {msg} (got {given!r})" if not isinstance(given, dict) else f"{loc}: {msg}"


def validate(data: dict[str, Any], source: str) -> PipelineConfig:
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as e:
        lines = "\n  ".join(_describe(err) for err in e.errors())
        raise ConfigError(f"invalid config {source}:\n  {lines}") from None


def merge(base: dict, over: dict) -> dict:
    """`over` merged into a copy of `base`: mappings key by key, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def read_yaml(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """The file's sections, with its `base:` chain merged under them."""
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist" + (f" (the base of {seen[-1]})" if seen else ""))
    if path.resolve() in seen:
        raise ConfigError(f"{path}: `base:` goes round in a circle: {' -> '.join(map(str, [*seen, path]))}")
    data = parse_yaml(path.read_text(encoding="utf-8"), str(path)) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"{path}: `base:` names one YAML file, got {base!r}")
    return merge(read_yaml(path.parent / base, (*seen, path.resolve())), data)


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> PipelineConfig:
    path = Path(path)
    data = read_yaml(path)
    for ov in overrides:
        apply_override(data, ov, source=f"{path} --set {ov}")
    return validate(data, str(path))


def literal_values(model: type[BaseModel], field: str) -> tuple:
    """Allowed values of a Literal field (used in docs and tests)."""
    return get_args(model.model_fields[field].annotation)
