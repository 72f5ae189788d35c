"""One temporary Prefect server for every pipeline test module that needs one (a server
start costs 20-35 s here; NOTES.md: the harness's 30 s default timeout is too short)."""

from __future__ import annotations

import pytest
from prefect.settings import PREFECT_API_URL
from prefect.testing.utilities import prefect_test_harness


@pytest.fixture(scope="session")
def prefect_server() -> str:
    with prefect_test_harness(server_startup_timeout=120):
        yield PREFECT_API_URL.value()
