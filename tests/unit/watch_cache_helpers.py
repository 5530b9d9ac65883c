"""Helpers of the watch cache's unit tests (the ``store`` fixture is in conftest.py).

``RecordingSink`` records what a transport would have been given; ``paused`` plays the
transport's flow control, and ``pause_after_write`` makes it a socket that takes one write at a
time (``resume`` lets the next one through). ``make_caches`` starts the caches on a store.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

from kubewire.resources import REGISTRY
from kubewire.storage.cache import WatchCaches
from kubewire.storage.sqlite.store import SQLiteStore


async def make_caches(store: SQLiteStore, capacity: int = 64) -> WatchCaches:
    caches = WatchCaches(store, REGISTRY, ring_capacity=capacity, bookmark_interval_s=3600)
    await caches.start()
    return caches


async def dispatched(caches: WatchCaches, timeout_s: float = 5.0) -> None:
    """Wait until live watchers were written every change the caches applied so far."""
    deadline = time.monotonic() + timeout_s
    while caches._dirty:  # applied, not yet flushed to live watchers
        assert time.monotonic() < deadline, "the watch cache never flushed"
        await asyncio.sleep(0)  # an unpaced flush is a few callbacks away ...
        if caches._dirty:
            await asyncio.sleep(0.0005)  # ... a paced one a timer


class RecordingSink:
    framing = "lines"

    def __init__(self, *, paused: bool = False, pause_after_write: bool = False) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.paused = paused
        self.pause_after_write = pause_after_write
        self.on_resume: Callable[[], None] | None = None
        self.on_close: Callable[[], None] | None = None

    @property
    def is_paused(self) -> bool:
        return self.paused

    @staticmethod
    def frame(lines: list[bytes]) -> bytes:
        return b"".join(lines)

    def write_framed(self, framed: bytes) -> None:
        assert not self.closed
        self.writes.append(framed)
        if self.pause_after_write:
            self.paused = True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.on_close is not None:
                self.on_close()

    def resume(self) -> None:
        self.paused = False
        if self.on_resume is not None:
            self.on_resume()

    def drain(self) -> None:
        """Resume until the watcher stops writing."""
        while True:
            count = len(self.writes)
            self.resume()
            if len(self.writes) == count:
                return

    def events(self) -> list[tuple[str, str, str]]:
        """(type, name, resourceVersion) of every event written, in order."""
        out = []
        for line in b"".join(self.writes).splitlines():
            event = json.loads(line)
            meta = event["object"].get("metadata", {})
            out.append((event["type"], meta.get("name", ""), meta.get("resourceVersion", "")))
        return out
