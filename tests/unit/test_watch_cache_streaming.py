"""The watch cache's coalesced dispatch (storage/cache.py).

Dispatch: batches committed within one loop turn reach each live watcher in one write, and a
watcher that starts between a commit and the dispatch gets exactly the events after its start.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubewire.resources import REGISTRY
from kubewire.selectors import parse_field_selector, parse_label_selector
from kubewire.storage.base import Change, ChangeType, Create, Retention
from kubewire.storage.cache import WatchCaches, WatchStart
from kubewire.storage.cached import WatchFilter
from kubewire.storage.sqlite import SQLiteStore

PODS = REGISTRY.by_id("core/pods")
assert PODS is not None


class Sink:
    """Records writes; with ``pause_after_write`` it pauses after each one, as a socket that
    takes one write at a time (``resume`` lets the next one through)."""

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


def pod(name: str, ns: str = "default", **labels: str) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def everything(ns: str = "", labels: str = "") -> WatchFilter:
    return WatchFilter(ns, "", parse_label_selector(labels), parse_field_selector(""))


def key(name: str, ns: str = "default") -> str:
    assert PODS is not None
    return PODS.storage_key(ns, name)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "db.sqlite", durability="normal",
                    retention=Retention(max_changes=None, max_age_s=None))
    await s.open()
    yield s
    await s.close()


async def make_caches(store: SQLiteStore, capacity: int = 64) -> WatchCaches:
    caches = WatchCaches(store, REGISTRY, ring_capacity=capacity, bookmark_interval_s=3600)
    await caches.start()
    return caches


async def create(store: SQLiteStore, obj: dict[str, Any]) -> int:
    return (await store.write(Create(key(obj["metadata"]["name"]), obj))).revision


def synthetic(revision: int, name: str, change_type: ChangeType = ChangeType.ADDED) -> Change:
    """A committed change as the store would publish it (for driving the feed directly)."""
    obj = pod(name)
    obj["metadata"]["resourceVersion"] = str(revision)
    return Change(revision=revision, type=change_type, key=key(name),
                  value=msgspec.json.encode(obj), prev_value=None, timestamp=time.time())


# -- coalesced dispatch ------------------------------------------------------------------------
async def test_batches_committed_in_one_turn_go_out_in_one_write(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    sink = Sink()
    start = caches.revision
    await caches.for_resource(PODS).watch(sink, everything(), WatchStart(revision=start))
    caches._on_changes([synthetic(start + 1, "a")])
    caches._on_changes([synthetic(start + 2, "b"), synthetic(start + 3, "c")])
    assert sink.writes == []  # served once per loop turn, not per batch
    await asyncio.sleep(0)
    assert len(sink.writes) == 1
    assert [e[1] for e in sink.events()] == ["a", "b", "c"]
    await caches.stop()


async def test_watch_starting_before_a_dispatch_gets_only_later_events(
        store: SQLiteStore) -> None:
    caches = await make_caches(store)
    cache = caches.for_resource(PODS)
    start = caches.revision
    early, late, older = Sink(), Sink(), Sink()
    await cache.watch(early, everything(), WatchStart(revision=start))
    caches._on_changes([synthetic(start + 1, "a")])
    # The cache is at start + 1 before live watchers were served it.
    await cache.watch(late, everything(), WatchStart(revision=caches.revision))
    await cache.watch(older, everything(), WatchStart(revision=start))
    caches._on_changes([synthetic(start + 2, "b")])
    await asyncio.sleep(0)
    assert [e[1] for e in early.events()] == ["a", "b"]
    assert [e[1] for e in late.events()] == ["b"]
    assert [e[1] for e in older.events()] == ["a", "b"]
    await caches.stop()


async def test_a_write_is_answered_after_its_watchers_were_written(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    sink = Sink()
    await caches.for_resource(PODS).watch(sink, everything(),
                                          WatchStart(revision=caches.revision))
    revision = await create(store, pod("a"))
    assert sink.events() == [("ADDED", "a", str(revision))]
    await caches.stop()


async def test_stop_serves_what_was_committed(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    sink = Sink()
    start = caches.revision
    await caches.for_resource(PODS).watch(sink, everything(), WatchStart(revision=start))
    caches._on_changes([synthetic(start + 1, "a")])
    await caches.stop()
    assert [e[1] for e in sink.events()] == ["a"]
    assert sink.closed


async def test_a_backlog_near_the_ring_capacity_is_served_at_once(store: SQLiteStore) -> None:
    caches = await make_caches(store, capacity=8)
    sink = Sink()
    start = caches.revision
    await caches.for_resource(PODS).watch(sink, everything(), WatchStart(revision=start))
    for i in range(1, 20):  # more than the ring holds, within one loop turn
        caches._on_changes([synthetic(start + i, f"p{i}")])
    await asyncio.sleep(0)
    assert [e[1] for e in sink.events()] == [f"p{i}" for i in range(1, 20)]
    assert not sink.closed
    await caches.stop()
