"""kubewire.selectors.field_sets: the selectable field values of objects, per kind."""

from __future__ import annotations

from kubewire.resources import Resource
from kubewire.selectors.field_sets import field_set
from kubewire.selectors.fields import (
    convert_field_selector,
    parse_field_selector,
)
from tests.gateway_api import gateway_registry


def resource(plural: str) -> Resource:
    found = next((r for r in gateway_registry() if r.plural == plural), None)
    assert found is not None
    return found


# --- selectable field values ------------------------------------------------------------------

POD = {"metadata": {"name": "web-0", "namespace": "demo"},
       "spec": {"nodeName": "n1", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "serviceAccountName": "sa", "hostNetwork": True},
       "status": {"phase": "Running", "podIP": "10.0.0.9",
                  "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                  "nominatedNodeName": "n2"}}


def test_pod_field_set() -> None:
    assert field_set(resource("pods"), POD) == {
        "metadata.name": "web-0", "metadata.namespace": "demo", "spec.nodeName": "n1",
        "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
        "spec.serviceAccountName": "sa", "spec.hostNetwork": "true", "status.phase": "Running",
        "status.podIP": "10.0.0.1", "status.podIPs": "", "status.nominatedNodeName": "n2"}


def test_pod_field_set_defaults_and_fallbacks() -> None:
    fields = field_set(resource("pods"), {"metadata": {"name": "p"},
                                          "status": {"podIP": "10.1.1.1"}})
    assert fields["spec.hostNetwork"] == "false"
    assert fields["status.podIP"] == "10.1.1.1"
    assert fields["spec.nodeName"] == "" and fields["metadata.namespace"] == ""
    assert field_set(resource("pods"), {"metadata": "odd", "spec": [1]})["spec.nodeName"] == ""


def test_pod_ips_never_match_and_host_alias_matches() -> None:
    pods = resource("pods")
    fields = field_set(pods, POD)
    ips = convert_field_selector(pods, parse_field_selector("status.podIPs=10.0.0.1"))
    assert not ips.matches(fields)
    host = convert_field_selector(pods, parse_field_selector("spec.host=n1"))
    assert host.matches(fields) and host.exact("spec.nodeName") == "n1"
    net = convert_field_selector(pods, parse_field_selector("spec.hostNetwork=true"))
    assert net.matches(fields)


def test_cluster_scoped_field_sets() -> None:
    node = field_set(resource("nodes"), {"metadata": {"name": "n1", "namespace": "x"},
                                         "spec": {"unschedulable": True}})
    assert node == {"metadata.name": "n1", "spec.unschedulable": "true"}
    assert field_set(resource("nodes"), {"metadata": {"name": "n2"}})["spec.unschedulable"] \
        == "false"
    ns = field_set(resource("namespaces"), {"metadata": {"name": "a"},
                                            "status": {"phase": "Terminating"}})
    assert ns == {"metadata.name": "a", "status.phase": "Terminating"}


def test_event_field_set() -> None:
    event = {"metadata": {"name": "e", "namespace": "d"}, "reason": "Started", "type": "Normal",
             "reportingController": "kubelet",
             "regarding": {"kind": "Pod", "namespace": "d", "name": "web", "uid": "u1",
                           "apiVersion": "v1", "resourceVersion": "7", "fieldPath": "spec"}}
    fields = field_set(resource("events"), event)
    assert fields["source"] == "kubelet"
    assert fields["regarding.name"] == "web" and fields["regarding.resourceVersion"] == "7"
    event["deprecatedSource"] = {"component": "old"}
    assert field_set(resource("events"), event)["source"] == "old"


def test_service_and_default_kinds() -> None:
    svc = field_set(resource("services"), {"metadata": {"name": "s", "namespace": "d"},
                                           "spec": {"clusterIP": "10.96.0.1", "type": "NodePort"}})
    assert svc["spec.clusterIP"] == "10.96.0.1" and svc["spec.type"] == "NodePort"
    for plural in ("deployments", "ingresses", "networkpolicies", "endpointslices", "gateways",
                   "httproutes"):
        assert field_set(resource(plural), {"metadata": {"name": "x", "namespace": "y"}}) == {
            "metadata.name": "x", "metadata.namespace": "y"}


def test_go_rendering_of_non_strings() -> None:
    res = Resource("", "v1", "Thing", "things", "thing", namespaced=False,
                   field_labels={"spec.n": "spec.n", "spec.f": "spec.f", "spec.b": "spec.b",
                                 "spec.o": "spec.o", "x": "first_ip:spec.l"})
    fields = field_set(res, {"spec": {"n": 3, "f": 2.0, "b": False, "o": {"a": 1}, "l": []}})
    assert fields == {"metadata.name": "", "spec.n": "3", "spec.f": "2", "spec.b": "false",
                      "spec.o": "", "x": ""}
