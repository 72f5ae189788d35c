"""The repository root: relative local paths in configs resolve against it."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def resolve_local(location: str) -> Path:
    path = Path(location).expanduser()
    return path if path.is_absolute() else REPO_ROOT / path
