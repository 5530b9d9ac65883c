"""Events at core/v1 and events.k8s.io/v1: one stored resource, two served versions.

kube serves the same Event objects at ``/api/v1/.../events`` and
``/apis/events.k8s.io/v1/.../events``, converting between the versions
(pkg/apis/events/v1/conversion.go). A write through either is read, listed and watched through
both, each in its own version; field selectors use each version's labels.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubewire.event_conversion import core_event_to_events_v1, events_v1_to_core_event
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl, run
from tests.integration.wire import call, create, get, list_rv, ok, types_and_names, watch
from tests.storage_choice import on_etcd
from tests.unit.test_protobuf import encode_body

CORE = "/api/v1/namespaces/default/events"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def core_event(name: str, pod: str = "web-0", **extra: Any) -> dict[str, Any]:
    """What kubelet (and kopf) post: the legacy fields, no eventTime."""
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": pod,
                               "uid": "pod-uid", "apiVersion": "v1"},
            "reason": "Pulled", "message": "pulled the image",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2024-12-11T09:15:02Z", "lastTimestamp": "2024-12-11T09:16:00Z",
            "count": 2, "type": "Normal", **extra}


def new_event(name: str, pod: str = "web-0") -> dict[str, Any]:
    """What client-go's events.k8s.io recorder posts."""
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
            "eventTime": "2024-12-11T09:15:02.123456Z", "reportingController": "kubewire.io/t",
            "reportingInstance": "t-1", "action": "Scheduling", "reason": "Scheduled",
            "type": "Normal", "note": "assigned to node-1",
            "regarding": {"kind": "Pod", "namespace": "default", "name": pod}}


# --- reads through the other version -------------------------------------------------------------

def test_core_create_reads_back_converted_through_events(server: ServerThread) -> None:
    created = create(server, CORE, core_event("legacy"))
    # the answer is core/v1 as Go writes it: every field in struct order, zeros included
    assert list(created) == ["kind", "apiVersion", "metadata", "involvedObject", "reason",
                             "message", "source", "firstTimestamp", "lastTimestamp", "count",
                             "type", "eventTime", "reportingComponent", "reportingInstance"]
    assert (created["eventTime"], created["reportingComponent"]) == (None, "")
    assert get(server, f"{CORE}/legacy") == created
    assert get(server, f"{EVENTS}/legacy") == core_event_to_events_v1(created)
    assert get(server, f"{EVENTS}/legacy")["note"] == "pulled the image"


def test_events_create_reads_back_converted_through_core(server: ServerThread) -> None:
    created = create(server, EVENTS, new_event("fresh"))
    assert get(server, f"{EVENTS}/fresh") == created
    core = get(server, f"{CORE}/fresh")
    assert core == events_v1_to_core_event(created)
    assert (core["involvedObject"]["name"], core["message"], core["reportingComponent"]) == (
        "web-0", "assigned to node-1", "kubewire.io/t")
    assert (core["source"], core["firstTimestamp"]) == ({}, None)


def test_events_writes_are_stored_as_go_encodes_them(server: ServerThread) -> None:
    """kube decodes an events.k8s.io body into the Go struct and encodes that: struct order,
    omitempty fields left out, deprecatedSource {} and the deprecated times null."""
    body = new_event("shaped")
    body = {"regarding": {"name": "web-0", "kind": "Pod", "namespace": "default"},
            **{k: v for k, v in reversed(body.items()) if k != "regarding"}}
    want = ["kind", "apiVersion", "metadata", "eventTime", "reportingController",
            "reportingInstance", "action", "reason", "regarding", "note", "type",
            "deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp"]
    created = create(server, EVENTS, body)
    assert list(created) == want
    assert list(created["regarding"]) == ["kind", "namespace", "name"]
    assert (created["deprecatedSource"], created["deprecatedFirstTimestamp"],
            created["deprecatedLastTimestamp"]) == ({}, None, None)
    assert get(server, f"{EVENTS}/shaped") == created
    dry = ok(call(server, "POST", EVENTS, {**body, "metadata": {"name": "dry"}},
                  params={"dryRun": "All"}), 201)
    assert list(dry) == want
    patched = ok(call(server, "PATCH", f"{EVENTS}/shaped", {"metadata": {"labels": {"a": "b"}},
                                                             "deprecatedSource": None}))
    assert list(patched) == want and patched["deprecatedSource"] == {}


