"""The pipeline's one config schema (SPEC §1, §6-9). Each YAML section is one model.

Defaults live here and nowhere else. Paper numbers cite their SPEC section; the
shipped YAMLs only set what differs from these defaults.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from configs.data import DataConfig
from configs.eval import EvalConfig
from configs.fields import operational
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)  # defaults typed as if loaded: same key


class RunConfig(Section):
    name: str = "tiny"
    artifacts_root: str = ".rstar/artifacts"  # local path or any fsspec URL
    seed: int = 0
    # What makes two overlapping runs wait for each other: a file lock works on one machine
    # (or a shared POSIX filesystem); runs on several machines need Redis (README, Caching).
    lock_manager: Literal["file", "redis"] = operational("file")
    redis_url: str = operational("redis://127.0.0.1:6379/0")  # lock_manager: redis
    # Stage name -> Prefect work pool. The flow (on a CPU worker) sends such a stage to the
    # deployment `rstar-stage/<pool>` and waits for its artifact; other stages run in the
    # flow's own process. Empty: everything runs where the flow runs.
    work_pools: dict[str, str] = operational({})


class HardwareConfig(Section):
    gpus_per_node: int = 0  # 0: the config runs on CPU
    nodes: int = 1
    accelerate_config: str | None = None  # path under configs/accelerate/
    # Processes a long stage starts per node (orchestrator/launcher.py); more than one in all
    # means `accelerate launch`. None: one per GPU, or one on CPU.
    processes_per_node: int | None = operational(None, ge=1)
    # The flow runs stages side by side where the graph allows (orchestrator/graph.py), sharing
    # `cpu_threads` CPU threads (None: the cores this process may use). A stage takes
    # `stage_threads[name]` of them (1 when not listed; more than the budget: all of it) and a
    # long stage's processes run with that many (OMP_NUM_THREADS, split over its processes).
    cpu_threads: int | None = operational(None, ge=1)
    stage_threads: dict[str, int] = operational({})

    @property
    def processes(self) -> int:
        """Processes per node a long stage runs with."""
        return self.processes_per_node or max(self.gpus_per_node, 1)

    def thread_budget(self) -> int:
        if self.cpu_threads:
            return self.cpu_threads
        affinity = getattr(os, "sched_getaffinity", None)  # Linux; macOS has none
        return len(affinity(0)) if affinity else os.cpu_count() or 1


class TinyModelConfig(Section):
    """Shape of the randomly initialised Qwen3 built offline for the tiny config."""

    vocab_size: int = 4096
    hidden_size: int = 64
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 192
    max_position_embeddings: int = 4096
    # Initial weight of every attention head's q/k RMSNorm (assets/tiny_model.py says why).
    qk_norm_init: float = Field(2.5, gt=0)
    init_seed: int = 0  # the random weights (the learning benchmark's seeds vary it)
    tokenizer_corpus_lines: int = 20000  # synthetic lines the small BPE is trained on
    # The tokenizer the tiny model is built on: the small BPE (fast on CPU), or the real
    # Qwen3 one (151,669 tokens; set vocab_size to Qwen3's 151936) for the paper's path.
    tokenizer: Literal["small", "qwen3"] = "small"


class ModelConfig(Section):
    base: str = "tiny"  # "tiny" (built offline) or a Hugging Face id / local path
    tokenizer: str | None = None  # defaults to the base model's tokenizer
    tiny: TinyModelConfig = TinyModelConfig()


class SFTHeldoutConfig(Section):
    """Accuracy before and after SFT on the generated held-out problems, measured through the
    rollout runtime and the code service (the tiny config's proof that SFT teaches)."""

    enabled: bool = False  # the paper config measures with the evaluation stage instead
    problems: int = Field(200, ge=1)  # the synthetic eval set of data.decontaminate (same generator, same seed)
    seed: int = 0
    samples_per_problem: int = Field(4, ge=1)
    temperature: float = 0.6  # SPEC §9's evaluation temperature
    max_turns: int = Field(4, ge=1)
    max_response_tokens: int = Field(512, ge=1)


class SFTConfig(Section):
    """Non-reasoning cold start (SPEC §7)."""

    lr: float = 5e-6
    # Per-device batch x accumulation x processes must equal it (training/batch_plan.py).
    global_batch_size: int = Field(128, ge=1)
    micro_batch_per_device: int = Field(1, ge=1)
    warmup_ratio: float = Field(0.04, ge=0.0, le=1.0)
    lr_scheduler: Literal["cosine", "constant", "linear"] = "cosine"
    epochs: float = Field(3.0, gt=0)
    max_seq_tokens: int = Field(8192, ge=16)  # longer conversations are cut (TRL truncates from the end)
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0  # weight init of new heads, data order
    # Padding-free packing (TRL's `bfd`): several conversations per row, attention kept
    # within each (position ids). On CPU with SDPA it was slower than padded batches
    # (`python -m benchmarks.sft`: 0.54x on the tiny model); it pays where attention skips
    # the pads' work (FlashAttention on GPUs), so the paper config turns it on.
    packing: bool = False
    # The loss's LM head: TRL's chunked one, or one that projects only the labelled positions
    # (training/sft_head.py; 2-3x faster SFT steps on CPU, where TRL's scores every position).
    # `auto`: the latter on CPU, TRL's on GPU. Same loss and gradients up to float rounding.
    lm_head: Literal["auto", "trl", "labelled"] = "auto"
    checkpoint_every_steps: int = operational(50, ge=1)  # where a killed run resumes from
    heldout: SFTHeldoutConfig = SFTHeldoutConfig()


class RoCConfig(Section):
    """Resample-on-Correct selection (SPEC §6)."""

    drop_uniform_groups: bool = True
    epsilon: float = Field(0.1, gt=0)  # p_total is often 0: the weight 1/(p_total+epsilon) needs it
    selection: Literal["sample", "topk"] = "sample"
    # p_err and p_format as the paper defines them (SPEC §6.4), or as the authors' release computes
    # them (rollout/metrics.py: `p_err_release`, `p_format_release`).
    penalties: Literal["paper", "release"] = "paper"


class PROFConfig(Section):
    """PROF selection with a process reward model (SPEC §6)."""

    prm: str = "Qwen/Qwen2.5-Math-PRM-7B"  # hub id or path; `tiny`: a random tiny PRM built offline
    # Tokens the PRM reads per response (None: its max_position_embeddings, 4096 for the 7B);
    # steps past it score NaN and are left out of r_pro (training/prm.py).
    prm_max_tokens: int | None = None
    rollouts: int = 8  # n
    kept: int = 4  # m
    negatives: Literal["lowest", "random"] = "lowest"  # PROF-Both / PROF-Correct
    # A group whose outcomes are all equal: kept and filtered like any other (n - m removed by
    # consistency, the rest trained with advantage 0, counted in the token mean), as the PROF
    # code does and its paper's formula allows (k_plus = n - m when all are correct); or dropped.
    drop_uniform_groups: bool = False


class RLStageConfig(Section):
    problems: int | None = None  # None: every curated problem
    max_response_tokens: int = 8192
    max_turns: int = 10
    steps: int = 300


class Stage3FilterConfig(Section):
    rollouts_per_problem: int = 8
    drop_when_solved: int = 8  # problems solved this many times are removed


ROC_MIN_KEPT = 4  # RoC keeps >= 2 of each class of a mixed group (SPEC §6.2)


class RLConfig(Section):
    """GRPO-RoC and its alternatives (SPEC §6, §7)."""

    algorithm: Literal["grpo_roc", "grpo", "prof", "blend"] = "grpo_roc"
    lr: float = 1e-6
    warmup_steps: int = 20
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    temperature: float = 1.0
    prompts_per_step: int = 512
    rollouts_per_prompt: int = 32  # 2G
    kept_per_prompt: int = 16  # G
    clip_low: float = 0.2
    clip_high: float = 0.28
    micro_batch_per_device: int = operational(1, ge=1)  # per-device memory only: the loss is a global token mean
    # Asynchronous RL (SPEC §4, beyond the paper): the engines roll out the next steps while
    # the trainer updates, and no trajectory is trained more than this many optimizer steps
    # after the weights that generated it. 0: every step on-policy, as the paper.
    max_staleness_steps: int = Field(0, ge=0)
    # Old log-probs of the PPO ratio: the trainer's own before the update (the reference's
    # default), or the engine's sampling log-probs, the behaviour policy's (no extra forward
    # pass). None: `recompute` when synchronous, `engine` when asynchronous, so that the clip
    # binds on the policy's lag (with `recompute` and one optimizer step per RL step the
    # ratio is 1 and the clip never binds).
    old_logprobs: Literal["recompute", "engine"] | None = None
    # Truncated importance sampling (TIS): weight each token's loss by min(pi_trainer /
    # pi_behaviour, cap), detached, with the ratio taken against the trainer's own log-probs
    # (decoupled PPO). None: off. It corrects for engine/trainer mismatch and for staleness.
    tis_cap: float | None = Field(None, gt=0)
    seed: int = 0  # problem order, rollout sampling and selection draws, all per step
    checkpoint_every_steps: int = operational(10, ge=1)  # where a killed stage resumes from
    prm_batch_size: int = operational(8, ge=1)  # PROF/Blend: responses per PRM forward pass
    # A trajectory cut by the token budget (finish "length") is a failure, reward 0 (SPEC §6),
    # or is scored like any other, as the authors' release does (an earlier \boxed{} can score 1).
    truncated_reward: Literal["zero", "score"] = "zero"
    roc: RoCConfig = RoCConfig()
    prof: PROFConfig = PROFConfig()
    stage1: RLStageConfig = RLStageConfig(max_response_tokens=8192, max_turns=10, steps=300)
    stage2: RLStageConfig = RLStageConfig(max_response_tokens=12288, max_turns=10, steps=85)
    stage3_filter: Stage3FilterConfig = Stage3FilterConfig()
    stage3: RLStageConfig = RLStageConfig(max_response_tokens=12288, max_turns=15, steps=125)

    @property
    def old_logprob_source(self) -> Literal["recompute", "engine"]:
        """`old_logprobs` resolved: None picks by staleness and TIS (see the field)."""
        if self.old_logprobs is not None:
            return self.old_logprobs
        return "engine" if self.max_staleness_steps > 0 and self.tis_cap is None else "recompute"

    @model_validator(mode="after")
    def _kept_fits(self) -> RLConfig:
        if self.tis_cap is not None and self.old_logprobs == "engine":
            raise ValueError("rl.tis_cap weighs tokens by pi_trainer / pi_engine with the ratio taken against the "
                             "trainer's own log-probs: set rl.old_logprobs to recompute or leave it unset")
        if not 0 < self.kept_per_prompt <= self.rollouts_per_prompt:
            raise ValueError(
                f"rl.kept_per_prompt ({self.kept_per_prompt}) must be in 1..rl.rollouts_per_prompt "
                f"({self.rollouts_per_prompt})"
            )
        if self.algorithm == "grpo_roc" and self.kept_per_prompt < ROC_MIN_KEPT:
            raise ValueError(
                f"rl.kept_per_prompt ({self.kept_per_prompt}) must be at least {ROC_MIN_KEPT} under grpo_roc: "
                "RoC keeps at least 2 positives and 2 negatives of a mixed group (the release asserts as much)"
            )
        return self


class PipelineConfig(Section):
    run: RunConfig = RunConfig()
    hardware: HardwareConfig = HardwareConfig()
    model: ModelConfig = ModelConfig()
    sandbox: SandboxConfig = SandboxConfig()
    rollout: RolloutConfig = RolloutConfig()
    data: DataConfig = DataConfig()
    sft: SFTConfig = SFTConfig()
    rl: RLConfig = RLConfig()
    eval: EvalConfig = EvalConfig()

    @model_validator(mode="after")
    def _synthetic_eval_was_decontaminated(self) -> PipelineConfig:
        """A generated eval set larger than (or seeded apart from) the one the RL problems were
        decontaminated against could share problems with training."""
        deco = self.data.decontaminate
        checked = any(b.is_synthetic for b in deco.benchmarks)
        for b in self.eval.benchmarks:
            if b.is_synthetic and checked and (b.problems > deco.synthetic_eval_problems
                                               or b.seed != deco.synthetic_eval_seed):
                raise ValueError(
                    f"eval.benchmarks {b.name!r}: {b.problems} synthetic problems with seed {b.seed}, but the RL "
                    f"problems were decontaminated against {deco.synthetic_eval_problems} with seed "
                    f"{deco.synthetic_eval_seed} (data.decontaminate.synthetic_eval_problems / _seed)")
        return self
