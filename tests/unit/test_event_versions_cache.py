"""One stored kind, two served versions: the cache's VersionView and the VersionedStore.

Real SQLite store and watch caches, no network; sinks record what a transport would get.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubewire.event_conversion import events_v1_to_core_event
from kubewire.resources import REGISTRY, Resource
from kubewire.selectors import parse_field_selector, parse_label_selector
from kubewire.storage.base import Create, Delete, Retention, Update
from kubewire.storage.cache import WatchCaches
from kubewire.storage.cached import WatchFilter, WatchStart
from kubewire.storage.sqlite.store import SQLiteStore
from kubewire.storage.version_view import VersionView
from kubewire.storage.versioned_store import VersionedStore
from tests.unit.watch_cache_helpers import RecordingSink, dispatched


def served(group: str) -> Resource:
    found = REGISTRY.lookup(group, "v1", "events")
    assert found is not None
    return found


CORE = served("")
EVENTS = served("events.k8s.io")


def events_v1(name: str, regarding: str = "web-0") -> dict[str, Any]:
    return {"kind": "Event", "apiVersion": "events.k8s.io/v1",
            "metadata": {"name": name, "namespace": "default"},
            "eventTime": "2024-12-11T09:15:02.123456Z", "reportingController": "kubewire.io/t",
            "reportingInstance": "t-1", "action": "Test", "reason": "Testing", "type": "Normal",
            "note": "first", "regarding": {"kind": "Pod", "name": regarding}}


def core_v1(name: str) -> dict[str, Any]:
    return {"kind": "Event", "apiVersion": "v1", "metadata": {"name": name,
                                                              "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web-0"}, "reason": "Started",
            "message": "legacy", "source": {"component": "kubelet"}, "count": 2}


def key(name: str) -> str:
    return EVENTS.storage_key("default", name)


def select(fields: str = "") -> WatchFilter:
    return WatchFilter("", "", parse_label_selector(""), parse_field_selector(fields))


def lines(sink: RecordingSink) -> list[dict[str, Any]]:
    return [json.loads(line) for line in b"".join(sink.writes).splitlines()]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[VersionedStore]:
    raw = SQLiteStore(tmp_path / "db.sqlite", durability="normal",
                      retention=Retention(max_changes=None, max_age_s=None))
    await raw.open()
    yield VersionedStore(raw, REGISTRY)
    await raw.close()


async def make_caches(store: VersionedStore) -> WatchCaches:
    caches = WatchCaches(store, REGISTRY, ring_capacity=64, bookmark_interval_s=3600)
    await caches.start()
    return caches


def view_of(caches: WatchCaches, resource: Resource) -> VersionView:
    view = caches.for_resource(resource)
    assert isinstance(view, VersionView)
    return view


async def test_other_version_writes_are_stored_in_the_stored_version(
        store: VersionedStore) -> None:
    change = await store.write(Create(key("legacy"), core_v1("legacy")))
    written = json.loads(change.value)
    assert written["apiVersion"] == "v1" and written["message"] == "legacy"
    record = await store.get(key("legacy"))
    assert record is not None
    stored = json.loads(record.value)
    assert stored["apiVersion"] == "events.k8s.io/v1"
    assert (stored["note"], stored["deprecatedCount"]) == ("legacy", 2)


async def test_view_converts_each_object_once(store: VersionedStore) -> None:
    await store.write(Create(key("a"), events_v1("a")))
    caches = await make_caches(store)
    view = view_of(caches, CORE)
    first = view.get(key("a"))
    assert first is not None and first is view.get(key("a"))
    stored = caches.for_resource(EVENTS).get(key("a"))
    assert stored is not None
    assert json.loads(first.value) == events_v1_to_core_event(json.loads(stored.value))
    assert first.fields["involvedObject.name"] == "web-0"
    assert [o.name for o in view.scan(CORE.storage_prefix("default"))] == ["a"]
    await caches.stop()


async def test_watchers_of_each_version_get_that_version_encoded_once(
        store: VersionedStore) -> None:
    caches = await make_caches(store)
    start = WatchStart(revision=caches.revision)
    core_a, core_b, stored = RecordingSink(), RecordingSink(), RecordingSink()
    await view_of(caches, CORE).watch(core_a, select(), start)
    await view_of(caches, CORE).watch(core_b, select(), start)
    await caches.for_resource(EVENTS).watch(stored, select(), start)
    await store.write(Create(key("a"), events_v1("a")))
    await dispatched(caches)
    assert [e["object"]["apiVersion"] for e in lines(core_a)] == ["v1"]
    assert [e["object"]["apiVersion"] for e in lines(stored)] == ["events.k8s.io/v1"]
    assert core_a.writes[0] is core_b.writes[0]  # one payload per version, shared
    assert lines(core_a)[0]["object"]["involvedObject"] == {"kind": "Pod", "name": "web-0"}
    await caches.stop()


async def test_a_view_field_selector_uses_its_versions_labels(store: VersionedStore) -> None:
    caches = await make_caches(store)
    sink = RecordingSink()
    await view_of(caches, CORE).watch(
        sink, select("involvedObject.name=web-0"), WatchStart(revision=caches.revision))
    created = await store.write(Create(key("a"), events_v1("a")))
    moved = await store.write(Update(key("a"), events_v1("a", regarding="web-1"),
                                     created.revision))
    await store.write(Create(key("b"), events_v1("b", regarding="web-1")))
    await store.write(Delete(key("a")))
    await dispatched(caches)
    events = lines(sink)
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == [
        ("ADDED", str(created.revision)), ("DELETED", str(moved.revision))]
    # leaving the filter: the previous state, in core/v1, at the update's revision
    assert events[1]["object"]["involvedObject"]["name"] == "web-0"
    assert events[1]["object"]["apiVersion"] == "v1"
    await caches.stop()


async def test_initial_events_and_bookmark_in_the_views_version(store: VersionedStore) -> None:
    await store.write(Create(key("a"), events_v1("a")))
    caches = await make_caches(store)
    sink = RecordingSink()
    await view_of(caches, CORE).watch(
        sink, select(), WatchStart(revision=0, initial_events=True, bookmarks=True))
    added, bookmark = lines(sink)
    assert (added["type"], added["object"]["apiVersion"], added["object"]["message"]) == (
        "ADDED", "v1", "first")
    assert bookmark["type"] == "BOOKMARK"
    assert (bookmark["object"]["kind"], bookmark["object"]["apiVersion"]) == ("Event", "v1")
    await caches.stop()


async def test_replay_from_the_durable_log_is_converted(tmp_path: Path) -> None:
    raw = SQLiteStore(tmp_path / "db.sqlite", durability="normal",
                      retention=Retention(max_changes=None, max_age_s=None))
    await raw.open()
    store = VersionedStore(raw, REGISTRY)
    first = await store.write(Create(key("a"), events_v1("a")))
    caches = WatchCaches(store, REGISTRY, ring_capacity=2, bookmark_interval_s=3600)
    await caches.start()
    for name in ("b", "c", "d"):  # push the ring past the first write
        await store.write(Create(key(name), events_v1(name)))
    sink = RecordingSink()
    # the replay from the log runs inside watch(): it has been written when watch returns
    await view_of(caches, CORE).watch(sink, select(), WatchStart(revision=first.revision - 1))
    got = lines(sink)
    assert [e["object"]["metadata"]["name"] for e in got] == ["a", "b", "c", "d"]
    assert {e["object"]["apiVersion"] for e in got} == {"v1"}
    await caches.stop()
    await raw.close()

