"""meta.k8s.io Tables on the raw wire: GET, LIST and WATCH with kubectl's Accept header
(objects-and-clients.md §5, watch-protocol.md §3.3)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.harness import ServerThread
from tests.integration.kinds import CONFIG_MAP, NS, POD, SERVICE
from tests.integration.wire import (
    call,
    create,
    get,
    list_rv,
    ok,
    rv_of,
    watch,
)

KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
                  "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
V1BETA1_ONLY = "application/json;as=Table;v=v1beta1;g=meta.k8s.io"
TABLE_ONLY = "application/json;as=Table;v=v1;g=meta.k8s.io"
KUBECTL = {"Accept": KUBECTL_ACCEPT}
PODS = POD.collection()
AGE = re.compile(r"\d+s")  # objects made by the test are seconds old
NOT_ACCEPTABLE = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": "only the following media types are accepted: application/json, "
                             "application/yaml, application/vnd.kubernetes.protobuf",
                  "reason": "NotAcceptable", "code": 406}
BAD_INCLUDE = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Unable to convert to Table as requested: includeObject: Invalid "
                          "value: \"Everything\": must be 'Metadata', 'Object', 'None', or empty",
               "reason": "BadRequest", "code": 400}


def column(name: str, priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": "string", "format": fmt, "description": "",
            "priority": priority}


POD_COLUMNS = [column("Name", fmt="name"), column("Ready"), column("Status"),
               column("Restarts"), column("Age"), column("IP", 1), column("Node", 1),
               column("Nominated Node", 1), column("Readiness Gates", 1)]


def table_get(server: ServerThread, path: str, accept: str = KUBECTL_ACCEPT,
              **params: Any) -> dict[str, Any]:
    reply = call(server, "GET", path, headers={"Accept": accept}, params=params)
    table = ok(reply, 200)
    assert reply.headers["content-type"] == "application/json"
    assert isinstance(table, dict)
    return table


def pending_cells(name: str, cells: list[Any]) -> None:
    """A created, unscheduled pod with one container, as kube's printer shows it."""
    assert cells[:4] == [name, "0/1", "Pending", "0"]
    assert AGE.fullmatch(cells[4]), cells[4]
    assert cells[5:] == ["<none>", "<none>", "<none>", "<none>"]


def pod_names(table: dict[str, Any]) -> list[str]:
    return [row["cells"][0] for row in table["rows"]]


# --- LIST ---------------------------------------------------------------------------------------

def test_list_with_kubectls_accept_is_a_v1_table(server: ServerThread) -> None:
    web = create(server, PODS, POD.obj("web", {"app": "web"}))
    create(server, PODS, POD.obj("db"))
    plain = get(server, PODS)
    table = table_get(server, PODS, limit=500)
    assert list(table) == ["kind", "apiVersion", "metadata", "columnDefinitions", "rows"]
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": plain["metadata"]["resourceVersion"]}
    assert table["columnDefinitions"] == POD_COLUMNS
    assert pod_names(table) == ["db", "web"]
    row = table["rows"][1]
    pending_cells("web", row["cells"])
    assert "conditions" not in row  # kube marks only Succeeded and Failed pods
    assert row["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": web["metadata"]}


def test_plain_json_is_unchanged_and_ignores_include_object(server: ServerThread) -> None:
    create(server, PODS, POD.obj("web"))
    for accept in ("application/json", "*/*", ""):
        reply = call(server, "GET", PODS, headers={"Accept": accept},
                     params={"includeObject": "Everything"})
        body = ok(reply, 200)
        assert body["kind"] == "PodList" and [i["metadata"]["name"] for i in body["items"]] == [
            "web"]
        one = ok(call(server, "GET", POD.item("web"), headers={"Accept": accept},
                      params={"includeObject": "Everything"}), 200)
        assert one["kind"] == "Pod"


@pytest.mark.parametrize("policy", ["None", "Metadata", "Object", ""])
def test_include_object_variants(server: ServerThread, policy: str) -> None:
    created = create(server, CONFIG_MAP.collection(), CONFIG_MAP.obj("cfg"))
    table = table_get(server, CONFIG_MAP.collection(), includeObject=policy)
    (row,) = table["rows"]
    assert row["cells"][:2] == ["cfg", 1]
    assert AGE.fullmatch(row["cells"][2])
    if policy == "None":
        assert row["object"] is None
    elif policy == "Object":
        assert row["object"] == get(server, CONFIG_MAP.item("cfg"))
        assert list(row["object"])[:2] == ["kind", "apiVersion"]
    else:
        assert row["object"] == {"kind": "PartialObjectMetadata",
                                 "apiVersion": "meta.k8s.io/v1",
                                 "metadata": created["metadata"]}


def test_v1beta1_tables(server: ServerThread) -> None:
    create(server, PODS, POD.obj("web"))
    table = table_get(server, PODS, accept=V1BETA1_ONLY)
    assert table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert table["columnDefinitions"] == POD_COLUMNS
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    one = table_get(server, POD.item("web"), accept=V1BETA1_ONLY)
    assert one["apiVersion"] == "meta.k8s.io/v1beta1" and pod_names(one) == ["web"]


