"""Config section `rollout` (SPEC §2, §4). Owned by the rollout package; defaults live here.

Per-call numbers (turn limit T, response budget, temperature, samples) belong to the
stage that rolls out (rl.stage*, eval, data filter) and are passed to `rollout()`;
this section says *how* rollouts run: which engine, which scheduler, engine sizes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RolloutConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    engine: Literal["hf", "sglang"] = "hf"  # rollout.engines.base.ENGINES
    scheduler: Literal["dynamic", "static"] = "dynamic"  # rollout.scheduler.SCHEDULERS (SPEC §4)
    top_p: float = Field(1.0, gt=0.0, le=1.0)  # 1: plain temperature sampling (SPEC §7 sets only temperature)

    # --- sglang: one engine per URL (a server, or a router in front of several) ---
    sglang_urls: list[str] = []
    sglang_timeout_s: float = Field(3600.0, gt=0)  # one /generate request (long turns on big models)
    sglang_kv_capacity_tokens: int | None = None  # override when /server_info has no max_total_num_tokens

    # --- hf: local transformers engines on this machine ---
    hf_engines: int = Field(1, ge=1)  # model copies, each with its own batch loop
    hf_max_batch_size: int = Field(64, ge=1)  # sequences decoded together by one engine
    hf_batch_window_s: float = Field(0.005, ge=0)  # wait this long after a first request to fill a batch
    hf_kv_capacity_tokens: int = Field(65536, ge=1)  # budget the dynamic scheduler reserves against
    hf_dtype: Literal["float32", "bfloat16"] = "float32"
    # continuous: requests join the running batch between decode steps; padded: a batch runs to its end
    hf_batching: Literal["continuous", "padded"] = "continuous"

    # --- agent loop ---
    max_tool_calls_per_turn: int = Field(8, ge=1)  # calls past this in one turn get an invalid_call answer
