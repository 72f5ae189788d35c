"""A stage's code version, computed from its source, never hand-set (issue 8, SPEC §1).

It digests the syntax tree of the stage's module and of every project module that it
imports, directly or not (imports inside functions included), plus the installed
versions of the result-shaping libraries that those modules import. A module started
as a child process (`[sys.executable, "-m", "sandbox.server", ...]`) counts as imported:
the code service's server shapes tool output as much as its client does. Syntax trees,
not bytes: a comment, a blank line or a reformatting changes no key; a docstring or any
statement does. Files outside the closure (READMEs, tests, other stages' modules) are
not part of it.

The orchestration packages are left out (`ORCHESTRATION`): config values enter the key
themselves, validated, so the schema's code need not; `orchestrator/` runs, caches and
moves artifacts, and `stagekit/` reports progress and holds work dirs, without shaping
them. An edit there reruns nothing.

    python -m orchestrator.code_version data_prep.rl_curation   # what a stage's version covers
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from stagekit.paths import REPO_ROOT

# Libraries whose version can change what a stage computes (numerics, tokenisation, data
# loading, answer checking). Others (pydantic, fsspec, tqdm, prefect) only carry data or
# report progress: upgrading them must not rerun a pipeline.
RESULT_LIBRARIES = (
    "torch", "transformers", "tokenizers", "trl", "accelerate", "deepspeed", "peft", "safetensors",
    "datasets", "pyarrow", "pandas", "numpy", "scipy", "sympy", "math_verify", "sglang",
)

ORCHESTRATION = ("orchestrator", "stagekit", "configs")


@dataclass(frozen=True)
class CodeVersion:
    digest: str  # sha256 over the closure's syntax trees and the library versions
    modules: tuple[str, ...]  # project modules covered, sorted
    libraries: dict[str, str]  # distribution name -> installed version

    def to_manifest(self) -> dict:
        return {"digest": self.digest, "modules": list(self.modules), "libraries": self.libraries}


def _module_file(name: str, root: Path) -> Path | None:
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(tree: ast.AST, name: str, is_package: bool) -> set[str]:
    """Absolute names every import statement of module `name` may refer to."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{node.module}" if node.module else parent
            else:
                base = node.module or ""
            found.add(base)
            # `from pkg import sub` may name a submodule; a name that is not one is ignored below.
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.List | ast.Tuple):
            items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            found.update(m for flag, m in zip(items, items[1:], strict=False) if flag == "-m" and isinstance(m, str))
    return found


@lru_cache(maxsize=4096)
def _parse(path: Path, mtime_ns: int, size: int, name: str) -> tuple[str, frozenset[str]]:
    """(digest of the syntax tree, names it imports) of one file; cached on (path, mtime, size)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    digest = hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()
    return digest, frozenset(_imports(tree, name, path.name == "__init__.py"))


def _closure(module: str, root: Path) -> tuple[dict[str, str], set[str]]:
    """Project modules reachable from `module` (name -> tree digest) and third-party roots."""
    seen: dict[str, str] = {}
    external: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or name.split(".")[0] in ORCHESTRATION:
            continue
        path = _module_file(name, root)
        if path is None:
            external.add(name.split(".")[0])
            continue
        st = path.stat()
        digest, imported_names = _parse(path, st.st_mtime_ns, st.st_size, name)
        seen[name] = digest
        parts = name.split(".")
        todo.extend(".".join(parts[:k]) for k in range(1, len(parts)))  # parent packages run first
        for imported in imported_names:
            if _module_file(imported, root) is not None:
                todo.append(imported)
            elif _module_file(imported.split(".")[0], root) is None:
                external.add(imported.split(".")[0])
    return seen, external


@lru_cache(maxsize=1)
def _packages_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()  # scans every installed distribution


def _distribution_versions(import_names: set[str]) -> dict[str, str]:
    by_module = _packages_distributions()
    versions: dict[str, str] = {}
    for name in sorted(import_names & set(RESULT_LIBRARIES)):
        for dist in by_module.get(name, [name]):
            try:
                versions[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                versions[dist] = "not installed"
    return versions


def source_root(module: str) -> Path:
    """The directory the project's modules are found under: the repository for stages,
    the test's own folder for toy stages that live outside it."""
    if _module_file(module, REPO_ROOT) is not None:
        return REPO_ROOT
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"stage module {module!r} has no source file (looked under {REPO_ROOT} and sys.path)")
    origin = Path(spec.origin)
    return origin.parents[module.count(".") + (origin.name == "__init__.py")]


def code_version(module: str, root: Path | None = None) -> CodeVersion:
    """The code version of the stage whose entry point is `module` (a dotted name)."""
    root = root or source_root(module)
    if _module_file(module, root) is None:
        raise ModuleNotFoundError(f"stage module {module!r} has no source file under {root}")
    trees, external = _closure(module, root)
    libraries = _distribution_versions(external - set(sys.builtin_module_names))
    payload = {"modules": dict(sorted(trees.items())), "libraries": libraries}
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return CodeVersion(digest=digest, modules=tuple(sorted(trees)), libraries=libraries)


def main(argv: list[str] | None = None) -> None:
    for module in argv if argv is not None else sys.argv[1:]:
        version = code_version(module)
        print(json.dumps({"module": module, **version.to_manifest()}, indent=2))


if __name__ == "__main__":
    main()
