"""Where the sandbox's own code lives. Its child processes (zygote, verifiers, a local
server) import `sandbox` from this directory, and calls must not see it: the package is
a library, so it finds its place itself rather than asking the pipeline."""

from __future__ import annotations

from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[1]  # the directory that holds the `sandbox` package
