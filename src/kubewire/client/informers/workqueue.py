"""A rate-limited work queue for controllers (client-go ``util/workqueue``).

Guarantees:
- A key is queued at most once however often it is added (``add`` while queued is a no-op).
- A key is never handed to two workers at once: added while being processed, it is queued
  again only when ``done(key)`` is called.
- ``add_rate_limited(key)`` re-adds after a per-key exponential delay (failures back off);
  ``forget(key)`` resets that key's delay after a success.
- ``shut_down()`` wakes every waiting ``get()`` with ``QueueShutDown``.
Delayed adds are tasks the queue owns; ``shut_down()`` cancels them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K")
BASE_DELAY_S = 0.005  # client-go DefaultControllerRateLimiter: 5 ms ...
MAX_DELAY_S = 1000.0  # ... doubling up to 1000 s per item


class QueueShutDown(Exception):
    """The queue was shut down; workers should return."""


@dataclass(slots=True)
class ItemBackoff(Generic[K]):
    """Per-key exponential delays (client-go ``ItemExponentialFailureRateLimiter``)."""

    base_s: float = BASE_DELAY_S
    max_s: float = MAX_DELAY_S
    _failures: dict[K, int] = field(default_factory=dict)

    def when(self, key: K) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return min(self.max_s, self.base_s * 2.0 ** failures)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)


class WorkQueue(Generic[K]):
    """Keys to reconcile, deduplicated, one worker per key at a time."""

    def __init__(self, backoff: ItemBackoff[K] | None = None) -> None:
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._ready = asyncio.Condition()
        self._backoff: ItemBackoff[K] = backoff or ItemBackoff()
        self._timers: set[asyncio.Task[None]] = set()
        self._shut_down = False

    def __len__(self) -> int:
        return len(self._queue)

    async def add(self, key: K) -> None:
        if self._shut_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # queued again by done()
        self._queue.append(key)
        async with self._ready:
            self._ready.notify()

    async def get(self) -> K:
        """The next key; call ``done(key)`` when finished with it. Raises ``QueueShutDown``."""
        async with self._ready:
            await self._ready.wait_for(lambda: bool(self._queue) or self._shut_down)
            if self._shut_down:
                raise QueueShutDown
            key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    async def done(self, key: K) -> None:
        """Finished with ``key``; if it was added meanwhile, it is queued again."""
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            async with self._ready:
                self._ready.notify()

    def add_rate_limited(self, key: K) -> float:
        """Add ``key`` after its backoff delay; returns the delay."""
        delay = self._backoff.when(key)
        self.add_after(key, delay)
        return delay

    def add_after(self, key: K, delay_s: float) -> None:
        if self._shut_down:
            return

        async def later() -> None:
            await asyncio.sleep(delay_s)
            await self.add(key)

        task = asyncio.ensure_future(later())
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (after it was handled successfully)."""
        self._backoff.forget(key)

    def failures(self, key: K) -> int:
        return self._backoff.failures(key)

    async def shut_down(self) -> None:
        self._shut_down = True
        for task in list(self._timers):
            task.cancel()
        async with self._ready:
            self._ready.notify_all()
