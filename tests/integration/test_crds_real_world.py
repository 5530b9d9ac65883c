"""Large real-world CRDs (tests/external/crds/, see its README) applied with kubectl, then
established, then used: valid and invalid custom resources get kube-apiserver v1.32's answers.

The set: cert-manager v1.21.1 (a 330 KB ClusterIssuer schema), Istio 1.30.3 (15 CRDs, up to
three versions each, 362 CEL rules, 117 of them in DestinationRule), Kyverno v1.19.0 (a 1.4 MB
ClusterPolicy CRD, two versions) and the Gateway API v1.6.1 experimental ListenerSet (CEL over
lists). The time the biggest take to be validated and compiled is measured and bounded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubewire.server.context import ServerConfig
from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.wire import Reply, call, create, get

CRD_DIR = Path(__file__).resolve().parents[1] / "external" / "crds"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CRD_FILES = ["cert-manager-v1.21.1-certificates.yaml", "cert-manager-v1.21.1-clusterissuers.yaml",
             "gateway-api-v1.6.1-experimental-listenersets.yaml",
             "istio-1.30.3-crd-all.gen.yaml", "kyverno-v1.19.0-clusterpolicies.yaml"]
# Istio CRDs whose rules use kube's CEL URL library (url(...).getScheme()).
USES_CEL_URLS = {"wasmplugins.extensions.istio.io", "trafficextensions.extensions.istio.io",
                 "requestauthentications.security.istio.io"}
# Validating and compiling one CRD, bounded generously for a shared 2-core machine (measured:
# Kyverno's 650 KB ClusterPolicy ~0.5 s, Istio's DestinationRule ~0.1 s).
CRD_CREATE_BOUND_S = 5.0


def crd_docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for name in CRD_FILES:
        docs += [d for d in yaml.safe_load_all((CRD_DIR / name).read_text()) if d]
    return docs


def crd_names() -> list[str]:
    return [d["metadata"]["name"] for d in crd_docs()]


def invalid(reply: Reply) -> str:
    assert reply.status == 422, reply.body[:1000]
    text: str = reply.status_object()["message"]
    return text


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """One server with every CRD applied (server-side, as these projects tell users to) and
    established; shared by the module's tests, which each use their own names."""
    data_dir = tmp_path_factory.mktemp("real-crds")
    server = ServerThread(ServerConfig(data_dir=data_dir, host="127.0.0.1", port=0,
                                       insecure_http=True)).start()
    for name in CRD_FILES:
        kubectl.ok(server, "apply", "--server-side", "-f", str(CRD_DIR / name))
    kubectl.ok(server, "wait", "--for", "condition=established", "--timeout=60s",
               *(f"crd/{n}" for n in crd_names()))
    yield server
    server.stop()


def test_every_crd_is_established_and_served(applied: ServerThread) -> None:
    served = crd_names()
    assert len(served) == 19 and set(served) >= USES_CEL_URLS
    for name in served:
        crd = get(applied, f"{CRDS}/{name}")
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions == {"NamesAccepted": "True", "Established": "True"}, name
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        storage = next(v["name"] for v in crd["spec"]["versions"] if v["storage"])
        assert crd["status"]["storedVersions"] == [storage]
        resources = get(applied, f"/apis/{group}/{storage}")["resources"]
        assert plural in {r["name"] for r in resources}, name
    # kubectl knows them: discovery and the OpenAPI document serve these schemas.
    explained = kubectl.ok(applied, "explain", "destinationrules.spec.trafficPolicy.tls.mode")
    assert "FIELD: mode <string>" in explained


def test_the_cel_url_library_checks_request_authentication_jwks_uris(
        applied: ServerThread) -> None:
    """Istio's ``url(self).getScheme() in ["http", "https"]`` runs as kube runs it."""
    path = "/apis/security.istio.io/v1/namespaces/default/requestauthentications"

    def body(name: str, uri: str) -> dict[str, Any]:
        return {"apiVersion": "security.istio.io/v1", "kind": "RequestAuthentication",
                "metadata": {"name": name},
                "spec": {"jwtRules": [{"issuer": "me", "jwksUri": uri}]}}

    assert call(applied, "POST", path, body("ra-https", "https://example.com/jwks")).status == 201
    message = invalid(call(applied, "POST", path, body("ra-ftp", "ftp://example.com/jwks")))
    assert ("spec.jwtRules[0].jwksUri: Invalid value: \"string\": url must have scheme "
            "http:// or https://") in message, message
    # url() of a string Go cannot parse as a request URI is an evaluation error, as in kube
    message = invalid(call(applied, "POST", path, body("ra-bad", "example.com/jwks")))
    assert ('URL parse error during conversion from string: parse \"example.com/jwks\": '
            "invalid URI for request") in message, message


