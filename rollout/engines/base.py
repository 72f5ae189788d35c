"""The engine contract (SPEC §4): token ids in; token ids, log-probs and finish reason out.

Every engine (local transformers, SGLang over HTTP) implements `Engine`; the scheduler
and the agent loop see nothing else. `build_engines` resolves `rollout.engine` by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from configs.rollout import RolloutConfig

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """What one generation request asks for."""

    max_new_tokens: int  # tokens the engine may add (the agent loop passes what is left of the budget)
    temperature: float = 1.0  # 0: greedy
    top_p: float = 1.0
    stop_token_ids: tuple[int, ...] = ()  # generation ends after emitting one of these (it is returned)
    seed: int | None = None  # same seed, same prompt, same params: same output
    # Engines also stop on the model's own end-of-text ids (config + generation_config
    # eos_token_id, as SGLang does) unless this is set; SGLang then ignores stop_token_ids too.
    ignore_eos: bool = False


@dataclass(frozen=True)
class GenerationResult:
    """What one generation request returns."""

    output_ids: list[int]  # generated tokens, the stop token included when finish_reason is "stop"
    logprobs: list[float]  # per output token, log-prob under the sampling distribution (natural log)
    finish_reason: FinishReason  # "stop": a stop token was emitted; "length": max_new_tokens reached
    stop_token_id: int | None = None  # which token ended it when "stop" (SGLang's finish_reason.matched)
    # The policy version (rollout runtime's count of weight pushes) whose weights answered the
    # whole request; None when the engine cannot tell. Engines load weights between requests.
    weight_version: int | None = None


class EngineError(RuntimeError):
    """A request an engine did not answer (HTTP 5xx, reset, timeout, a failed batch).

    `retryable` is False when another attempt cannot help (the request itself was refused).
    """

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


def eos_token_ids(model_config: object, generation_config: object | None) -> frozenset[int]:
    """The model's end-of-text ids: config.eos_token_id and generation_config.eos_token_id, merged.

    SGLang stops on the same union (ModelConfig._get_hf_eos_token_id); Qwen3-Base's
    generation config names `<|endoftext|>`, the instruct models add `<|im_end|>`.
    """
    ids: set[int] = set()
    for source in (model_config, generation_config):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    return frozenset(ids)


@runtime_checkable
class Engine(Protocol):
    """One inference engine holding one KV cache."""

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult: ...

    def kv_capacity_tokens(self) -> int:
        """Tokens this engine's KV cache holds; the dynamic scheduler reserves against it."""
        ...

    async def serve(self, model_path: str) -> None:
        """Serve `model_path` from now on (an SGLang server may hold another stage's weights)."""
        ...

    async def update_weights(self, path: str, version: int | None = None) -> None:
        """Load new policy weights from a checkpoint directory (after an RL step), between
        requests: the requests running finish under the old weights, the next ones get the new.
        `version` tags the results answered under them (`GenerationResult.weight_version`)."""
        ...

    async def flush_cache(self) -> None:
        """Drop cached prefixes (computed with the old weights)."""
        ...

    async def aclose(self) -> None: ...


@dataclass
class EngineStats:
    """Counters an engine keeps for benchmarks and logs."""

    requests: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    busy_s: float = 0.0  # wall time with at least one batch running, seconds
    batch_sizes: list[int] = field(default_factory=list)


EngineBuilder = Callable[[RolloutConfig, str, object], "list[Engine]"]


def _build_hf(cfg: RolloutConfig, model_path: str, tokenizer: object) -> list[Engine]:
    from rollout.engines.hf import HFEngine  # torch import stays out of sglang-only processes

    return [HFEngine.from_config(cfg, model_path) for _ in range(cfg.hf_engines)]


def _build_sglang(cfg: RolloutConfig, model_path: str, tokenizer: object) -> list[Engine]:
    from rollout.engines.sglang import SGLangEngine

    if not cfg.sglang_urls:
        raise ValueError("rollout.engine is 'sglang' but rollout.sglang_urls is empty: list one URL per server")
    return [SGLangEngine.from_config(cfg, url) for url in cfg.sglang_urls]


ENGINES: dict[str, EngineBuilder] = {"hf": _build_hf, "sglang": _build_sglang}


def build_engines(cfg: RolloutConfig, model_path: str, tokenizer: object = None) -> list[Engine]:
    """One engine per local model copy (`hf`) or per server URL (`sglang`).

    `model_path` is what the hf engine loads; SGLang servers were started with their model
    and only get new weights through `update_weights`.
    """
    try:
        builder = ENGINES[cfg.engine]
    except KeyError:
        raise ValueError(f"unknown rollout.engine {cfg.engine!r}; allowed: {sorted(ENGINES)}") from None
    return builder(cfg, model_path, tokenizer)


build_engine = build_engines  # the name other packages were promised; it returns a list
