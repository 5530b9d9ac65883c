"""Discovery documents and Accept negotiation (server/discovery.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.resources import REGISTRY, Registry, Resource
from kubewire.server.apiextensions.crd.crd_internal import storage_version
from kubewire.server.discovery.documents import (
    AGGREGATED_CONTENT_TYPES,
    discovery_documents,
    discovery_response,
    negotiate_discovery,
    storage_version_hash,
)
from tests.gateway_api import gateway_registry

# What a started server serves: the built-in kinds and the pre-installed Gateway API CRDs'.
SERVED = gateway_registry()

ADDRESS = "127.0.0.1:6443"
V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
KUBECTL_ACCEPT = f"{V2},{V2BETA1},application/json"  # objects-and-clients.md §4.3 [M]
KUBECTL_128_ACCEPT = f"{V2BETA1},application/json"
STD = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
CRD_VERBS = ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]
STATUS = ["get", "patch", "update"]

# objects-and-clients.md §4.2 (subresources limited to what kubewire serves), plus the other
# registry kinds as kube-apiserver 1.32 lists them:
# (group, plural) -> (kind, namespaced, verbs, shortNames, categories, {sub: verbs})
EXPECTED: dict[tuple[str, str], tuple[str, bool, list[str], list[str], list[str],
                                      dict[str, list[str]]]] = {
    ("", "pods"): ("Pod", True, STD, ["po"], ["all"], {
        "status": STATUS, "log": ["get"], "exec": ["create", "get"],
        "attach": ["create", "get"], "portforward": ["create", "get"],
        "eviction": ["create"], "binding": ["create"],
        "ephemeralcontainers": ["get", "patch", "update"]}),
    ("", "bindings"): ("Binding", True, ["create"], [], [], {}),
    ("authentication.k8s.io", "selfsubjectreviews"): ("SelfSubjectReview", False, ["create"],
                                                      [], [], {}),
    ("authentication.k8s.io", "tokenreviews"): ("TokenReview", False, ["create"], [], [], {}),
    ("", "services"): ("Service", True, STD, ["svc"], ["all"], {"status": STATUS}),
    ("", "nodes"): ("Node", False, STD, ["no"], [], {"status": STATUS}),
    ("", "namespaces"): ("Namespace", False, [v for v in STD if v != "deletecollection"],
                         ["ns"], [], {"finalize": ["update"], "status": STATUS}),
    ("", "configmaps"): ("ConfigMap", True, STD, ["cm"], [], {}),
    ("", "endpoints"): ("Endpoints", True, STD, ["ep"], [], {}),
    ("", "replicationcontrollers"): ("ReplicationController", True, STD, ["rc"], ["all"],
                                     {"scale": STATUS, "status": STATUS}),
    ("", "secrets"): ("Secret", True, STD, [], [], {}),
    ("", "serviceaccounts"): ("ServiceAccount", True, STD, ["sa"], [], {"token": ["create"]}),
    ("", "events"): ("Event", True, STD, ["ev"], [], {}),
    ("apps", "deployments"): ("Deployment", True, STD, ["deploy"], ["all"],
                              {"scale": STATUS, "status": STATUS}),
    ("apps", "replicasets"): ("ReplicaSet", True, STD, ["rs"], ["all"],
                              {"scale": STATUS, "status": STATUS}),
    ("apps", "statefulsets"): ("StatefulSet", True, STD, ["sts"], ["all"],
                               {"scale": STATUS, "status": STATUS}),
    ("apps", "daemonsets"): ("DaemonSet", True, STD, ["ds"], ["all"], {"status": STATUS}),
    ("apps", "controllerrevisions"): ("ControllerRevision", True, STD, [], [], {}),
    ("events.k8s.io", "events"): ("Event", True, STD, ["ev"], [], {}),
    ("networking.k8s.io", "ingresses"): ("Ingress", True, STD, ["ing"], [], {"status": STATUS}),
    ("networking.k8s.io", "networkpolicies"): ("NetworkPolicy", True, STD, ["netpol"], [], {}),
    ("discovery.k8s.io", "endpointslices"): ("EndpointSlice", True, STD, [], [], {}),
    ("coordination.k8s.io", "leases"): ("Lease", True, STD, [], [], {}),
    ("rbac.authorization.k8s.io", "roles"): ("Role", True, STD, [], [], {}),
    ("certificates.k8s.io", "certificatesigningrequests"): (
        "CertificateSigningRequest", False, STD, ["csr"], [],
        {"approval": STATUS, "status": STATUS}),
    ("rbac.authorization.k8s.io", "rolebindings"): ("RoleBinding", True, STD, [], [], {}),
    ("rbac.authorization.k8s.io", "clusterroles"): ("ClusterRole", False, STD, [], [], {}),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): ("ClusterRoleBinding", False, STD, [],
                                                           [], {}),
    # authorization.k8s.io's reviews: Creaters alone, no hash
    ("authorization.k8s.io", "localsubjectaccessreviews"): (
        "LocalSubjectAccessReview", True, ["create"], [], [], {}),
    ("authorization.k8s.io", "selfsubjectaccessreviews"): (
        "SelfSubjectAccessReview", False, ["create"], [], [], {}),
    ("authorization.k8s.io", "selfsubjectrulesreviews"): (
        "SelfSubjectRulesReview", False, ["create"], [], [], {}),
    ("authorization.k8s.io", "subjectaccessreviews"): (
        "SubjectAccessReview", False, ["create"], [], [], {}),
    ("", "resourcequotas"): ("ResourceQuota", True, STD, ["quota"], [], {"status": STATUS}),
    ("", "limitranges"): ("LimitRange", True, STD, ["limits"], [], {}),
    ("", "persistentvolumeclaims"): ("PersistentVolumeClaim", True, STD, ["pvc"], [],
                                     {"status": STATUS}),
    ("", "persistentvolumes"): ("PersistentVolume", False, STD, ["pv"], [], {"status": STATUS}),
    ("storage.k8s.io", "storageclasses"): ("StorageClass", False, STD, ["sc"], [], {}),
    ("batch", "jobs"): ("Job", True, STD, [], ["all"], {"status": STATUS}),
    ("autoscaling", "horizontalpodautoscalers"): ("HorizontalPodAutoscaler", True, STD, ["hpa"],
                                                  ["all"], {"status": STATUS}),
    ("batch", "cronjobs"): ("CronJob", True, STD, ["cj"], ["all"], {"status": STATUS}),
    ("policy", "poddisruptionbudgets"): ("PodDisruptionBudget", True, STD, ["pdb"], [],
                                         {"status": STATUS}),
    ("scheduling.k8s.io", "priorityclasses"): ("PriorityClass", False, STD, ["pc"], [], {}),
    ("networking.k8s.io", "ingressclasses"): ("IngressClass", False, STD, [], [], {}),
    ("apiregistration.k8s.io", "apiservices"): (
        "APIService", False, STD, [], ["api-extensions"], {"status": STATUS}),
    ("apiextensions.k8s.io", "customresourcedefinitions"): (
        "CustomResourceDefinition", False, STD, ["crd", "crds"], ["api-extensions"],
        {"status": STATUS}),
    # the Gateway API v1.2.1 standard channel's CRDs, as a cluster with them installed
    ("gateway.networking.k8s.io", "gatewayclasses"): ("GatewayClass", False, CRD_VERBS, ["gc"],
                                                      ["gateway-api"], {"status": STATUS}),
    ("gateway.networking.k8s.io", "gateways"): ("Gateway", True, CRD_VERBS, ["gtw"],
                                                ["gateway-api"], {"status": STATUS}),
    ("gateway.networking.k8s.io", "grpcroutes"): ("GRPCRoute", True, CRD_VERBS, [],
                                                  ["gateway-api"], {"status": STATUS}),
    ("gateway.networking.k8s.io", "httproutes"): ("HTTPRoute", True, CRD_VERBS, [],
                                                  ["gateway-api"], {"status": STATUS}),
    ("gateway.networking.k8s.io", "referencegrants"): ("ReferenceGrant", True, CRD_VERBS,
                                                       ["refgrant"], ["gateway-api"], {}),
}
# The served versions of a group served from CRDs, in kube's order (upstream's CRDs serve
# GRPCRoute at v1 only and ReferenceGrant at v1beta1 only).
GATEWAY_GROUP = "gateway.networking.k8s.io"
GATEWAY_VERSIONS = ["v1", "v1beta1"]

# Subresources whose kind is not the parent's: (group, version, kind), "" for the parent's
# group-version (kube 1.32 /api/v1 and /apis/apps/v1).
SUB_KINDS = {"scale": ("autoscaling", "v1", "Scale"), "exec": ("", "", "PodExecOptions"),
             "attach": ("", "", "PodAttachOptions"),
             "portforward": ("", "", "PodPortForwardOptions"),
             "eviction": ("policy", "v1", "Eviction"), "binding": ("", "", "Binding"),
             "token": ("authentication.k8s.io", "v1", "TokenRequest")}

# kubernetes/kubernetes pkg/controlplane/storageversionhashdata/data.go
KUBE_HASHES = {
    ("", "pods"): "xPOwRZ+Yhw8=", ("", "services"): "0/CO1lhkEBI=",
    ("", "nodes"): "XwShjMxG9Fs=", ("", "namespaces"): "Q3oi5N2YM8M=",
    ("", "configmaps"): "qFsyl6wFWjQ=", ("", "secrets"): "S6u1pOWzb84=",
    ("", "serviceaccounts"): "pbx9ZvyFpBE=", ("apps", "deployments"): "8aSe+NMegvE=",
    ("apps", "replicasets"): "P1RzHs8/mWQ=", ("apps", "statefulsets"): "H+vl74LkKdo=",
    ("apps", "daemonsets"): "dd7pWHUlMKQ=", ("apps", "controllerrevisions"): "85nkx63pcBU=",
    ("", "events"): "r2yiGXH7wu8=",
    ("events.k8s.io", "events"): "r2yiGXH7wu8=", ("networking.k8s.io", "ingresses"): "39NQlfNR+bo=",
    ("networking.k8s.io", "networkpolicies"): "YpfwF18m1G8=",
    ("discovery.k8s.io", "endpointslices"): "qgS0xkrxYAI=",
    ("coordination.k8s.io", "leases"): "gqkMMb/YqFM=",
    ("rbac.authorization.k8s.io", "clusterrolebindings"): "48tpQ8gZHFc=",
    ("rbac.authorization.k8s.io", "clusterroles"): "bYE5ZWDrJ44=",
    ("rbac.authorization.k8s.io", "rolebindings"): "eGsCzGH6b1g=",
    ("rbac.authorization.k8s.io", "roles"): "7FuwZcIIItM=",
    ("certificates.k8s.io", "certificatesigningrequests"): "95fRKMXA+00=",
    ("", "resourcequotas"): "8uhSgffRX6w=", ("", "limitranges"): "EBKMFVe6cwo=",
    ("", "persistentvolumeclaims"): "QWTyNDq0dC4=", ("", "persistentvolumes"): "HN/zwEC+JgM=",
    ("storage.k8s.io", "storageclasses"): "K+m6uJwbjGY=", ("", "endpoints"): "fWeeMqaN/OA=",
    ("", "replicationcontrollers"): "Jond2If31h0=",
    ("batch", "cronjobs"): "sd5LIXh4Fjs=", ("batch", "jobs"): "mudhfqk/qZY=",
    # storageversionhashdata: v1 and v2 report the storage version's (autoscaling/v2) hash
    ("autoscaling", "horizontalpodautoscalers"): "qwQve8ut294=",
    ("policy", "poddisruptionbudgets"): "EVWiDmWqyJw=",
    ("scheduling.k8s.io", "priorityclasses"): "1QwjyaZjj3Y=",
    ("networking.k8s.io", "ingressclasses"): "l/iqIbDgFyQ=",
    ("apiregistration.k8s.io", "apiservices"): "InPBPD7+PqM=",
}


def get(path: str, accept: str = "", registry: Registry = SERVED) -> tuple[int, bytes, str]:
    result = discovery_response(registry, path, accept, ADDRESS)
    assert result is not None, path
    return result


def get_json(path: str, accept: str = "") -> Any:
    status, body, _ = get(path, accept)
    assert status == 200
    return json.loads(body)


def content_type_params(content_type: str) -> tuple[str, dict[str, str]]:
    """Split like client-go's ContentTypeIsGVK (mime.ParseMediaType): order-free params."""
    media, *params = content_type.split(";")
    return media.strip(), dict(p.strip().split("=", 1) for p in params)


