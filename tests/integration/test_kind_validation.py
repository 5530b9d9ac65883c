"""Kind-specific validation: kube's whole 422 Status for bad specs, and nothing stored.

Messages and order follow kubernetes pkg/apis/core/validation/validation.go and
pkg/apis/apps/validation/validation.go (metadata errors first, then the spec's).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.harness import ServerThread
from tests.integration.kinds import (
    CONFIG_MAP,
    CRON_JOB,
    DEPLOYMENT,
    ENDPOINT_SLICE,
    ENDPOINTS,
    HORIZONTAL_POD_AUTOSCALER,
    INGRESS,
    INGRESS_CLASS,
    JOB,
    LEASE,
    NAMESPACE,
    NETWORK_POLICY,
    NODE,
    POD,
    POD_DISRUPTION_BUDGET,
    PRIORITY_CLASS,
    SECRET,
    SERVICE,
    Kind,
)
from tests.integration.test_bad_input import invalid
from tests.integration.wire import call, create, get, ok

PORT_RANGE = "must be between 1 and 65535, inclusive"
SNAPSHOT = [POD, SERVICE, DEPLOYMENT, CONFIG_MAP, NODE, NAMESPACE, INGRESS, NETWORK_POLICY,
            ENDPOINT_SLICE, LEASE, JOB, CRON_JOB, POD_DISRUPTION_BUDGET, PRIORITY_CLASS,
            INGRESS_CLASS, ENDPOINTS, HORIZONTAL_POD_AUTOSCALER]


def snapshot(server: ServerThread) -> list[Any]:
    return [get(server, kind.collection(None)) for kind in SNAPSHOT]


@pytest.fixture
def unchanged(server: ServerThread) -> Iterator[ServerThread]:
    create(server, POD.collection(), POD.obj("existing"))
    create(server, DEPLOYMENT.collection(), DEPLOYMENT.obj("existing"))
    before = snapshot(server)
    yield server
    assert snapshot(server) == before, "a rejected request changed the store"


def rejected(server: ServerThread, kind: Kind, obj: Any) -> Any:
    reply = call(server, "POST", kind.collection(), obj)
    assert reply.status == 422, reply.body[:500]
    return reply.json


def pod(name: str, **spec: Any) -> dict[str, Any]:
    obj = POD.obj(name)
    obj["spec"].update(spec)
    return obj


def test_pod_container_without_image(unchanged: ServerThread) -> None:
    body = pod("p", containers=[{"name": "c"}])
    assert rejected(unchanged, POD, body) == invalid("Pod", "p", [
        ("FieldValueRequired", "spec.containers[0].image", "Required value")])


def test_pod_without_containers(unchanged: ServerThread) -> None:
    body = pod("p", containers=[])
    assert rejected(unchanged, POD, body) == invalid("Pod", "p", [
        ("FieldValueRequired", "spec.containers", "Required value")])


def test_pod_metadata_errors_come_before_spec_errors(unchanged: ServerThread) -> None:
    body = pod("Bad_Name", containers=[{"name": "c"}])
    message = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
               "characters, '-' or '.', and must start and end with an alphanumeric character "
               "(e.g. 'example.com', regex used for validation is "
               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    assert rejected(unchanged, POD, body) == invalid("Pod", "Bad_Name", [
        ("FieldValueInvalid", "metadata.name", f'Invalid value: "Bad_Name": {message}'),
        ("FieldValueRequired", "spec.containers[0].image", "Required value")])


def test_pod_container_rules_in_kube_order(unchanged: ServerThread) -> None:
    containers = [
        {"name": "c", "image": "i", "ports": [{"containerPort": 0},
                                               {"containerPort": 70000, "protocol": "HTTP"}],
         "env": [{"name": "A=B"}], "volumeMounts": [{"name": "nope", "mountPath": "/x"}],
         "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}},
        {"name": "c", "image": "i"}]
    body = pod("p", containers=containers, restartPolicy="Sometimes")
    c0 = "spec.containers[0]"
    assert rejected(unchanged, POD, body) == invalid("Pod", "p", [
        ("FieldValueRequired", f"{c0}.ports[0].containerPort", "Required value"),
        ("FieldValueInvalid", f"{c0}.ports[1].containerPort",
         f"Invalid value: 70000: {PORT_RANGE}"),
        ("FieldValueNotSupported", f"{c0}.ports[1].protocol",
         'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"'),
        ("FieldValueInvalid", f"{c0}.env[0].name",
         'Invalid value: "A=B": a valid environment variable name must consist only of '
         "printable ASCII characters other than '='"),
        ("FieldValueNotFound", f"{c0}.volumeMounts[0].name", 'Not found: "nope"'),
        ("FieldValueInvalid", f"{c0}.resources.requests",
         'Invalid value: "2": must be less than or equal to cpu limit of 1'),
        ("FieldValueDuplicate", "spec.containers[1].name", 'Duplicate value: "c"'),
        ("FieldValueNotSupported", "spec.restartPolicy",
         'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"')])


def test_pod_volumes_unique_and_mounted(unchanged: ServerThread) -> None:
    volumes = [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]
    containers = [{"name": "c", "image": "i", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]
    body = pod("p", containers=containers, volumes=volumes)
    assert rejected(unchanged, POD, body) == invalid("Pod", "p", [
        ("FieldValueDuplicate", "spec.volumes[1].name", 'Duplicate value: "v"')])


def test_pod_spec_update_is_forbidden_but_image_may_change(server: ServerThread) -> None:
    current = create(server, POD.collection(), POD.obj("p"))
    current["spec"]["containers"][0]["image"] = "nginx:1.28"
    current = ok(call(server, "PUT", POD.item("p"), current), 200)
    assert current["spec"]["containers"][0]["image"] == "nginx:1.28"

    changed = copy.deepcopy(current)
    changed["spec"]["hostname"] = "other"
    reply = call(server, "PUT", POD.item("p"), changed)
    assert reply.status == 422
    status = reply.json
    [cause] = status["details"]["causes"]
    assert cause["reason"] == "FieldValueForbidden" and cause["field"] == "spec"
    # kube appends go-cmp's diff of the specs, whose spacing go-cmp randomizes: not compared
    assert cause["message"].startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
        "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to "
        "be set to 1 if it was previously negative)\n")
    assert status["message"] == f'Pod "p" is invalid: spec: {cause["message"]}'
    assert get(server, POD.item("p")) == current


def test_scheduling_gates_may_only_be_removed(server: ServerThread) -> None:
    """ValidatePodUpdate: a gated pod's gates may be deleted (what lets a scheduler see it);
    a new gate is refused with validateOnlyDeletedSchedulingGates' text."""
    body = POD.obj("gated")
    body["spec"]["schedulingGates"] = [{"name": "a"}, {"name": "b"}]
    current = create(server, POD.collection(), body)
    added = copy.deepcopy(current)
    added["spec"]["schedulingGates"] = [{"name": "a"}, {"name": "b"}, {"name": "c"}]
    reply = call(server, "PUT", POD.item("gated"), added)
    assert reply.status == 422
    causes = {(c["field"], c["message"]) for c in reply.json["details"]["causes"]}
    assert ("spec.schedulingGates[2].name",
            "Forbidden: only deletion is allowed, but found new scheduling gate 'c'") in causes
    assert get(server, POD.item("gated")) == current
    current["spec"]["schedulingGates"] = [{"name": "b"}]
    current = ok(call(server, "PUT", POD.item("gated"), current), 200)
    del current["spec"]["schedulingGates"]
    current = ok(call(server, "PUT", POD.item("gated"), current), 200)
    assert "schedulingGates" not in current["spec"]


