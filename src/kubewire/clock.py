"""The server's clock: what time it is, and timers that fire on that time.

``RealClock`` (the default) is the wall clock and the event loop's timers. ``ManualClock``
stands still until ``advance(seconds)``, which moves it forward and fires the timers that fell
due, in the order they are due (ties in the order they were set), each seeing the clock at its
own due time. A test thus finishes a 30 s graceful pod deletion, or a namespace's deletion
delay, at once. Everything in the server that waits on time a client could notice (deletion
timers today; CronJobs, TTLs and leases later) takes it from the one clock in
``ServerContext.clock``; request deadlines, watch timeouts and the bookmark ticker are transport
matters and stay on the loop's own time.

Written by hand because asyncio's timers cannot run on a virtual time inside a live loop (the
loop keeps serving real sockets meanwhile); ``ManualClock.sleep`` is a timer that resolves a
future, so a coroutine sleeping on it wakes when a test advances past its due time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """What the server asks of its clock."""

    manual: bool

    def now(self) -> datetime: ...

    def call_later(self, delay_s: float, callback: Callable[[], object]) -> Timer: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """Wall time, and the running loop's timers."""

    manual = False

    def now(self) -> datetime:
        return datetime.now(UTC)

    def call_later(self, delay_s: float, callback: Callable[[], object]) -> Timer:
        return asyncio.get_running_loop().call_later(max(delay_s, 0.0), callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


MAX_ADVANCE_S = 10 * 365 * 86400.0  # one advance moves at most ten years (a datetime bound)


class ManualTimer:
    """One pending callback of a ``ManualClock``; ``cancel()`` is idempotent."""

    __slots__ = ("callback", "when")

    def __init__(self, when: float, callback: Callable[[], object]) -> None:
        self.when = when
        self.callback: Callable[[], object] | None = callback

    def cancel(self) -> None:
        self.callback = None


class ManualClock:
    """A clock that moves only when told. Use it on the server's loop (the loop's thread)."""

    manual = True

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start if start is not None else datetime.now(UTC)
        self._elapsed = 0.0  # seconds since ``start``
        self._timers: list[tuple[float, int, ManualTimer]] = []
        self._order = itertools.count()

    @property
    def elapsed(self) -> float:
        return self._elapsed

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed)

    def call_later(self, delay_s: float, callback: Callable[[], object]) -> ManualTimer:
        timer = ManualTimer(self._elapsed + max(delay_s, 0.0), callback)
        heapq.heappush(self._timers, (timer.when, next(self._order), timer))
        return timer

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        timer = self.call_later(seconds, wake)
        try:
            await future
        finally:
            timer.cancel()

    @property
    def pending(self) -> int:
        """Timers set and not yet fired or cancelled."""
        return sum(1 for _, _, timer in self._timers if timer.callback is not None)

    def advance(self, seconds: float) -> int:
        """Move ``seconds`` forward, firing what falls due in order; how many fired. A timer
        set by a callback for a time within the step fires in the same call."""
        if not 0 <= seconds <= MAX_ADVANCE_S:
            raise ValueError(f"seconds must be in [0, {MAX_ADVANCE_S:g}], not {seconds!r}")
        target = self._elapsed + seconds
        fired = 0
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            callback, timer.callback = timer.callback, None
            if callback is None:
                continue
            self._elapsed = max(self._elapsed, when)
            callback()
            fired += 1
        self._elapsed = target
        return fired
