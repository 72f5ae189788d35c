"""STYLE rule 1 and issue 20: imports point one way.

- Nothing below tasks/ imports Prefect, tasks or flows.
- The libraries `rollout/` and `sandbox/` import nothing but each other and `configs/`: a
  user can take them without the pipeline (no orchestrator, no stage kit, no stage).
- `datalib/` (the data library) imports no stage package and nothing of the orchestrator;
  `stagekit/` imports nothing of the orchestrator.
- The project's packages import each other without a cycle (imports inside functions count).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ["flows", "tasks", "orchestrator", "stagekit", "configs", "assets", "data_prep", "datalib", "training",
            "evaluation", "rollout", "sandbox", "benchmarks"]
BELOW_TASKS = [p for p in PACKAGES if p not in ("flows", "tasks")]
ALLOWED = {  # package -> the project packages it may import (besides itself)
    "rollout": {"sandbox", "configs"},
    "sandbox": {"configs"},
    "datalib": {"rollout", "sandbox", "configs", "stagekit"},
    "stagekit": {"configs"},
    "configs": set(),
}


def _imports(path: Path) -> set[str]:
    """Top-level names of every absolute import in the file, at any depth (function bodies too)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _package_imports(package: str) -> dict[str, set[str]]:
    return {str(f.relative_to(REPO)): _imports(f) for f in (REPO / package).rglob("*.py")}


@pytest.mark.parametrize("package", BELOW_TASKS)
def test_no_prefect_or_orchestration_imports_below_tasks(package):
    offenders = {f: sorted(names & {"prefect", "tasks", "flows"}) for f, names in _package_imports(package).items()}
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_libraries_import_only_what_they_may(package):
    forbidden = set(PACKAGES) - ALLOWED[package] - {package}
    offenders = {f: sorted(names & forbidden) for f, names in _package_imports(package).items()}
    assert {k: v for k, v in offenders.items() if v} == {}, f"{package} may import only {sorted(ALLOWED[package])}"


def test_packages_import_each_other_without_a_cycle():
    graph = {p: set().union(*_package_imports(p).values()) & set(PACKAGES) - {p} for p in PACKAGES}
    state: dict[str, str] = {}

    def visit(p: str, path: list[str]) -> None:
        state[p] = "open"
        for q in sorted(graph[p]):
            if state.get(q) == "open":
                raise AssertionError("import cycle: " + " -> ".join([*path, p, q][path.index(q) if q in path else 0:]))
            if q not in state:
                visit(q, [*path, p])
        state[p] = "done"

    for p in PACKAGES:
        if p not in state:
            visit(p, [])


def test_the_layout_test_sees_a_forbidden_import(tmp_path):
    """The check above would catch a library that imports the orchestrator."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from orchestrator.runner import run_stage\n")
    assert "orchestrator" in _imports(bad)


def test_every_stage_module_exists_and_has_main():
    from orchestrator.stages import STAGES

    for spec in STAGES:
        path = REPO / (spec.module.replace(".", "/") + ".py")
        assert path.exists(), spec.module
        assert "def main(" in path.read_text(), spec.module


def test_stage_inputs_name_registered_upstream_stages():
    """The graph is the registry's: every role names an earlier stage."""
    from orchestrator.stages import STAGES

    seen: set[str] = set()
    for spec in STAGES:
        assert set(spec.inputs.values()) <= seen, (spec.name, spec.inputs)
        seen.add(spec.name)
