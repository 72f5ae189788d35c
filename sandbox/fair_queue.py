"""Ready children handed to waiting calls round-robin by request (issue 22, point 5).

A FIFO of waiters serves calls in arrival order, so one request of 4,096 calls holds every
slot until its last call started, and a lone call of another client waits behind all of
them. Here waiters queue per request (the key the server gives: one per HTTP request), and
each ready child goes to the next request in turn: a request of one call waits for at most
one child per request ahead of it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class FairQueue(Generic[T]):
    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._waiters: OrderedDict[Hashable, deque[asyncio.Future]] = OrderedDict()

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def get_nowait(self) -> T:
        return self._items.popleft()

    def put_nowait(self, item: T) -> None:
        while self._waiters:
            key, waiters = next(iter(self._waiters.items()))
            fut = waiters.popleft()
            if waiters:
                self._waiters.move_to_end(key)  # this request had its turn
            else:
                del self._waiters[key]
            if not fut.done():
                fut.set_result(item)
                return
        self._items.append(item)

    async def get(self, key: Hashable) -> T:
        if self._items and not self._waiters:
            return self._items.popleft()
        fut = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, deque()).append(fut)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # handed an item as it was cancelled: pass it on
                self.put_nowait(fut.result())
            else:
                waiters = self._waiters.get(key)
                if waiters is not None and fut in waiters:
                    waiters.remove(fut)
                    if not waiters:
                        del self._waiters[key]
            raise
