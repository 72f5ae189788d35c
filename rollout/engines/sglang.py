"""Client of one SGLang server's native HTTP API behind the `Engine` interface (SPEC §4, §10).

Endpoints used (SGLang 0.5.x, NOTES.md): `POST /generate` with `input_ids`,
`sampling_params` and `return_logprob`; `GET /server_info` for `max_total_num_tokens`
(the KV capacity); `POST /update_weights_from_disk`; `POST /flush_cache`.
Several servers: one engine per URL (`rollout.sglang_urls`), the dynamic scheduler spreads
trajectories over them. A router URL works as one big engine; give its capacity with
`rollout.sglang_kv_capacity_tokens` when its /server_info lacks it.
Stopping: SGLang ends a request on `stop_token_ids` and, by default, on the model's eos ids
(config + generation_config) and the tokenizer's; `ignore_eos` turns all of these off,
`stop_token_ids` included (0.5.x `Req.check_finished`). `finish_reason.matched` becomes
`GenerationResult.stop_token_id`. Transport errors and HTTP errors become `EngineError`
(4xx not retryable), which the scheduler retries (rollout/scheduler.py).
CI runs this client against rollout/engines/fake_sglang.py; real SGLang needs a GPU.
"""

from __future__ import annotations

import logging

import httpx

from configs.rollout import RolloutConfig
from rollout.engines.base import EngineError, EngineStats, GenerationResult, SamplingParams

log = logging.getLogger(__name__)


def _capacity_from(info: dict) -> int | None:
    if isinstance(info.get("max_total_num_tokens"), int):
        return info["max_total_num_tokens"]
    for state in info.get("internal_states") or []:  # newer servers nest scheduler info here
        if isinstance(state, dict) and isinstance(state.get("max_total_num_tokens"), int):
            return state["max_total_num_tokens"]
    return None


def sampling_payload(prompt_ids: list[int], params: SamplingParams) -> dict:
    sampling = {
        "max_new_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "stop_token_ids": list(params.stop_token_ids),
        "skip_special_tokens": False,  # tags and turn markers are part of the protocol
    }
    if params.seed is not None:
        sampling["sampling_seed"] = params.seed
    if params.ignore_eos:
        sampling["ignore_eos"] = True
    return {"input_ids": list(prompt_ids), "sampling_params": sampling, "return_logprob": True}


def parse_generation(body: dict, sent_under: int | None = None, tags: frozenset[int] = frozenset()) -> GenerationResult:
    """The server's answer. Its version: `meta_info.weight_version` when it is one of `tags`, the
    versions this client pushed, else `sent_under`, the version the client had pushed when it
    sent the request (a lower bound: an update running then makes the request wait for it)."""
    meta = body.get("meta_info", {})
    finish = meta.get("finish_reason") or {}
    kind = finish.get("type") if isinstance(finish, dict) else finish
    if kind not in ("stop", "length"):  # "abort": the server gave up on it (OOM, shutdown, ...)
        raise EngineError(f"SGLang request ended with finish_reason {finish!r}")
    output_ids = list(body["output_ids"])
    logprobs = [float(entry[0]) if entry[0] is not None else 0.0 for entry in meta.get("output_token_logprobs", [])]
    if len(logprobs) != len(output_ids):
        raise EngineError(f"SGLang returned {len(output_ids)} tokens but {len(logprobs)} log-probs")
    matched = finish.get("matched") if isinstance(finish, dict) else None
    stop_id = matched if kind == "stop" and isinstance(matched, int) else None
    tag = meta.get("weight_version")
    version = int(tag) if str(tag).isdigit() and int(tag) in tags else sent_under
    return GenerationResult(output_ids, logprobs, kind, stop_id, version)


class SGLangEngine:
    """One SGLang server (or router) reached over HTTP."""

    def __init__(self, url: str, *, timeout_s: float = 3600.0, kv_capacity_tokens: int | None = None) -> None:
        self.url = url.rstrip("/")
        self._timeout_s = timeout_s
        self._capacity = kv_capacity_tokens if kv_capacity_tokens is not None else self._query_capacity()
        # Thousands of trajectories may wait on one server at once: don't cap connections at httpx's 100.
        limits = httpx.Limits(max_connections=4096, max_keepalive_connections=256)
        self._client = httpx.AsyncClient(base_url=self.url, timeout=timeout_s, limits=limits)
        self.stats = EngineStats()
        self.weight_version: int | None = None  # the version this client pushed last (None: none yet)
        self._tags: frozenset[int] = frozenset()  # every version it has pushed or is pushing

    @classmethod
    def from_config(cls, cfg: RolloutConfig, url: str) -> SGLangEngine:
        return cls(url, timeout_s=cfg.sglang_timeout_s, kv_capacity_tokens=cfg.sglang_kv_capacity_tokens)

    def _query_capacity(self) -> int:
        # Once, at construction (before any event loop work): the scheduler needs it synchronously.
        response = httpx.get(f"{self.url}/server_info", timeout=30.0)
        response.raise_for_status()
        capacity = _capacity_from(response.json())
        if capacity is None:
            raise RuntimeError(
                f"{self.url}/server_info has no max_total_num_tokens; set rollout.sglang_kv_capacity_tokens"
            )
        return capacity

    def kv_capacity_tokens(self) -> int:
        return self._capacity

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        if params.max_new_tokens < 1:
            return GenerationResult([], [], "length")
        sent_under = self.weight_version
        try:
            response = await self._client.post("/generate", json=sampling_payload(prompt_ids, params))
        except httpx.TransportError as exc:  # refused, reset, timed out: the server may be back, or another one
            raise EngineError(f"{self.url}/generate: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            # 4xx: this request is refused and would be again; 5xx: the server failed it.
            raise EngineError(
                f"{self.url}/generate answered HTTP {response.status_code}: {response.text[:200]}",
                retryable=response.status_code >= 500,
            )
        result = parse_generation(response.json(), sent_under, self._tags)
        self.stats.requests += 1
        self.stats.prompt_tokens += len(prompt_ids)
        self.stats.output_tokens += len(result.output_ids)
        return result

    async def serve(self, model_path: str) -> None:
        """Make the server serve `model_path`. A server keeps the model it was started with
        (or the weights pushed last) across stages, so a stage pushes its own checkpoint
        first; it skips the push when `/get_model_info` already names that path."""
        try:
            response = await self._client.get("/get_model_info")
            served = response.json().get("model_path") if response.status_code == 200 else None
        except (httpx.TransportError, ValueError) as exc:
            raise EngineError(f"{self.url}/get_model_info: {type(exc).__name__}: {exc}") from exc
        if served == model_path:
            return
        log.info("%s serves %s; loading %s", self.url, served, model_path)
        await self.update_weights(model_path)
        await self.flush_cache()

    async def update_weights(self, path: str, version: int | None = None) -> None:
        """SGLang loads them between requests: the running ones finish first, later ones wait."""
        body = {"model_path": path}
        if version is not None:
            body["weight_version"] = str(version)
            self._tags |= {version}
        response = await self._client.post("/update_weights_from_disk", json=body)
        response.raise_for_status()
        body = response.json()
        if not body.get("success", False):
            raise RuntimeError(f"{self.url} refused the weights at {path}: {body.get('message')}")
        if version is not None:
            self.weight_version = version
        log.info("%s loaded weights from %s", self.url, path)

    async def flush_cache(self) -> None:
        response = await self._client.post("/flush_cache")
        response.raise_for_status()

    async def aclose(self) -> None:
        await self._client.aclose()
