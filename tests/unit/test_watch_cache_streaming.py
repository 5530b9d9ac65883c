"""The watch cache's coalesced dispatch and key-walked initial events (storage/cache.py).

Dispatch: a write is answered before its watchers are written to; batches committed before a
flush reach each live watcher in one write, flushes are paced by the previous flush's time (up
to a bound), a request beginning while a flush is due waits for it, and a watcher that starts
between a commit and the dispatch gets exactly the events after its start.
Initial events: a ``sendInitialEvents`` watcher walks the cache by key; every object appears as
it was at the snapshot revision, once, whatever changes while the walk is under way, and the
changes after the snapshot follow in revision order.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec
import pytest

from kubewire.resources import REGISTRY
from kubewire.selectors import parse_field_selector, parse_label_selector
from kubewire.storage import cache as cache_module
from kubewire.storage.base import Change, ChangeType, Create, Delete, Update
from kubewire.storage.cache import WatchCaches
from kubewire.storage.cached import WatchFilter, WatchStart
from kubewire.storage.sqlite.store import SQLiteStore
from tests.unit.watch_cache_helpers import RecordingSink as Sink
from tests.unit.watch_cache_helpers import dispatched, make_caches

PODS = REGISTRY.by_id("core/pods")
assert PODS is not None


def pod(name: str, ns: str = "default", **labels: str) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def everything(ns: str = "", labels: str = "") -> WatchFilter:
    return WatchFilter(ns, "", parse_label_selector(labels), parse_field_selector(""))


def key(name: str, ns: str = "default") -> str:
    assert PODS is not None
    return PODS.storage_key(ns, name)


async def create(store: SQLiteStore, obj: dict[str, Any]) -> int:
    return (await store.write(Create(key(obj["metadata"]["name"]), obj))).revision


async def update(store: SQLiteStore, obj: dict[str, Any]) -> int:
    return (await store.write(Update(key(obj["metadata"]["name"]), obj, None))).revision


async def delete(store: SQLiteStore, name: str) -> int:
    return (await store.write(Delete(key(name)))).revision


def synthetic(revision: int, name: str, change_type: ChangeType = ChangeType.ADDED) -> Change:
    """A committed change as the store would publish it (for driving the feed directly)."""
    obj = pod(name)
    obj["metadata"]["resourceVersion"] = str(revision)
    return Change(revision=revision, type=change_type, key=key(name),
                  value=msgspec.json.encode(obj), prev_value=None, timestamp=time.time())


# -- coalesced, paced dispatch ------------------------------------------------------------------
async def test_batches_committed_before_a_flush_go_out_in_one_write(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    sink = Sink()
    start = caches.revision
    await caches.for_resource(PODS).watch(sink, everything(), WatchStart(revision=start))
    caches._on_changes([synthetic(start + 1, "a")])
    caches._on_changes([synthetic(start + 2, "b"), synthetic(start + 3, "c")])
    assert sink.writes == []  # served by a later flush, not per batch
    await dispatched(caches)
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
    await dispatched(caches)
    assert [e[1] for e in early.events()] == ["a", "b"]
    assert [e[1] for e in late.events()] == ["b"]
    assert [e[1] for e in older.events()] == ["a", "b"]
    await caches.stop()


async def test_a_write_is_answered_before_its_watchers_are_written(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    order: list[str] = []

    class OrderSink(Sink):
        def write_framed(self, framed: bytes) -> None:
            order.append("watcher written")
            super().write_framed(framed)

    sink = OrderSink()
    await caches.for_resource(PODS).watch(sink, everything(),
                                          WatchStart(revision=caches.revision))

    async def writer() -> tuple[int, Any]:
        revision = await create(store, pod("a"))
        order.append("answered")  # what a handler does next: answer (no await between)
        return revision, caches.for_resource(PODS).get(key("a"))

    revision, seen = await asyncio.get_running_loop().create_task(writer())
    await dispatched(caches)
    # Answered before the watcher got it, when reads already saw it at that revision.
    assert order == ["answered", "watcher written"]
    assert seen is not None and seen.revision == revision
    assert sink.events() == [("ADDED", "a", str(revision))]
    await caches.stop()


class SlowSink(Sink):
    """A transport whose every write takes ``delay_s`` of the loop (as 1,000 sockets do)."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.spans: list[tuple[float, float]] = []  # each write's start and end (monotonic)

    def write_framed(self, framed: bytes) -> None:
        began = time.monotonic()
        busy_until = time.thread_time() + self.delay_s  # the loop's CPU, as a socket write
        while time.thread_time() < busy_until:
            pass
        super().write_framed(framed)
        self.spans.append((began, time.monotonic()))