def test_limit_and_continue_pages_are_tables(server: ServerThread) -> None:
    for name in ("a", "b", "c"):
        create(server, PODS, POD.obj(name))
    first = table_get(server, PODS, limit=2)
    assert pod_names(first) == ["a", "b"]
    meta = first["metadata"]
    assert set(meta) == {"resourceVersion", "continue", "remainingItemCount"}
    assert meta["remainingItemCount"] == 1
    second = table_get(server, PODS, limit=2, **{"continue": meta["continue"]})
    assert pod_names(second) == ["c"]
    assert second["metadata"] == {"resourceVersion": meta["resourceVersion"]}


def test_selectors_and_all_namespaces(server: ServerThread) -> None:
    create(server, "/api/v1/namespaces", {"metadata": {"name": "other"}})
    create(server, PODS, POD.obj("web", {"app": "web"}))
    create(server, PODS, POD.obj("db", {"app": "db"}))
    create(server, POD.collection("other"), POD.obj("far", {"app": "web"}))
    assert pod_names(table_get(server, PODS, labelSelector="app=web")) == ["web"]
    assert pod_names(table_get(server, PODS, fieldSelector="metadata.name=db")) == ["db"]
    everywhere = table_get(server, POD.collection(None))
    assert pod_names(everywhere) == ["db", "web", "far"]  # by namespace, then name
    assert {r["object"]["metadata"]["namespace"] for r in everywhere["rows"]} == {NS, "other"}


def test_empty_list_has_columns_and_no_rows(server: ServerThread) -> None:
    table = table_get(server, SERVICE.collection("kube-system"))
    assert table["rows"] == []
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"]


# --- GET ----------------------------------------------------------------------------------------

def test_get_one_object_is_a_one_row_table(server: ServerThread) -> None:
    web = create(server, PODS, POD.obj("web"))
    table = table_get(server, POD.item("web"))
    assert table["metadata"] == {"resourceVersion": web["metadata"]["resourceVersion"]}
    assert table["columnDefinitions"] == POD_COLUMNS
    (row,) = table["rows"]
    pending_cells("web", row["cells"])
    assert row["object"]["metadata"] == web["metadata"]


# --- negotiation and bad input ------------------------------------------------------------------

@pytest.mark.parametrize("accept", [
    "application/json;as=Table;v=v2;g=meta.k8s.io",
    "application/json;as=Table;v=v1;g=example.com",
    "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
    "text/html",
])
def test_unsupported_only_accept_is_406(server: ServerThread, accept: str) -> None:
    create(server, PODS, POD.obj("web"))
    for path in (PODS, POD.item("web")):
        reply = call(server, "GET", path, headers={"Accept": accept})
        assert reply.status == 406
        assert reply.status_object() == NOT_ACCEPTABLE


def test_table_only_accept_is_served(server: ServerThread) -> None:
    create(server, PODS, POD.obj("web"))
    assert pod_names(table_get(server, PODS, accept=TABLE_ONLY)) == ["web"]


def test_bad_include_object_is_400_and_changes_nothing(server: ServerThread) -> None:
    create(server, PODS, POD.obj("web"))
    before = list_rv(server, PODS)
    for path in (PODS, POD.item("web")):
        reply = call(server, "GET", path, headers=KUBECTL,
                     params={"includeObject": "Everything"})
        assert reply.status == 400
        assert reply.status_object() == BAD_INCLUDE
    # kube converts the read's result: a missing object is 404 before includeObject is read
    missing = call(server, "GET", POD.item("nope"), headers=KUBECTL,
                   params={"includeObject": "Everything"})
    assert missing.status == 404
    with watch(server, PODS, headers=KUBECTL, resourceVersion=before,
               includeObject="Everything") as stream:
        assert stream.status == 400
        assert json.loads(stream.body) == BAD_INCLUDE
    assert list_rv(server, PODS) == before


# --- WATCH --------------------------------------------------------------------------------------

def test_watch_events_are_one_row_tables_with_columns_first_only(server: ServerThread) -> None:
    start = list_rv(server, PODS)
    with watch(server, PODS, headers=KUBECTL, resourceVersion=start) as stream:
        created = create(server, PODS, POD.obj("web"))
        changed = ok(call(server, "PATCH", POD.item("web"),
                          {"metadata": {"labels": {"tier": "front"}}}), 200)
        ok(call(server, "DELETE", POD.item("web"), params={"gracePeriodSeconds": 0}), 200)
        events = stream.events_until(lambda e: e["type"] == "DELETED")
        lines = list(stream.lines)
    # a pod's delete first marks it (MODIFIED, Terminating), then removes it
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    for event in events:
        table = event["object"]
        assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
        (row,) = table["rows"]
        assert row["object"]["kind"] == "PartialObjectMetadata"
    for event in events[:2]:
        pending_cells("web", event["object"]["rows"][0]["cells"])
    for event in events[2:]:
        assert event["object"]["rows"][0]["cells"][:3] == ["web", "0/1", "Terminating"]
    assert events[0]["object"]["columnDefinitions"] == POD_COLUMNS
    assert all(e["object"]["columnDefinitions"] is None for e in events[1:])
    assert b'"columnDefinitions":null' in lines[1]
    assert events[0]["object"]["metadata"] == {
        "resourceVersion": created["metadata"]["resourceVersion"]}
    assert events[1]["object"]["rows"][0]["object"]["metadata"]["labels"] == {"tier": "front"}
    assert rv_of(events[1]["object"]["rows"][0]["object"]) == rv_of(changed)
    assert rv_of(events[-1]["object"]) > rv_of(changed)  # DELETED: last state, delete's RV


