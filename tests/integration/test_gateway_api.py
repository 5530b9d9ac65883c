"""The Gateway API v1.2.1 standard channel, served from the CRDs every server pre-installs
(``server/controllers/preinstalled_crds.py``), as a cluster with ``standard-install.yaml``
applied serves it: the five CRDs established before ``start()`` returns, every kind's CRUD and
watch, the CRDs' CEL rules with upstream's messages, ``kubectl get`` columns from their printer
columns, ``kubectl apply`` of upstream's files over them, and the rule for a user's delete.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubewire.server.apiextensions.crd.gateway_crds import gateway_crds
from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl
from tests.integration.wire import call, create, get, ok, types_and_names, wait_for, watch

GROUP = "gateway.networking.k8s.io"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
V1 = f"/apis/{GROUP}/v1"
NS = f"{V1}/namespaces/default"
NAMES = [f"{plural}.{GROUP}" for plural in
         ("gatewayclasses", "gateways", "grpcroutes", "httproutes", "referencegrants")]
SHARED = Path("/work/shared/openapi/gateway-api-v1.2.1/standard")  # three of upstream's files
UNCHECKED_RULES = ("some validation rules were not checked because the object was invalid; "
                   "correct the existing errors to complete validation")


def conditions(crd: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in crd["status"].get("conditions") or ()}


def causes(reply: Any) -> list[tuple[str, str, str]]:
    assert reply.status == 422, reply.body
    return [(c["reason"], c["field"], c["message"])
            for c in reply.json["details"]["causes"]]


# --- installed at start ----------------------------------------------------------------------

def test_the_standard_channel_is_established_when_start_returns(server: ServerThread) -> None:
    crds = {c["metadata"]["name"]: c for c in get(server, CRDS)["items"]}
    assert sorted(crds) == NAMES
    for name in NAMES:
        crd = crds[name]
        assert conditions(crd) == {"NamesAccepted": "True", "Established": "True"}, name
        annotations = crd["metadata"]["annotations"]
        assert annotations["gateway.networking.k8s.io/bundle-version"] == "v1.2.1"
        assert annotations["gateway.networking.k8s.io/channel"] == "standard"
        assert crd["metadata"]["generation"] == 1
        assert [m["manager"] for m in crd["metadata"]["managedFields"]] == [
            "kube-apiserver", "kube-apiserver"]  # the create, then the controllers' status
    stored = {name: crds[name]["status"]["storedVersions"] for name in NAMES}
    assert stored == {NAMES[0]: ["v1"], NAMES[1]: ["v1"], NAMES[2]: ["v1"], NAMES[3]: ["v1"],
                      NAMES[4]: ["v1beta1"]}
    # discovery as a cluster with the CRDs serves it
    group = get(server, f"/apis/{GROUP}")
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    assert group["preferredVersion"]["version"] == "v1"
    v1 = {r["name"]: r for r in get(server, V1)["resources"]}
    assert sorted(v1) == ["gatewayclasses", "gatewayclasses/status", "gateways",
                          "gateways/status", "grpcroutes", "grpcroutes/status", "httproutes",
                          "httproutes/status"]
    assert v1["gateways"]["shortNames"] == ["gtw"]
    assert v1["gateways"]["categories"] == ["gateway-api"]
    beta = {r["name"] for r in get(server, f"/apis/{GROUP}/v1beta1")["resources"]}
    assert "referencegrants" in beta and "grpcroutes" not in beta


def test_a_restart_keeps_the_crds_and_their_objects(make_server: Any) -> None:
    server = make_server()
    create(server, f"{V1}/gatewayclasses", gateway_class("kept"))
    before = {c["metadata"]["name"]: c["metadata"]["uid"] for c in get(server, CRDS)["items"]}
    server.restart()
    after = {c["metadata"]["name"]: c["metadata"]["uid"] for c in get(server, CRDS)["items"]}
    assert after == before  # the same CRDs, not made again
    assert get(server, f"{V1}/gatewayclasses/kept")["spec"]["controllerName"] == \
        "example.com/gateway-controller"


# --- the user's changes ------------------------------------------------------------------------

def test_a_deleted_crd_stays_deleted_until_the_next_start(make_server: Any) -> None:
    """The rule: kubewire never re-creates a pre-installed CRD behind the user's back while it
    runs; a server started on the data directory installs whatever is absent."""
    server = make_server()
    name = f"referencegrants.{GROUP}"
    create(server, f"/apis/{GROUP}/v1beta1/namespaces/default/referencegrants",
           reference_grant("rg"))
    ok(call(server, "DELETE", f"{CRDS}/{name}"))
    wait_for(lambda: call(server, "GET", f"{CRDS}/{name}").status == 404, 10,
             "the CRD to be deleted")
    wait_for(lambda: server.call(lambda: server.server.controllers.idle), 10, "idle")
    assert call(server, "GET", f"{CRDS}/{name}").status == 404
    assert call(server, "GET", f"/apis/{GROUP}/v1beta1/namespaces/default/referencegrants"
                ).status == 404
    server.restart()
    crd = get(server, f"{CRDS}/{name}")
    assert conditions(crd)["Established"] == "True"
    assert get(server, f"/apis/{GROUP}/v1beta1/namespaces/default/referencegrants")[
        "items"] == []  # deleted with the CRD, as kube's finalizer deletes them


def test_a_users_change_to_a_crd_is_kept_across_restarts(make_server: Any) -> None:
    server = make_server()
    name = f"httproutes.{GROUP}"
    patch = {"metadata": {"labels": {"owner": "me"}}}
    ok(call(server, "PATCH", f"{CRDS}/{name}", patch,
            {"Content-Type": "application/merge-patch+json"}))
    server.restart()
    assert get(server, f"{CRDS}/{name}")["metadata"]["labels"] == {"owner": "me"}


def test_a_pre_installed_crd_whose_names_are_taken_does_not_hold_up_the_start(
        make_server: Any) -> None:
    """A user's CRD that took HTTPRoute's kind (and list kind): the re-created upstream CRD is
    not accepted (kube's naming controller reports the last conflict it finds,
    ``ListKindConflict``), and the server starts at once."""
    server = make_server()
    ok(call(server, "DELETE", f"{CRDS}/httproutes.{GROUP}"))
    wait_for(lambda: call(server, "GET", f"{CRDS}/httproutes.{GROUP}").status == 404, 10,
             "the CRD to be deleted")
    mine = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"myroutes.{GROUP}", "annotations": {  # a *.k8s.io group
                "api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/1111"}},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": "myroutes", "kind": "HTTPRoute"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                         "openAPIV3Schema": {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}
    create(server, CRDS, mine)
    wait_for(lambda: conditions(get(server, f"{CRDS}/myroutes.{GROUP}")).get("Established")
             == "True", 10, "the user's CRD to be established")
    started = time.monotonic()
    server.restart()
    assert time.monotonic() - started < 5  # settled() does not wait for what cannot come
    upstream = get(server, f"{CRDS}/httproutes.{GROUP}")
    names = {c["type"]: c for c in upstream["status"]["conditions"]}["NamesAccepted"]
    assert (names["status"], names["reason"]) == ("False", "ListKindConflict")
    assert call(server, "GET", f"{NS}/httproutes").status == 404
    assert get(server, f"{NS}/myroutes")["items"] == []


# --- the other kinds of the standard channel ---------------------------------------------------

def gateway_class(name: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "GatewayClass", "metadata": {"name": name},
            "spec": {"controllerName": "example.com/gateway-controller"}}


def grpc_route(name: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "GRPCRoute", "metadata": {"name": name},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["grpc.example.com"],
                     "rules": [{"matches": [{"method": {"service": "echo.Echo"}}],
                                "backendRefs": [{"name": "echo", "port": 9000}]}]}}


def reference_grant(name: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": name},
            "spec": {"from": [{"group": GROUP, "kind": "HTTPRoute", "namespace": "other"}],
                     "to": [{"group": "", "kind": "Service"}]}}


ACCEPTED = [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok",
             "lastTransitionTime": "2025-01-01T00:00:00Z"}]
# (collection, object maker, a spec change, a status or None without the status subresource)
KINDS = [
    (f"{V1}/gatewayclasses", gateway_class, {"spec": {"description": "changed"}},
     {"conditions": ACCEPTED}),
    (f"{NS}/grpcroutes", grpc_route, {"spec": {"hostnames": ["changed.example.com"]}},
     {"parents": [{"parentRef": {"name": "gw", "group": GROUP, "kind": "Gateway"},
                   "controllerName": "example.com/c",
                   "conditions": ACCEPTED}]}),
    (f"/apis/{GROUP}/v1beta1/namespaces/default/referencegrants", reference_grant,
     {"spec": {"to": [{"group": "", "kind": "Secret"}]}}, None),
]


@pytest.mark.parametrize(("collection", "make", "change", "status"), KINDS,
                         ids=["GatewayClass", "GRPCRoute", "ReferenceGrant"])
def test_crud_and_watch(server: ServerThread, collection: str, make: Any,
                        change: dict[str, Any], status: dict[str, Any] | None) -> None:
    start = get(server, collection)["metadata"]["resourceVersion"]
    with watch(server, collection, resourceVersion=start) as stream:
        created = create(server, collection, make("one"))
        assert created["metadata"]["generation"] == 1 and created["metadata"]["uid"]
        item = f"{collection}/one"
        assert get(server, item)["metadata"]["uid"] == created["metadata"]["uid"]
        assert [o["metadata"]["name"] for o in get(server, collection)["items"]] == ["one"]
        patched = ok(call(server, "PATCH", item, change,
                          {"Content-Type": "application/merge-patch+json"}))
        assert patched["metadata"]["generation"] == 2
        assert patched["spec"] == {**created["spec"], **change["spec"]}
        written = call(server, "PATCH", f"{item}/status", {"status": status},
                       {"Content-Type": "application/merge-patch+json"})
        if status is None:
            assert written.status == 404  # ReferenceGrant has no status subresource
        else:
            assert ok(written)["status"] == status
            assert written.json["metadata"]["generation"] == 2
        smp = call(server, "PATCH", item, {}, {"Content-Type":
                                               "application/strategic-merge-patch+json"})
        assert smp.status == 415  # custom resources take no strategic merge patch
        ok(call(server, "DELETE", item))
        assert call(server, "GET", item).status == 404
        events = stream.events(4 if status else 3)
    assert types_and_names(events) == [("ADDED", "one"), ("MODIFIED", "one"),
                                       *([("MODIFIED", "one")] if status else []),
                                       ("DELETED", "one")]


def test_gateway_class_status_is_defaulted_as_upstream(server: ServerThread) -> None:
    created = create(server, f"{V1}/gatewayclasses", gateway_class("gc"))
    assert created["status"] == {"conditions": [{
        "lastTransitionTime": "1970-01-01T00:00:00Z", "message": "Waiting for controller",
        "reason": "Pending", "status": "Unknown", "type": "Accepted"}]}
    # served at both versions, stored once
    beta = get(server, f"/apis/{GROUP}/v1beta1/gatewayclasses/gc")
    assert beta["apiVersion"] == f"{GROUP}/v1beta1"
    assert beta["metadata"]["uid"] == created["metadata"]["uid"]


# --- CEL rules of the CRDs ---------------------------------------------------------------------

def test_a_gateway_cel_rule_rejects_with_upstreams_message(server: ServerThread) -> None:
    gateway = {"apiVersion": f"{GROUP}/v1", "kind": "Gateway", "metadata": {"name": "gw"},
               "spec": {"gatewayClassName": "example", "listeners": [
                   {"name": "http", "port": 80, "protocol": "HTTP",
                    "tls": {"certificateRefs": [{"name": "cert"}]}}]}}
    reply = call(server, "POST", f"{NS}/gateways", gateway)
    assert causes(reply) == [(
        "FieldValueInvalid", "spec.listeners",
        "Invalid value: \"array\": tls must not be specified for protocols "
        "['HTTP', 'TCP', 'UDP']")]
    assert reply.json["message"] == (
        'Gateway.gateway.networking.k8s.io "gw" is invalid: spec.listeners: Invalid value: '
        "\"array\": tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']")
    assert call(server, "GET", f"{NS}/gateways/gw").status == 404


def test_a_transition_rule_keeps_the_controller_name(server: ServerThread) -> None:
    create(server, f"{V1}/gatewayclasses", gateway_class("fixed"))
    reply = call(server, "PATCH", f"{V1}/gatewayclasses/fixed",
                 {"spec": {"controllerName": "example.com/other"}},
                 {"Content-Type": "application/merge-patch+json"})
    assert causes(reply) == [("FieldValueInvalid", "spec.controllerName",
                              'Invalid value: "string": Value is immutable')]


def test_a_blocking_schema_error_leaves_the_rules_unchecked(server: ServerThread) -> None:
    route = grpc_route("bad")
    route["spec"]["hostnames"] = "not-a-list"
    assert causes(call(server, "POST", f"{NS}/grpcroutes", route)) == [
        ("FieldValueTypeInvalid", "spec.hostnames",
         'Invalid value: "string": spec.hostnames in body must be of type array: "string"'),
        ("FieldValueInvalid", "<nil>", f'Invalid value: "null": {UNCHECKED_RULES}')]


# --- kubectl -----------------------------------------------------------------------------------

@needs_kubectl
def test_kubectl_get_shows_the_crds_printer_columns(server: ServerThread) -> None:
    create(server, f"{V1}/gatewayclasses", gateway_class("example"))
    create(server, f"{NS}/gateways", {
        "apiVersion": f"{GROUP}/v1", "kind": "Gateway", "metadata": {"name": "gw"},
        "spec": {"gatewayClassName": "example",
                 "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})
    create(server, f"{NS}/httproutes", {
        "apiVersion": f"{GROUP}/v1", "kind": "HTTPRoute", "metadata": {"name": "web"},
        "spec": {"hostnames": ["a.example.com"], "parentRefs": [{"name": "gw"}]}})
    gateways = kubectl.ok(server, "get", "gateways").splitlines()
    assert gateways[0].split() == ["NAME", "CLASS", "ADDRESS", "PROGRAMMED", "AGE"]
    row = gateways[1].split()
    assert row[:3] == ["gw", "example", "Unknown"] and len(row) == 4  # no address yet
    by_short_name = kubectl.ok(server, "get", "gtw").splitlines()  # the same table, but AGE
    assert [line.split()[:-1] for line in by_short_name] == [  # may have ticked meanwhile
        line.split()[:-1] for line in gateways]
    classes = kubectl.ok(server, "get", "gatewayclasses", "-o", "wide").splitlines()
    assert classes[0].split() == ["NAME", "CONTROLLER", "ACCEPTED", "AGE", "DESCRIPTION"]
    assert classes[1].split()[:3] == ["example", "example.com/gateway-controller", "Unknown"]
    routes = kubectl.ok(server, "get", "httproutes").splitlines()
    assert routes[0].split() == ["NAME", "HOSTNAMES", "AGE"]
    assert routes[1].split()[:2] == ["web", '["a.example.com"]']
    everything = kubectl.ok(server, "get", "gateway-api").splitlines()  # the category
    assert any(line.startswith("gateway.gateway.networking.k8s.io/gw") for line in everything)


def upstream_documents() -> list[dict[str, Any]]:
    """The five CRDs as upstream's files hold them: the three ``../shared`` has, read from
    their YAML, and the package data's copies of the other two (the same objects: the data is
    generated from the tag's files and checked against ``../shared``)."""
    found = {c["metadata"]["name"]: c for c in gateway_crds()}  # type: ignore[index]
    if SHARED.is_dir():
        for path in sorted(SHARED.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            found[crd["metadata"]["name"]] = crd
    return [found[name] for name in NAMES]


@needs_kubectl
def test_kubectl_apply_of_the_upstream_files_is_an_update_that_changes_nothing(
        server: ServerThread, tmp_path: Path) -> None:
    before = {c["metadata"]["name"]: c for c in get(server, CRDS)["items"]}
    for path in sorted(SHARED.glob("*.yaml")) if SHARED.is_dir() else ():
        done = kubectl.run(server, "apply", "-f", str(path))
        assert done.returncode == 0, done.stderr
        assert done.stdout.endswith(" configured\n"), done.stdout
        # kubectl's own note: the CRD was not made by kubectl apply (as on a cluster whose
        # CRDs were installed another way)
        assert "missing the kubectl.kubernetes.io/last-applied-configuration" in done.stderr
    install = tmp_path / "standard-install.yaml"
    install.write_text(yaml.safe_dump_all(upstream_documents()))
    done = kubectl.run(server, "apply", "-f", str(install))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 5 and all(line.startswith("customresourcedefinition.apiextensions."
                                                   "k8s.io/") for line in lines), lines
    applied = {c["metadata"]["name"]: c for c in get(server, CRDS)["items"]}
    # kubectl patches the placeholder status it cannot match (as on a cluster: "configured"),
    # which the CRD's main resource ignores: nothing is written
    again = kubectl.ok(server, "apply", "-f", str(install)).splitlines()
    assert len(again) == 5, again
    after = {c["metadata"]["name"]: c for c in get(server, CRDS)["items"]}
    assert {n: c["metadata"]["resourceVersion"] for n, c in after.items()} == {
        n: c["metadata"]["resourceVersion"] for n, c in applied.items()}
    for name in NAMES:
        assert after[name]["metadata"]["uid"] == before[name]["metadata"]["uid"]
        assert after[name]["metadata"]["generation"] == 1  # the spec is upstream's already
        assert after[name]["spec"] == before[name]["spec"]
        assert conditions(after[name]) == {"NamesAccepted": "True", "Established": "True"}
    assert get(server, f"{NS}/gateways")["items"] == []  # still served


@needs_kubectl
def test_kubectl_server_side_apply_of_the_upstream_files(server: ServerThread,
                                                         tmp_path: Path) -> None:
    install = tmp_path / "standard-install.json"
    install.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                   "items": upstream_documents()}))
    out = kubectl.ok(server, "apply", "--server-side", "-f", str(install))
    assert out.splitlines() == [f"customresourcedefinition.apiextensions.k8s.io/{name} "
                                "serverside-applied" for name in NAMES]
    crd = get(server, f"{CRDS}/gateways.{GROUP}")
    assert crd["metadata"]["generation"] == 1
    assert "kubectl" in {m["manager"] for m in crd["metadata"]["managedFields"]}
