"""Config section `rollout` (SPEC §4). Owned by the rollout package; defaults live here."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class RolloutConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    engine: Literal["hf", "sglang"] = "hf"
    scheduler: Literal["dynamic", "static"] = "dynamic"
    sglang_urls: list[str] = []