def test_lists_hold_both_writes_each_in_its_version(server: ServerThread) -> None:
    a = create(server, CORE, core_event("a"))
    b = create(server, EVENTS, new_event("b"))
    core_list = get(server, CORE)
    assert (core_list["kind"], core_list["apiVersion"]) == ("EventList", "v1")
    strip = {"kind", "apiVersion"}
    assert core_list["items"] == [{k: v for k, v in o.items() if k not in strip}
                                  for o in (a, events_v1_to_core_event(b))]
    events_list = get(server, EVENTS)
    assert (events_list["kind"], events_list["apiVersion"]) == ("EventList", "events.k8s.io/v1")
    assert [o["metadata"]["name"] for o in events_list["items"]] == ["a", "b"]
    assert events_list["items"][0]["regarding"]["name"] == "web-0"
    all_namespaces = get(server, "/api/v1/events")
    names = [o["metadata"]["name"] for o in all_namespaces["items"]]
    if on_etcd():  # servers on a shared store elect a controller leader: kube's LeaderElection
        names = [n for n in names if not n.startswith("kube-controller-manager.")]
    assert names == ["a", "b"]


def test_a_historical_list_is_converted_too(server: ServerThread) -> None:
    create(server, EVENTS, new_event("old"))
    rv = list_rv(server, CORE)
    create(server, EVENTS, new_event("later"))
    page = get(server, CORE, resourceVersion=rv, resourceVersionMatch="Exact")
    assert [o["metadata"]["name"] for o in page["items"]] == ["old"]
    assert page["items"][0]["involvedObject"]["name"] == "web-0"


# --- writes through either version ----------------------------------------------------------------

def test_update_patch_and_delete_through_core_act_on_the_shared_object(
        server: ServerThread) -> None:
    create(server, EVENTS, new_event("shared"))
    current = get(server, f"{CORE}/shared")
    current["count"] = 5
    updated = ok(call(server, "PUT", f"{CORE}/shared", current), 200)
    assert updated["count"] == 5
    assert get(server, f"{EVENTS}/shared")["deprecatedCount"] == 5
    patched = ok(call(server, "PATCH", f"{CORE}/shared", {"message": "patched"},
                      {"Content-Type": "application/merge-patch+json"}), 200)
    assert patched["message"] == "patched" and patched["apiVersion"] == "v1"
    assert get(server, f"{EVENTS}/shared")["note"] == "patched"
    done = ok(call(server, "DELETE", f"{CORE}/shared"), 200)
    assert (done["kind"], done["status"]) == ("Status", "Success")
    assert call(server, "GET", f"{EVENTS}/shared").status == 404


def test_put_through_core_creates_a_missing_event(server: ServerThread) -> None:
    # registry/core/event/strategy.go AllowCreateOnUpdate
    reply = call(server, "PUT", f"{CORE}/put-made", core_event("put-made"))
    assert reply.status == 201, reply.body
    assert get(server, f"{EVENTS}/put-made")["deprecatedSource"] == {
        "component": "kubelet", "host": "node-1"}


def test_put_through_events_creates_a_missing_event(server: ServerThread) -> None:
    # registry/events/rest/storage_events.go serves events.k8s.io from the core event storage,
    # whose strategy allows create on update
    reply = call(server, "PUT", f"{EVENTS}/put-made-v1", new_event("put-made-v1"))
    assert reply.status == 201, reply.body
    assert get(server, f"{CORE}/put-made-v1")["reportingComponent"] == "kubewire.io/t"
    reply = call(server, "PUT", f"{EVENTS}/put-made-v1", get(server, f"{EVENTS}/put-made-v1"))
    assert reply.status == 200, reply.body  # there now: an update


def test_deletecollection_through_core_removes_events_of_both_origins(
        server: ServerThread) -> None:
    create(server, CORE, core_event("a"))
    create(server, EVENTS, new_event("b"))
    create(server, EVENTS, new_event("c", pod="db-0"))
    gone = ok(call(server, "DELETE", CORE,
                   params={"fieldSelector": "involvedObject.name=web-0"}))
    assert (gone["kind"], gone["apiVersion"]) == ("EventList", "v1")
    assert [o["metadata"]["name"] for o in get(server, EVENTS)["items"]] == ["c"]


