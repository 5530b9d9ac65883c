"""The watch cache's list reads and watcher index (issue 15 item 3) against brute force.

After random creates, label changes and deletes over several namespaces, every read a page makes
(``range``, ``count``, ``named``, ``labelled``) equals the same read done by filtering a full
scan; label indexes are dropped past ``MAX_INDEXED_LABELS`` and rebuilt right; name-scoped
watchers get exactly their object's events and leave no index entry behind when closed.
"""

from __future__ import annotations

import random
from typing import Any

from kubewire.resources import REGISTRY
from kubewire.selectors import parse_field_selector, parse_label_selector
from kubewire.storage.base import Create, Delete, Update
from kubewire.storage.cache import WatchCache
from kubewire.storage.cached import WatchFilter, WatchStart
from kubewire.storage.label_index import MAX_INDEXED_LABELS
from kubewire.storage.sqlite.store import SQLiteStore
from tests.unit.watch_cache_helpers import RecordingSink, make_caches

PODS = REGISTRY.by_id("core/pods")
assert PODS is not None
NAMESPACES = ("a", "a-b", "b", "ab")
NAMES = ("x", "x1", "x-1", "y")


def pod(ns: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def random_labels(rng: random.Random) -> dict[str, str]:
    return {f"k{i}": rng.choice("uvw") for i in range(MAX_INDEXED_LABELS + 2)
            if rng.random() < 0.6}


async def churn(store: SQLiteStore, rng: random.Random, steps: int) -> None:
    for _ in range(steps):
        ns, name = rng.choice(NAMESPACES), rng.choice(NAMES)
        key = PODS.storage_key(ns, name)
        exists = await store.get(key) is not None
        if not exists:
            await store.write(Create(key, pod(ns, name, random_labels(rng))))
        elif rng.random() < 0.3:
            await store.write(Delete(key))
        else:
            await store.write(Update(key, pod(ns, name, random_labels(rng)), None))


def check_reads(cache: WatchCache, rng: random.Random) -> None:
    for prefix in [PODS.storage_prefix()] + [PODS.storage_prefix(ns) for ns in NAMESPACES]:
        everything = cache.scan(prefix)
        starts = [""] + [o.key for o in everything] + [o.key + "\x00" for o in everything]
        for start in rng.sample(starts, min(6, len(starts))):
            rest = [o for o in everything if o.key >= start]
            assert list(cache.range(prefix, start)) == rest
            assert cache.count(prefix, start) == len(rest)
            for name in (*NAMES, "nope"):
                assert cache.named(prefix, name, start) == [o for o in rest if o.name == name]
            for label in rng.sample([f"k{i}" for i in range(MAX_INDEXED_LABELS + 2)], 4):
                value = rng.choice("uvw")
                found = cache.labelled(prefix, start, label, value)
                assert found is not None
                assert list(found) == [o for o in rest if o.labels.get(label) == value]
                assert cache.label_count(label, value) == sum(
                    1 for o in cache.scan(PODS.storage_prefix()) if o.labels.get(label) == value)


async def test_list_reads_equal_a_filtered_scan(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    cache = caches.for_resource(PODS)
    assert isinstance(cache, WatchCache)
    rng = random.Random(15)
    for _ in range(12):
        await churn(store, rng, 25)
        check_reads(cache, rng)
    assert 0 < len(cache._labels) <= MAX_INDEXED_LABELS
    await caches.stop()


async def test_name_watchers_get_only_their_object(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    cache = caches.for_resource(PODS)
    assert isinstance(cache, WatchCache)
    sinks: dict[tuple[str, str], RecordingSink] = {}
    for ns in ("", "a", "b"):
        for name in ("x", "x1"):
            sinks[ns, name] = sink = RecordingSink()
            fields = f"metadata.name={name}" + (f",metadata.namespace={ns}" if ns else "")
            await cache.watch(sink, WatchFilter(ns, name, parse_label_selector(""),
                                                parse_field_selector(fields)),
                              WatchStart(revision=caches.revision))
    for ns in ("a", "b", "c"):
        for name in ("x", "x1", "x2"):
            await store.write(Create(PODS.storage_key(ns, name), pod(ns, name, {})))
    await store.write(Delete(PODS.storage_key("a", "x")))
    caches.flush()
    for (ns, name), sink in sinks.items():
        expected = [("ADDED", name, "")] * (3 if not ns else 1)
        if name == "x" and ns in ("", "a"):
            expected.append(("DELETED", "x", ""))
        assert [(t, n, "") for t, n, _ in sink.events()] == expected, (ns, name)
    assert len(cache._live_named) == 6
    for sink in sinks.values():
        sink.close()
    assert not cache._live_named and not cache.watchers
    await caches.stop()
