"""STYLE rule 1: imports point one way; nothing below tasks/ imports Prefect."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BELOW_TASKS = ["assets", "configs", "pipeline", "data_prep", "training", "evaluation", "rollout", "sandbox"]
FORBIDDEN = ("prefect", "tasks", "flows")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", BELOW_TASKS)
def test_no_prefect_or_orchestration_imports_below_tasks(package):
    offenders = {
        str(f.relative_to(REPO)): sorted(_imports(f) & set(FORBIDDEN))
        for f in (REPO / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_every_stage_module_exists_and_has_main():
    from pipeline.stages import STAGES

    for spec in STAGES:
        path = REPO / (spec.module.replace(".", "/") + ".py")
        assert path.exists(), spec.module
        assert "def main(" in path.read_text(), spec.module