# --- watches see the other version's writes -------------------------------------------------------

def test_a_core_watch_sees_events_writes_in_core_form(server: ServerThread) -> None:
    rv = list_rv(server, CORE)
    with watch(server, CORE, resourceVersion=rv) as stream:
        created = create(server, EVENTS, new_event("w"))
        # events.k8s.io updates may change only metadata and the series (ValidateEventUpdate)
        series = {"count": 2, "lastObservedTime": "2024-12-11T09:20:00.000000Z"}
        patched = ok(call(server, "PATCH", f"{EVENTS}/w", {"series": series},
                          {"Content-Type": "application/merge-patch+json"}), 200)
        ok(call(server, "DELETE", f"{EVENTS}/w"), 200)
        events = stream.events(3)
    assert types_and_names(events) == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]
    assert events[0]["object"] == events_v1_to_core_event(created)
    assert events[1]["object"] == events_v1_to_core_event(patched)
    assert events[2]["object"]["apiVersion"] == "v1"
    assert events[2]["object"]["involvedObject"]["name"] == "web-0"


def test_an_events_watch_sees_core_writes_in_events_form(server: ServerThread) -> None:
    rv = list_rv(server, EVENTS)
    with watch(server, EVENTS, resourceVersion=rv) as stream:
        created = create(server, CORE, core_event("k"))
        current = get(server, f"{CORE}/k")
        current["count"] = 3
        updated = ok(call(server, "PUT", f"{CORE}/k", current), 200)
        ok(call(server, "DELETE", f"{CORE}/k"), 200)
        events = stream.events(3)
    assert types_and_names(events) == [("ADDED", "k"), ("MODIFIED", "k"), ("DELETED", "k")]
    assert events[0]["object"] == core_event_to_events_v1(created)
    assert events[1]["object"] == core_event_to_events_v1(updated)
    assert events[2]["object"]["deprecatedCount"] == 3


def test_a_core_watch_from_the_start_lists_in_core_form(server: ServerThread) -> None:
    create(server, EVENTS, new_event("before"))
    with watch(server, CORE, allowWatchBookmarks="true", sendInitialEvents="true",
               resourceVersionMatch="NotOlderThan") as stream:
        added, bookmark = stream.events(2)
    assert (added["type"], added["object"]["apiVersion"]) == ("ADDED", "v1")
    assert added["object"]["message"] == "assigned to node-1"
    assert bookmark["type"] == "BOOKMARK"
    assert (bookmark["object"]["kind"], bookmark["object"]["apiVersion"]) == ("Event", "v1")


# --- field selectors per version ------------------------------------------------------------------

@pytest.mark.parametrize(("path", "selector"), [
    (CORE, "involvedObject.name=web-0"), (CORE, "involvedObject.kind=Pod,reason=Scheduled"),
    (CORE, "reportingComponent=kubewire.io/t"), (CORE, "source=kubewire.io/t"),
    (EVENTS, "regarding.name=web-0"), (EVENTS, "reportingController=kubewire.io/t"),
    (EVENTS, "source=kubewire.io/t"), (EVENTS, "regarding.name=web-0,type=Normal"),
])
def test_field_selectors_use_each_versions_labels(server: ServerThread, path: str,
                                                  selector: str) -> None:
    create(server, EVENTS, new_event("match"))
    create(server, EVENTS, new_event("other", pod="db-0") | {"reason": "Other",
                                                            "reportingController": "x.io/y"})
    found = get(server, path, fieldSelector=selector)
    assert [o["metadata"]["name"] for o in found["items"]] == ["match"]


def test_source_selects_the_legacy_source_first(server: ServerThread) -> None:
    create(server, CORE, core_event("kubelet-made"))
    assert [o["metadata"]["name"] for o in
            get(server, EVENTS, fieldSelector="source=kubelet")["items"]] == ["kubelet-made"]


@pytest.mark.parametrize(("path", "label"), [
    (CORE, "regarding.name"), (CORE, "reportingController"), (CORE, "note"),
    (EVENTS, "involvedObject.name"), (EVENTS, "reportingComponent"),
])
def test_the_other_versions_labels_are_rejected(server: ServerThread, path: str,
                                                label: str) -> None:
    for params in ({}, {"watch": "true"}):
        reply = call(server, "GET", path, params={"fieldSelector": f"{label}=x", **params})
        assert reply.status == 400
        assert reply.status_object() == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"field label not supported: {label}", "reason": "BadRequest",
            "code": 400}