# --- negotiation ------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (KUBECTL_ACCEPT, "v2"),
        (KUBECTL_128_ACCEPT, "v2beta1"),
        (V2, "v2"),
        ("*/*", "legacy"),  # kr8s, kopf (§7.4, §7.6)
        ("", "legacy"),
        ("application/json", "legacy"),
        ("application/json, */*", "legacy"),  # kubectl's per-group-version fetches (§4.4)
        ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "legacy"),
        ("application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;"
         "as=APIGroupDiscoveryList,application/json", "legacy"),
        ("application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io", "v2"),
        ("application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList", "v2"),
        ("Application/JSON;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "v2"),
        ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList", "legacy"),
        ("application/json;g=other.io;v=v2;as=APIGroupDiscoveryList", "legacy"),
        ("*/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "v2"),
        # the server honours the client's order and q values (goautoneg), like kube
        (f"{V2BETA1},{V2}", "v2beta1"),
        (f"application/json;q=0.5,{V2}", "v2"),
        (f"{V2};q=0.1,{V2BETA1};q=0.9", "v2beta1"),
        (f"*/*,{V2}", "v2"),  # concrete before wildcard at equal q
        ("text/html", "legacy"),
        ("garbage,,;;=", "legacy"),
        ("application/json/x;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "legacy"),
    ],
)
def test_negotiate_discovery(accept: str, expected: str) -> None:
    assert negotiate_discovery(accept) == expected


@given(st.text())
def test_negotiate_discovery_total(accept: str) -> None:
    assert negotiate_discovery(accept) in ("v2", "v2beta1", "legacy")


# --- roots and content types ------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/api", "/api/", "/apis", "/apis/"])
def test_kubectl_accept_gets_aggregated_v2_with_exact_content_type(path: str) -> None:
    status, body, content_type = get(path, KUBECTL_ACCEPT)
    assert status == 200
    assert content_type == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    media, params = content_type_params(content_type)
    assert media == "application/json"
    assert params == {"g": "apidiscovery.k8s.io", "v": "v2", "as": "APIGroupDiscoveryList"}
    doc = json.loads(body)
    assert doc["kind"] == "APIGroupDiscoveryList"
    assert doc["apiVersion"] == "apidiscovery.k8s.io/v2"
    assert doc["metadata"] == {}


@pytest.mark.parametrize("path", ["/api", "/apis"])
def test_v2beta1_is_the_v2_document_under_its_own_version(path: str) -> None:
    _, v2_body, _ = get(path, KUBECTL_ACCEPT)
    status, body, content_type = get(path, KUBECTL_128_ACCEPT)
    assert status == 200
    assert content_type == AGGREGATED_CONTENT_TYPES["v2beta1"]
    assert content_type_params(content_type)[1]["v"] == "v2beta1"
    doc, v2_doc = json.loads(body), json.loads(v2_body)
    assert doc.pop("apiVersion") == "apidiscovery.k8s.io/v2beta1"
    v2_doc.pop("apiVersion")
    assert doc == v2_doc


def test_kr8s_accept_gets_legacy_api_versions() -> None:
    for path in ("/api", "/api/"):
        status, body, content_type = get(path, "*/*")
        assert (status, content_type) == (200, "application/json")
        assert body == (b'{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":'
                        b'[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1:6443"}]}\n')


def test_api_versions_carries_the_given_server_address() -> None:
    result = discovery_response(REGISTRY, "/api", "", "10.0.0.7:443")
    assert result is not None
    doc = json.loads(result[1])
    assert doc["serverAddressByClientCIDRs"] == [{"clientCIDR": "0.0.0.0/0",
                                                  "serverAddress": "10.0.0.7:443"}]


def test_legacy_group_list_in_kube_priority_order() -> None:
    status, _, content_type = get("/apis/", "*/*")
    assert (status, content_type) == (200, "application/json")
    doc = get_json("/apis", "*/*")
    assert doc["kind"] == "APIGroupList"
    assert doc["apiVersion"] == "v1"
    names = [g["name"] for g in doc["groups"]]
    assert names == ["apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
                     "authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io",
                     "networking.k8s.io", "policy",
                     "rbac.authorization.k8s.io", "storage.k8s.io", "apiextensions.k8s.io",
                     "scheduling.k8s.io", "coordination.k8s.io", "discovery.k8s.io",
                     "gateway.networking.k8s.io"]
    assert doc["groups"][1] == {
        "name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}}


@pytest.mark.parametrize("path", ["/apis/apps", "/apis/apps/"])
def test_api_group(path: str) -> None:
    status, body, content_type = get(path)
    assert (status, content_type) == (200, "application/json")
    assert json.loads(body) == {
        "kind": "APIGroup", "apiVersion": "v1", "name": "apps",
        "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}}


def test_autoscaling_lists_v2_first_and_prefers_it() -> None:
    # kube-aggregator's version priorities: autoscaling/v2 (30) before v1 (15)
    doc = get_json("/apis/autoscaling", "*/*")
    assert doc["versions"] == [{"groupVersion": "autoscaling/v2", "version": "v2"},
                               {"groupVersion": "autoscaling/v1", "version": "v1"}]
    assert doc["preferredVersion"] == {"groupVersion": "autoscaling/v2", "version": "v2"}


@pytest.mark.parametrize("path", ["/apis/nope.example.com", "/apis/nope/", "/apis/apps/v9",
                                  "/apis/nope/v1/", "/api/v2", "/apis/v1"])
def test_unknown_group_or_version_is_plain_text_404(path: str) -> None:
    assert get(path) == (404, b"404 page not found\n", "text/plain; charset=utf-8")


@pytest.mark.parametrize("path", ["/", "", "/version", "/api/v1/pods", "/api/v1/namespaces/x",
                                  "/apis/apps/v1/deployments", "/apis/apps/v1/watch/deployments",
                                  "/apisx", "/apix", "/api//", "//api", "/apis//v1",
                                  "/openapi/v3", "/healthz", "api"])
def test_other_paths_are_left_to_the_caller(path: str) -> None:
    assert discovery_response(REGISTRY, path, KUBECTL_ACCEPT, ADDRESS) is None


# --- resource lists ---------------------------------------------------------------------------

def test_core_resource_list_has_no_api_version() -> None:
    doc = get_json("/api/v1")
    assert list(doc)[:2] == ["kind", "groupVersion"]
    assert doc["kind"] == "APIResourceList"
    assert doc["groupVersion"] == "v1"


def test_group_resource_list_shape() -> None:
    _, body, content_type = get("/apis/apps/v1/")
    assert content_type == "application/json"
    assert json.loads(body) == {
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1",
        "resources": [
            {"name": "controllerrevisions", "singularName": "controllerrevision",
             "namespaced": True, "kind": "ControllerRevision", "verbs": STD,
             "storageVersionHash": "85nkx63pcBU="},
            {"name": "daemonsets", "singularName": "daemonset", "namespaced": True,
             "kind": "DaemonSet", "verbs": STD, "shortNames": ["ds"], "categories": ["all"],
             "storageVersionHash": "dd7pWHUlMKQ="},
            {"name": "daemonsets/status", "singularName": "", "namespaced": True,
             "kind": "DaemonSet", "verbs": STATUS},
            {"name": "deployments", "singularName": "deployment", "namespaced": True,
             "kind": "Deployment", "verbs": STD, "shortNames": ["deploy"], "categories": ["all"],
             "storageVersionHash": "8aSe+NMegvE="},
            {"name": "deployments/scale", "singularName": "", "namespaced": True,
             "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": STATUS},
            {"name": "deployments/status", "singularName": "", "namespaced": True,
             "kind": "Deployment", "verbs": STATUS},
            {"name": "replicasets", "singularName": "replicaset", "namespaced": True,
             "kind": "ReplicaSet", "verbs": STD, "shortNames": ["rs"], "categories": ["all"],
             "storageVersionHash": "P1RzHs8/mWQ="},
            {"name": "replicasets/scale", "singularName": "", "namespaced": True,
             "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": STATUS},
            {"name": "replicasets/status", "singularName": "", "namespaced": True,
             "kind": "ReplicaSet", "verbs": STATUS},
            {"name": "statefulsets", "singularName": "statefulset", "namespaced": True,
             "kind": "StatefulSet", "verbs": STD, "shortNames": ["sts"], "categories": ["all"],
             "storageVersionHash": "H+vl74LkKdo="},
            {"name": "statefulsets/scale", "singularName": "", "namespaced": True,
             "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": STATUS},
            {"name": "statefulsets/status", "singularName": "", "namespaced": True,
             "kind": "StatefulSet", "verbs": STATUS},
        ]}


def legacy_entries() -> dict[tuple[str, str, str], dict[str, Any]]:
    """(group, version, name) -> the APIResource entry of every served group-version."""
    entries: dict[tuple[str, str, str], dict[str, Any]] = {}
    for group, version in SERVED.group_versions():
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        doc = get_json(path, "application/json, */*")
        assert doc["groupVersion"] == (f"{group}/{version}" if group else version)
        names = [r["name"] for r in doc["resources"]]
        assert names == sorted(names)
        for entry in doc["resources"]:
            entries[(group, version, entry["name"])] = entry
    return entries


def test_every_registry_kind_in_legacy_resource_lists() -> None:
    entries = legacy_entries()
    assert {key for key in entries if "/" not in key[2]} == {(r.group, r.version, r.plural)
                                                              for r in SERVED}
    for res in SERVED:
        kind, namespaced, verbs, short, categories, subs = EXPECTED[(res.group, res.plural)]
        entry = entries[(res.group, res.version, res.plural)]
        assert entry["kind"] == kind
        assert entry["singularName"] == res.singular
        assert entry["namespaced"] is namespaced
        assert entry["verbs"] == verbs
        assert entry.get("shortNames", []) == short
        assert entry.get("categories", []) == categories
        assert "group" not in entry and "version" not in entry
        if res.create_only:  # kube's bindings: nothing stored, no hash
            assert "storageVersionHash" not in entry
        else:
            # a CRD's every served version reports its storage version's hash
            stored = storage_version(res.crd) if res.crd is not None else res.version
            if res.id == "autoscaling/horizontalpodautoscalers":
                stored = "v2"  # autoscaling/v1 HPAs are stored as v2
            assert entry["storageVersionHash"] == storage_version_hash(
                "" if res.id == "events.k8s.io/events" else res.group, stored, kind)
        found_subs = {k[2].split("/")[1] for k in entries
                      if k[:2] == (res.group, res.version) and k[2].startswith(res.plural + "/")}
        assert found_subs == set(subs)
        for sub, sub_verbs in subs.items():
            sub_entry = entries[(res.group, res.version, f"{res.plural}/{sub}")]
            assert sub_entry["verbs"] == sub_verbs
            assert sub_entry["singularName"] == ""
            assert sub_entry["namespaced"] is namespaced
            assert "storageVersionHash" not in sub_entry
            group, version, sub_kind = SUB_KINDS.get(sub, ("", "", kind))
            assert sub_entry["kind"] == sub_kind
            assert sub_entry.get("group") == (group or None)
            assert sub_entry.get("version") == (version or None)


def test_storage_version_hashes_match_kube() -> None:
    entries = legacy_entries()
    for (group, plural), expected in KUBE_HASHES.items():
        assert entries[(group, "v1", plural)]["storageVersionHash"] == expected, plural


def test_storage_version_hash_algorithm() -> None:
    assert storage_version_hash("", "v1", "Pod") == "xPOwRZ+Yhw8="
    assert storage_version_hash("apps", "v1", "Deployment") == "8aSe+NMegvE="


# --- aggregated -------------------------------------------------------------------------------

def aggregated_resources() -> dict[tuple[str, str, str], dict[str, Any]]:
    """(group, version, resource) -> the aggregated discovery entry."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    core = get_json("/api", KUBECTL_ACCEPT)["items"]
    assert [item["metadata"] for item in core] == [{"creationTimestamp": None}]
    named = get_json("/apis", KUBECTL_ACCEPT)["items"]
    assert [item["metadata"]["name"] for item in named] == [
        "apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io", "policy",
        "rbac.authorization.k8s.io",
        "storage.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io",
        "coordination.k8s.io", "discovery.k8s.io", "gateway.networking.k8s.io"]
    for item in core + named:
        group = item["metadata"].get("name", "")
        for version in item["versions"]:
            assert version["freshness"] == "Current"
            assert (group, version["version"]) in SERVED.group_versions()
            for res in version["resources"]:
                out[(group, version["version"], res["resource"])] = res
    gateway = next(item for item in named if item["metadata"]["name"] == GATEWAY_GROUP)
    assert [v["version"] for v in gateway["versions"]] == GATEWAY_VERSIONS
    return out


def test_every_registry_kind_in_aggregated_discovery() -> None:
    resources = aggregated_resources()
    assert set(resources) == {(r.group, r.version, r.plural) for r in SERVED}
    for res in SERVED:
        kind, namespaced, verbs, short, categories, subs = EXPECTED[(res.group, res.plural)]
        entry = resources[(res.group, res.version, res.plural)]
        own_gv = (res.group, res.version) if res.is_custom else ("", "")
        assert entry["responseKind"] == {"group": own_gv[0], "version": own_gv[1], "kind": kind}
        assert entry["scope"] == ("Namespaced" if namespaced else "Cluster")
        assert entry["singularResource"] == res.singular
        assert entry["verbs"] == verbs
        assert entry.get("shortNames", []) == short
        assert entry.get("categories", []) == categories
        got_subs = {s["subresource"]: s for s in entry.get("subresources", [])}
        assert {name: s["verbs"] for name, s in got_subs.items()} == subs
        for name, sub in got_subs.items():
            if name in SUB_KINDS:
                group, version, sub_kind = SUB_KINDS[name]
                expected_kind = {"group": group, "version": version, "kind": sub_kind}
            else:
                expected_kind = {"group": own_gv[0], "version": own_gv[1], "kind": kind}
            assert sub["responseKind"] == expected_kind


def test_aggregated_item_shape() -> None:
    items = get_json("/apis", KUBECTL_ACCEPT)["items"]
    assert items[0]["metadata"]["name"] == "apiregistration.k8s.io"  # the aggregator's own
    apps = items[1]
    assert apps["metadata"] == {"name": "apps", "creationTimestamp": None}
    [version] = apps["versions"]
    assert list(version) == ["version", "resources", "freshness"]
    resources = {r["resource"]: r for r in version["resources"]}
    assert list(resources) == ["controllerrevisions", "daemonsets", "deployments",
                               "replicasets", "statefulsets"]
    assert resources["deployments"] == {
        "resource": "deployments",
        "responseKind": {"group": "", "version": "", "kind": "Deployment"},
        "scope": "Namespaced", "singularResource": "deployment", "verbs": STD,
        "shortNames": ["deploy"], "categories": ["all"],
        "subresources": [
            {"subresource": "scale",
             "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
             "verbs": STATUS},
            {"subresource": "status",
             "responseKind": {"group": "", "version": "", "kind": "Deployment"},
             "verbs": STATUS}]}
    assert resources["controllerrevisions"] == {
        "resource": "controllerrevisions",
        "responseKind": {"group": "", "version": "", "kind": "ControllerRevision"},
        "scope": "Namespaced", "singularResource": "controllerrevision", "verbs": STD}


def test_aggregated_and_legacy_agree() -> None:
    aggregated = aggregated_resources()
    legacy = legacy_entries()
    for (group, version, name), entry in legacy.items():
        plural, _, sub = name.partition("/")
        parent = aggregated[(group, version, plural)]
        if not sub:
            assert entry["verbs"] == parent["verbs"]
            continue
        subs = {s["subresource"]: s["verbs"] for s in parent["subresources"]}
        assert subs[sub] == entry["verbs"]


# --- encoding and determinism -----------------------------------------------------------------

def all_paths() -> list[tuple[str, str]]:
    paths = [("/api", ""), ("/apis", ""), ("/api", KUBECTL_ACCEPT), ("/apis", KUBECTL_ACCEPT),
             ("/api", KUBECTL_128_ACCEPT), ("/apis", KUBECTL_128_ACCEPT)]
    for group, version in SERVED.group_versions():
        if group:
            paths += [(f"/apis/{group}", ""), (f"/apis/{group}/{version}", "")]
        else:
            paths.append((f"/api/{version}", ""))
    return paths


def test_bodies_are_json_ending_in_newline() -> None:
    for path, accept in all_paths():
        _, body, _ = get(path, accept)
        assert body.endswith(b"}\n"), path
        json.loads(body)


def test_bodies_are_encoded_once_and_shared() -> None:
    for path, accept in all_paths():
        assert get(path, accept)[1] is get(path + "/", accept)[1], path
    assert discovery_documents(SERVED) is discovery_documents(SERVED)


def test_output_is_deterministic_across_registries_and_entry_order() -> None:
    reordered = Registry(tuple(reversed(list(SERVED))))
    for path, accept in all_paths():
        first = get(path, accept, SERVED)
        assert get(path, accept, Registry(tuple(SERVED))) == first, path
        assert get(path, accept, reordered) == first, path


def test_unknown_subresource_is_refused() -> None:
    registry = Registry((Resource("", "v1", "Widget", "widgets", "widget", namespaced=True,
                                  subresources=("proxy",)),))
    with pytest.raises(ValueError, match="proxy"):
        discovery_response(registry, "/api/v1", "", ADDRESS)
