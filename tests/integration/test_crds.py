"""CustomResourceDefinitions end to end: a CRD applied at run time becomes a served kind.

kubectl (apply, wait, get with the CRD's columns, scale, delete) and plain HTTP against the real
server; expectations from kube-apiserver v1.32 (crds.md §9's checklist, cited by item).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, get, ok, types_and_names, wait_for, watch

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
CRD_NAME = "widgets.example.com"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                  "shortNames": ["wd"], "categories": ["all"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}, "scale": {
                "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                "labelSelectorPath": ".status.selector"}},
            "additionalPrinterColumns": [
                {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "x-kubernetes-validations": [
                            {"rule": "self.replicas <= 10", "message": "too many replicas"}],
                        "properties": {
                            "color": {"type": "string", "default": "blue",
                                      "enum": ["blue", "red", "green"]},
                            "replicas": {"type": "integer", "minimum": 0}}},
                    "status": {"type": "object", "properties": {
                        "replicas": {"type": "integer"}, "selector": {"type": "string"}}}}}},
        }],
    },
}


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name}, "spec": {"replicas": 1, **spec}}


def install(server: ServerThread, crd: dict[str, Any] = WIDGET_CRD) -> dict[str, Any]:
    create(server, CRDS, crd)
    return established(server, crd["metadata"]["name"])


def established(server: ServerThread, name: str) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        found: dict[str, Any] = get(server, f"{CRDS}/{name}")
        conditions = {c["type"]: c for c in found.get("status", {}).get("conditions") or ()}
        ok_ = conditions.get("Established", {}).get("status") == "True"
        return found if ok_ else None

    found: dict[str, Any] = wait_for(ready, 10, "the CRD to be established")
    return found


def test_a_new_crd_is_accepted_established_and_served(server: ServerThread) -> None:
    """§9.8: conditions NamesAccepted NoConflicts and Established InitialNamesAccepted,
    storedVersions the storage version; §9.11: discovery lists the kind and subresources."""
    crd = install(server)
    conditions = {c["type"]: c for c in crd["status"]["conditions"]}
    assert conditions["NamesAccepted"]["reason"] == "NoConflicts"
    assert conditions["NamesAccepted"]["message"] == "no conflicts found"
    assert conditions["Established"]["reason"] == "InitialNamesAccepted"
    assert crd["status"]["storedVersions"] == ["v1"]
    assert crd["status"]["acceptedNames"]["kind"] == "Widget"
    resources = get(server, "/apis/example.com/v1")["resources"]
    by_name = {r["name"]: r for r in resources}
    assert by_name["widgets"]["verbs"] == ["delete", "deletecollection", "get", "list", "patch",
                                           "create", "update", "watch"]
    assert by_name["widgets"]["shortNames"] == ["wd"]
    assert by_name["widgets"]["categories"] == ["all"]
    assert by_name["widgets/scale"]["kind"] == "Scale"
    assert by_name["widgets/status"]["kind"] == "Widget"
    groups = [g["name"] for g in get(server, "/apis")["groups"]]
    assert "example.com" in groups


def test_custom_resources_are_defaulted_validated_and_watched(server: ServerThread) -> None:
    install(server)
    stream = watch(server, WIDGETS)
    created = create(server, WIDGETS, widget("w1"))
    assert created["spec"]["color"] == "blue"  # §9.18: the schema's default
    assert created["metadata"]["generation"] == 1
    bad = call(server, "POST", WIDGETS, widget("w2", replicas=11))
    assert bad.status == 422
    assert bad.status_object()["message"] == \
        'Widget.example.com "w2" is invalid: spec: Invalid value: "object": too many replicas'
    enum = call(server, "POST", WIDGETS, widget("w3", color="pink"))
    assert enum.status == 422
    assert 'spec.color: Unsupported value: "pink": supported values: "blue", "green", "red"' \
        in enum.status_object()["message"] or "spec.color: Unsupported value" in \
        enum.status_object()["message"]
    patched = ok(call(server, "PATCH", f"{WIDGETS}/w1", {"spec": {"color": "red"}}), 200)
    assert patched["spec"]["color"] == "red" and patched["metadata"]["generation"] == 2
    events = [stream.next_event(10) for _ in range(2)]
    assert types_and_names(events) == [("ADDED", "w1"), ("MODIFIED", "w1")]
    stream.close()


def test_unknown_fields_warn_strict_rejects_and_strategic_merge_is_unsupported(
        server: ServerThread) -> None:
    """§9.15-17."""
    install(server)
    body = widget("w1")
    body["spec"]["foo"] = 1
    reply = call(server, "POST", WIDGETS, body)
    assert reply.status == 201
    assert reply.headers.get("warning") == '299 - "unknown field \\"spec.foo\\""'
    assert "foo" not in reply.json["spec"]
    body["metadata"]["name"] = "w2"
    strict = call(server, "POST", WIDGETS, body, params={"fieldValidation": "Strict"})
    assert strict.status == 400
    assert strict.status_object()["message"] == (
        'Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
        'unknown field "spec.foo"')
    smp = call(server, "PATCH", f"{WIDGETS}/w1", {"spec": {"color": "red"}},
               headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert smp.status == 415


def test_status_and_scale_subresources(server: ServerThread) -> None:
    """§9.28-30: status dropped on create, generation only for spec; Scale from the paths."""
    install(server)
    body = widget("w1", replicas=2)
    body["status"] = {"replicas": 5}
    created = create(server, WIDGETS, body)
    assert "status" not in created
    status = ok(call(server, "PUT", f"{WIDGETS}/w1/status",
                     {**created, "status": {"replicas": 2, "selector": "app=w"}}), 200)
    assert status["status"] == {"replicas": 2, "selector": "app=w"}
    assert status["metadata"]["generation"] == 1
    scale = get(server, f"{WIDGETS}/w1/scale")
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "app=w"}
    scaled = ok(call(server, "PATCH", f"{WIDGETS}/w1/scale", {"spec": {"replicas": 4}}), 200)
    assert scaled["spec"] == {"replicas": 4}
    after = get(server, f"{WIDGETS}/w1")
    assert after["spec"]["replicas"] == 4 and after["metadata"]["generation"] == 2


def test_kubectl_end_to_end(server: ServerThread, tmp_path: Path) -> None:
    """The issue's kubectl session: apply, wait, get (the CRD's columns), scale, delete."""
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(yaml.safe_dump(WIDGET_CRD))
    kubectl.ok(server, "apply", "-f", str(crd_file))
    kubectl.ok(server, "wait", "--for", "condition=established", "--timeout=20s",
               f"crd/{CRD_NAME}")
    cr_file = tmp_path / "w.yaml"
    cr_file.write_text(yaml.safe_dump(widget("w1", replicas=2)))
    kubectl.ok(server, "apply", "-f", str(cr_file))
    table = kubectl.ok(server, "get", "wd")
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "COLOR", "REPLICAS", "AGE"]
    assert row.split()[:3] == ["w1", "blue", "2"]
    kubectl.ok(server, "scale", "widget/w1", "--replicas=3")
    assert json.loads(kubectl.ok(server, "get", "widget", "w1", "-o", "json"))["spec"][
        "replicas"] == 3
    kubectl.ok(server, "delete", "crd", CRD_NAME, "--wait=true", "--timeout=30s")
    assert call(server, "GET", f"{CRDS}/{CRD_NAME}").status == 404
    assert call(server, "GET", WIDGETS).status == 404


def test_deleting_the_crd_deletes_its_resources_then_itself(server: ServerThread) -> None:
    """§9.36: 200 with the CRD, Terminating; CR creates 405; watchers see DELETED."""
    install(server)
    create(server, WIDGETS, widget("w1"))
    create(server, WIDGETS, widget("w2"))
    stream = watch(server, WIDGETS)
    first = [stream.next_event(10) for _ in range(2)]
    assert sorted(types_and_names(first)) == [("ADDED", "w1"), ("ADDED", "w2")]
    reply = ok(call(server, "DELETE", f"{CRDS}/{CRD_NAME}"), 200)
    assert reply["kind"] == "CustomResourceDefinition"
    assert "customresourcecleanup.apiextensions.k8s.io" in reply["metadata"]["finalizers"]
    deleted = [stream.next_event(10) for _ in range(2)]
    assert sorted(types_and_names(deleted)) == [("DELETED", "w1"), ("DELETED", "w2")]
    wait_for(lambda: call(server, "GET", f"{CRDS}/{CRD_NAME}").status == 404, 10,
             "the CRD to go")
    wait_for(lambda: call(server, "GET", "/apis/example.com/v1").status == 404, 10,
             "the group to leave discovery")
    assert stream.ended(10)  # kube destroys the storage: the stream just finishes
    stream.close()


def test_custom_resources_survive_a_restart(server: ServerThread) -> None:
    install(server)
    create(server, WIDGETS, widget("w1"))
    server.restart()
    assert get(server, f"{WIDGETS}/w1")["spec"]["color"] == "blue"
    stream = watch(server, WIDGETS, resourceVersion="0")
    assert types_and_names([stream.next_event(10)]) == [("ADDED", "w1")]
    stream.close()


def test_a_crd_overlapping_a_built_in_kind_leaves_the_built_in_served(
        server: ServerThread) -> None:
    """An approved CRD in a k8s.io group may name a built-in resource: kube establishes it, its
    built-in handlers keep answering the paths, and deleting the CRD deletes no built-in
    object (Terminating=False OverlappingBuiltInResource)."""
    overlapping = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "leases.coordination.k8s.io",
                     "annotations": {"api-approved.kubernetes.io": "unapproved, testing"}},
        "spec": {"group": "coordination.k8s.io", "scope": "Namespaced",
                 "names": {"plural": "leases", "singular": "lease", "kind": "Lease"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]}}
    leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    create(server, leases, {"metadata": {"name": "l1"}, "spec": {"holderIdentity": "me"}})
    install(server, overlapping)
    assert get(server, f"{leases}/l1")["spec"]["holderIdentity"] == "me"
    bad = call(server, "POST", leases, {"metadata": {"name": "l2"},
                                        "spec": {"leaseDurationSeconds": "x"}})
    assert bad.status == 400  # the built-in kind's Go decode, not the CRD's open schema
    ok(call(server, "DELETE", f"{CRDS}/leases.coordination.k8s.io"), 200)
    wait_for(lambda: call(server, "GET", f"{CRDS}/leases.coordination.k8s.io").status == 404,
             10, "the CRD to go")
    assert get(server, f"{leases}/l1")["spec"]["holderIdentity"] == "me"


def test_crd_status_writes_are_validated_by_the_status_strategy_only(
        server: ServerThread) -> None:
    """§2.1: a CRD's ``/status`` update runs ``ValidateUpdateCustomResourceDefinitionStatus``,
    which checks only ``status.acceptedNames``; storedVersions is checked on main-resource
    writes (``ValidateCustomResourceDefinitionStoredVersions``), not here."""
    crd = install(server)
    odd = {**crd, "status": {**crd["status"], "storedVersions": ["v1", "v9"]}}
    written = ok(call(server, "PUT", f"{CRDS}/{CRD_NAME}/status", odd), 200)
    assert written["status"]["storedVersions"] == ["v1", "v9"]
    main = call(server, "PUT", f"{CRDS}/{CRD_NAME}", written)
    assert main.status == 422
    assert 'status.storedVersions[1]: Invalid value: "v9": must appear in spec.versions' in \
        main.status_object()["message"]
    names = {**written["status"]["acceptedNames"], "kind": "not a kind"}
    bad = call(server, "PUT", f"{CRDS}/{CRD_NAME}/status",
               {**written, "status": {**written["status"], "acceptedNames": names}})
    assert bad.status == 422
    assert "status.acceptedNames.kind" in bad.status_object()["message"]
