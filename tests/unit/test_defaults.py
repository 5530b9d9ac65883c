"""server/defaults.py: kube's per-kind defaults (objects-and-clients.md §3), pure and idempotent."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kubewire.json_copy import copy_json
from kubewire.json_types import JSON
from kubewire.resources import REGISTRY, Resource
from kubewire.schema import kinds
from kubewire.schema.validate import (
    SchemaNode,
    _is_null_to_default,
    builtin_root,
    fill_defaults,
)
from kubewire.server.writes.defaults import (
    KIND_DEFAULTERS,
    apply_kind_defaults,
    image_tag,
)
from tests.gateway_api import gateway_resource


def _res(resource_id: str) -> Resource:
    found = REGISTRY.by_id(resource_id)
    assert found is not None, resource_id
    return found


POD = _res("core/pods")
DEPLOYMENT = _res("apps/deployments")
SERVICE = _res("core/services")
NODE = _res("core/nodes")
SECRET = _res("core/secrets")
CONFIGMAP = _res("core/configmaps")
NETPOL = _res("networking.k8s.io/networkpolicies")
SLICE = _res("discovery.k8s.io/endpointslices")
INGRESS = _res("networking.k8s.io/ingresses")
GATEWAY = gateway_resource("gateways")  # served from its pre-installed CRD


def pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": spec}


def service(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": spec,
            **extra}


def deployment(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": spec}


MINIMAL_TEMPLATE: dict[str, Any] = {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}


# --- Pod ---------------------------------------------------------------------------------------

def test_pod_spec_defaults() -> None:
    spec = apply_kind_defaults(POD, pod({"containers": [{"name": "c", "image": "nginx"}]}))["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["securityContext"] == {}
    assert spec["enableServiceLinks"] is True


def test_container_defaults() -> None:
    body = pod({"containers": [{"name": "c", "image": "nginx:1.27",
                                "ports": [{"containerPort": 80}]}]})
    container = apply_kind_defaults(POD, body)["spec"]["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
    assert container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]


@pytest.mark.parametrize(("image", "policy"), [
    ("nginx", "Always"),
    ("nginx:latest", "Always"),
    ("docker.io/library/nginx", "Always"),
    ("localhost:5000/app", "Always"),
    ("nginx:1.27", "IfNotPresent"),
    ("registry.example.com:5000/team/app:v2", "IfNotPresent"),
    ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
    ("nginx:latest@sha256:" + "a" * 64, "Always"),
    ("", "IfNotPresent"),  # unparseable: ParseImageName fails, no tag
    ("Nginx", "IfNotPresent"),  # repository names must be lower case
])
def test_image_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    body = pod({"containers": [{"name": "c", "image": image}]})
    assert apply_kind_defaults(POD, body)["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_image_tag() -> None:
    assert image_tag("busybox") == "latest"
    assert image_tag("quay.io/org/img:1.0") == "1.0"
    assert image_tag("img@sha256:" + "b" * 64) == ""


def test_explicit_values_are_kept() -> None:
    body = pod({"containers": [{"name": "c", "image": "nginx", "imagePullPolicy": "Never"}],
                "enableServiceLinks": False, "terminationGracePeriodSeconds": 0,
                "restartPolicy": "Never", "securityContext": {"runAsUser": 1000}})
    spec = apply_kind_defaults(POD, body)["spec"]
    assert spec["enableServiceLinks"] is False
    assert spec["terminationGracePeriodSeconds"] == 0  # a pointer: 0 is a value
    assert spec["restartPolicy"] == "Never"
    assert spec["securityContext"] == {"runAsUser": 1000}
    assert spec["containers"][0]["imagePullPolicy"] == "Never"


def test_probe_and_lifecycle_defaults() -> None:
    body = pod({"containers": [{
        "name": "c", "image": "nginx",
        "livenessProbe": {"httpGet": {"port": 8080}},
        "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 5},
        "startupProbe": {"grpc": {"port": 9000}, "timeoutSeconds": 0},
        "lifecycle": {"preStop": {"httpGet": {"port": 8080, "path": "/stop"}}},
    }]})
    container = apply_kind_defaults(POD, body)["spec"]["containers"][0]
    assert container["livenessProbe"] == {
        "httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
        "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    assert container["readinessProbe"]["periodSeconds"] == 5
    assert container["startupProbe"]["timeoutSeconds"] == 1  # 0 is Go's zero value
    assert container["startupProbe"]["grpc"] == {"port": 9000, "service": ""}
    assert container["lifecycle"]["preStop"]["httpGet"] == {"port": 8080, "path": "/stop",
                                                            "scheme": "HTTP"}


def test_env_field_ref_api_version() -> None:
    body = pod({"containers": [{"name": "c", "image": "nginx", "env": [
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "PLAIN", "value": "x"}]}]})
    env = apply_kind_defaults(POD, body)["spec"]["containers"][0]["env"]
    assert env[0]["valueFrom"]["fieldRef"] == {"fieldPath": "spec.nodeName", "apiVersion": "v1"}
    assert env[1] == {"name": "PLAIN", "value": "x"}


def test_requests_default_to_limits_on_pods() -> None:
    body = pod({"containers": [{"name": "c", "image": "nginx", "resources": {
        "limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m"}}}],
        "initContainers": [{"name": "i", "image": "busybox",
                            "resources": {"limits": {"memory": "64Mi"}}}]})
    spec = apply_kind_defaults(POD, body)["spec"]
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert spec["initContainers"][0]["resources"]["requests"] == {"memory": "64Mi"}


def test_host_network_copies_container_ports_to_host_ports() -> None:
    body = pod({"hostNetwork": True, "containers": [
        {"name": "c", "image": "nginx", "ports": [{"containerPort": 80},
                                                  {"containerPort": 81, "hostPort": 9081}]}]})
    ports = apply_kind_defaults(POD, body)["spec"]["containers"][0]["ports"]
    assert [p["hostPort"] for p in ports] == [80, 9081]


def test_volume_defaults() -> None:
    body = pod({"containers": [{"name": "c", "image": "nginx"}], "volumes": [
        {"name": "scratch"},
        {"name": "s", "secret": {"secretName": "creds"}},
        {"name": "cm", "configMap": {"name": "conf", "defaultMode": 256}},
        {"name": "d", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
        {"name": "p", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}},
            {"downwardAPI": {"items": [{"path": "ns",
                                        "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}},
        {"name": "h", "hostPath": {"path": "/data"}},
        {"name": "r", "rbd": {"monitors": ["m"], "image": "img"}},
    ]})
    volumes = {v["name"]: v for v in apply_kind_defaults(POD, body)["spec"]["volumes"]}
    assert volumes["scratch"] == {"name": "scratch", "emptyDir": {}}
    assert volumes["s"]["secret"]["defaultMode"] == 420
    assert volumes["cm"]["configMap"]["defaultMode"] == 256
    assert volumes["d"]["downwardAPI"]["defaultMode"] == 420
    assert volumes["d"]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    projected = volumes["p"]["projected"]
    assert projected["defaultMode"] == 420
    assert projected["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3600
    assert projected["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    assert volumes["h"]["hostPath"] == {"path": "/data", "type": ""}
    # OpenAPI declared defaults come from the schema layer
    assert volumes["r"]["rbd"] == {"monitors": ["m"], "image": "img", "pool": "rbd",
                                   "user": "admin", "keyring": "/etc/ceph/keyring"}


# --- Deployment --------------------------------------------------------------------------------

def test_deployment_defaults() -> None:
    spec = apply_kind_defaults(DEPLOYMENT, deployment(
        {"selector": {"matchLabels": {"app": "web"}}, "template": MINIMAL_TEMPLATE}))["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    template = spec["template"]["spec"]
    assert template["restartPolicy"] == "Always"
    assert template["dnsPolicy"] == "ClusterFirst"
    assert template["schedulerName"] == "default-scheduler"
    assert template["securityContext"] == {}
    assert template["terminationGracePeriodSeconds"] == 30
    assert "enableServiceLinks" not in template  # SetDefaults_Pod only
    assert template["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert template["containers"][0]["terminationMessagePolicy"] == "File"


def test_deployment_keeps_explicit_strategy_and_replicas() -> None:
    spec = apply_kind_defaults(DEPLOYMENT, deployment(
        {"replicas": 0, "strategy": {"type": "Recreate"}, "template": MINIMAL_TEMPLATE,
         "selector": {"matchLabels": {"app": "web"}}}))["spec"]
    assert spec["replicas"] == 0
    assert spec["strategy"] == {"type": "Recreate"}
    partial = apply_kind_defaults(DEPLOYMENT, deployment(
        {"strategy": {"rollingUpdate": {"maxSurge": 1}}, "template": MINIMAL_TEMPLATE}))
    assert partial["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}


def test_deployment_template_does_not_get_pod_only_defaults() -> None:
    template = copy.deepcopy(MINIMAL_TEMPLATE)
    template["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    spec = apply_kind_defaults(DEPLOYMENT, deployment({"template": template}))["spec"]
    assert "requests" not in spec["template"]["spec"]["containers"][0]["resources"]


# --- Service -----------------------------------------------------------------------------------

def test_service_cluster_ip_defaults() -> None:
    spec = apply_kind_defaults(SERVICE, service(
        {"selector": {"app": "web"}, "ports": [{"port": 80}]}))["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert "externalTrafficPolicy" not in spec
    assert "allocateLoadBalancerNodePorts" not in spec
    assert "clusterIP" not in spec  # allocation, not defaulting


@pytest.mark.parametrize("target", ["http", 8080])
def test_service_target_port_kept(target: Any) -> None:
    spec = apply_kind_defaults(SERVICE, service(
        {"ports": [{"port": 80, "targetPort": target, "protocol": "UDP"}]}))["spec"]
    assert spec["ports"] == [{"port": 80, "targetPort": target, "protocol": "UDP"}]


def test_service_node_port_and_load_balancer_defaults() -> None:
    node_port = apply_kind_defaults(SERVICE, service({"type": "NodePort",
                                                      "ports": [{"port": 80}]}))["spec"]
    assert node_port["externalTrafficPolicy"] == "Cluster"
    assert node_port["internalTrafficPolicy"] == "Cluster"
    assert "allocateLoadBalancerNodePorts" not in node_port
    balancer = apply_kind_defaults(SERVICE, service(
        {"type": "LoadBalancer", "ports": [{"port": 443}]},
        status={"loadBalancer": {"ingress": [{"ip": "203.0.113.5"}, {"hostname": "lb"}]}}))
    assert balancer["spec"]["externalTrafficPolicy"] == "Cluster"
    assert balancer["spec"]["allocateLoadBalancerNodePorts"] is True
    assert balancer["status"]["loadBalancer"]["ingress"] == [
        {"ip": "203.0.113.5", "ipMode": "VIP"}, {"hostname": "lb"}]


def test_service_external_ips_make_cluster_ip_externally_accessible() -> None:
    spec = apply_kind_defaults(SERVICE, service(
        {"externalIPs": ["198.51.100.1"], "ports": [{"port": 80}]}))["spec"]
    assert spec["externalTrafficPolicy"] == "Cluster"


def test_external_name_service_gets_no_traffic_policy() -> None:
    spec = apply_kind_defaults(SERVICE, service(
        {"type": "ExternalName", "externalName": "db.example.com"}))["spec"]
    assert "internalTrafficPolicy" not in spec
    assert "externalTrafficPolicy" not in spec
    assert spec["sessionAffinity"] == "None"


def test_session_affinity() -> None:
    client_ip = apply_kind_defaults(SERVICE, service({"sessionAffinity": "ClientIP"}))["spec"]
    assert client_ip["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    kept = apply_kind_defaults(SERVICE, service(
        {"sessionAffinity": "ClientIP",
         "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}))["spec"]
    assert kept["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 60}}
    dropped = apply_kind_defaults(SERVICE, service(
        {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}))["spec"]
    assert "sessionAffinityConfig" not in dropped  # affinity None clears the config


# --- the other kinds ---------------------------------------------------------------------------

def test_node_allocatable_copies_capacity() -> None:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
    assert apply_kind_defaults(NODE, body)["status"]["allocatable"] == {
        "cpu": "4", "memory": "8Gi", "pods": "110"}
    body["status"]["allocatable"] = {"cpu": "3"}
    assert apply_kind_defaults(NODE, body)["status"]["allocatable"] == {"cpu": "3"}
    no_status = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}}
    assert apply_kind_defaults(NODE, no_status) == no_status


def test_network_policy_types() -> None:
    def policy_types(spec: dict[str, Any]) -> Any:
        body = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": "p"}, "spec": {"podSelector": {}, **spec}}
        return apply_kind_defaults(NETPOL, body)["spec"]["policyTypes"]

    assert policy_types({}) == ["Ingress"]
    assert policy_types({"egress": [{"to": [{"podSelector": {}}]}]}) == ["Ingress", "Egress"]
    assert policy_types({"egress": []}) == ["Ingress"]
    assert policy_types({"policyTypes": ["Egress"]}) == ["Egress"]


def test_network_policy_port_protocol() -> None:
    body = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "p"}, "spec": {
                "podSelector": {}, "ingress": [{"ports": [{"port": 80}]}],
                "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}]}}
    spec = apply_kind_defaults(NETPOL, body)["spec"]
    assert spec["ingress"][0]["ports"] == [{"port": 80, "protocol": "TCP"}]
    assert spec["egress"][0]["ports"] == [{"port": 53, "protocol": "UDP"}]


def test_endpoint_slice_ports() -> None:
    body = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-abc"}, "addressType": "IPv4", "endpoints": [],
            "ports": [{"port": 8080}, {"name": "dns", "port": 53, "protocol": "UDP"}]}
    assert apply_kind_defaults(SLICE, body)["ports"] == [
        {"port": 8080, "name": "", "protocol": "TCP"},
        {"name": "dns", "port": 53, "protocol": "UDP"}]


def test_secret_type_opaque() -> None:
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"k": "dg=="}}
    assert apply_kind_defaults(SECRET, body)["type"] == "Opaque"
    typed = {**body, "type": "kubernetes.io/tls"}
    assert apply_kind_defaults(SECRET, typed)["type"] == "kubernetes.io/tls"


def test_kinds_without_visible_defaults_are_unchanged() -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert apply_kind_defaults(CONFIGMAP, config_map) == config_map
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "i"}, "spec": {"rules": [{"http": {"paths": [
                   {"path": "/", "backend": {"service": {"name": "web",
                                                         "port": {"number": 80}}}}]}}]}}
    assert apply_kind_defaults(INGRESS, ingress) == ingress  # pathType is required, no default


def test_custom_resources_get_structural_defaults_while_decoding() -> None:
    """apiextensions defaults a custom resource as it decodes it, before the strategy compares
    old and new: an object that only lacks its defaults is unchanged."""
    gateway = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "g"}, "spec": {"gatewayClassName": "x",
                                                   "listeners": [{"name": "http", "port": 80,
                                                                  "protocol": "HTTP"}]}}
    defaulted = apply_kind_defaults(GATEWAY, gateway)
    assert defaulted["spec"]["listeners"][0]["allowedRoutes"] == {"namespaces": {"from": "Same"}}
    assert "allowedRoutes" not in gateway["spec"]["listeners"][0]  # the input is untouched
    assert apply_kind_defaults(GATEWAY, defaulted) == defaulted


def test_table_covers_the_kinds_about_to_be_added() -> None:
    for resource_id in ("core/configmaps", "core/secrets", "core/serviceaccounts",
                        "coordination.k8s.io/leases", "core/events"):
        assert resource_id in KIND_DEFAULTERS
    events = Resource("", "v1", "Event", "events", "event", namespaced=True)
    body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "reason": "x"}
    assert apply_kind_defaults(events, body) == body


# --- purity and idempotence --------------------------------------------------------------------

BODIES = [
    (POD, pod({"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}],
                               "livenessProbe": {"httpGet": {"port": 80}},
                               "resources": {"limits": {"cpu": "1"}}}],
               "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "x"}}]})),
    (DEPLOYMENT, deployment({"template": MINIMAL_TEMPLATE})),
    (SERVICE, service({"type": "LoadBalancer", "sessionAffinity": "ClientIP",
                       "ports": [{"port": 80}]})),
    (NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "status": {"capacity": {"cpu": "1"}}}),
    (NETPOL, {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": "p"}, "spec": {"egress": [{}]}}),
    (SLICE, {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": "s"}, "addressType": "IPv4", "ports": [{}]}),
    (SECRET, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
]


@pytest.mark.parametrize(("resource", "body"), BODIES, ids=lambda v: getattr(v, "id", ""))
def test_defaulting_is_idempotent_and_pure(resource: Resource, body: dict[str, Any]) -> None:
    original = copy.deepcopy(body)
    once = apply_kind_defaults(resource, body)
    assert body == original  # the input is untouched
    assert apply_kind_defaults(resource, once) == once
    assert once is not body


@pytest.mark.parametrize("spec", [
    {"containers": "nope"},
    {"containers": [{"name": "c", "image": 5, "ports": "x", "livenessProbe": []}]},
    {"containers": [None], "volumes": [None, "x"], "securityContext": None},
])
def test_malformed_bodies_are_left_for_validation(spec: dict[str, Any]) -> None:
    apply_kind_defaults(POD, pod(spec))
    apply_kind_defaults(DEPLOYMENT, deployment({"strategy": "x", "template": {"spec": spec}}))
    apply_kind_defaults(SERVICE, service({"ports": "x", "type": 3}))


def test_null_fields_count_as_unset() -> None:
    spec = apply_kind_defaults(POD, pod({"containers": [{"name": "c", "image": "nginx"}],
                                         "securityContext": None, "dnsPolicy": None}))["spec"]
    assert spec["securityContext"] == {}
    assert spec["dnsPolicy"] == "ClusterFirst"


# --- schema defaults: done in place, as the copying walk below does them -------------------------

def _defaulted(node: SchemaNode, value: JSON) -> JSON:
    """The reference for ``fill_defaults``: apiextensions structural defaulting written as a
    copying walk (containers along defaulted paths copied, other subtrees shared), every
    property of every node visited."""
    if not node.has_defaults:
        return value
    if isinstance(value, dict):
        out = dict(value)
        for key, prop in node.props.items():
            if prop.has_default and (key not in out or _is_null_to_default(prop, out[key])):
                out[key] = copy_json(prop.default)
        for key, child in out.items():
            sub = node.props.get(key) or node.values
            if sub is not None:
                if key not in node.props and _is_null_to_default(sub, child):
                    child = copy_json(sub.default)
                out[key] = _defaulted(sub, child)
        return out
    if isinstance(value, list) and node.items is not None:
        items = node.items
        return [_defaulted(items, copy_json(items.default)
                           if _is_null_to_default(items, v) else v) for v in value]
    return value


def _exercising(node: SchemaNode, depth: int, nulls: bool) -> Any:
    """A value of ``node`` reaching every default below it: a property with a default of its
    own is left out or null (``nulls``), one with defaults below it gets a value of its own,
    a list holds an empty and a null item, a map an empty and a null value."""
    if depth == 0 or not (node.has_defaults or node.has_default):
        return {}
    if node.items is not None:
        return [_exercising(node.items, depth - 1, nulls), None, {}]
    out: dict[str, Any] = {"unknownField": None, "x-extra": {}}
    for key, prop in node.props.items():
        if prop.has_default and nulls:
            out[key] = None
        elif prop.has_defaults:
            out[key] = _exercising(prop, depth - 1, not nulls)
    if node.values is not None:
        out["some-key"] = _exercising(node.values, depth - 1, nulls)
        out["null-key"] = None
    return out


@pytest.mark.parametrize("kind", [k for k in kinds()], ids=lambda k: f"{k.group}/{k.kind}")
def test_schema_defaults_in_place_match_the_copying_walk(kind: Any) -> None:
    api_version = f"{kind.group}/{kind.version}" if kind.group else kind.version
    root = builtin_root(api_version, kind.kind)
    for nulls in (False, True):
        body = _exercising(root, 12, nulls)
        expected = _defaulted(root, body)
        owned = copy.deepcopy(body)
        fill_defaults(root, owned)
        # the same values in the same key order (kube writes Go's field order)
        assert json.dumps(owned) == json.dumps(expected)


def test_schema_defaults_fill_pod_ports_and_volume_sources() -> None:
    body = pod({"containers": [{"name": "c", "image": "nginx", "ports": [
        {"containerPort": 80}, {"containerPort": 81, "protocol": None},
        {"containerPort": 82, "protocol": "UDP"}]}],
        "volumes": [{"name": "r", "rbd": {"monitors": ["m"], "image": "i", "pool": None}}]})
    spec = apply_kind_defaults(POD, body)["spec"]
    assert [p["protocol"] for p in spec["containers"][0]["ports"]] == ["TCP", "TCP", "UDP"]
    assert spec["volumes"][0]["rbd"] == {"monitors": ["m"], "image": "i", "pool": "rbd",
                                         "keyring": "/etc/ceph/keyring", "user": "admin"}


def test_schema_defaults_of_map_values_and_list_items_match_the_copying_walk() -> None:
    # no built-in schema defaults a map value or a list item itself: a node made for it
    def node(**facts: Any) -> SchemaNode:
        made = SchemaNode()
        for name, value in facts.items():
            setattr(made, name, value)
        return made

    leaf = node(has_default=True, default={"d": 1})
    root = node(has_defaults=True, props={"list": node(has_defaults=True, items=leaf),
                                          "known": node()}, values=leaf)
    body = {"list": [None, {"x": 1}], "known": None, "other": None, "kept": {"y": 2}}
    owned = copy.deepcopy(body)
    fill_defaults(root, owned)
    assert json.dumps(owned) == json.dumps(_defaulted(root, body))
    assert owned == {"list": [{"d": 1}, {"x": 1}], "known": None, "other": {"d": 1},
                     "kept": {"y": 2}}
