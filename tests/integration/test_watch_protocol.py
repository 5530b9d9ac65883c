"""The watch contract on the wire, beyond the conformance scenarios (watch-protocol.md §2-§9).

Absence is proven with a *sentinel*: a later write the watch is known to match. Events arrive
in revision order (§2.4), so what came before the sentinel's event is all there is. A bounded
``expect_no_event`` is used only where nothing can serve as a sentinel (idle bookmarks).

Scenarios that hold for any kind run on Pods and on a custom resource of a CRD installed through
the API at the start of the test (``KINDS``: the ``kind`` fixture, ``custom_kinds.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from kubewire.storage.base import Retention
from tests.integration.custom_kinds import GIZMO, serve
from tests.integration.harness import ServerThread
from tests.integration.kinds import DEPLOYMENT, GATEWAY, NAMESPACE, NS, POD, SERVICE, Kind, kind_id
from tests.integration.wire import (
    Session,
    WatchStream,
    call,
    create,
    get,
    is_bookmark,
    is_initial_end,
    list_rv,
    name_of,
    ok,
    rv_of,
    types_and_names,
    wait_for,
    watch,
)
from tests.storage_choice import range_writes, sqlite_only

PODS = POD.collection()
KINDS = pytest.mark.parametrize("kind", [POD, GIZMO], ids=kind_id, indirect=True)
# The initial-events-end bookmark's list blueprint (§6.2): the empty versioned list, encoded. A
# built-in list is a typed struct (items null); a custom resource's is an UnstructuredList,
# encoded by unstructuredJSONScheme: a map (sorted keys) of apiVersion and kind set by the
# CRD store's NewListFunc, plus "items": [] (apimachinery unstructured/helpers.go doEncode).
BLUEPRINT = {
    "Pod": ("eyJraW5kIjoiUG9kTGlzdCIsImFwaVZlcnNpb24iOiJ2MSIsIm1ldGFkYXRhIjp7fSwi"
            "aXRlbXMiOm51bGx9Cg=="),  # {"kind":"PodList",...,"items":null}\n
    "Gizmo": ("eyJhcGlWZXJzaW9uIjoidGVzdHMua3ViZXdpcmUuaW8vdjEiLCJpdGVtcyI6W10sImtp"
              "bmQiOiJHaXptb0xpc3QifQo="),  # {"apiVersion":...,"items":[],"kind":"GizmoList"}\n
}


def pod(server: ServerThread, name: str, namespace: str = NS, **spec: Any) -> dict[str, Any]:
    obj = POD.obj(name)
    obj["spec"].update(spec)
    return create(server, POD.collection(namespace), obj)


def make(server: ServerThread, kind: Kind, name: str, namespace: str = NS,
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    return create(server, kind.collection(namespace), kind.obj(name, labels=labels))


def deletion(kind: Kind, name: str) -> list[tuple[str, str]]:
    """The events one DELETE produces: a Pod is graceful (its deletion mark, then DELETED)."""
    return [("MODIFIED", name), ("DELETED", name)] if kind is POD else [("DELETED", name)]


def patch(server: ServerThread, path: str, body: Any) -> dict[str, Any]:
    return ok(call(server, "PATCH", path, body), 200)


def until_name(stream: WatchStream, name: str, timeout: float = 5.0) -> list[dict[str, Any]]:
    return stream.events_until(lambda e: name_of(e) == name, timeout)


def namespace(server: ServerThread, name: str) -> None:
    create(server, NAMESPACE.collection(), NAMESPACE.obj(name))


# --- §3 headers and framing ---------------------------------------------------------------------

def test_headers_and_line_framing(server: ServerThread) -> None:
    pod(server, "framed")
    with watch(server, PODS, resourceVersion="0") as stream:
        event = stream.next_event()
        assert stream.status == 200
        headers = stream.response_headers
        assert headers["content-type"] == "application/json"
        assert headers["transfer-encoding"] == "chunked"
        assert "content-length" not in headers
        assert headers["cache-control"] == "no-cache, private"
        line = stream.lines[0]
    assert line.startswith(b'{"type":"ADDED","object":{')
    assert line.endswith(b"}\n")
    assert b"\n" not in line[:-1]
    decoded = json.loads(line)
    assert line == json.dumps(decoded, separators=(",", ":")).encode() + b"\n"  # compact
    assert event["object"]["kind"] == "Pod"
    assert event["object"]["apiVersion"] == "v1"


def test_headers_are_sent_before_any_event(server: ServerThread) -> None:
    rv = list_rv(server, PODS)
    with watch(server, PODS, resourceVersion=rv) as stream:  # nothing to send yet
        assert stream.status == 200
        assert stream.response_headers["content-type"] == "application/json"


def test_accept_stream_watch_is_answered_as_plain_json(server: ServerThread) -> None:
    rv = list_rv(server, PODS)
    with watch(server, PODS, {"Accept": "application/json;stream=watch"},
               resourceVersion=rv) as stream:
        assert stream.status == 200
        assert stream.response_headers["content-type"] == "application/json"


# --- §2.2 where a watch starts ------------------------------------------------------------------

def _key_order_fixture(server: ServerThread, kind: Kind) -> dict[str, int]:
    """Objects whose last-write revisions are not in key order; returns name -> revision."""
    for name in ("charlie", "alpha", "bravo"):
        make(server, kind, name)
    patch(server, kind.item("alpha"), {"metadata": {"labels": {"touched": "yes"}}})
    return {item["metadata"]["name"]: int(item["metadata"]["resourceVersion"])
            for item in get(server, kind.collection())["items"]}


@KINDS
@pytest.mark.parametrize("rv", [None, "0"], ids=["rv-unset", "rv-0"])
def test_legacy_start_replays_objects_in_key_order_then_initial_end_bookmark(
        server: ServerThread, kind: Kind, rv: str | None) -> None:
    revisions = _key_order_fixture(server, kind)
    snapshot = int(list_rv(server, kind.collection()))
    with watch(server, kind.collection(), resourceVersion=rv,
               allowWatchBookmarks="true") as stream:
        initial = stream.events(4)
        later = make(server, kind, "delta")
        after = stream.next_event()
    assert types_and_names(initial[:3]) == [("ADDED", "alpha"), ("ADDED", "bravo"),
                                            ("ADDED", "charlie")]
    assert [rv_of(e) for e in initial[:3]] == [revisions[n] for n in ("alpha", "bravo", "charlie")]
    assert [rv_of(e) for e in initial[:3]] != sorted(rv_of(e) for e in initial[:3])
    bookmark = initial[3]
    assert is_initial_end(bookmark), bookmark
    assert bookmark["object"]["kind"] == kind.kind
    assert bookmark["object"]["apiVersion"] == kind.api_version
    assert rv_of(bookmark) == snapshot
    assert types_and_names([after]) == [("ADDED", "delta")]
    assert rv_of(after) == rv_of(later) > snapshot


@KINDS
@pytest.mark.parametrize("rv", [None, "0"], ids=["rv-unset", "rv-0"])
def test_legacy_start_without_bookmarks_sends_no_end_marker(server: ServerThread, kind: Kind,
                                                            rv: str | None) -> None:
    _key_order_fixture(server, kind)
    with watch(server, kind.collection(), resourceVersion=rv) as stream:
        make(server, kind, "sentinel")
        events = until_name(stream, "sentinel")
    assert types_and_names(events) == [("ADDED", "alpha"), ("ADDED", "bravo"),
                                       ("ADDED", "charlie"), ("ADDED", "sentinel")]


@KINDS
def test_all_namespaces_replay_is_in_namespace_then_name_order(server: ServerThread,
                                                               kind: Kind) -> None:
    namespace(server, "aaa")
    namespace(server, "zzz")
    make(server, kind, "b", "zzz")
    make(server, kind, "z", "aaa")
    make(server, kind, "a", NS)
    make(server, kind, "a", "aaa")
    with watch(server, kind.collection(None), resourceVersion="0") as stream:
        events = stream.events(4)
    assert [(e["object"]["metadata"]["namespace"], name_of(e)) for e in events] == [
        ("aaa", "a"), ("aaa", "z"), (NS, "a"), ("zzz", "b")]


@KINDS
def test_watch_from_a_list_rv_replays_nothing(server: ServerThread, kind: Kind) -> None:
    _key_order_fixture(server, kind)
    rv = list_rv(server, kind.collection())
    with watch(server, kind.collection(), resourceVersion=rv,
               allowWatchBookmarks="true") as stream:
        patch(server, kind.item("bravo"), {"metadata": {"labels": {"x": "y"}}})
        event = stream.next_event()
    assert types_and_names([event]) == [("MODIFIED", "bravo")]


@KINDS
def test_send_initial_events_streaming_list(server: ServerThread, kind: Kind) -> None:
    revisions = _key_order_fixture(server, kind)
    snapshot = int(list_rv(server, kind.collection()))
    with watch(server, kind.collection(), sendInitialEvents="true",
               resourceVersionMatch="NotOlderThan", allowWatchBookmarks="true") as stream:
        initial = stream.events(4)
        make(server, kind, "after")
        after = stream.next_event()
    assert types_and_names(initial[:3]) == [("ADDED", "alpha"), ("ADDED", "bravo"),
                                            ("ADDED", "charlie")]
    assert {name_of(e): rv_of(e) for e in initial[:3]} == revisions
    end = initial[3]
    assert is_initial_end(end)
    assert rv_of(end) == snapshot
    annotations = end["object"]["metadata"]["annotations"]
    assert annotations["kubernetes.io/initial-events-list-blueprint"] == BLUEPRINT[kind.kind]
    assert types_and_names([after]) == [("ADDED", "after")]
    assert rv_of(after) > snapshot


@KINDS
def test_send_initial_events_from_an_rv_replays_state_not_history(server: ServerThread,
                                                                  kind: Kind) -> None:
    make(server, kind, "one")
    rv = list_rv(server, kind.collection())
    patch(server, kind.item("one"), {"metadata": {"labels": {"v": "2"}}})
    make(server, kind, "two")
    current = int(list_rv(server, kind.collection()))
    with watch(server, kind.collection(), sendInitialEvents="true",
               resourceVersionMatch="NotOlderThan", resourceVersion=rv,
               allowWatchBookmarks="true") as stream:
        events = stream.events(3)
    assert types_and_names(events[:2]) == [("ADDED", "one"), ("ADDED", "two")]
    assert events[0]["object"]["metadata"]["labels"] == {"v": "2"}
    assert is_initial_end(events[2])
    assert int(rv) <= rv_of(events[2]) <= current


@KINDS
def test_send_initial_events_on_an_empty_collection_is_just_the_bookmark(
        server: ServerThread, kind: Kind) -> None:
    snapshot = int(list_rv(server, kind.collection()))
    with watch(server, kind.collection(), sendInitialEvents="true",
               resourceVersionMatch="NotOlderThan", allowWatchBookmarks="true") as stream:
        event = stream.next_event()
    assert is_initial_end(event)
    assert rv_of(event) == snapshot


@KINDS
def test_send_initial_events_without_bookmarks_has_no_end_marker(server: ServerThread,
                                                                 kind: Kind) -> None:
    make(server, kind, "one")
    with watch(server, kind.collection(), sendInitialEvents="true",
               resourceVersionMatch="NotOlderThan") as stream:
        make(server, kind, "sentinel")
        events = until_name(stream, "sentinel")
    assert types_and_names(events) == [("ADDED", "one"), ("ADDED", "sentinel")]


@KINDS
def test_send_initial_events_false_starts_at_the_current_revision(server: ServerThread,
                                                                  kind: Kind) -> None:
    make(server, kind, "existing")
    with watch(server, kind.collection(), sendInitialEvents="false",
               resourceVersionMatch="NotOlderThan", allowWatchBookmarks="true") as stream:
        make(server, kind, "sentinel")
        events = until_name(stream, "sentinel")
    assert types_and_names(events) == [("ADDED", "sentinel")]


@KINDS
def test_resource_version_in_the_future_waits_then_delivers(server: ServerThread,
                                                            kind: Kind) -> None:
    current = int(list_rv(server, kind.collection()))
    with watch(server, kind.collection(), resourceVersion=current + 2) as stream:
        assert stream.status == 200
        first = make(server, kind, "p1")
        second = make(server, kind, "p2")
        third = make(server, kind, "p3")
        event = stream.next_event()
    assert [rv_of(first), rv_of(second)] == [current + 1, current + 2]
    assert types_and_names([event]) == [("ADDED", "p3")]  # strictly after the requested RV
    assert rv_of(event) == rv_of(third)


# --- §6.1 periodic bookmarks --------------------------------------------------------------------

BOOKMARK_INTERVAL_S = 0.1
IDLE_S = 10 * BOOKMARK_INTERVAL_S  # many intervals: long enough to show that none come


@sqlite_only("on etcd the store's revision also moves with the Leases replicas renew by "
             "design (the controller manager's election, the master leases), so an idle "
             "stretch is not idle and a bookmark may rightly come")
@pytest.mark.parametrize("kind", [POD, GIZMO], ids=kind_id)
def test_periodic_bookmarks_only_when_the_revision_advanced(
        make_server: Callable[..., ServerThread], kind: Kind) -> None:
    server = make_server(bookmark_interval_s=BOOKMARK_INTERVAL_S)
    serve(server, kind)
    start = int(list_rv(server, kind.collection()))
    with watch(server, kind.collection(), resourceVersion=start,
               allowWatchBookmarks="true") as stream:
        stream.expect_no_event(within=IDLE_S)  # idle, nothing newer than the start: none

        elsewhere = create(server, SERVICE.collection(), SERVICE.obj("elsewhere"))
        first = stream.next_event()
        assert is_bookmark(first), first
        assert not is_initial_end(first)
        assert first["object"]["kind"] == kind.kind
        assert first["object"]["apiVersion"] == kind.api_version
        assert start < rv_of(first) <= rv_of(elsewhere)
        stream.expect_no_event(within=IDLE_S)  # no duplicate bookmark at the same revision

        mine = make(server, kind, "mine")
        added = stream.next_event()
        assert types_and_names([added]) == [("ADDED", "mine")]
        assert rv_of(added) == rv_of(mine) > rv_of(first)

        again = create(server, SERVICE.collection(), SERVICE.obj("again"))
        second = stream.next_event()
        assert is_bookmark(second), second
        assert rv_of(mine) < rv_of(second) <= rv_of(again)  # never regressing
        stream.expect_no_event(within=IDLE_S)


@pytest.mark.parametrize("kind", [POD, GIZMO], ids=kind_id)
def test_no_bookmarks_unless_asked(make_server: Callable[..., ServerThread], kind: Kind) -> None:
    server = make_server(bookmark_interval_s=BOOKMARK_INTERVAL_S)
    serve(server, kind)
    start = list_rv(server, kind.collection())
    with watch(server, kind.collection(), resourceVersion=start) as stream:
        create(server, SERVICE.collection(), SERVICE.obj("elsewhere"))
        stream.expect_no_event(within=IDLE_S)
        make(server, kind, "sentinel")
        events = until_name(stream, "sentinel")
    assert types_and_names(events) == [("ADDED", "sentinel")]


def test_bookmarks_on_a_custom_kind_are_shells_of_that_kind(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(bookmark_interval_s=BOOKMARK_INTERVAL_S)
    start = list_rv(server, GATEWAY.collection())
    with watch(server, GATEWAY.collection(), resourceVersion=start,
               allowWatchBookmarks="true") as stream:
        create(server, SERVICE.collection(), SERVICE.obj("elsewhere"))
        event = stream.next_event()
    assert is_bookmark(event)
    assert event["object"]["kind"] == "Gateway"
    assert event["object"]["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert set(event["object"]) <= {"kind", "apiVersion", "metadata"}


# --- §3.4 stream end ----------------------------------------------------------------------------

@KINDS
def test_timeout_seconds_ends_the_stream_cleanly_without_error(server: ServerThread,
                                                               kind: Kind) -> None:
    make(server, kind, "present")
    with watch(server, kind.collection(), resourceVersion="0", timeoutSeconds=1) as stream:
        assert stream.ended(timeout=15)
        assert stream.ended_cleanly
        events = stream.remaining()
    assert types_and_names(events) == [("ADDED", "present")]  # no ERROR, no trailing status


# --- §5.2 DELETED -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", [SERVICE, DEPLOYMENT, GATEWAY, GIZMO], ids=kind_id,
                         indirect=True)
def test_deleted_carries_the_last_state_at_the_delete_revision(server: ServerThread,
                                                               kind: Kind) -> None:
    create(server, kind.collection(), kind.obj("gone"))
    last = patch(server, kind.item("gone"), {"metadata": {"labels": {"last": "state"}}})
    rv = list_rv(server, kind.collection())
    with watch(server, kind.collection(), resourceVersion=rv) as stream:
        ok(call(server, "DELETE", kind.item("gone")), 200)
        event = stream.next_event()
    assert event["type"] == "DELETED"
    assert rv_of(event) > rv_of(last)
    # (on etcd a Service's delete releases its IP in kube's allocator range after it)
    assert rv_of(event) + range_writes(kind.plural) == int(list_rv(server, kind.collection()))
    expected = json.loads(json.dumps(last))
    expected["metadata"]["resourceVersion"] = event["object"]["metadata"]["resourceVersion"]
    assert event["object"] == expected


def test_deleted_pod_carries_its_deletion_mark(server: ServerThread) -> None:
    pod(server, "gone")
    rv = list_rv(server, PODS)
    with watch(server, PODS, resourceVersion=rv) as stream:
        ok(call(server, "DELETE", POD.item("gone")), 200)
        marked, deleted = stream.events(2)
    assert (marked["type"], deleted["type"]) == ("MODIFIED", "DELETED")
    assert marked["object"]["metadata"]["deletionGracePeriodSeconds"] == 0
    assert rv_of(deleted) > rv_of(marked)
    assert deleted["object"]["metadata"]["deletionTimestamp"] == \
        marked["object"]["metadata"]["deletionTimestamp"]


# --- §9 selectors -------------------------------------------------------------------------------

@KINDS
def test_metadata_name_field_selector_watches_one_object(server: ServerThread,
                                                         kind: Kind) -> None:
    with watch(server, kind.collection(), fieldSelector="metadata.name=target") as stream:
        make(server, kind, "before")
        make(server, kind, "target")
        make(server, kind, "after")
        patch(server, kind.item("after"), {"metadata": {"labels": {"a": "b"}}})
        patch(server, kind.item("target"), {"metadata": {"labels": {"a": "b"}}})
        ok(call(server, "DELETE", kind.item("target")), 200)
        events = stream.events_until(lambda e: e["type"] == "DELETED")
    assert types_and_names(events) == [("ADDED", "target"), ("MODIFIED", "target"),
                                       *deletion(kind, "target")]


def test_spec_node_name_field_selector(server: ServerThread) -> None:
    with watch(server, PODS, fieldSelector="spec.nodeName=node-1") as on_node, \
            watch(server, PODS, fieldSelector="spec.nodeName=") as unscheduled:
        pod(server, "a", nodeName="node-1")
        pod(server, "b", nodeName="node-2")
        pod(server, "c")
        pod(server, "sentinel-1", nodeName="node-1")
        pod(server, "sentinel-0")
        assert types_and_names(until_name(on_node, "sentinel-1")) == [
            ("ADDED", "a"), ("ADDED", "sentinel-1")]
        assert types_and_names(until_name(unscheduled, "sentinel-0")) == [
            ("ADDED", "c"), ("ADDED", "sentinel-0")]


def test_metadata_namespace_field_selector_on_an_all_namespaces_watch(
        server: ServerThread) -> None:
    namespace(server, "team-a")
    namespace(server, "team-b")
    with watch(server, POD.collection(None), fieldSelector="metadata.namespace=team-a") as pods, \
            watch(server, SERVICE.collection(None),
                  fieldSelector="metadata.namespace!=team-a") as services:
        pod(server, "x", "team-b")
        pod(server, "x", "team-a")
        pod(server, "y", NS)
        create(server, SERVICE.collection("team-a"), SERVICE.obj("s"))
        create(server, SERVICE.collection("team-b"), SERVICE.obj("s"))
        pod(server, "sentinel", "team-a")
        events = until_name(pods, "sentinel")
        service_events = services.events(2)
    assert [(e["object"]["metadata"]["namespace"], name_of(e)) for e in events] == [
        ("team-a", "x"), ("team-a", "sentinel")]
    # the watch starts with what exists: default's kubernetes Service
    assert [(e["object"]["metadata"]["namespace"], name_of(e)) for e in service_events] == [
        ("default", "kubernetes"), ("team-b", "s")]


@pytest.mark.parametrize(("selector", "expected"), [
    ("tier=web", ["web"]),
    ("tier!=web", ["db", "none"]),
    ("tier", ["web", "db"]),
    ("!tier", ["none"]),
    ("tier in (web,db)", ["web", "db"]),
    ("tier notin (web)", ["db", "none"]),
], ids=["eq", "neq-includes-missing", "exists", "not-exists", "in", "notin-includes-missing"])
@KINDS
def test_label_selectors_on_watch(server: ServerThread, kind: Kind, selector: str,
                                  expected: list[str]) -> None:
    with watch(server, kind.collection(), labelSelector=selector) as stream:
        make(server, kind, "web", labels={"tier": "web"})
        make(server, kind, "db", labels={"tier": "db"})
        make(server, kind, "none")
        # The sentinel is labelled to match this selector.
        make(server, kind, "sentinel", labels={"tier": "web"} if "web" in expected else
             {"tier": "db"} if "db" in expected else None)
        events = until_name(stream, "sentinel")
    assert [name_of(e) for e in events] == [*expected, "sentinel"]


# --- §1.1 legacy paths and namespaces that do not exist ------------------------------------------

@KINDS
def test_legacy_watch_collection_path(server: ServerThread, kind: Kind) -> None:
    rv = list_rv(server, kind.collection())
    with watch(server, f"{kind.base}/watch/namespaces/{NS}/{kind.plural}",
               resourceVersion=rv) as stream:
        assert stream.status == 200
        make(server, kind, "legacy")
        event = stream.next_event()
    assert types_and_names([event]) == [("ADDED", "legacy")]


@KINDS
def test_legacy_watch_item_path(server: ServerThread, kind: Kind) -> None:
    with watch(server, f"{kind.base}/watch/namespaces/{NS}/{kind.plural}/one") as stream:
        assert stream.status == 200
        make(server, kind, "other")
        make(server, kind, "one")
        make(server, kind, "another")
        patch(server, kind.item("one"), {"metadata": {"labels": {"a": "b"}}})
        events = stream.events(2)
    assert types_and_names(events) == [("ADDED", "one"), ("MODIFIED", "one")]


def test_legacy_watch_paths_for_all_namespaces_and_custom_kinds(server: ServerThread) -> None:
    rv = list_rv(server, PODS)
    with watch(server, "/api/v1/watch/pods", resourceVersion=rv) as pods, \
            watch(server, f"/apis/gateway.networking.k8s.io/v1/watch/namespaces/{NS}/gateways",
                  resourceVersion=rv) as gateways:
        pod(server, "p")
        create(server, GATEWAY.collection(), GATEWAY.obj("g"))
        assert types_and_names(pods.events(1)) == [("ADDED", "p")]
        assert types_and_names(gateways.events(1)) == [("ADDED", "g")]


def test_legacy_item_path_with_a_different_name_selector_is_400(server: ServerThread) -> None:
    reply = call(server, "GET", f"/api/v1/watch/namespaces/{NS}/pods/one",
                 params={"fieldSelector": "metadata.name=two"})
    assert reply.status == 400
    assert reply.status_object() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "fieldSelector metadata.name doesn't match requested name",
        "reason": "BadRequest", "code": 400}


@KINDS
def test_watch_in_a_namespace_that_does_not_exist(server: ServerThread, kind: Kind) -> None:
    with watch(server, kind.collection("nope")) as stream:
        assert stream.status == 200
        make(server, kind, "elsewhere")
        namespace(server, "nope")
        make(server, kind, "inside", "nope")
        event = stream.next_event()
    assert types_and_names([event]) == [("ADDED", "inside")]
    assert event["object"]["metadata"]["namespace"] == "nope"


# --- §2.4 ordering across kinds -----------------------------------------------------------------

def test_every_watcher_sees_its_changes_once_in_revision_order(server: ServerThread) -> None:
    namespace(server, "other")
    serve(server, GIZMO)
    start = list_rv(server, PODS)
    kinds = [POD, SERVICE, DEPLOYMENT, GATEWAY, GIZMO]
    written: dict[str, list[int]] = {k.kind: [] for k in kinds}
    all_pods: list[int] = []
    streams = {k.kind: watch(server, k.collection(), resourceVersion=start) for k in kinds}
    everywhere = watch(server, POD.collection(None), resourceVersion=start)
    try:
        with Session(server) as session:
            for step in range(30):
                kind = kinds[step % len(kinds)]
                ns = "other" if step % 3 == 0 else NS
                name = f"obj-{step % 5}"
                reply = session.call("PATCH", kind.item(name, ns),
                                     {"metadata": {"labels": {"step": str(step)}}})
                if reply.status == 404:
                    reply = session.call("POST", kind.collection(ns), kind.obj(name))
                rv = rv_of(ok(reply))
                if kind is POD:
                    all_pods.append(rv)
                if ns == NS:
                    written[kind.kind].append(rv)
        for kind in kinds:
            got = [rv_of(streams[kind.kind].next_event()) for _ in written[kind.kind]]
            assert got == written[kind.kind], kind.kind
        assert [rv_of(everywhere.next_event()) for _ in all_pods] == all_pods
        # Nothing else is pending: a final write per kind is the next event each one gets.
        for kind in kinds:
            final = create(server, kind.collection(), kind.obj("final"))
            assert rv_of(streams[kind.kind].next_event()) == rv_of(final)
    finally:
        everywhere.close()
        for s in streams.values():
            s.close()


# --- §5.4 410 Expired ---------------------------------------------------------------------------

TOO_OLD = re.compile(r"too old resource version: (\d+) \((\d+)\)")


@pytest.mark.parametrize("kind", [POD, GIZMO], ids=kind_id)
def test_watch_below_the_compaction_horizon_gets_one_410_error_event(
        make_server: Callable[..., ServerThread], kind: Kind) -> None:
    server = make_server(ring_capacity=8, retention=Retention(max_changes=10, max_age_s=None))
    serve(server, kind)
    make(server, kind, "busy")
    early = int(list_rv(server, kind.collection()))
    writes = 0

    def expired() -> dict[str, Any] | None:
        nonlocal writes
        with Session(server) as session:  # compaction is triggered by writing
            for _ in range(100):
                writes += 1
                ok(session.call("PATCH", kind.item("busy"),
                                {"metadata": {"annotations": {"n": str(writes)}}}))
        with watch(server, kind.collection(), resourceVersion=early) as probe:
            first = probe.next_event()
        return first if first["type"] == "ERROR" else None

    wait_for(expired, timeout=60, what="the change log to be compacted past the watch RV")
    current = int(list_rv(server, kind.collection()))
    for params in ({}, {"allowWatchBookmarks": "true"}, {"labelSelector": "a=b"}):
        with watch(server, kind.collection(), resourceVersion=early, **params) as stream:
            assert stream.status == 200
            error = stream.next_event()
            assert stream.ended(timeout=10)
            assert stream.ended_cleanly
            assert stream.remaining() == []
        assert error["type"] == "ERROR"
        status = error["object"]
        match = TOO_OLD.fullmatch(status["message"])
        assert match, status
        assert int(match.group(1)) == early
        assert early < int(match.group(2)) < current
        assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Failure", "message": status["message"],
                          "reason": "Expired", "code": 410}