def test_service_port_zero(unchanged: ServerThread) -> None:
    body = SERVICE.obj("s")
    body["spec"]["ports"] = [{"port": 0}]
    # targetPort defaults to the port (SetDefaults_Service), so it is out of range too
    assert rejected(unchanged, SERVICE, body) == invalid("Service", "s", [
        ("FieldValueInvalid", "spec.ports[0].port", f"Invalid value: 0: {PORT_RANGE}"),
        ("FieldValueInvalid", "spec.ports[0].targetPort", f"Invalid value: 0: {PORT_RANGE}")])


def test_service_ports_required_names_unique_and_type(unchanged: ServerThread) -> None:
    body = SERVICE.obj("s")
    del body["spec"]["ports"]
    assert rejected(unchanged, SERVICE, body) == invalid("Service", "s", [
        ("FieldValueRequired", "spec.ports", "Required value")])

    body = SERVICE.obj("s")
    body["spec"]["ports"] = [{"port": 80, "name": "web"}, {"port": 81, "name": "web"},
                             {"port": 82, "protocol": "ICMP", "targetPort": "Http"}]
    body["spec"]["selector"] = {"app": "bad value"}
    body["spec"]["type"] = "Internal"
    label_error = ("a valid label must be an empty string or consist of alphanumeric "
                   "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                   "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                   "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
    assert rejected(unchanged, SERVICE, body) == invalid("Service", "s", [
        ("FieldValueDuplicate", "spec.ports[1].name", 'Duplicate value: "web"'),
        ("FieldValueRequired", "spec.ports[2].name", "Required value"),
        ("FieldValueNotSupported", "spec.ports[2].protocol",
         'Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"'),
        ("FieldValueInvalid", "spec.ports[2].targetPort",
         'Invalid value: "Http": must contain only alpha-numeric characters (a-z, 0-9), and '
         "hyphens (-)"),
        ("FieldValueInvalid", "spec.selector", f'Invalid value: "bad value": {label_error}'),
        ("FieldValueNotSupported", "spec.type",
         'Unsupported value: "Internal": supported values: "ClusterIP", "ExternalName", '
         '"LoadBalancer", "NodePort"')])


def test_deployment_selector_and_template(unchanged: ServerThread) -> None:
    body = DEPLOYMENT.obj("d")
    del body["spec"]["selector"]
    assert rejected(unchanged, DEPLOYMENT, body) == invalid("Deployment", "d", [
        ("FieldValueRequired", "spec.selector", "Required value"),
        ("FieldValueInvalid", "spec.template.metadata.labels",
         'Invalid value: map[string]string{"app":"web"}: `selector` does not match template '
         "`labels`")], group="apps")

    body = DEPLOYMENT.obj("d")
    body["spec"]["replicas"] = -1
    body["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    body["spec"]["template"]["spec"]["containers"] = [{"name": "c"}]
    body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    body["spec"]["strategy"] = {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}
    body["spec"]["revisionHistoryLimit"] = -2
    assert rejected(unchanged, DEPLOYMENT, body) == invalid("Deployment", "d", [
        ("FieldValueInvalid", "spec.replicas",
         "Invalid value: -1: must be greater than or equal to 0"),
        ("FieldValueInvalid", "spec.template.metadata.labels",
         'Invalid value: map[string]string{"app":"web"}: `selector` does not match template '
         "`labels`"),
        ("FieldValueRequired", "spec.template.spec.containers[0].image", "Required value"),
        ("FieldValueNotSupported", "spec.template.spec.restartPolicy",
         'Unsupported value: "Never": supported values: "Always"'),
        ("FieldValueInvalid", "spec.strategy.rollingUpdate.maxUnavailable",
         'Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:""}: may not be 0 when '
         "`maxSurge` is 0"),
        ("FieldValueInvalid", "spec.revisionHistoryLimit",
         "Invalid value: -2: must be greater than or equal to 0")], group="apps")


def test_deployment_selector_is_immutable(unchanged: ServerThread) -> None:
    body = {"spec": {"selector": {"matchLabels": {"app": "web", "tier": "x"}},
                     "template": {"metadata": {"labels": {"app": "web", "tier": "x"}}}}}
    reply = call(unchanged, "PATCH", DEPLOYMENT.item("existing"), body)
    assert reply.status == 422
    assert reply.json == invalid("Deployment", "existing", [
        ("FieldValueInvalid", "spec.selector",
         'Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web", '
         '"tier":"x"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is '
         "immutable")], group="apps")


def test_config_map_keys(unchanged: ServerThread) -> None:
    body = CONFIG_MAP.obj("cm")
    body["data"] = {"bad key": "x", "..": "y"}
    key_error = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                 "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation "
                 "is '[-._a-zA-Z0-9]+')")
    assert rejected(unchanged, CONFIG_MAP, body) == invalid("ConfigMap", "cm", [
        ("FieldValueInvalid", "data[bad key]", f'Invalid value: "bad key": {key_error}'),
        ("FieldValueInvalid", "data[..]", "Invalid value: \"..\": must not be '..'")])


def test_node_taints_are_checked_under_metadata(unchanged: ServerThread) -> None:
    """kube's ValidateNode starts the taints' path from ``metadata``."""
    body = NODE.obj("n")
    body["spec"]["taints"] = [{"key": "k", "effect": "Sometimes"},
                              {"key": "k", "value": "v", "effect": ""}]
    assert rejected(unchanged, NODE, body) == invalid("Node", "n", [
        ("FieldValueNotSupported", "metadata.taints[0].effect",
         'Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", '
         '"NoExecute"'),
        ("FieldValueRequired", "metadata.taints[1].effect", "Required value")])


def test_namespace_finalizers(unchanged: ServerThread) -> None:
    body = NAMESPACE.obj("ns1")
    body["spec"] = {"finalizers": ["kubernetes", "mine"]}
    assert rejected(unchanged, NAMESPACE, body) == invalid("Namespace", "ns1", [
        ("FieldValueInvalid", "spec.finalizers",
         'Invalid value: "mine": name is neither a standard finalizer name nor is it fully '
         "qualified")])


def test_lease_duration(unchanged: ServerThread) -> None:
    body = LEASE.obj("l")
    body["spec"]["leaseDurationSeconds"] = 0
    body["spec"]["leaseTransitions"] = -1
    assert rejected(unchanged, LEASE, body) == invalid("Lease", "l", [
        ("FieldValueInvalid", "spec.leaseDurationSeconds",
         "Invalid value: 0: must be greater than 0"),
        ("FieldValueInvalid", "spec.leaseTransitions",
         "Invalid value: -1: must be greater than or equal to 0")], group="coordination.k8s.io")


def test_ingress_backend_and_paths(unchanged: ServerThread) -> None:
    body = INGRESS.obj("i")
    body["spec"] = {"rules": [{"host": "10.0.0.1", "http": {"paths": [
        {"path": "a//b", "pathType": "Prefix",
         "backend": {"service": {"name": "web", "port": {"number": 0}}}},
        {"path": "/", "pathType": "Exact", "backend": {"service": {"name": "web",
                                                                     "port": {}}}}]}}]}
    assert rejected(unchanged, INGRESS, body) == invalid("Ingress", "i", [
        ("FieldValueInvalid", "spec.rules[0].host",
         'Invalid value: "10.0.0.1": must be a DNS name, not an IP address'),
        ("FieldValueInvalid", "spec.rules[0].http.paths[0].path",
         'Invalid value: "a//b": must be an absolute path'),
        ("FieldValueInvalid", "spec.rules[0].http.paths[0].path",
         "Invalid value: \"a//b\": must not contain '//'"),
        ("FieldValueRequired", "spec.rules[0].http.paths[0].backend",
         "Required value: port name or number is required"),
        ("FieldValueRequired", "spec.rules[0].http.paths[1].backend",
         "Required value: port name or number is required")], group="networking.k8s.io")

    body["spec"] = {}
    assert rejected(unchanged, INGRESS, body) == invalid("Ingress", "i", [
        ("FieldValueInvalid", "spec",
         "Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` "
         "must be specified")], group="networking.k8s.io")


def test_network_policy_ports_and_peers(unchanged: ServerThread) -> None:
    body = NETWORK_POLICY.obj("np")
    body["spec"]["ingress"] = [{"ports": [{"protocol": "ICMP", "port": 80, "endPort": 70}],
                                "from": [{}]}]
    body["spec"]["policyTypes"] = ["Sideways"]
    assert rejected(unchanged, NETWORK_POLICY, body) == invalid("NetworkPolicy", "np", [
        ("FieldValueNotSupported", "spec.ingress[0].ports[0].protocol",
         'Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"'),
        ("FieldValueInvalid", "spec.ingress[0].ports[0].endPort",
         "Invalid value: 80: must be greater than or equal to `port`"),
        ("FieldValueRequired", "spec.ingress[0].from[0]", "Required value: must specify a peer"),
        ("FieldValueNotSupported", "spec.policyTypes[0]",
         'Unsupported value: "Sideways": supported values: "Ingress", "Egress"')],
        group="networking.k8s.io")


def test_endpoint_slice_addresses_and_ports(unchanged: ServerThread) -> None:
    body = ENDPOINT_SLICE.obj("es")
    body["endpoints"] = [{"addresses": ["10.0.0.256"]}, {"addresses": []}]
    body["ports"] = [{"name": "http", "port": 80, "protocol": "ICMP"},
                     {"name": "http", "port": 81}]
    assert rejected(unchanged, ENDPOINT_SLICE, body) == invalid("EndpointSlice", "es", [
        ("FieldValueInvalid", "endpoints[0].addresses[0]",
         'Invalid value: "10.0.0.256": must be a valid IPv4 address'),
        ("FieldValueRequired", "endpoints[1].addresses",
         "Required value: must contain at least 1 address"),
        ("FieldValueNotSupported", "ports[0].protocol",
         'Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"'),
        ("FieldValueDuplicate", "ports[1].name", 'Duplicate value: "http"')],
        group="discovery.k8s.io")


DNS_LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
             "or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
             "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def test_endpoints_subsets(unchanged: ServerThread) -> None:
    """validateEndpointSubsets: kube's texts in kube's order (ports default to TCP first)."""
    body = ENDPOINTS.obj("ep")
    body["subsets"] = [
        {"addresses": [{"ip": "10.0.0.256", "hostname": "Bad_Host"}],
         "notReadyAddresses": [{"ip": "0.0.0.0"}],
         "ports": [{"port": 0, "protocol": "ICMP"}, {"name": "b", "port": 81}]},
        {"addresses": [{"ip": "169.254.1.1"}]},
        {"ports": [{"port": 80}]}]
    assert rejected(unchanged, ENDPOINTS, body) == invalid("Endpoints", "ep", [
        ("FieldValueInvalid", "subsets[0].addresses[0].ip",
         'Invalid value: "10.0.0.256": must be a valid IP address, (e.g. 10.9.8.7 or '
         "2001:db8::ffff)"),
        ("FieldValueInvalid", "subsets[0].addresses[0].hostname",
         f'Invalid value: "Bad_Host": {DNS_LABEL}'),
        ("FieldValueInvalid", "subsets[0].addresses[0].ip",
         'Invalid value: "10.0.0.256": must be a valid IP address'),
        ("FieldValueInvalid", "subsets[0].notReadyAddresses[0].ip",
         'Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)'),
        ("FieldValueRequired", "subsets[0].ports[0].name", "Required value"),
        ("FieldValueInvalid", "subsets[0].ports[0].port", f"Invalid value: 0: {PORT_RANGE}"),
        ("FieldValueNotSupported", "subsets[0].ports[0].protocol",
         'Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"'),
        ("FieldValueInvalid", "subsets[1].addresses[0].ip",
         'Invalid value: "169.254.1.1": may not be in the link-local range (169.254.0.0/16, '
         "fe80::/10)"),
        ("FieldValueRequired", "subsets[2]",
         "Required value: must specify `addresses` or `notReadyAddresses`")])


def test_endpoints_defaults_and_table(server: ServerThread) -> None:
    """SetDefaults_Endpoints (protocol TCP) and printers.go's ENDPOINTS cell (three, + more)."""
    body = ENDPOINTS.obj("many")
    body["subsets"] = [{"addresses": [{"ip": f"10.0.0.{i}"} for i in range(1, 4)],
                        "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]},
                       {"notReadyAddresses": [{"ip": "10.0.1.1"}]}]
    created = create(server, ENDPOINTS.collection(), body)
    [with_ports] = [s for s in created["subsets"] if s.get("ports")]
    assert [p["protocol"] for p in with_ports["ports"]] == ["TCP", "TCP"]
    table = ok(call(server, "GET", ENDPOINTS.item("many"), headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}), 200)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Endpoints", "Age"]
    assert table["rows"][0]["cells"][:2] == [
        "many", "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 3 more..."]
    create(server, ENDPOINTS.collection(), {**ENDPOINTS.obj("empty"), "subsets": []})
    table = ok(call(server, "GET", ENDPOINTS.item("empty"), headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}), 200)
    assert table["rows"][0]["cells"][1] == "<none>"