def test_a_field_selector_watch_on_events_follows_core_updates(server: ServerThread) -> None:
    create(server, CORE, core_event("moving"))
    rv = list_rv(server, EVENTS)
    with watch(server, EVENTS, resourceVersion=rv,
               fieldSelector="regarding.name=web-0") as stream:
        # legacy (core/v1) updates may change what the event is about
        moved = get(server, f"{CORE}/moving")
        moved["involvedObject"]["name"] = "web-1"
        ok(call(server, "PUT", f"{CORE}/moving", moved), 200)
        create(server, CORE, core_event("arriving"))
        events = stream.events(2)
    assert types_and_names(events) == [("DELETED", "moving"), ("ADDED", "arriving")]
    # leaving the selector: the last matching state, in events.k8s.io/v1
    assert events[0]["object"]["regarding"]["name"] == "web-0"
    assert events[0]["object"]["apiVersion"] == "events.k8s.io/v1"


# --- discovery, OpenAPI, kubectl ------------------------------------------------------------------

def test_discovery_lists_events_in_both_groups(server: ServerThread) -> None:
    for path in ("/api/v1", "/apis/events.k8s.io/v1"):
        entry = next(r for r in get(server, path)["resources"] if r["name"] == "events")
        assert (entry["kind"], entry["namespaced"], entry["shortNames"]) == ("Event", True,
                                                                             ["ev"])
        assert entry["storageVersionHash"] == "r2yiGXH7wu8="  # one storage: one hash


def test_openapi_documents_both_versions(server: ServerThread) -> None:
    core = get(server, "/openapi/v3/api/v1")
    assert "io.k8s.api.core.v1.Event" in core["components"]["schemas"]
    assert "/api/v1/namespaces/{namespace}/events" in core["paths"]
    events = get(server, "/openapi/v3/apis/events.k8s.io/v1")
    assert "io.k8s.api.events.v1.Event" in events["components"]["schemas"]





@needs_kubectl
def test_kubectl_get_events_reads_core_v1(server: ServerThread) -> None:
    create(server, EVENTS, new_event("from-recorder"))
    create(server, CORE, core_event("from-kubelet", pod="db-0"))
    done = run(server, "get", "events", "-n", "default", "-o", "json")
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["items"]
    assert [(o["apiVersion"], o["metadata"]["name"]) for o in items] == [
        ("v1", "from-kubelet"), ("v1", "from-recorder")]
    table = run(server, "get", "events", "-n", "default")
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert any("pod/web-0" in row and "assigned to node-1" in row for row in rows), rows
    assert any("pod/db-0" in row and "pulled the image" in row for row in rows), rows


def test_tables_print_the_same_row_through_both_versions(server: ServerThread) -> None:
    create(server, EVENTS, new_event("recorded"))
    accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    rows = {}
    for path in (CORE, EVENTS):
        reply = call(server, "GET", path, headers=accept)
        table = ok(reply, 200)
        names = [c["name"] for c in table["columnDefinitions"]]
        cells = dict(zip(names, table["rows"][0]["cells"], strict=True))
        rows[path] = {k: v for k, v in cells.items() if k not in ("Last Seen", "First Seen")}
    # Source falls back to the reporting controller under either version's field name
    assert rows[CORE]["Source"] == "kubewire.io/t, t-1"
    assert rows[CORE] == rows[EVENTS]


# --- validation follows the request's version ---------------------------------------------

def test_core_creates_get_legacy_validation(server: ServerThread) -> None:
    bad = core_event("bad")
    bad["involvedObject"]["namespace"] = "other"
    reply = call(server, "POST", CORE, bad)
    assert reply.status == 422
    cause = {"reason": "FieldValueInvalid", "field": "involvedObject.namespace",
             "message": 'Invalid value: "other": does not match event.namespace'}
    assert reply.status_object() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Event "bad" is invalid: involvedObject.namespace: Invalid value: "other": '
                   "does not match event.namespace",
        "reason": "Invalid", "details": {"name": "bad", "kind": "Event", "causes": [cause]},
        "code": 422}
    # a core event naming the new fields is held to them, under core/v1's names
    half = core_event("half", eventTime="2024-12-11T09:15:02.000000Z",
                      reportingComponent="kubelet")
    fields = [c["field"] for c in call(server, "POST", CORE, half).json["details"]["causes"]]
    assert fields == ["reportingInstance", "action"]
    assert get(server, CORE)["items"] == []


