"""Table watchers in the real watch cache (server/table_sink.py, server/table_bodies.py): the
same order, once-only and slow-consumer guarantees as JSON watchers, their own first-event
column definitions, and JSON watchers' shared bytes untouched. Real SQLite store, no network."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from kubewire.server.tables.bodies import TableEventLines, list_table_body, object_table_body
from kubewire.server.tables.columns import column_definitions
from kubewire.server.tables.output import TableRequest
from kubewire.server.tables.sink import TableSink
from kubewire.storage.cached import WatchStart
from kubewire.storage.sqlite.store import SQLiteStore
from tests.unit.test_watch_cache import PODS, everything, pod, write_pod
from tests.unit.watch_cache_helpers import RecordingSink, dispatched, make_caches

NOW = datetime(2025, 3, 10, 12, 0, 0, tzinfo=UTC)
POD_COLUMNS = column_definitions(PODS)


def clock() -> datetime:
    return NOW


def table_sink(request: TableRequest | None = None) -> tuple[TableSink, RecordingSink]:
    inner = RecordingSink()
    return TableSink(inner, PODS, request or TableRequest(), clock), inner


def events(sink: RecordingSink) -> list[dict[str, Any]]:
    return [json.loads(line) for line in b"".join(sink.writes).splitlines()]


def rows(sink: RecordingSink) -> list[tuple[str, str, bool]]:
    """(type, name in the row, whether the event carried column definitions)."""
    out = []
    for event in events(sink):
        table = event["object"]
        assert table["kind"] == "Table", event
        (row,) = table["rows"]
        out.append((event["type"], row["cells"][0], table["columnDefinitions"] is not None))
    return out


# --- pure encoders ------------------------------------------------------------------------------

def test_event_lines_rewrite_data_events_and_bookmarks_and_pass_errors() -> None:
    obj = json.dumps(pod("a")).encode()
    bookmark = b'{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1",' \
               b'"metadata":{"resourceVersion":"9"}}}\n'
    error = b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":410}}\n'
    lines = TableEventLines(PODS, TableRequest("v1beta1", "None"))
    first, as_table, passed_error, second = lines.rewrite(
        [b'{"type":"ADDED","object":%b}\n' % obj, bookmark, error,
         b'{"type":"DELETED","object":%b}\n' % obj], NOW)
    assert passed_error is error  # a Status is never transformed
    added, marked, deleted = json.loads(first), json.loads(as_table), json.loads(second)
    assert first.endswith(b"}\n") and first.count(b"\n") == 1
    assert added["type"] == "ADDED" and deleted["type"] == "DELETED"
    assert added["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    assert added["object"]["columnDefinitions"] == POD_COLUMNS
    assert marked["type"] == "BOOKMARK" and marked["object"]["kind"] == "Table"
    assert marked["object"]["metadata"] == {"resourceVersion": "9"}
    assert marked["object"]["columnDefinitions"] is None
    assert marked["object"]["rows"][0]["cells"][:3] == ["", "0/0", ""]
    assert deleted["object"]["columnDefinitions"] is None
    assert deleted["object"]["rows"][0]["object"] is None


def test_event_lines_send_an_unrenderable_object_as_it_is() -> None:
    odd = b'{"type":"MODIFIED","object":[1,2]}\n'
    lines = TableEventLines(PODS, TableRequest())
    assert lines.rewrite([odd], NOW) == [odd]
    later = lines.rewrite([b'{"type":"ADDED","object":%b}\n' % json.dumps(pod("a")).encode()],
                          NOW)
    assert json.loads(later[0])["object"]["columnDefinitions"] == POD_COLUMNS


def test_list_and_object_bodies() -> None:
    values = [json.dumps(pod(name)).encode() for name in ("a", "b")]
    body = list_table_body(PODS, values, {"resourceVersion": "7", "continue": ""},
                           TableRequest(), NOW)
    table = json.loads(body)
    assert table["metadata"] == {"resourceVersion": "7"}
    assert [r["cells"][0] for r in table["rows"]] == ["a", "b"]
    one = json.loads(object_table_body(PODS, values[1], TableRequest("v1", "Object"), NOW))
    assert one["rows"][0]["object"] == pod("b")


# --- in the watch cache -------------------------------------------------------------------------

async def test_table_watcher_gets_every_change_once_in_order(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    cache = caches.for_resource(PODS)
    tables, inner = table_sink()
    plain = RecordingSink()
    await cache.watch(tables, everything(), WatchStart(revision=caches.revision))
    await cache.watch(plain, everything(), WatchStart(revision=caches.revision))
    await write_pod(store, "create", pod("a"))
    await write_pod(store, "update", pod("a", app="x"))
    await write_pod(store, "create", pod("b"))
    await write_pod(store, "delete", pod("a"))
    await dispatched(caches)
    assert rows(inner) == [("ADDED", "a", True), ("MODIFIED", "a", False),
                           ("ADDED", "b", False), ("DELETED", "a", False)]
    assert [e["object"]["kind"] for e in events(plain)] == ["Pod"] * 4
    await caches.stop()
    assert inner.closed


async def test_table_watchers_never_share_bytes_with_others(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    cache = caches.for_resource(PODS)
    early, early_inner = table_sink()
    await cache.watch(early, everything(), WatchStart(revision=caches.revision))
    await write_pod(store, "create", pod("a"))
    await dispatched(caches)
    late, late_inner = table_sink()
    plain = [RecordingSink(), RecordingSink()]
    for sink in (late, *plain):
        await cache.watch(sink, everything(), WatchStart(revision=caches.revision))
    await write_pod(store, "create", pod("b"))
    await dispatched(caches)
    assert rows(early_inner) == [("ADDED", "a", True), ("ADDED", "b", False)]
    assert rows(late_inner) == [("ADDED", "b", True)]
    assert plain[0].writes[0] is plain[1].writes[0]  # JSON watchers still share
    assert json.loads(plain[0].writes[0])["object"]["kind"] == "Pod"
    await caches.stop()


async def test_initial_events_are_tables(store: SQLiteStore) -> None:
    await write_pod(store, "create", pod("a"))
    await write_pod(store, "create", pod("b"))
    caches = await make_caches(store)
    tables, inner = table_sink()
    await caches.for_resource(PODS).watch(
        tables, everything(), WatchStart(revision=caches.revision, initial_events=True))
    assert rows(inner) == [("ADDED", "a", True), ("ADDED", "b", False)]
    await caches.stop()


async def test_paused_table_watcher_catches_up_with_headers_once(store: SQLiteStore) -> None:
    caches = await make_caches(store)
    cache = caches.for_resource(PODS)
    tables, inner = table_sink()
    await cache.watch(tables, everything(), WatchStart(revision=caches.revision))
    inner.paused = True
    for name in ("a", "b", "c"):
        await write_pod(store, "create", pod(name))
        await dispatched(caches)
    assert rows(inner) == [("ADDED", "a", True)]  # the write that found it paused
    inner.resume()
    assert rows(inner) == [("ADDED", "a", True), ("ADDED", "b", False), ("ADDED", "c", False)]
    await caches.stop()


async def test_table_watcher_overtaken_by_the_ring_is_closed(store: SQLiteStore) -> None:
    caches = await make_caches(store, capacity=4)
    cache = caches.for_resource(PODS)
    tables, inner = table_sink()
    fast = RecordingSink()
    await cache.watch(tables, everything(), WatchStart(revision=caches.revision))
    await cache.watch(fast, everything(), WatchStart(revision=caches.revision))
    await write_pod(store, "create", pod("a"))
    await dispatched(caches)
    inner.paused = True
    for i in range(10):
        await write_pod(store, "update", pod("a", n=str(i)))
        await dispatched(caches)
    inner.resume()
    assert inner.closed and tables.closed
    assert len(fast.events()) == 11 and not fast.closed
    assert len(cache.watchers) == 1
    await caches.stop()