def test_endpoints_are_stored_repacked(server: ServerThread) -> None:
    """The Endpoints strategy's Canonicalize (RepackSubsets): addresses offering the same
    ports share a subset, sorted by IP; an address ready on a port stays ready there."""
    port = [{"name": "http", "port": 80, "protocol": "TCP"}]
    body = ENDPOINTS.obj("packed")
    body["subsets"] = [
        {"addresses": [{"ip": "10.0.0.9"}], "ports": port},
        {"addresses": [{"ip": "10.0.0.2"}], "notReadyAddresses": [{"ip": "10.0.0.5"}],
         "ports": port},
        {"notReadyAddresses": [{"ip": "10.0.0.9"}], "ports": port},
        {"addresses": [{"ip": "10.0.0.7"}], "ports": [{"name": "dns", "port": 53,
                                                        "protocol": "UDP"}]}]
    created = create(server, ENDPOINTS.collection(), body)
    assert created["subsets"] == [
        {"addresses": [{"ip": "10.0.0.7"}],
         "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]},
        {"addresses": [{"ip": "10.0.0.2"}, {"ip": "10.0.0.9"}],
         "notReadyAddresses": [{"ip": "10.0.0.5"}], "ports": port}]
    assert get(server, ENDPOINTS.item("packed"))["subsets"] == created["subsets"]
    # an update is repacked too
    updated = ok(call(server, "PATCH", ENDPOINTS.item("packed"), {"subsets": [
        {"addresses": [{"ip": "10.0.0.4"}], "ports": port},
        {"addresses": [{"ip": "10.0.0.3"}], "ports": port}]}), 200)
    assert updated["subsets"] == [{"addresses": [{"ip": "10.0.0.3"}, {"ip": "10.0.0.4"}],
                                   "ports": port}]


def test_valid_objects_of_every_checked_kind_are_accepted(server: ServerThread) -> None:
    """The rules refuse nothing kube accepts in the minimal objects of every kind."""
    for kind in (POD, SERVICE, DEPLOYMENT, NODE, NAMESPACE, CONFIG_MAP, SECRET, INGRESS,
                 NETWORK_POLICY, ENDPOINT_SLICE, LEASE, JOB, CRON_JOB, POD_DISRUPTION_BUDGET,
                 PRIORITY_CLASS, INGRESS_CLASS, ENDPOINTS, HORIZONTAL_POD_AUTOSCALER):
        created = create(server, kind.collection(), kind.obj("ok"))
        assert ok(call(server, "PATCH", kind.item("ok"), kind.mutation), 200), created
