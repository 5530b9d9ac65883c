"""Many deadlines on one loop timer (watch timeouts, request deadlines).

Why not ``loop.call_later`` per watch: under uvloop each TimerHandle costs ~0.5 KB (the handle,
its libuv timer, the bound callback, a context), held for the 30-60 minutes a watch may last,
and most watches end before their deadline. Here a deadline is one small heap entry and each
loop holds a single timer, for the earliest entry. Deadlines fire at the same loop time a
``call_at`` would, in deadline order.

Cancelling drops the entry's reference to its target at once (a closed watcher is not kept
alive) and leaves the empty entry in the heap until it comes to the top or the heap is rebuilt,
which happens when more than half of it is cancelled (as asyncio does with its own timers).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from typing import Protocol

log = logging.getLogger(__name__)

_COMPACT_MIN = 64  # below this many cancelled entries, never rebuild the heap
# uvloop's timers have millisecond resolution: an entry this close to due counts as due, so the
# timer is not re-armed for a fraction of a millisecond (asyncio uses its clock resolution).
_SLACK_S = 0.001


class Closable(Protocol):
    def close(self) -> None: ...


class Deadline:
    """One scheduled ``target.close()``; ``cancel()`` is idempotent."""

    __slots__ = ("_owner", "target", "when")

    def __init__(self, when: float, target: Closable, owner: _LoopDeadlines) -> None:
        self.when = when
        self.target: Closable | None = target
        self._owner = owner

    def __lt__(self, other: Deadline) -> bool:
        return self.when < other.when

    def cancel(self) -> None:
        if self.target is not None:
            self.target = None
            self._owner.cancelled()


class _LoopDeadlines:
    """The heap and the one timer of one event loop."""

    __slots__ = ("_armed_at", "_cancelled", "_heap", "_loop", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[Deadline] = []
        self._cancelled = 0  # entries in the heap with no target
        self._timer: asyncio.TimerHandle | None = None
        self._armed_at = float("inf")

    def add(self, when: float, target: Closable) -> Deadline:
        entry = Deadline(when, target, self)
        heapq.heappush(self._heap, entry)
        if when < self._armed_at:
            self._arm(when)
        return entry

    def cancelled(self) -> None:
        self._cancelled += 1
        heap = self._heap
        if self._cancelled == len(heap):  # nothing left to fire: free the heap and the timer
            heap.clear()
            self._cancelled = 0
            self._disarm()
            _forget(self._loop, self)
        elif self._cancelled >= _COMPACT_MIN and self._cancelled * 2 > len(heap):
            heap[:] = [e for e in heap if e.target is not None]
            heapq.heapify(heap)
            self._cancelled = 0

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_at = when
        self._timer = self._loop.call_at(when, self._fire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._armed_at = float("inf")

    def _fire(self) -> None:
        self._timer = None
        self._armed_at = float("inf")
        heap = self._heap
        due = self._loop.time() + _SLACK_S
        while heap and heap[0].when <= due:
            entry = heapq.heappop(heap)
            target = entry.target
            if target is None:
                self._cancelled -= 1
                continue
            entry.target = None  # fired: a cancel() from inside close() is a no-op
            try:
                target.close()
            except Exception:
                log.exception("deadline callback failed")
        while heap and heap[0].target is None:
            heapq.heappop(heap)
            self._cancelled -= 1
        if heap:
            if heap[0].when < self._armed_at:  # close() may have added and armed already
                self._arm(heap[0].when)
        else:
            self._disarm()
            _forget(self._loop, self)


_by_loop: dict[asyncio.AbstractEventLoop, _LoopDeadlines] = {}


def _forget(loop: asyncio.AbstractEventLoop, table: _LoopDeadlines) -> None:
    # A loop's table lives while it has deadlines: no reference to a finished loop remains.
    if _by_loop.get(loop) is table:
        del _by_loop[loop]


def call_later(delay: float, target: Closable) -> Deadline:
    """Call ``target.close()`` after ``delay`` seconds on the running loop."""
    loop = asyncio.get_running_loop()
    table = _by_loop.get(loop)
    if table is None:
        table = _by_loop[loop] = _LoopDeadlines(loop)
    return table.add(loop.time() + delay, target)
