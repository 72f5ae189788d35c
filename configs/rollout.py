"""Config section `rollout` (SPEC §2, §4). Owned by the rollout package; defaults live here.

Per-call numbers (turn limit T, response budget, temperature, seed) belong to the stage
that rolls out (rl.stage*, eval, the data filter, SFT's held-out check); it passes them as
one `SamplingSettings` to `RolloutRuntime.sample_and_score`. This section says *how*
rollouts run: which engine, which scheduler, engine sizes, and the nucleus `top_p` every
stage samples with.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from configs.fields import operational


class SamplingSettings(BaseModel):
    """How one `sample_and_score` call samples: every trajectory of the call shares these."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_response_tokens: int = Field(ge=1)  # every token after the prompt, tool feedback included (SPEC §2)
    max_turns: int = Field(ge=1)  # assistant turns, T in SPEC §2
    seed: int = 0  # sample j of problem key k draws with a seed derived from (seed, k, j)


class RolloutConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)  # defaults typed as if loaded: same key

    engine: Literal["hf", "sglang"] = "hf"  # rollout.engines.base.ENGINES
    scheduler: Literal["dynamic", "static"] = operational("dynamic")  # rollout.scheduler.SCHEDULERS (SPEC §4)
    top_p: float = Field(1.0, gt=0.0, le=1.0)  # 1: plain temperature sampling (SPEC §7 sets only temperature)

    # --- sglang: one engine per URL (a server, or a router in front of several) ---
    sglang_urls: list[str] = operational([])
    sglang_timeout_s: float = operational(3600.0, gt=0)  # one /generate request (long turns on big models)
    sglang_kv_capacity_tokens: int | None = operational(None)  # override when /server_info has no max_total_num_tokens

    # --- hf: local transformers engines on this machine ---
    hf_engines: int = operational(1, ge=1)  # model copies, each with its own batch loop
    hf_max_batch_size: int = operational(64, ge=1)  # sequences decoded together by one engine
    hf_batch_window_s: float = operational(0.005, ge=0)  # wait this long after a first request to fill a batch
    hf_kv_capacity_tokens: int = operational(65536, ge=1)  # budget the dynamic scheduler reserves against
    hf_dtype: Literal["float32", "bfloat16"] = "float32"
    # continuous: requests join the running batch between decode steps; padded: a batch runs to its end
    hf_batching: Literal["continuous", "padded"] = operational("continuous")

    # --- KV reservations (dynamic scheduler, SPEC §4 as changed by issue 9) ---
    # per_turn: a trajectory holds its current context plus, while a turn runs, up to
    # kv_turn_reserve_tokens more; worst_case: prompt + max_response for its whole life.
    kv_reservation: Literal["per_turn", "worst_case"] = operational("per_turn")
    kv_turn_reserve_tokens: int = operational(2048, ge=1)

    # --- engine failures: a turn is retried (on another engine where there is one) ---
    engine_max_attempts: int = operational(3, ge=1)  # tries per turn before the trajectory is recorded as failed
    engine_retry_backoff_s: float = operational(0.5, ge=0)  # wait before the 2nd try; doubles each time
    engine_cooldown_s: float = operational(10.0, ge=0)  # a failed engine gets no new trajectories for this long

    # --- agent loop and tool protocol ---
    max_tool_calls_per_turn: int = Field(8, ge=1)
    # Calls past that limit: answered as invalid calls, or left out unanswered (`skip`: the
    # authors' release runs the first `max_parallel_calls`, 1 there, and drops the rest).
    extra_tool_calls: Literal["invalid", "skip"] = "invalid"
    # Prompt wording (rollout/prompt.py): ours, or the release's system prompt, instruction
    # ahead of the problem and `<reason>` written after every assistant header.
    prompt: Literal["project", "release"] = "project"

    def sampling(self, temperature: float, max_response_tokens: int, max_turns: int, seed: int) -> SamplingSettings:
        """A stage's sampling settings, with this section's `top_p`."""
        return SamplingSettings(temperature=temperature, top_p=self.top_p, max_response_tokens=max_response_tokens,
                                max_turns=max_turns, seed=seed)