def test_client_side_apply_of_a_huge_crd_overflows_the_annotation_limit(
        make_server: Callable[..., ServerThread]) -> None:
    """kubectl's client-side apply stores the whole object in last-applied-configuration;
    kube caps all annotations at 256 KiB (why these projects say --server-side)."""
    server = make_server()
    result = kubectl.run(server, "apply", "-f", str(CRD_DIR / CRD_FILES[4]))
    assert result.returncode != 0
    assert ('The CustomResourceDefinition "clusterpolicies.kyverno.io" is invalid: '
            "metadata.annotations: Too long: must have at most 262144 bytes") in result.stderr


BIGGEST = ["clusterpolicies.kyverno.io", "clusterissuers.cert-manager.io",
           "destinationrules.networking.istio.io"]  # the most schema, and the most CEL


def test_create_time_of_the_biggest_crds_is_bounded(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server()
    took: dict[str, float] = {}
    for doc in crd_docs():
        name = doc["metadata"]["name"]
        if name not in BIGGEST:
            continue
        started = time.monotonic()
        reply = call(server, "POST", CRDS, doc)
        took[name] = time.monotonic() - started
        assert reply.status == 201, (name, reply.body[:500])
    slowest = max(took, key=took.__getitem__)
    assert took[slowest] < CRD_CREATE_BOUND_S, took


# --- custom resources of these CRDs ---------------------------------------------------------

def test_istio_service_entry_rules(applied: ServerThread) -> None:
    entries = "/apis/networking.istio.io/v1/namespaces/default/serviceentries"
    good = {"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "external-api"},
            "spec": {"hosts": ["api.example.com"], "location": "MESH_EXTERNAL",
                     "resolution": "DNS",
                     "ports": [{"number": 443, "name": "https", "protocol": "TLS"}]}}
    created = create(applied, entries, good)
    assert created["spec"]["hosts"] == ["api.example.com"]

    both = json.loads(json.dumps(good))
    both["metadata"]["name"] = "both"
    both["spec"].update(resolution="STATIC", workloadSelector={"labels": {"app": "x"}},
                        endpoints=[{"address": "10.0.0.1"}])
    assert invalid(call(applied, "POST", entries, both)) == (
        'ServiceEntry.networking.istio.io "both" is invalid: spec: Invalid value: "object": '
        "only one of WorkloadSelector or Endpoints can be set")

    wildcard = json.loads(json.dumps(good))
    wildcard["metadata"]["name"] = "wildcard"
    wildcard["spec"]["hosts"] = ["*"]
    wildcard["spec"]["ports"][0]["number"] = 70000
    assert invalid(call(applied, "POST", entries, wildcard)) == (
        'ServiceEntry.networking.istio.io "wildcard" is invalid: [spec.hosts[0]: Invalid value: '
        '"string": hostname cannot be wildcard, spec.ports[0].number: Invalid value: "integer": '
        "port must be between 1-65535]")


def test_istio_destination_rule_in_an_older_served_version(applied: ServerThread) -> None:
    """DestinationRule serves v1, v1beta1 and v1alpha3 with the same schema (no conversion)."""
    rules = "/apis/networking.istio.io/v1alpha3/namespaces/default/destinationrules"
    body = {"apiVersion": "networking.istio.io/v1alpha3", "kind": "DestinationRule",
            "metadata": {"name": "reviews"},
            "spec": {"host": "reviews", "trafficPolicy": {"tls": {"mode": "ISTIO_MUTUAL"}},
                     "subsets": [{"name": "v1", "labels": {"version": "v1"}}]}}
    created = create(applied, rules, body)
    assert created["apiVersion"] == "networking.istio.io/v1alpha3"
    as_v1 = get(applied, "/apis/networking.istio.io/v1/namespaces/default/destinationrules/reviews")
    assert as_v1["apiVersion"] == "networking.istio.io/v1"
    assert as_v1["spec"] == created["spec"]
    body["metadata"]["name"] = "bad-mode"
    body["spec"]["trafficPolicy"]["tls"]["mode"] = "SOMETIMES"
    # A blocking schema error leaves the CRD's CEL rules unchecked, and kube says so
    # (strategy.go hasBlockingErr), only for a CRD that has rules (unlike Certificate below).
    assert invalid(call(applied, "POST", rules, body)) == (
        'DestinationRule.networking.istio.io "bad-mode" is invalid: ['
        'spec.trafficPolicy.tls.mode: Unsupported value: "SOMETIMES": supported values: '
        '"DISABLE", "SIMPLE", "MUTUAL", "ISTIO_MUTUAL", <nil>: Invalid value: "null": some '
        "validation rules were not checked because the object was invalid; correct the "
        "existing errors to complete validation]")


def test_cert_manager_certificate_and_cluster_issuer(applied: ServerThread) -> None:
    certificates = "/apis/cert-manager.io/v1/namespaces/default/certificates"
    good = {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": {"name": "web"},
            "spec": {"secretName": "web-tls", "dnsNames": ["web.example.com"],
                     "issuerRef": {"name": "letsencrypt", "kind": "ClusterIssuer"}}}
    create(applied, certificates, good)
    missing = {**good, "metadata": {"name": "no-secret"},
               "spec": {k: v for k, v in good["spec"].items() if k != "secretName"}}
    assert invalid(call(applied, "POST", certificates, missing)) == (
        'Certificate.cert-manager.io "no-secret" is invalid: spec.secretName: Required value')

    issuers = "/apis/cert-manager.io/v1/clusterissuers"
    venafi = {"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
              "metadata": {"name": "venafi"},
              "spec": {"venafi": {"zone": "z",
                                  "cloud": {"apiTokenSecretRef": {"name": "t", "key": "k"}},
                                  "tpp": {"url": "https://tpp.example.com",
                                          "credentialsRef": {"name": "c"}}}}}
    assert invalid(call(applied, "POST", issuers, venafi)) == (
        'ClusterIssuer.cert-manager.io "venafi" is invalid: spec.venafi: Invalid value: '
        '"object": exactly one of tpp, cloud, or ngts must be configured')
    del venafi["spec"]["venafi"]["tpp"]
    create(applied, issuers, venafi)
    assert kubectl.ok(applied, "get", "clusterissuer", "venafi", "-o",
                      "jsonpath={.spec.venafi.zone}") == "z"


def test_gateway_api_listener_set_rules(applied: ServerThread) -> None:
    listener_sets = "/apis/gateway.networking.k8s.io/v1/namespaces/default/listenersets"
    good = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
            "metadata": {"name": "extra"},
            "spec": {"parentRef": {"name": "gw"},
                     "listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}}
    created = create(applied, listener_sets, good)
    assert created["spec"]["parentRef"] == {"group": "gateway.networking.k8s.io",
                                            "kind": "Gateway", "name": "gw"}  # defaults
    twice = json.loads(json.dumps(good))
    twice["metadata"]["name"] = "twice"
    twice["spec"]["listeners"].append({"name": "http", "port": 8081, "protocol": "HTTP"})
    text = invalid(call(applied, "POST", listener_sets, twice))
    assert text.startswith('ListenerSet.gateway.networking.k8s.io "twice" is invalid: ')
    assert ('spec.listeners: Invalid value: "array": Listener name must be unique within the '
            "Gateway") in text


def test_kyverno_cluster_policy(applied: ServerThread) -> None:
    policies = "/apis/kyverno.io/v1/clusterpolicies"
    policy = {"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
              "metadata": {"name": "require-labels"},
              "spec": {"rules": [{
                  "name": "check-team",
                  "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
                  "validate": {"message": "label team is required",
                               "pattern": {"metadata": {"labels": {"team": "?*"}}}}}]}}
    created = create(applied, policies, policy)
    assert created["spec"]["validationFailureAction"] == "Audit"  # the schema's default
    bad = json.loads(json.dumps(policy))
    bad["metadata"]["name"] = "bad-action"
    bad["spec"]["validationFailureAction"] = "Block"
    assert invalid(call(applied, "POST", policies, bad)) == (
        'ClusterPolicy.kyverno.io "bad-action" is invalid: spec.validationFailureAction: '
        'Unsupported value: "Block": supported values: "audit", "enforce", "Audit", "Enforce"')
