"""The change feed's in-process hint (``Change.obj``): the watch cache takes its label and field
sets from the writer's decoded object instead of decoding the stored bytes again, and must end up
exactly where a decode would have put it; changes without the hint are decoded."""

from __future__ import annotations

from typing import Any

import msgspec

from kubewire.resources import REGISTRY, Resource
from kubewire.storage.base import Change, ChangeType, Create, Delete, Update
from kubewire.storage.cache import WatchCaches
from kubewire.storage.cached import CachedObject
from kubewire.storage.sqlite.store import SQLiteStore

PODS = REGISTRY.by_id("core/pods")
SERVICES = REGISTRY.by_id("core/services")
assert PODS is not None and SERVICES is not None


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "ns", "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeName": "n1",
                     "restartPolicy": "Always"},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}}


def sets(obj: CachedObject) -> tuple[Any, ...]:
    return (obj.key, obj.revision, obj.value, obj.api_version, obj.name, obj.namespace,
            obj.labels, obj.fields)


def decoded(obj: CachedObject, resource: Resource) -> CachedObject:
    return CachedObject.decode(obj.key, obj.revision, obj.value, resource)


async def test_committed_changes_carry_the_written_object(store: SQLiteStore) -> None:
    seen: list[Change] = []
    store.subscribe(seen.extend)
    key = PODS.storage_key("ns", "a")
    created = await store.write(Create(key, pod("a", app="x")))
    updated = await store.write(Update(key, pod("a", app="y"), created.revision))
    deleted = await store.write(Delete(key))
    for change in seen:
        assert change.obj is not None
        assert change.obj == msgspec.json.decode(change.value)
    assert [c.type for c in seen] == [ChangeType.ADDED, ChangeType.MODIFIED, ChangeType.DELETED]
    assert seen == [created, updated, deleted]
    # the hint is not part of the change: the log's copy (without it) is equal
    logged = await store.changes_since(0)
    assert [c.obj for c in logged] == [None, None, None]
    assert logged == seen


async def test_cache_objects_from_hints_equal_decoded_ones(store: SQLiteStore) -> None:
    caches = WatchCaches(store, REGISTRY, ring_capacity=64, bookmark_interval_s=3600)
    await caches.start()
    pods = caches.for_resource(PODS)
    written = [pod("a", app="x"), pod("b"), {**pod("c", tier="db"), "status": {}}]
    revisions = {}
    for obj in written:
        change = await store.write(Create(PODS.storage_key("ns", obj["metadata"]["name"]), obj))
        revisions[obj["metadata"]["name"]] = change.revision
    service = {"kind": "Service", "apiVersion": "v1",
               "metadata": {"name": "s", "namespace": "ns", "labels": {"k": "v"}},
               "spec": {"ports": [{"port": 80}]}}
    await store.write(Create(SERVICES.storage_key("ns", "s"), service))
    await store.write(Update(PODS.storage_key("ns", "a"), pod("a", app="z"), revisions["a"]))
    await store.write(Delete(PODS.storage_key("ns", "b")))
    for resource in (PODS, SERVICES):
        for cached in caches.for_resource(resource).scan(resource.storage_prefix()):
            assert sets(cached) == sets(decoded(cached, resource))
    for event in pods.ring.slice(pods.ring.start, pods.ring.end):
        assert sets(event.obj) == sets(decoded(event.obj, PODS))
    assert [o.name for o in pods.scan(PODS.storage_prefix())] == ["a", "c"]
    await caches.stop()


async def test_labels_are_not_shared_with_the_writer(store: SQLiteStore) -> None:
    caches = WatchCaches(store, REGISTRY, ring_capacity=64, bookmark_interval_s=3600)
    await caches.start()
    obj = pod("a", app="x")
    await store.write(Create(PODS.storage_key("ns", "a"), obj))
    obj["metadata"]["labels"]["app"] = "changed later"  # the caller's object, after the write
    cached = caches.for_resource(PODS).get(PODS.storage_key("ns", "a"))
    assert cached is not None and cached.labels == {"app": "x"}
    await caches.stop()


def _change(key: str, revision: int, value: bytes, obj: dict[str, Any] | None) -> Change:
    return Change(revision, ChangeType.ADDED, key, value, None, 0.0, obj)


def test_a_change_without_the_hint_is_decoded() -> None:
    value = msgspec.json.encode(pod("a", app="x"))
    from_bytes = CachedObject.of_change(_change("k", 5, value, None), PODS)
    from_hint = CachedObject.of_change(_change("k", 5, value, msgspec.json.decode(value)), PODS)
    assert sets(from_bytes) == sets(from_hint)


def test_ring_slices_equal_event_by_event_reads() -> None:
    from kubewire.storage.cached import CachedEvent, HistoryRing

    obj = CachedObject.of_change(_change("k", 1, b"{}", {}), PODS)
    ring = HistoryRing(5, 0)
    for revision in range(1, 14):
        ring.append(CachedEvent(revision, ChangeType.ADDED, obj, None))
        for begin in range(0, ring.end + 2):
            for stop in range(0, ring.end + 2):
                naive = [ring.get(s) for s in range(max(begin, ring.start), min(stop, ring.end))]
                assert ring.slice(begin, stop) == naive
