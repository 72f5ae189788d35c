"""Fixtures of the training tests: a small cold-start artifact of synthetic demonstrations."""

from __future__ import annotations

from pathlib import Path

import pytest

from configs.data import ColdStartConfig, ColdStartSource
from data_prep import cold_start


@pytest.fixture(scope="session")
def small_cold_start(tmp_path_factory) -> Path:
    """A `cold_start` artifact directory with 64 synthetic tool-use demonstrations."""
    out = tmp_path_factory.mktemp("cold_start")
    cold_start.run(ColdStartConfig(sources=[ColdStartSource(source="synthetic", examples=64)]), {}, out)
    return out
