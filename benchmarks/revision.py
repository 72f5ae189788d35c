"""The repository as it was at a git revision: what `--against REV` benchmarks run beside this checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

from stagekit.paths import REPO_ROOT


def tree_at(rev: str, into: Path) -> Path:
    """The tree of `rev` extracted into `into` (read-only `git archive`: the checkout is not touched)."""
    archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into