def test_watch_initial_events_are_tables(server: ServerThread) -> None:
    create(server, PODS, POD.obj("a"))
    create(server, PODS, POD.obj("b"))
    with watch(server, PODS, headers={"Accept": TABLE_ONLY}, includeObject="None") as stream:
        events = stream.events(2)
    assert [(e["type"], e["object"]["rows"][0]["cells"][0]) for e in events] == [
        ("ADDED", "a"), ("ADDED", "b")]
    assert events[0]["object"]["columnDefinitions"] == POD_COLUMNS
    assert events[1]["object"]["columnDefinitions"] is None
    assert all(e["object"]["rows"][0]["object"] is None for e in events)


def test_each_table_watcher_gets_its_own_first_columns(server: ServerThread) -> None:
    start = list_rv(server, PODS)
    with watch(server, PODS, headers=KUBECTL, resourceVersion=start) as early, \
            watch(server, PODS, resourceVersion=start) as plain:
        one = create(server, PODS, POD.obj("one"))
        assert early.next_event()["object"]["columnDefinitions"] == POD_COLUMNS
        with watch(server, PODS, headers=KUBECTL,
                   resourceVersion=one["metadata"]["resourceVersion"]) as late:
            create(server, PODS, POD.obj("two"))
            late_two = late.next_event()
            early_two = early.next_event()
        plain_events = plain.events(2)
    assert late_two["object"]["columnDefinitions"] == POD_COLUMNS
    assert early_two["object"]["columnDefinitions"] is None
    assert late_two["object"]["rows"] == early_two["object"]["rows"]
    assert [(e["object"]["kind"], e["object"]["metadata"]["name"]) for e in plain_events] == [
        ("Pod", "one"), ("Pod", "two")]


def test_watch_bookmarks_are_tables_too(make_server: Callable[..., ServerThread]) -> None:
    """kube transforms every watch object but a Status (``doTransformObject``), bookmarks
    included: the empty object becomes one row of an empty Pod's cells, and being first it
    carries the column definitions."""
    server = make_server(bookmark_interval_s=0.1)
    start = list_rv(server, PODS)
    with watch(server, PODS, headers=KUBECTL, resourceVersion=start,
               allowWatchBookmarks="true") as stream:
        create(server, SERVICE.collection(), SERVICE.obj("elsewhere"))
        bookmark = stream.next_event()
        create(server, PODS, POD.obj("web"))
        added = stream.events_until(lambda e: e["type"] == "ADDED")[-1]
    assert bookmark["type"] == "BOOKMARK"
    table = bookmark["object"]
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["columnDefinitions"] == POD_COLUMNS
    revision = table["metadata"]["resourceVersion"]
    assert int(revision) > int(start)
    [row] = table["rows"]
    assert row["cells"] == ["", "0/0", "", "0", "<unknown>", "<none>", "<none>", "<none>",
                            "<none>"]
    assert row["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": {"resourceVersion": revision,
                                          "creationTimestamp": None}}
    assert added["object"]["kind"] == "Table"
    assert added["object"]["columnDefinitions"] is None  # the bookmark was the first event


def test_watch_list_requests_never_get_tables(server: ServerThread) -> None:
    create(server, PODS, POD.obj("web"))
    params = {"sendInitialEvents": "true", "allowWatchBookmarks": "true",
              "resourceVersionMatch": "NotOlderThan"}
    with watch(server, PODS, headers=KUBECTL, **params) as stream:
        first = stream.next_event()
    assert first["type"] == "ADDED" and first["object"]["kind"] == "Pod"
    with watch(server, PODS, headers={"Accept": TABLE_ONLY}, **params) as refused:
        assert refused.status == 406
        assert json.loads(refused.body) == NOT_ACCEPTABLE


@pytest.mark.parametrize(("accept", "message"), [
    ("text/html", NOT_ACCEPTABLE["message"]),
    ("application/json;as=Table;v=v2;g=meta.k8s.io", NOT_ACCEPTABLE["message"]),
    # YAML passes kube's first negotiation but has no stream serializer
    ("application/yaml", "only the following media types are accepted: "
                         "application/json;stream=watch, "
                         "application/vnd.kubernetes.protobuf;stream=watch"),
])
def test_watch_406_before_the_stream(server: ServerThread, accept: str, message: str) -> None:
    with watch(server, PODS, headers={"Accept": accept}, resourceVersion="0") as refused:
        assert refused.status == 406
        assert json.loads(refused.body) == {**NOT_ACCEPTABLE, "message": message}