def test_events_creates_get_strict_validation(server: ServerThread) -> None:
    legacy_fields = new_event("strict") | {"deprecatedCount": 3,
                                           "deprecatedSource": {"component": "kubelet"}}
    del legacy_fields["type"]
    reply = call(server, "POST", EVENTS, legacy_fields)
    assert reply.status == 422
    status = reply.status_object()
    assert status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "type",
         "message": 'Invalid value: "": has invalid value: '},
        {"reason": "FieldValueInvalid", "field": "count",
         "message": 'Invalid value: "": needs to be unset'},
        {"reason": "FieldValueInvalid", "field": "source",
         "message": 'Invalid value: "": needs to be unset'}]
    # Invalid names kube's internal kind, which lives in the core group (store.go BeforeCreate)
    assert status["message"] == (
        'Event "strict" is invalid: [type: Invalid value: "": has invalid value: , count: Invalid '
        'value: "": needs to be unset, source: Invalid value: "": needs to be unset]')
    assert (status["details"]["kind"], "group" in status["details"]) == ("Event", False)
    # the very same event is fine through core/v1
    create(server, CORE, events_v1_to_core_event(legacy_fields))


def test_events_updates_may_not_change_the_event_but_core_updates_may(
        server: ServerThread) -> None:
    create(server, EVENTS, new_event("fixed"))
    before = get(server, f"{EVENTS}/fixed")
    reply = call(server, "PATCH", f"{EVENTS}/fixed", {"note": "rewritten"},
                 {"Content-Type": "application/merge-patch+json"})
    assert reply.status == 422
    assert reply.status_object()["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "message",
         "message": 'Invalid value: "rewritten": field is immutable'}]
    assert get(server, f"{EVENTS}/fixed") == before  # nothing changed
    legacy = ok(call(server, "PATCH", f"{CORE}/fixed", {"message": "rewritten"},
                     {"Content-Type": "application/merge-patch+json"}), 200)
    assert legacy["message"] == "rewritten"
    assert get(server, f"{EVENTS}/fixed")["note"] == "rewritten"


def test_a_protobuf_core_event_is_read_through_events(server: ServerThread) -> None:
    # kubelet's recorder posts core/v1 Events as protobuf
    body = encode_body(core_event("from-proto"))
    reply = call(server, "POST", CORE, body,
                 {"Content-Type": "application/vnd.kubernetes.protobuf",
                  "Accept": "application/vnd.kubernetes.protobuf,application/json"})
    assert reply.status == 201, reply.body
    created = reply.json
    assert (created["apiVersion"], created["source"]) == ("v1", {"component": "kubelet",
                                                                 "host": "node-1"})
    assert get(server, f"{EVENTS}/from-proto") == core_event_to_events_v1(created)


@needs_kubectl
def test_kubectl_describe_shows_events_written_through_either_version(
        server: ServerThread) -> None:
    pod = create(server, "/api/v1/namespaces/default/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    uid = pod["metadata"]["uid"]
    legacy = core_event("pulled")
    legacy["involvedObject"]["uid"] = uid
    create(server, CORE, legacy)
    recorded = new_event("scheduled")
    recorded["regarding"]["uid"] = uid
    create(server, EVENTS, recorded)
    # describe lists core/v1 events selected by involvedObject name, namespace and uid
    done = run(server, "describe", "pod", "web-0", "-n", "default")
    assert done.returncode == 0, done.stderr
    events_section = done.stdout.split("Events:", 1)[1]
    assert "Pulled" in events_section and "pulled the image" in events_section
    assert "Scheduled" in events_section and "assigned to node-1" in events_section


def test_both_versions_survive_a_restart(server: ServerThread) -> None:
    legacy = create(server, CORE, core_event("kept"))
    recorded = create(server, EVENTS, new_event("also-kept"))
    server.restart()
    assert get(server, f"{CORE}/kept") == legacy
    assert get(server, f"{EVENTS}/also-kept") == recorded
    assert get(server, f"{CORE}/also-kept") == events_v1_to_core_event(recorded)
