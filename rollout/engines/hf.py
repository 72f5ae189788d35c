"""Local transformers engine: concurrent `generate` calls share a left-padded batch.

Two batching modes (`rollout.hf_batching`):
  padded:     a batch runs from start to finish; requests that arrive meanwhile wait
              for the next batch (request-level batching, the cheapest per step).
  continuous: waiting requests join the running batch between decode steps, and a
              finished row is answered at once. It helps when turn lengths vary a lot:
              a long turn no longer holds up every request that arrives after it.
Decoding itself is rollout.engines.decode_batch.DecodeBatch (per-request seeds,
temperature, top-p, stop tokens and budgets in one batch).

New weights (`load_state_dict`, `update_weights`) are loaded between requests, as SGLang
does: no request is admitted while a swap waits, the running ones finish under the old
weights, then the weights change and admission resumes. So every answer comes from one
set of weights, and says which (`GenerationResult.weight_version`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace

import torch
from transformers import AutoModelForCausalLM

from configs.rollout import RolloutConfig
from rollout.engines.base import EngineError, EngineStats, GenerationResult, SamplingParams, eos_token_ids
from rollout.engines.decode_batch import DecodeBatch, decode_batch

log = logging.getLogger(__name__)

__all__ = ["HFEngine", "decode_batch", "load_model"]


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future
    version: int = 0  # the weights it was admitted under (set at admission)


class HFEngine:
    """A transformers model on this machine behind the `Engine` interface."""

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        pad_token_id: int,
        kv_capacity_tokens: int,
        max_batch_size: int = 32,
        batch_window_s: float = 0.005,
        continuous: bool = True,
        eos_ids: Iterable[int] | None = None,
    ) -> None:
        self._model = model.eval()
        if eos_ids is None:
            eos_ids = eos_token_ids(model.config, getattr(model, "generation_config", None))
        self.eos_ids = frozenset(eos_ids)  # added to every request's stop ids unless ignore_eos
        self._pad = pad_token_id
        self._capacity = kv_capacity_tokens
        self._max_batch = max_batch_size
        self._window_s = batch_window_s
        self._continuous = continuous
        self._queue: asyncio.Queue[_Request] = asyncio.Queue()
        self._worker: asyncio.Task | None = None
        self._inflight: dict[Hashable, _Request] = {}  # rows of the running batch
        self._model_lock = asyncio.Lock()  # a weight swap waits for the running step
        self.weight_version = 0  # what the results answered now report
        self._swap_pending = False  # no admission while set: the running requests drain first
        self._swap_lock = asyncio.Lock()  # one swap at a time
        self._rows = asyncio.Condition()  # notified when the running requests or the swap state change
        self.stats = EngineStats()

    @classmethod
    def from_pretrained(cls, path: str, *, dtype: str = "float32", **kwargs) -> HFEngine:
        """Load a model dir (or hub id); `kwargs` are the constructor's sizes."""
        model = load_model(path, dtype)
        pad = model.config.pad_token_id
        if pad is None:  # any id works: padded positions are masked out
            pad = model.config.eos_token_id if isinstance(model.config.eos_token_id, int) else 0
        return cls(model, pad_token_id=pad, **kwargs)

    @classmethod
    def from_config(cls, cfg: RolloutConfig, model_path: str) -> HFEngine:
        return cls.from_pretrained(
            model_path,
            dtype=cfg.hf_dtype,
            kv_capacity_tokens=cfg.hf_kv_capacity_tokens,
            max_batch_size=cfg.hf_max_batch_size,
            batch_window_s=cfg.hf_batch_window_s,
            continuous=cfg.hf_batching == "continuous",
        )

    def kv_capacity_tokens(self) -> int:
        return self._capacity

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        if params.max_new_tokens < 1:
            return GenerationResult([], [], "length")
        if not params.ignore_eos and not self.eos_ids <= set(params.stop_token_ids):
            params = replace(params, stop_token_ids=tuple(sorted(set(params.stop_token_ids) | self.eos_ids)))
        future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Request(list(prompt_ids), params, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._serve())
        return await future

    def _take(self, room: int) -> list[_Request]:
        taken = []
        while len(taken) < room and not self._queue.empty():
            request = self._queue.get_nowait()
            if not request.future.cancelled():
                taken.append(request)
        return taken

    async def _serve(self) -> None:
        batch = DecodeBatch(self._model, self._pad)
        waiting: list[_Request] = []  # taken from the queue while a swap was pending, not admitted yet
        while True:
            # Before waiting for work: the last rows may have just been answered, and a swap waits for that.
            if self._swap_pending and not batch:  # every admitted request is answered: let the swap run
                async with self._rows:
                    self._rows.notify_all()
                    await self._rows.wait_for(lambda: not self._swap_pending)
                continue
            if not batch and not waiting:
                waiting = [await self._queue.get()]
                if self._window_s > 0 and self._queue.qsize() < self._max_batch - 1:
                    await asyncio.sleep(self._window_s)  # let concurrent trajectories join this batch
            async with self._model_lock:
                batch.model = self._model  # the latest weights (a swap replaces or overwrites them)
                joining = []
                if not self._swap_pending and (self._continuous or not batch):
                    joining = [r for r in waiting if not r.future.cancelled()]
                    joining += self._take(self._max_batch - len(batch) - len(joining))
                    waiting = []
                    for request in joining:
                        request.version = self.weight_version
                if not batch and not joining:
                    continue
                gone = {key for key, r in self._inflight.items() if r.future.cancelled()}
                for key in gone:  # the caller was cancelled: stop decoding for it
                    del self._inflight[key]
                start = time.perf_counter()
                try:
                    finished = await asyncio.to_thread(self._advance, batch, joining, gone)
                except Exception as exc:  # answer every waiter; the loop keeps serving
                    log.exception("hf engine batch failed")
                    error = EngineError(f"hf engine batch failed: {type(exc).__name__}: {exc}")
                    self._fail(list(self._inflight.values()) + joining, error)
                    batch = DecodeBatch(self._model, self._pad)
                    continue
                self.stats.busy_s += time.perf_counter() - start
            if joining:
                self.stats.batch_sizes.append(len(batch) + len(finished))
            for key, result in finished:
                request = self._inflight.pop(key)
                self.stats.requests += 1
                self.stats.prompt_tokens += len(request.prompt_ids)
                self.stats.output_tokens += len(result.output_ids)
                if not request.future.done():
                    request.future.set_result(replace(result, weight_version=request.version))

    def _advance(
        self, batch: DecodeBatch, joining: list[_Request], gone: set[Hashable]
    ) -> list[tuple[Hashable, GenerationResult]]:
        """In a worker thread: drop cancelled rows, admit new ones, then one step (continuous) or all (padded)."""
        if gone:
            batch.drop(gone)
        if joining:
            for request in joining:
                self._inflight[id(request)] = request
            batch.add([(id(r), r.prompt_ids, r.params) for r in joining])
        if not batch:
            return []
        finished = batch.step()
        while batch and not self._continuous:
            finished += batch.step()
        return finished

    @property
    def inflight(self) -> int:
        """Requests decoding now (tests check that cancellation reaches them)."""
        return len(self._inflight)

    def _fail(self, requests: list[_Request], exc: BaseException) -> None:
        for request in requests:
            if not request.future.done():
                request.future.set_exception(exc)
        self._inflight.clear()

    async def serve(self, model_path: str) -> None:
        """Nothing to do: an hf engine is built from the stage's model (`from_config`)."""

    async def update_weights(self, path: str, version: int | None = None) -> None:
        model = (await asyncio.to_thread(load_model, path, str(self._model.dtype).removeprefix("torch."))).eval()

        def swap() -> None:
            self._model = model

        await self._swap(swap, version)
        log.info("hf engine loaded weights from %s", path)

    async def load_state_dict(self, state: Mapping[str, torch.Tensor], version: int | None = None) -> None:
        """New policy weights straight from the trainer's memory (the RL step's `hf` path):
        copied into this engine's own model, cast to its dtype, between requests. `state` must
        not change until this returns (the trainer passes a copy when it goes on training)."""

        def copy() -> None:
            with torch.no_grad():
                self._model.load_state_dict(state)

        await self._swap(copy, version)

    async def _swap(self, apply: Callable[[], None], version: int | None) -> None:
        """Hold new requests back, wait for the running ones to be answered, then `apply`."""
        async with self._swap_lock:
            async with self._rows:
                self._swap_pending = True
                await self._rows.wait_for(lambda: not self._inflight)
            try:
                async with self._model_lock:
                    apply()
                    self.weight_version = self.weight_version + 1 if version is None else version
            finally:
                async with self._rows:
                    self._swap_pending = False
                    self._rows.notify_all()

    async def flush_cache(self) -> None:
        """Nothing to drop: KV lives only while a request decodes (no prefix cache across requests)."""

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
        waiting = list(self._inflight.values()) + self._take(self._queue.qsize())
        self._fail(waiting, EngineError("hf engine closed"))
        async with self._rows:  # a swap waiting for those rows goes ahead
            self._rows.notify_all()


def load_model(path: str, dtype: str) -> torch.nn.Module:
    """The weights at `path`, on the GPU when there is one (decode_batch keeps the batch there)."""
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    return model.to("cuda") if torch.cuda.is_available() else model
