"""Errors in a stage's input that a person fixes in the data or the config, not in the code:
the stage command prints them as one line naming the file, row and field, and keeps the
traceback in a log file (orchestrator/cli.py)."""

from __future__ import annotations


class StageInputError(ValueError):
    """Bad input, said precisely enough to act on."""
