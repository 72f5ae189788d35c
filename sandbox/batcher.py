"""Coalesces items submitted one by one from many coroutines into batches (SPEC §3).

A batch leaves when it holds `max_items` or `window_s` after its first item arrived,
whichever comes first; when no batch is in flight it leaves at once (after the current
event-loop iteration), so a lone call does not wait for the window. Each submitter gets
back its own answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Batcher(Generic[T, R]):
    def __init__(self, send: Callable[[list[T]], Awaitable[list[R]]], max_items: int, window_s: float):
        self._send = send
        self._max = max_items
        self._window_s = window_s
        self._items: list[T] = []
        self._futures: list[asyncio.Future[R]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._inflight: set[asyncio.Task] = set()

    async def submit(self, item: T) -> R:
        return await self._enqueue(item)

    async def submit_many(self, items: Sequence[T]) -> list[R]:
        futures = [self._enqueue(item) for item in items]
        return list(await asyncio.gather(*futures))

    def _enqueue(self, item: T) -> asyncio.Future[R]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[R] = loop.create_future()
        self._items.append(item)
        self._futures.append(fut)
        if len(self._items) >= self._max:
            self._flush()
        elif self._timer is None:
            # Nothing on the wire: leave at the end of this loop iteration (items submitted
            # together, e.g. by gather, still share the batch) instead of paying the window.
            delay = self._window_s if self._inflight else 0.0
            self._timer = loop.call_later(delay, self._flush)
        return fut

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._items:
            items, futures = self._items[: self._max], self._futures[: self._max]
            del self._items[: self._max], self._futures[: self._max]
            task = asyncio.get_running_loop().create_task(self._deliver(items, futures))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)

    async def _deliver(self, items: list[T], futures: list[asyncio.Future[R]]) -> None:
        try:
            results = await self._send(items)
            if len(results) != len(items):
                raise RuntimeError(f"{len(results)} answers for {len(items)} items")
        except BaseException as exc:
            for fut in futures:
                if not fut.done():
                    fut.set_exception(exc if isinstance(exc, Exception) else RuntimeError("batch cancelled"))
            if not isinstance(exc, Exception):
                raise
            return
        for fut, res in zip(futures, results, strict=True):
            if not fut.done():
                fut.set_result(res)

    async def aclose(self) -> None:
        self._flush()
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)
