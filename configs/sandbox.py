"""Config section `sandbox` (SPEC §3). Owned by the sandbox package; defaults live here."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    urls: list[str] = []  # empty: start a local service on loopback for this run
    timeout_s: float = 10.0  # wall-clock limit of one call