async def first_flush(store: SQLiteStore, sink: SlowSink) -> WatchCaches:
    """Caches whose one watcher ``sink`` has been written the create of "a" (one slow flush)."""
    caches = await make_caches(store)
    await caches.for_resource(PODS).watch(sink, everything(),
                                          WatchStart(revision=caches.revision))
    await create(store, pod("a"))
    await dispatched(caches)
    return caches


async def test_flushes_are_paced_by_the_previous_flush(store: SQLiteStore) -> None:
    # A flush that takes ~20 ms: what is committed in the next 20 ms goes out in one write.
    caches = await first_flush(store, sink := SlowSink(0.02))
    assert len(sink.writes) == 1
    await create(store, pod("b"))
    for _ in range(5):
        await asyncio.sleep(0)  # several loop turns: an unpaced flush would have run
    await create(store, pod("c"))
    assert len(sink.writes) == 1
    await dispatched(caches)
    assert len(sink.writes) == 2
    assert [e[1] for e in sink.events()] == ["a", "b", "c"]
    await caches.stop()


async def test_the_pause_is_twice_the_previous_flush(store: SQLiteStore,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # A flush that takes ~100 ms: a commit 130 ms after it ended is held (a pause of one
    # flush's cost would have passed) until twice the cost has.
    monkeypatch.setattr(cache_module, "MAX_FLUSH_GAP_S", 1.0)
    caches = await first_flush(store, sink := SlowSink(0.1))
    await asyncio.sleep(0.13)
    await create(store, pod("b"))
    await dispatched(caches)
    (_, first_ended), (second_began, _) = sink.spans
    assert second_began - first_ended >= 2 * 0.1 * 0.95
    assert [e[1] for e in sink.events()] == ["a", "b"]
    await caches.stop()


async def test_the_pause_between_flushes_is_bounded(store: SQLiteStore,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "MAX_FLUSH_GAP_S", 0.0)  # a long flush, no pause after
    caches = await first_flush(store, sink := SlowSink(0.02))
    await create(store, pod("b"))
    await dispatched(caches)
    assert [e[1] for e in sink.events()] == ["a", "b"]
    assert len(sink.writes) == 2
    await caches.stop()


def writes_in_flight(store: SQLiteStore, n: int) -> None:
    """Have the store count ``n`` of this process's writes as handed to its writer and not yet
    published (what ``SQLiteStore.write`` counts; test_sqlite_batch.py tests the count)."""
    store._unpublished = n


async def test_a_due_flush_waits_for_the_writes_in_flight(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # A burst whose first write was committed alone, after a flush that cost 50 ms: its flush
    # waits for the rest (for up to 100 ms), and the delivery that leaves none in flight
    # sends the whole burst in one write.
    monkeypatch.setattr(cache_module, "MAX_FLUSH_GAP_S", 1.0)
    caches = await first_flush(store, sink := SlowSink(0.05))
    await asyncio.sleep(0.11)  # the pause after it has passed: a new flush falls due at once
    writes_in_flight(store, 2)
    start = caches.revision
    caches._on_changes([synthetic(start + 1, "b")])
    for _ in range(5):
        await asyncio.sleep(0)  # an unheld flush runs a few callbacks after the delivery
    assert len(sink.writes) == 1
    writes_in_flight(store, 0)
    caches._on_changes([synthetic(start + 2, "c"), synthetic(start + 3, "d")])
    await dispatched(caches)
    assert len(sink.writes) == 2
    assert [e[1] for e in sink.events()] == ["a", "b", "c", "d"]
    await caches.stop()


async def test_the_wait_for_writes_in_flight_is_bounded(store: SQLiteStore) -> None:
    # Writes that stay in flight (a stalled writer) hold a due flush at most one pause:
    # twice what the kind's previous flush cost (another kind's cheap flush between does not
    # count).
    caches = await first_flush(store, sink := SlowSink(0.02))
    writes_in_flight(store, 3)
    for name in ("b", "c"):
        await asyncio.sleep(0.05)  # the pause after the previous flush has passed
        await store.write(Create(f"core/configmaps/default/{name}", {  # nobody watches these
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}}))
        await dispatched(caches)
        start = caches.revision
        caches._on_changes([synthetic(start + 1, name)])
        fell_due = time.monotonic()
        await dispatched(caches)
        began, _ = sink.spans[-1]
        assert 2 * 0.02 * 0.95 <= began - fell_due < 2 * 0.02 + 0.5
    assert [e[1] for e in sink.events()] == ["a", "b", "c"]
    writes_in_flight(store, 0)
    await caches.stop()


async def test_a_cheap_flush_does_not_wait_for_writes_in_flight(store: SQLiteStore) -> None:
    # No flush measured yet, or one whose pause would be under MIN_HOLD_S: waiting would add
    # latency for less than one commit's round trip.
    caches = await make_caches(store)
    sink = Sink()
    await caches.for_resource(PODS).watch(sink, everything(),
                                          WatchStart(revision=caches.revision))
    writes_in_flight(store, 1)
    for name in ("a", "b"):
        caches._on_changes([synthetic(caches.revision + 1, name)])
        for _ in range(5):
            await asyncio.sleep(0)  # the flush follows the answers: a few callbacks
        assert sink.events()[-1][1] == name
        cost = caches.for_resource(PODS).flush_cost
        assert cost * cache_module.FLUSH_PAUSE_PER_COST < cache_module.MIN_HOLD_S
        await asyncio.sleep(0.01)  # past the pause
    writes_in_flight(store, 0)
    await caches.stop()


async def test_a_request_beginning_while_a_flush_is_due_waits_for_it(
        store: SQLiteStore) -> None:
    # The server awaits ``due_flush()`` as each request begins: the due flush goes out before
    # that request's work, instead of after whatever the loop took up before it.
    caches = await make_caches(store)
    sink = Sink()
    start = caches.revision
    await caches.for_resource(PODS).watch(sink, everything(), WatchStart(revision=start))
    assert caches.due_flush() is None  # nothing to flush
    caches._on_changes([synthetic(start + 1, "a")])
    due = caches.due_flush()
    assert due is not None and caches.due_flush() is due  # one future for every request
    assert sink.writes == []
    await asyncio.wait_for(due, 1.0)
    assert [e[1] for e in sink.events()] == ["a"]  # written before the request went on
    assert caches.due_flush() is None
    await caches.stop()


async def test_a_flush_in_its_pause_does_not_hold_requests(store: SQLiteStore) -> None:
    # The pause after a flush is what lets the loop serve new writes: a flush not yet due
    # keeps nobody waiting.
    caches = await first_flush(store, sink := SlowSink(0.02))
    caches._on_changes([synthetic(caches.revision + 1, "b")])
    assert caches.due_flush() is None  # within the 40 ms pause
    await dispatched(caches)
    assert [e[1] for e in sink.events()] == ["a", "b"]
    await caches.stop()


async def test_a_flush_that_waits_for_writes_in_flight_lets_requests_go(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # A due flush that then waits for this process's writes in flight: the requests waiting
    # for it go on at once (some of them may be what it waits for), not after the wait.
    monkeypatch.setattr(cache_module, "MAX_FLUSH_GAP_S", 1.0)
    caches = await first_flush(store, sink := SlowSink(0.05))
    await asyncio.sleep(0.11)  # past the pause
    writes_in_flight(store, 2)
    start = caches.revision
    caches._on_changes([synthetic(start + 1, "b")])
    due = caches.due_flush()
    assert due is not None
    await asyncio.wait_for(due, 0.05)  # well within the wait for the writes (100 ms)
    assert len(sink.writes) == 1  # "b" is held
    assert caches.due_flush() is None  # and no one waits for a held flush
    writes_in_flight(store, 0)
    caches._on_changes([synthetic(start + 2, "c")])
    await dispatched(caches)
    assert [e[1] for e in sink.events()] == ["a", "b", "c"]
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
    for i in range(1, 20):  # more than the ring holds, before any flush
        caches._on_changes([synthetic(start + i, f"p{i}")])
    assert len(sink.events()) >= 12  # served as the backlog passed half the ring
    await dispatched(caches)
    assert [e[1] for e in sink.events()] == [f"p{i}" for i in range(1, 20)]
    assert not sink.closed
    await caches.stop()


# -- initial events walked by key ----------------------------------------------------------
async def test_changes_during_the_walk_show_the_snapshot_then_the_changes(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "PUMP_BATCH_EVENTS", 2)  # pages of two objects
    revs = {name: await create(store, pod(name)) for name in ("a", "b", "c", "d", "e")}
    caches = await make_caches(store)
    cache = caches.for_resource(PODS)
    sink = Sink(pause_after_write=True)
    await cache.watch(sink, everything(),
                      WatchStart(revision=0, initial_events=True, bookmarks=True))
    snapshot = caches.revision
    assert [e[1] for e in sink.events()] == ["a", "b"]  # the first page, then paused
    r1 = await update(store, pod("a", v="1"))  # behind the walk
    r2 = await update(store, pod("c", v="1"))  # ahead of it
    r3 = await delete(store, "d")  # ahead, gone before the walk gets there
    r4 = await create(store, pod("cc"))  # ahead, created after the snapshot
    r5 = await delete(store, "b")  # behind
    r6 = await update(store, pod("c", v="2"))
    sink.drain()
    assert sink.events() == [
        ("ADDED", "a", str(revs["a"])), ("ADDED", "b", str(revs["b"])),
        ("ADDED", "c", str(revs["c"])), ("ADDED", "d", str(revs["d"])),
        ("ADDED", "e", str(revs["e"])),
        ("BOOKMARK", "", str(snapshot)),
        ("MODIFIED", "a", str(r1)), ("MODIFIED", "c", str(r2)), ("DELETED", "d", str(r3)),
        ("ADDED", "cc", str(r4)), ("DELETED", "b", str(r5)), ("MODIFIED", "c", str(r6)),
    ]
    # The walk is over: the cache keeps no earlier states for it.
    assert not cache._walkers and not cache._before
    r7 = await create(store, pod("f"))
    await dispatched(caches)
    assert sink.events()[-1] == ("ADDED", "f", str(r7))
    await caches.stop()


async def test_walks_from_different_snapshots_see_their_own_states(store: SQLiteStore) -> None:
    r0 = await create(store, pod("x"))
    caches = await make_caches(store)
    cache = caches.for_resource(PODS)
    first = Sink(paused=True)
    await cache.watch(first, everything(), WatchStart(revision=0, initial_events=True))
    r1 = await update(store, pod("x", v="1"))
    second = Sink(paused=True)
    await cache.watch(second, everything(), WatchStart(revision=0, initial_events=True))
    r2 = await delete(store, "x")
    third = Sink(paused=True)
    await cache.watch(third, everything(), WatchStart(revision=0, initial_events=True))
    r3 = await create(store, pod("x"))
    for sink in (third, first, second):
        sink.drain()
    assert first.events() == [("ADDED", "x", str(r0)), ("MODIFIED", "x", str(r1)),
                              ("DELETED", "x", str(r2)), ("ADDED", "x", str(r3))]
    assert second.events() == [("ADDED", "x", str(r1)), ("DELETED", "x", str(r2)),
                               ("ADDED", "x", str(r3))]
    assert third.events() == [("ADDED", "x", str(r3))]
    assert not cache._before
    await caches.stop()


async def test_walk_of_a_namespace_with_a_selector(store: SQLiteStore,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "PUMP_BATCH_EVENTS", 3)
    names = [f"p{i:02d}" for i in range(10)]
    for i, name in enumerate(names):
        obj = pod(name, app="web" if i % 2 else "db")
        await store.write(Create(key(name), obj))
        await store.write(Create(key(name, "other"), pod(name, "other", app="web")))
    caches = await make_caches(store)
    sink = Sink(pause_after_write=True)
    await caches.for_resource(PODS).watch(
        sink, everything(ns="default", labels="app=web"),
        WatchStart(revision=0, initial_events=True))
    sink.drain()
    assert [e[1] for e in sink.events()] == names[1::2]
    await caches.stop()


async def test_a_walker_overtaken_by_the_ring_is_closed(store: SQLiteStore) -> None:
    await create(store, pod("a"))
    caches = await make_caches(store, capacity=4)
    cache = caches.for_resource(PODS)
    sink = Sink(paused=True)
    await cache.watch(sink, everything(), WatchStart(revision=0, initial_events=True))
    for i in range(6):
        await update(store, pod("a", n=str(i)))
    assert sink.closed
    assert not cache._walkers and not cache._before
    await caches.stop()


class FlowSink(Sink):
    """A sink with a settable pause mark, as server streams have."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.high_water: list[int | None] = []

    def set_write_high_water(self, high: int | None) -> None:
        self.high_water.append(high)


async def test_a_walker_holds_nothing_unsent_until_its_walk_ends(store: SQLiteStore) -> None:
    await create(store, pod("a"))
    caches = await make_caches(store)
    cache = caches.for_resource(PODS)
    done, cut = FlowSink(pause_after_write=True), FlowSink(paused=True)
    await cache.watch(done, everything(), WatchStart(revision=0, initial_events=True))
    await cache.watch(cut, everything(), WatchStart(revision=0, initial_events=True))
    done.drain()
    assert done.high_water == [1, None]  # paused while anything waits, then the usual mark
    assert not done.closed
    cut.close()  # mid-walk: the connection may serve more requests with the usual mark
    assert cut.high_water == [1, None]
    await caches.stop()
