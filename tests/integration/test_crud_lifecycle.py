"""Writes and object lifecycle on the wire (objects-and-clients.md §1, §2; watch-protocol.md §8,
§10): server-set metadata, lists and paging, optimistic concurrency, the status subresource,
deletion with preconditions, finalizers, graceful pods, deletecollection and namespaces.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.harness import ServerThread
from tests.integration.kinds import (
    ALL_KINDS,
    DEPLOYMENT,
    GATEWAY,
    HTTP_ROUTE,
    JOB,
    NAMESPACE,
    NS,
    POD,
    SERVICE,
    SERVICE_ACCOUNT,
    Kind,
    kind_id,
)
from tests.integration.wire import (
    call,
    create,
    get,
    list_rv,
    name_of,
    ok,
    rv_of,
    types_and_names,
    wait_for,
    watch,
)
from tests.storage_choice import range_writes

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")  # metav1.Time: seconds, UTC


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None,
           ) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure", "message": message, "reason": reason}
    if details is not None:
        out["details"] = details
    out["code"] = code
    return out


def name_for(kind: Kind) -> str:
    return "life-" + kind.kind.lower()


# --- §1.1-1.4 server-set metadata ---------------------------------------------------------------

# Pod (v1.32), Service, Node, ...: none
GENERATION_ON_CREATE = {"Deployment": 1, "ReplicaSet": 1, "StatefulSet": 1, "DaemonSet": 1,
                        "Ingress": 1, "NetworkPolicy": 1, "EndpointSlice": 1,
                        "Gateway": 1, "HTTPRoute": 1, "Job": 1, "CronJob": 1,
                        "PodDisruptionBudget": 1, "IngressClass": 1, "PriorityClass": 1,
                        "ReplicationController": 1}


@pytest.mark.parametrize("kind", ALL_KINDS, ids=kind_id)
def test_create_sets_server_metadata(server: ServerThread, kind: Kind) -> None:
    before = int(list_rv(server, kind.collection()))
    body = kind.obj(name_for(kind), uid="client-chosen", creationTimestamp="2000-01-01T00:00:00Z")
    if kind.kind in GENERATION_ON_CREATE:
        body["metadata"]["generation"] = 42  # PrepareForCreate sets 1 whatever was sent
    created = create(server, kind.collection(), body)
    meta = created["metadata"]
    assert created["kind"] == kind.kind
    assert created["apiVersion"] == kind.api_version
    assert meta["name"] == name_for(kind)
    assert str(uuid.UUID(meta["uid"])) == meta["uid"]  # a fresh RFC 4122 uid, not the client's
    assert TIMESTAMP.fullmatch(meta["creationTimestamp"])
    assert meta["creationTimestamp"] != "2000-01-01T00:00:00Z"
    # (on etcd a Service's create writes kube's allocator range first)
    assert int(meta["resourceVersion"]) == before + 1 + range_writes(kind.plural)
    assert meta.get("generation") == GENERATION_ON_CREATE.get(kind.kind)
    if kind.namespaced:
        assert meta["namespace"] == NS
    else:
        assert "namespace" not in meta
    read = get(server, kind.item(name_for(kind)))
    if kind.controller_status:  # its controller may have written status since (kube's would)
        read, created = _without_status(read), _without_status(created)
    assert read == created


def _without_status(obj: dict[str, Any]) -> dict[str, Any]:
    """An object but for what a status write changes: status, resourceVersion, managedFields."""
    meta = {k: v for k, v in obj["metadata"].items()
            if k not in ("resourceVersion", "managedFields")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def test_deployment_generation_follows_spec_and_annotations(server: ServerThread) -> None:
    item = DEPLOYMENT.item("web")
    created = create(server, DEPLOYMENT.collection(), DEPLOYMENT.obj("web"))
    assert created["metadata"]["generation"] == 1
    labelled = ok(call(server, "PATCH", item, {"metadata": {"labels": {"a": "b"}}}))
    assert labelled["metadata"]["generation"] == 1  # labels are not spec
    scaled = ok(call(server, "PATCH", item, {"spec": {"replicas": 2}}))
    assert scaled["metadata"]["generation"] == 2
    annotated = ok(call(server, "PATCH", item, {"metadata": {"annotations": {"x": "y"}}}))
    assert annotated["metadata"]["generation"] == 3  # annotations count for deployments
    forged = ok(call(server, "PATCH", item, {"metadata": {"generation": 99}}))
    assert forged["metadata"]["generation"] == 3  # clients never set it
    status_write = ok(call(server, "PATCH", item + "/status", {"status": {"replicas": 2}}))
    assert status_write["metadata"]["generation"] == 3


def test_pod_has_no_generation_even_after_spec_changes(server: ServerThread) -> None:
    create(server, POD.collection(), POD.obj("p"))
    patched = ok(call(server, "PATCH", POD.item("p"), {"spec": {"activeDeadlineSeconds": 5}}))
    assert "generation" not in patched["metadata"]


def test_generate_name(server: ServerThread) -> None:
    body = POD.obj("")
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "web-"
    first = create(server, POD.collection(), body)
    second = create(server, POD.collection(), body)
    for obj in (first, second):
        assert re.fullmatch(r"web-[bcdfghjklmnpqrstvwxz2456789]{5}", obj["metadata"]["name"])
        assert obj["metadata"]["generateName"] == "web-"
    assert first["metadata"]["name"] != second["metadata"]["name"]


def test_create_existing_name_is_409_already_exists(server: ServerThread) -> None:
    create(server, DEPLOYMENT.collection(), DEPLOYMENT.obj("web"))
    reply = call(server, "POST", DEPLOYMENT.collection(), DEPLOYMENT.obj("web"))
    assert reply.status == 409
    assert reply.status_object() == status(
        409, "AlreadyExists", 'deployments.apps "web" already exists',
        {"name": "web", "group": "apps", "kind": "deployments"})


def test_create_in_a_missing_namespace_is_404(server: ServerThread) -> None:
    before = get(server, POD.collection(None))
    reply = call(server, "POST", POD.collection("nope"), POD.obj("x"))
    assert reply.status == 404
    assert reply.status_object() == status(404, "NotFound", 'namespaces "nope" not found',
                                           {"name": "nope", "kind": "namespaces"})
    assert get(server, POD.collection(None)) == before


# --- §10 lists ----------------------------------------------------------------------------------

def _continue_token(token: str) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    return decoded


def test_list_pages_share_one_snapshot(server: ServerThread) -> None:
    for i in range(7):
        create(server, POD.collection(), POD.obj(f"p{i}"))
    first = get(server, POD.collection(), limit=3)
    rv = first["metadata"]["resourceVersion"]
    assert [i["metadata"]["name"] for i in first["items"]] == ["p0", "p1", "p2"]
    assert first["metadata"]["remainingItemCount"] == 4
    token = first["metadata"]["continue"]
    assert _continue_token(token)["rv"] == int(rv)

    # Changes after page one do not show in later pages: they are served from the snapshot.
    create(server, POD.collection(), POD.obj("p3a"))
    ok(call(server, "DELETE", POD.item("p5")), 200)

    second = get(server, POD.collection(), limit=3, **{"continue": token})
    assert second["metadata"]["resourceVersion"] == rv
    assert [i["metadata"]["name"] for i in second["items"]] == ["p3", "p4", "p5"]
    assert second["metadata"]["remainingItemCount"] == 1
    third = get(server, POD.collection(), limit=3, **{"continue": second["metadata"]["continue"]})
    assert third["metadata"]["resourceVersion"] == rv
    assert [i["metadata"]["name"] for i in third["items"]] == ["p6"]
    assert not third["metadata"].get("continue")
    assert "remainingItemCount" not in third["metadata"]


def test_list_with_selector_has_no_remaining_item_count(server: ServerThread) -> None:
    for i in range(6):
        create(server, POD.collection(), POD.obj(f"p{i}", labels={"even": str(i % 2 == 0)}))
    names: list[str] = []
    token = None
    pages = 0
    while True:
        page = get(server, POD.collection(), limit=2, labelSelector="even=True",
                   **({"continue": token} if token else {}))
        pages += 1
        assert "remainingItemCount" not in page["metadata"]
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
        assert pages < 10
    assert names == ["p0", "p2", "p4"]


def test_list_rv_zero_ignores_limit(server: ServerThread) -> None:
    for i in range(4):
        create(server, POD.collection(), POD.obj(f"p{i}"))
    page = get(server, POD.collection(), limit=2, resourceVersion="0")
    assert len(page["items"]) == 4
    assert not page["metadata"].get("continue")


@pytest.mark.parametrize("kind", ALL_KINDS, ids=kind_id)
def test_list_shape(server: ServerThread, kind: Kind) -> None:
    listed = get(server, kind.collection("empty-ns") if kind.namespaced else kind.collection())
    assert listed["kind"] == kind.kind + "List"
    assert listed["apiVersion"] == kind.api_version
    assert isinstance(listed["metadata"]["resourceVersion"], str)
    assert isinstance(listed["items"], list)
    if kind.namespaced:
        assert listed["items"] == []  # never null

    create(server, kind.collection(), kind.obj(name_for(kind)))
    items = [i for i in get(server, kind.collection())["items"]
             if i["metadata"]["name"] == name_for(kind)]
    assert len(items) == 1
    if kind.is_custom:  # CRD lists are unstructured: items keep kind/apiVersion
        assert items[0]["kind"] == kind.kind
        assert items[0]["apiVersion"] == kind.api_version
    else:
        assert "kind" not in items[0]
        assert "apiVersion" not in items[0]


def test_empty_list_with_limit_is_items_empty(server: ServerThread) -> None:
    reply = call(server, "GET", GATEWAY.collection(), params={"limit": 5})
    assert reply.status == 200
    assert b'"items":[]' in reply.body
    assert reply.json["items"] == []


# --- §2.2 PUT -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", [POD, DEPLOYMENT, GATEWAY], ids=kind_id)
def test_put_with_a_stale_resource_version_is_409(server: ServerThread, kind: Kind) -> None:
    created = create(server, kind.collection(), kind.obj("x"))
    ok(call(server, "PATCH", kind.item("x"), {"metadata": {"labels": {"v": "2"}}}))
    before = get(server, kind.item("x"))
    stale = dict(created)
    stale["metadata"] = dict(created["metadata"], labels={"v": "stale"})
    reply = call(server, "PUT", kind.item("x"), stale)
    assert reply.status == 409
    details: dict[str, Any] = {"name": "x", "kind": kind.plural}
    if kind.group:
        details = {"name": "x", "group": kind.group, "kind": kind.plural}
    assert reply.status_object() == status(
        409, "Conflict",
        f'Operation cannot be fulfilled on {kind.group_resource} "x": the object has been '
        "modified; please apply your changes to the latest version and try again", details)
    assert get(server, kind.item("x")) == before


@pytest.mark.parametrize("kind", [k for k in ALL_KINDS if not k.is_custom], ids=kind_id)
def test_put_without_resource_version_is_unconditional_for_builtins(server: ServerThread,
                                                                    kind: Kind) -> None:
    created = create(server, kind.collection(), kind.obj(name_for(kind)))
    body = kind.obj(name_for(kind), labels={"put": "blind"})
    if kind is POD:  # admission gave the pod a token volume, whose removal pod updates refuse
        body["spec"] = created["spec"]
    if kind is JOB:  # a Job's selector and template are generated on create, then immutable
        body["spec"] = created["spec"]
    replaced = ok(call(server, "PUT", kind.item(name_for(kind)), body), 200)
    assert replaced["metadata"]["labels"]["put"] == "blind"
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]
    assert replaced["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert rv_of(replaced) > rv_of(created)


@pytest.mark.parametrize("kind", [GATEWAY, HTTP_ROUTE], ids=kind_id)
def test_put_without_resource_version_is_422_for_custom_kinds(server: ServerThread,
                                                              kind: Kind) -> None:
    create(server, kind.collection(), kind.obj("cr"))
    before = get(server, kind.collection())
    reply = call(server, "PUT", kind.item("cr"), kind.obj("cr", labels={"put": "blind"}))
    assert reply.status == 422
    # store.go Update: GroupKind{Group, Kind: <resource>} — the plural, not the Kind.
    cause = {"reason": "FieldValueInvalid", "message": "Invalid value: 0x0: must be specified "
             "for an update", "field": "metadata.resourceVersion"}
    assert reply.status_object() == status(
        422, "Invalid", f'{kind.group_resource} "cr" is invalid: metadata.resourceVersion: '
        "Invalid value: 0x0: must be specified for an update",
        {"name": "cr", "group": kind.group, "kind": kind.plural, "causes": [cause]})
    assert get(server, kind.collection()) == before


def test_put_creates_a_missing_service_but_not_a_missing_pod(server: ServerThread) -> None:
    reply = call(server, "PUT", SERVICE.item("fresh"), SERVICE.obj("fresh"))
    assert reply.status == 201
    reply = call(server, "PUT", POD.item("fresh"), POD.obj("fresh"))
    assert reply.status == 404
    assert reply.status_object() == status(404, "NotFound", 'pods "fresh" not found',
                                           {"name": "fresh", "kind": "pods"})


def test_put_with_mismatched_name_is_400(server: ServerThread) -> None:
    create(server, POD.collection(), POD.obj("a"))
    reply = call(server, "PUT", POD.item("a"), POD.obj("b"))
    assert reply.status == 400
    assert reply.status_object() == status(
        400, "BadRequest", "the name of the object (b) does not match the name on the URL (a)")


def test_noop_update_keeps_the_revision_and_sends_no_event(server: ServerThread) -> None:
    created = create(server, POD.collection(), POD.obj("same", labels={"a": "b"}))
    with watch(server, POD.collection(), resourceVersion=rv_of(created)) as stream:
        again = ok(call(server, "PATCH", POD.item("same"), {"metadata": {"labels": {"a": "b"}}}))
        assert again == created
        sentinel = create(server, POD.collection(), POD.obj("sentinel"))
        assert rv_of(sentinel) == rv_of(created) + 1
        assert types_and_names([stream.next_event()]) == [("ADDED", "sentinel")]


# --- §2.3 status subresource --------------------------------------------------------------------

def test_status_subresource_changes_only_status(server: ServerThread) -> None:
    created = create(server, POD.collection(), POD.obj("p"))
    body = json.loads(json.dumps(created))
    body["status"] = {"phase": "Running", "podIP": "10.0.0.9"}
    body["spec"]["activeDeadlineSeconds"] = 7  # ignored on /status
    body["metadata"]["labels"] = {"via": "status"}  # metadata is kept for pods
    updated = ok(call(server, "PUT", POD.item("p") + "/status", body), 200)
    assert updated["status"]["phase"] == "Running"
    assert updated["status"]["podIP"] == "10.0.0.9"
    assert "activeDeadlineSeconds" not in updated["spec"]
    assert rv_of(updated) > rv_of(created)

    patched = ok(call(server, "PATCH", POD.item("p") + "/status",
                      {"status": {"phase": "Succeeded"}, "spec": {"nodeName": "ignored"}}), 200)
    assert patched["status"]["phase"] == "Succeeded"
    assert "nodeName" not in patched["spec"]
    assert get(server, POD.item("p") + "/status") == patched


def test_main_endpoint_ignores_status_changes(server: ServerThread) -> None:
    created = create(server, POD.collection(), POD.obj("p"))
    only_status = ok(call(server, "PATCH", POD.item("p"), {"status": {"phase": "Failed"}}), 200)
    assert only_status["status"] == created["status"]
    assert rv_of(only_status) == rv_of(created)  # nothing changed: no write
    mixed = ok(call(server, "PATCH", POD.item("p"),
                    {"status": {"phase": "Failed"}, "metadata": {"labels": {"a": "b"}}}), 200)
    assert mixed["status"] == created["status"]
    assert mixed["metadata"]["labels"] == {"a": "b"}


def test_custom_kind_status_subresource(server: ServerThread) -> None:
    created = create(server, GATEWAY.collection(), GATEWAY.obj("gw"))
    status_body = {"status": {"addresses": [{"type": "IPAddress", "value": "10.1.1.1"}]}}
    patched = ok(call(server, "PATCH", GATEWAY.item("gw") + "/status", status_body), 200)
    assert patched["status"]["addresses"] == [{"type": "IPAddress", "value": "10.1.1.1"}]
    assert patched["spec"] == created["spec"]
    assert patched["metadata"]["generation"] == 1
    ignored = ok(call(server, "PATCH", GATEWAY.item("gw"),
                      {"status": {"addresses": [{"type": "IPAddress", "value": "10.9.9.9"}]}}))
    assert ignored["status"] == patched["status"]


# --- §1.10, §1.12, §1.13 deletes ----------------------------------------------------------------

@pytest.mark.parametrize("kind", [POD, DEPLOYMENT], ids=kind_id)
def test_delete_preconditions_are_409(server: ServerThread, kind: Kind) -> None:
    created = create(server, kind.collection(), kind.obj("x"))
    uid, rv = created["metadata"]["uid"], created["metadata"]["resourceVersion"]
    # rest/delete.go BeforeDelete: GroupResource{Group, Resource: <Kind>} — the Kind this time.
    details = {"name": "x", "kind": kind.kind} | ({"group": kind.group} if kind.group else {})
    details = {k: details[k] for k in ("name", "group", "kind") if k in details}
    reply = call(server, "DELETE", kind.item("x"), {"preconditions": {"uid": "wrong"}})
    assert reply.status == 409
    assert reply.status_object() == status(
        409, "Conflict", f'Operation cannot be fulfilled on {kind.group_kind} "x": the UID in '
        f"the precondition (wrong) does not match the UID in record ({uid}). The object might "
        "have been deleted and then recreated", details)
    reply = call(server, "DELETE", kind.item("x"), {"preconditions": {"resourceVersion": "1"}})
    assert reply.status == 409
    assert reply.status_object() == status(
        409, "Conflict", f'Operation cannot be fulfilled on {kind.group_kind} "x": the '
        f"ResourceVersion in the precondition (1) does not match the ResourceVersion in record "
        f"({rv}). The object might have been modified", details)
    assert get(server, kind.item("x")) == created
    ok(call(server, "DELETE", kind.item("x"),
            {"preconditions": {"uid": uid, "resourceVersion": rv}}), 200)
    assert call(server, "GET", kind.item("x")).status == 404


@pytest.mark.parametrize("kind", [DEPLOYMENT, GATEWAY], ids=kind_id)
def test_delete_answers_a_success_status_for_kinds_without_return_deleted_object(
        server: ServerThread, kind: Kind) -> None:
    created = create(server, kind.collection(), kind.obj("x"))
    reply = ok(call(server, "DELETE", kind.item("x")), 200)
    assert reply == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                     "details": {"name": "x", "group": kind.group, "kind": kind.plural,
                                 "uid": created["metadata"]["uid"]}}


def test_deleting_a_service_account_answers_the_deleted_object(server: ServerThread) -> None:
    """kube's serviceaccount storage sets ReturnDeletedObject (its OpenAPI delete answers a
    ServiceAccount), so the answer is the object as it was removed, not a Success Status."""
    created = create(server, SERVICE_ACCOUNT.collection(), SERVICE_ACCOUNT.obj("gone"))
    reply = ok(call(server, "DELETE", SERVICE_ACCOUNT.item("gone")), 200)
    assert reply["kind"] == "ServiceAccount"
    assert reply["metadata"]["uid"] == created["metadata"]["uid"]
    assert call(server, "GET", SERVICE_ACCOUNT.item("gone")).status == 404


def test_delete_missing_object_is_404(server: ServerThread) -> None:
    reply = call(server, "DELETE", DEPLOYMENT.item("ghost"))
    assert reply.status == 404
    assert reply.status_object() == status(404, "NotFound", 'deployments.apps "ghost" not found',
                                           {"name": "ghost", "group": "apps",
                                            "kind": "deployments"})


@pytest.mark.parametrize("kind", [SERVICE, DEPLOYMENT], ids=kind_id)
def test_finalizers_hold_the_object_until_removed(server: ServerThread, kind: Kind) -> None:
    created = create(server, kind.collection(),
                     kind.obj("held", finalizers=["example.com/hold"]))
    with watch(server, kind.collection(), resourceVersion=rv_of(created)) as stream:
        marked = ok(call(server, "DELETE", kind.item("held")), 200)
        assert marked["metadata"]["deletionTimestamp"]
        assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
        if "generation" in created["metadata"]:
            assert marked["metadata"]["generation"] == created["metadata"]["generation"] + 1
        event = stream.next_event()
        assert event["type"] == "MODIFIED"
        assert event["object"]["metadata"]["deletionTimestamp"]
        still = get(server, kind.item("held"))
        assert still["metadata"]["finalizers"] == ["example.com/hold"]

        again = ok(call(server, "DELETE", kind.item("held")), 200)  # pending: nothing changes
        assert rv_of(again) == rv_of(still)

        ok(call(server, "PATCH", kind.item("held"),
                [{"op": "remove", "path": "/metadata/finalizers"}]), 200)
        # store.go Update: emptied finalizers on a marked object → errEmptiedFinalizers →
        # deleteWithoutFinalizers: the update is never written, only the removal (one DELETED).
        event = stream.next_event()
        assert types_and_names([event]) == [("DELETED", "held")]
    assert call(server, "GET", kind.item("held")).status == 404


def test_unscheduled_pod_is_deleted_at_once(server: ServerThread) -> None:
    created = create(server, POD.collection(), POD.obj("free"))
    with watch(server, POD.collection(), resourceVersion=rv_of(created)) as stream:
        ok(call(server, "DELETE", POD.item("free")), 200)
        assert call(server, "GET", POD.item("free")).status == 404  # gone when DELETE returns
        marked, deleted = stream.events(2)
    # kube writes the grace-0 mark and removes it in the same request (store.go).
    assert (marked["type"], deleted["type"]) == ("MODIFIED", "DELETED")
    assert marked["object"]["metadata"]["deletionGracePeriodSeconds"] == 0


def test_scheduled_pod_is_deleted_gracefully(make_server: Callable[..., ServerThread]) -> None:
    server = make_server(pod_grace_cap_s=0.3)
    body = POD.obj("bound")
    body["spec"]["nodeName"] = "node-1"
    created = create(server, POD.collection(), body)
    with watch(server, POD.collection(), resourceVersion=rv_of(created)) as stream:
        answer = ok(call(server, "DELETE", POD.item("bound")), 200)
        assert answer["kind"] == "Pod"
        assert answer["metadata"]["deletionGracePeriodSeconds"] == 30  # the default grace
        assert answer["metadata"]["deletionTimestamp"] > created["metadata"]["creationTimestamp"]
        marked = stream.next_event()
        assert marked["type"] == "MODIFIED"
        assert marked["object"]["metadata"]["deletionGracePeriodSeconds"] == 30
        deleted = stream.next_event(timeout=15)
        assert deleted["type"] == "DELETED"
        assert rv_of(deleted) > rv_of(marked)
    assert call(server, "GET", POD.item("bound")).status == 404


def test_a_simulated_nodes_pods_are_left_to_its_kubelet(
        make_server: Callable[..., ServerThread]) -> None:
    """The server's pod-termination stand-in finishes graceful deletions only where no
    simulated kubelet runs: a pod on a ``kubewire://`` node stays Terminating for that node's
    kubelet (none runs here), while a pod on any other node is removed when its grace ends."""
    server = make_server(pod_grace_cap_s=0.2)
    create(server, "/api/v1/nodes", {"metadata": {"name": "sim-1"},
                                     "spec": {"providerID": "kubewire://sim-1"}})
    for name, node in (("on-sim", "sim-1"), ("on-other", "node-1")):
        body = POD.obj(name)
        body["spec"]["nodeName"] = node
        create(server, POD.collection(), body)
        ok(call(server, "DELETE", POD.item(name)), 200)
    deadline = time.monotonic() + 15
    while call(server, "GET", POD.item("on-other")).status != 404:
        assert time.monotonic() < deadline, "the other node's pod was never removed"
        time.sleep(0.05)
    time.sleep(0.5)
    left = ok(call(server, "GET", POD.item("on-sim")), 200)
    assert left["metadata"]["deletionTimestamp"]


def test_scheduled_pod_with_grace_zero_is_deleted_at_once(server: ServerThread) -> None:
    body = POD.obj("bound")
    body["spec"]["nodeName"] = "node-1"
    create(server, POD.collection(), body)
    ok(call(server, "DELETE", POD.item("bound"), {"gracePeriodSeconds": 0}), 200)
    assert call(server, "GET", POD.item("bound")).status == 404


def test_deletecollection_with_a_label_selector(server: ServerThread) -> None:
    for name, app in (("s1", "x"), ("s2", "x"), ("s3", "y")):
        create(server, SERVICE.collection(), SERVICE.obj(name, labels={"app": app}))
    rv = list_rv(server, SERVICE.collection())
    with watch(server, SERVICE.collection(), resourceVersion=rv) as stream:
        reply = ok(call(server, "DELETE", SERVICE.collection(),
                        params={"labelSelector": "app=x"}), 200)
        events = stream.events(2)
    assert reply["kind"] == "ServiceList"
    assert [i["metadata"]["name"] for i in reply["items"]] == ["s1", "s2"]
    assert types_and_names(events) == [("DELETED", "s1"), ("DELETED", "s2")]
    assert [i["metadata"]["name"] for i in get(server, SERVICE.collection())["items"]] == [
        "kubernetes", "s3"]  # default's own kubernetes Service stays


def test_deletecollection_answers_the_listed_items_for_every_kind(server: ServerThread) -> None:
    # Deployments answer a single DELETE with a Status; deletecollection still answers the list
    # of what it processed, as listed before the deletes (store.go DeleteCollection).
    before = [create(server, DEPLOYMENT.collection(), DEPLOYMENT.obj(n)) for n in ("d1", "d2")]
    reply = ok(call(server, "DELETE", DEPLOYMENT.collection()), 200)
    assert reply["kind"] == "DeploymentList" and reply["apiVersion"] == "apps/v1"
    expected = [{k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
                for obj in before]
    assert reply["items"] == expected
    assert get(server, DEPLOYMENT.collection())["items"] == []


# --- §1.8, §1.9 namespaces ----------------------------------------------------------------------

def test_system_namespaces_exist(server: ServerThread) -> None:
    listed = get(server, NAMESPACE.collection())
    names = [i["metadata"]["name"] for i in listed["items"]]
    assert names == sorted(names)
    for name in ("default", "kube-node-lease", "kube-public", "kube-system"):
        assert name in names
        ns = get(server, NAMESPACE.item(name))
        assert ns["status"]["phase"] == "Active"
        assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == name
        assert ns["spec"]["finalizers"] == ["kubernetes"]


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
def test_immortal_namespaces_cannot_be_deleted(server: ServerThread, name: str) -> None:
    before = get(server, NAMESPACE.item(name))
    reply = call(server, "DELETE", NAMESPACE.item(name))
    assert reply.status == 403
    assert reply.status_object() == status(
        403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted',
        {"name": name, "kind": "namespaces"})
    assert get(server, NAMESPACE.item(name)) == before


def test_deleting_a_namespace_empties_it_then_removes_it(server: ServerThread) -> None:
    create(server, NAMESPACE.collection(), NAMESPACE.obj("doomed"))
    create(server, POD.collection("doomed"), POD.obj("p"))
    create(server, SERVICE.collection("doomed"), SERVICE.obj("s"))
    held = create(server, SERVICE.collection("doomed"),
                  SERVICE.obj("held", finalizers=["example.com/hold"]))
    create(server, POD.collection(), POD.obj("bystander"))
    rv = list_rv(server, NAMESPACE.collection())
    with watch(server, NAMESPACE.collection(), resourceVersion=rv,
               fieldSelector="metadata.name=doomed") as namespaces, \
            watch(server, POD.collection(None), resourceVersion=rv) as pods, \
            watch(server, SERVICE.collection(None), resourceVersion=rv) as services:
        answer = ok(call(server, "DELETE", NAMESPACE.item("doomed")), 200)
        assert answer["kind"] == "Namespace"
        assert answer["status"]["phase"] == "Terminating"
        assert answer["metadata"]["deletionTimestamp"]
        terminating = namespaces.next_event()
        assert terminating["type"] == "MODIFIED"
        assert terminating["object"]["status"]["phase"] == "Terminating"

        pod_events = pods.events_until(lambda e: e["type"] == "DELETED")
        assert {(e["object"]["metadata"]["namespace"], name_of(e)) for e in pod_events} == {
            ("doomed", "p")}
        service_events = services.events(2)
        assert sorted(types_and_names(service_events)) == [
            ("DELETED", "s"), ("MODIFIED", "held")]
        # Held by its finalizer, the namespace stays Terminating and refuses new content.
        late = call(server, "POST", POD.collection("doomed"), POD.obj("late"))
        assert late.status == 403
        assert late.status_object() == status(
            403, "Forbidden", 'pods "late" is forbidden: unable to create new content in '
            "namespace doomed because it is being terminated",
            {"name": "late", "kind": "pods", "causes": [
                {"reason": "NamespaceTerminating", "message": "namespace doomed is being "
                 "terminated", "field": "metadata.namespace"}]})

        ok(call(server, "PATCH", SERVICE.item("held", "doomed"),
                [{"op": "remove", "path": "/metadata/finalizers"}]), 200)
        # (That this is a single DELETED is test_finalizers_hold_the_object_until_removed's job.)
        removed = services.events_until(lambda e: e["type"] == "DELETED")
        assert name_of(removed[-1]) == "held"
        last = namespaces.events_until(lambda e: e["type"] == "DELETED", timeout=15)
        assert all(e["type"] == "MODIFIED" for e in last[:-1])
        assert rv_of(last[-1]) > rv_of(held)
    wait_for(lambda: call(server, "GET", NAMESPACE.item("doomed")).status == 404)
    assert get(server, POD.item("bystander"))["metadata"]["name"] == "bystander"
