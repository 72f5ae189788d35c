"""Config section `data` (SPEC §8). Owned by the data_prep package; defaults live here."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ColdStartConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RLCurationConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DecontaminateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DataConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cold_start: ColdStartConfig = ColdStartConfig()
    rl_curation: RLCurationConfig = RLCurationConfig()
    decontaminate: DecontaminateConfig = DecontaminateConfig()
