"""Requests begin in slices of the loop's time.

Once the requests begun within one batch of ready loop callbacks have taken ``SLICE_S`` of
wall time, the next ones wait for the next batch (``APIServer.handle`` awaits
``LoopSlices.begin()``), after the loop has polled its sockets and run its timers. The loop
runs every callback that was ready when a batch began before it looks at I/O again, so a burst
of requests arriving together (64 creates, or ten after a moment the process waited for a
core) was one batch: at ~0.5 ms each, commits delivered meanwhile, their writers' answers and
the flush to watchers all waited for the whole burst. Sliced, they wait at most about one
slice (in bursts of up to ``MAX_TURNS_WAITED`` slices; beyond, a request begins after that
many turns whatever the slice): under 1,000 creates/s with 100 watchers the flush's wait past
its due time fell from a p99 of 6.6-8.4 ms to 3.8-4.1 ms, and the write->watch p99 with it
(bench/FINDINGS.md, 2026-11-27); the create-driven fan-out is unchanged. Requests that
waited for a due flush (``begin``'s gate) take their slices again once it has run: the flush
releases them all in one batch, and before they were sliced again 57 creates ran as one 20 ms
convoy after it, their writes reaching the store as one.

Written by hand: asyncio has no priority among ready callbacks and no hook at the start of a
batch; a callback queued when a slice opens runs at the start of the next batch and closes it.
A request that yields goes to the end of the ready queue, ahead of anything that arrives later.
On uvloop (the server's loop) I/O callbacks run as it polls, so they wait at most one slice; on
asyncio's own loop (an in-process ``kubewire.Server`` in a test's loop) they join the ready
queue behind the requests that yielded, so at most two.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

SLICE_S = 0.004  # a few creates; a flush to 100 watchers costs ~1 ms
# A request waits at most this many turns, then begins whatever the slice: each wait is a loop
# callback, so a flood of n requests waiting together costs O(n) of them, not O(n^2) (n
# requests of cost c make n*c/SLICE_S batches, each re-asking every request still waiting).
MAX_TURNS_WAITED = 8


class LoopSlices:
    """``await begin()`` as each request begins; one per server (its loop)."""

    __slots__ = ("_open", "_started")

    def __init__(self) -> None:
        self._open = False
        self._started = 0.0

    async def begin(self, gate: Callable[[], Awaitable[None] | None] | None = None) -> int:
        """Wait, if this batch's requests have had their slice, for a later batch: a turn at
        a time (``await asyncio.sleep(0)``), ``MAX_TURNS_WAITED`` turns at most. Then, if
        ``gate()`` returns an awaitable (the server's: a flush to watchers that is due), wait
        for it and take a slice again: what releases the requests that waited for it releases
        them all in one batch of callbacks, and they would otherwise run as one convoy (see
        the module). Returns the turns waited for slices."""
        turns = await self._slice()
        if gate is not None:
            pending = gate()
            if pending is not None:
                await pending
                turns += await self._slice()
        return turns

    async def _slice(self) -> int:
        for turn in range(MAX_TURNS_WAITED):
            if not self.full():
                return turn
            await asyncio.sleep(0)
        return MAX_TURNS_WAITED

    def full(self) -> bool:
        """Whether this batch's requests have had their slice. The first request of a batch
        opens its slice and is never told so."""
        now = time.monotonic()
        if not self._open:
            self._open = True
            self._started = now
            asyncio.get_running_loop().call_soon(self._close)
            return False
        return now - self._started > SLICE_S

    def _close(self) -> None:
        self._open = False
