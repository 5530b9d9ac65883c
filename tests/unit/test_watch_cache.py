"""The watch cache's guarantees (storage/cache.py), on a real SQLite store, no network.

The sink records what a transport would have been given; ``paused`` plays the transport's
flow control.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubewire.resources import REGISTRY, Resource
from kubewire.selectors import parse_field_selector, parse_label_selector
from kubewire.storage.base import Create, Delete, Retention, Update
from kubewire.storage.cached import WatchFilter, WatchStart
from kubewire.storage.sqlite.store import SQLiteStore
from tests.unit.watch_cache_helpers import RecordingSink, dispatched, make_caches

PODS = REGISTRY.by_id("core/pods")
SERVICES = REGISTRY.by_id("core/services")
assert PODS is not None and SERVICES is not None


def pod(name: str, ns: str = "default", **labels: str) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def everything(ns: str = "", labels: str = "", fields: str = "") -> WatchFilter:
    return WatchFilter(ns, "", parse_label_selector(labels), parse_field_selector(fields))


async def write_pod(store: SQLiteStore, op: str, obj: dict[str, Any], rev: int = 0) -> int:
    key = _key(PODS, obj)
    if op == "create":
        change = await store.write(Create(key, obj))
    elif op == "update":
        change = await store.write(Update(key, obj, rev or None))
    else:
        change = await store.write(Delete(key))
    return change.revision


def _key(resource: Resource | None, obj: dict[str, Any]) -> str:
    assert resource is not None
    return resource.storage_key(obj["metadata"]["namespace"], obj["metadata"]["name"])


async def test_live_watcher_gets_every_change_once_in_order(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    cache = caches.for_resource(PODS)
    sink = RecordingSink()
    await cache.watch(sink, everything(), WatchStart(revision=caches.revision))
    r1 = await write_pod(store, "create", pod("a"))
    r2 = await write_pod(store, "update", pod("a", app="x"))
    r3 = await write_pod(store, "delete", pod("a"))
    await dispatched(caches)
    assert sink.events() == [("ADDED", "a", str(r1)), ("MODIFIED", "a", str(r2)),
                             ("DELETED", "a", str(r3))]
    await caches.stop()


async def test_initial_events_then_end_bookmark_then_changes(store: SQLiteStore) -> None:
    r_b = await write_pod(store, "create", pod("b"))
    r_a = await write_pod(store, "create", pod("a"))
    caches = await make_caches(store)
    sink = RecordingSink()
    await caches.for_resource(PODS).watch(
        sink, everything(), WatchStart(revision=0, initial_events=True, bookmarks=True))
    r_c = await write_pod(store, "create", pod("c"))
    await dispatched(caches)
    events = sink.events()
    # key order, each with its own revision; then the bookmark at the snapshot revision
    assert events == [("ADDED", "a", str(r_a)), ("ADDED", "b", str(r_b)),
                      ("BOOKMARK", "", str(r_a)), ("ADDED", "c", str(r_c))]
    bookmark = json.loads(b"".join(sink.writes).splitlines()[2])
    annotations = bookmark["object"]["metadata"]["annotations"]
    assert annotations["k8s.io/initial-events-end"] == "true"
    await caches.stop()


async def test_selector_exit_is_deleted_and_entry_is_added(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    sink = RecordingSink()
    await caches.for_resource(PODS).watch(sink, everything(labels="app=web"),
                                          WatchStart(revision=caches.revision))
    await write_pod(store, "create", pod("p", app="web"))
    r_out = await write_pod(store, "update", pod("p", app="db"))
    await write_pod(store, "update", pod("p", app="db", tier="x"))  # invisible
    r_in = await write_pod(store, "update", pod("p", app="web"))
    await dispatched(caches)
    assert [e[0] for e in sink.events()] == ["ADDED", "DELETED", "ADDED"]
    deleted = json.loads(b"".join(sink.writes).splitlines()[1])["object"]
    assert deleted["metadata"]["labels"] == {"app": "web"}  # previous content...
    assert deleted["metadata"]["resourceVersion"] == str(r_out)  # ...at the event's revision
    assert sink.events()[2][2] == str(r_in)
    await caches.stop()


async def test_equal_filters_share_the_same_bytes(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    sinks = [RecordingSink() for _ in range(3)]
    for sink in sinks:
        await caches.for_resource(PODS).watch(sink, everything(),
                                              WatchStart(revision=caches.revision))
    await write_pod(store, "create", pod("a"))
    await dispatched(caches)
    assert sinks[0].writes[0] is sinks[1].writes[0] is sinks[2].writes[0]
    await caches.stop()


async def test_paused_watcher_catches_up_after_resume(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    slow, fast = RecordingSink(), RecordingSink()
    cache = caches.for_resource(PODS)
    await cache.watch(slow, everything(), WatchStart(revision=caches.revision))
    await cache.watch(fast, everything(), WatchStart(revision=caches.revision))
    await write_pod(store, "create", pod("a"))
    await dispatched(caches)
    slow.paused = True
    for i in range(5):
        await write_pod(store, "update", pod("a", n=str(i)))
        await dispatched(caches)
    assert len(fast.events()) == 6
    assert len(slow.events()) == 2  # the write that found it paused, then nothing
    slow.resume()
    assert slow.events() == fast.events()
    await caches.stop()


async def test_watcher_overtaken_by_the_ring_is_closed(store: SQLiteStore) -> None:
    caches = await make_caches(store, capacity=4)
    slow, fast = RecordingSink(), RecordingSink()
    cache = caches.for_resource(PODS)
    await cache.watch(slow, everything(), WatchStart(revision=caches.revision))
    await cache.watch(fast, everything(), WatchStart(revision=caches.revision))
    await write_pod(store, "create", pod("a"))
    await dispatched(caches)
    slow.paused = True
    for i in range(10):
        await write_pod(store, "update", pod("a", n=str(i)))
        await dispatched(caches)
    slow.resume()
    assert slow.closed
    assert len(fast.events()) == 11 and not fast.closed
    assert len(cache.watchers) == 1
    await caches.stop()


async def test_start_older_than_ring_is_replayed_from_the_log(store: SQLiteStore) -> None:
    caches = await make_caches(store, capacity=4)
    start = caches.revision
    revisions = [await write_pod(store, "create", pod("a"))]
    for i in range(30):
        revisions.append(await write_pod(store, "update", pod("a", n=str(i))))
    sink = RecordingSink()
    await caches.for_resource(PODS).watch(sink, everything(), WatchStart(revision=start + 3))
    got = [int(rv) for _, _, rv in sink.events()]
    assert got == [r for r in revisions if r > start + 3]
    await caches.stop()


async def test_start_below_compaction_gets_410(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite", durability="normal",
                        retention=Retention(max_changes=5, max_age_s=None))
    await store.open()
    caches = await make_caches(store, capacity=4)
    for i in range(20):
        await write_pod(store, "create", pod(f"p{i}"))
    await store.compact()
    sink = RecordingSink()
    await caches.for_resource(PODS).watch(sink, everything(), WatchStart(revision=1))
    (line,) = b"".join(sink.writes).splitlines()
    event = json.loads(line)
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    assert event["object"]["message"] == (
        f"too old resource version: 1 ({store.compacted_revision})")
    assert sink.closed
    await caches.stop()
    await store.close()


async def test_future_revision_waits_for_it(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    sink = RecordingSink()
    await caches.for_resource(PODS).watch(sink, everything(),
                                          WatchStart(revision=caches.revision + 2))
    await write_pod(store, "create", pod("a"))
    await write_pod(store, "create", pod("b"))
    r3 = await write_pod(store, "create", pod("c"))
    await dispatched(caches)
    assert sink.events() == [("ADDED", "c", str(r3))]
    await caches.stop()


async def test_namespace_filter_sees_only_its_namespace(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    sink = RecordingSink()
    await caches.for_resource(PODS).watch(sink, everything(ns="b"),
                                          WatchStart(revision=caches.revision))
    await write_pod(store, "create", pod("x", ns="a"))
    await write_pod(store, "create", pod("y", ns="b"))
    await dispatched(caches)
    assert [e[1] for e in sink.events()] == ["y"]
    await caches.stop()
