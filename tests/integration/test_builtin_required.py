"""Built-in kinds are not held to their OpenAPI ``required`` lists; kube's validation is.

kube-apiserver decodes a built-in kind into its Go struct, where a missing field is its zero
value; only the hand-written validation (``pkg/apis/<group>/validation/validation.go``) rejects
anything. The OpenAPI ``required`` lists of built-in types only mirror the Go fields without
``omitempty``, which is why kube writes those fields back as ``""``/``0``/``false``. Custom
resources (Gateway API) keep their structural schema's ``required``.

Each case posts a valid object with one schema-required field left out that kube does not
require; the answer is 201 and the field comes back as kube writes it. The other cases are
fields kube does require, with kube's own message.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.integration.harness import ServerThread
from tests.integration.kinds import (
    DEPLOYMENT,
    ENDPOINT_SLICE,
    GATEWAY,
    NETWORK_POLICY,
    NODE,
    POD,
    SERVICE,
    Kind,
)
from tests.integration.wire import call

_PROBE = {"httpGet": {"port": 80, "httpHeaders": [{"name": "X-Probe"}]}}
_CONTAINER = {"name": "c", "image": "nginx:1.27", "readinessProbe": _PROBE}
_NODE_INFO = {"operatingSystem": "linux", "architecture": "amd64"}
_NODE_INFO_ZEROS = {key: "" for key in (
    "machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
    "kubeletVersion", "kubeProxyVersion")}

# (kind, fields merged into the valid object, path to the field, what kube returns there)
ACCEPTED: list[tuple[str, Kind, dict[str, Any], tuple[Any, ...], Any]] = [
    ("node-info", NODE, {"status": {"nodeInfo": _NODE_INFO}}, ("status", "nodeInfo"),
     {**_NODE_INFO, **_NODE_INFO_ZEROS}),
    ("node-kubelet-port", NODE, {"status": {"daemonEndpoints": {"kubeletEndpoint": {}}}},
     ("status", "daemonEndpoints", "kubeletEndpoint", "Port"), 0),
    ("node-address", NODE, {"status": {"addresses": [{"type": "InternalIP"}]}},
     ("status", "addresses", 0, "address"), ""),
    ("node-condition", NODE, {"status": {"conditions": [{"type": "Ready"}]}},
     ("status", "conditions", 0, "status"), ""),
    ("node-attached-volume", NODE, {"status": {"volumesAttached": [{"name": "v"}]}},
     ("status", "volumesAttached", 0, "devicePath"), ""),
    ("pod-header-value", POD, {"spec": {"containers": [_CONTAINER]}},
     ("spec", "containers", 0, "readinessProbe", "httpGet", "httpHeaders", 0, "value"), ""),
    ("deployment-header-value", DEPLOYMENT,
     {"spec": {"template": {"spec": {"containers": [_CONTAINER]}}}},
     ("spec", "template", "spec", "containers", 0, "readinessProbe", "httpGet", "httpHeaders",
      0, "value"), ""),
    ("endpointslice-zone", ENDPOINT_SLICE,
     {"endpoints": [{"addresses": ["10.0.0.1"], "hints": {"forZones": [{}]}}]},
     ("endpoints", 0, "hints", "forZones", 0, "name"), ""),
]


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


@pytest.mark.parametrize(("case", "kind", "extra", "path", "expected"), ACCEPTED,
                         ids=[c[0] for c in ACCEPTED])
def test_schema_required_field_kube_does_not_require_is_accepted(
        server: ServerThread, case: str, kind: Kind, extra: dict[str, Any],
        path: tuple[Any, ...], expected: Any) -> None:
    body = _merged(kind.obj("x"), extra)
    reply = call(server, "POST", kind.collection(), body)
    assert reply.status == 201, reply.body
    assert _at(reply.json, path) == expected
    stored = call(server, "GET", kind.item("x")).json
    assert _at(stored, path) == expected
    again = call(server, "PUT", kind.item("x"), reply.json)  # what kube wrote reads back as is
    assert again.status == 200, again.body
    assert again.json["metadata"]["resourceVersion"] == reply.json["metadata"]["resourceVersion"]


def _causes(reply: Any) -> list[tuple[str, str, str]]:
    assert reply.status == 422, reply.body
    return [(c["reason"], c["field"], c["message"]) for c in reply.json["details"]["causes"]]


def _pod_with(volume: dict[str, Any]) -> dict[str, Any]:
    return _merged(POD.obj("v"), {"spec": {"volumes": [{"name": "data", **volume}]}})


@pytest.mark.parametrize(("volume", "causes"), [
    ({"hostPath": {}}, [("FieldValueRequired", "spec.volumes[0].hostPath.path",
                         "Required value")]),
    ({"gcePersistentDisk": {}}, [("FieldValueRequired",
                                  "spec.volumes[0].persistentDisk.pdName", "Required value")]),
    ({"nfs": {"server": "nfs.local"}}, [
        ("FieldValueRequired", "spec.volumes[0].nfs.path", "Required value"),
        ("FieldValueInvalid", "spec.volumes[0].nfs.path",
         'Invalid value: "": must be an absolute path')]),
    ({"configMap": {"items": [{"key": "k"}]}}, [
        ("FieldValueRequired", "spec.volumes[0].configMap.name", "Required value"),
        ("FieldValueRequired", "spec.volumes[0].configMap.items[0].path", "Required value")]),
    ({"quobyte": {"volume": "v"}}, [
        ("FieldValueRequired", "spec.volumes[0].quobyte.registry",
         "Required value: must be a host:port pair or multiple pairs separated by commas")]),
], ids=["hostPath", "gcePersistentDisk", "nfs", "configMap", "quobyte"])
def test_volume_sources_keep_kubes_required_fields(server: ServerThread, volume: dict[str, Any],
                                                   causes: list[tuple[str, str, str]]) -> None:
    reply = call(server, "POST", POD.collection(), _pod_with(volume))
    assert _causes(reply) == causes


def test_service_port_is_checked_as_kube_does(server: ServerThread) -> None:
    body = _merged(SERVICE.obj("s"), {"spec": {"ports": [{"name": "web"}]}})
    assert _causes(call(server, "POST", SERVICE.collection(), body)) == [
        ("FieldValueInvalid", "spec.ports[0].port",
         "Invalid value: 0: must be between 1 and 65535, inclusive")]


def test_owner_reference_fields_are_invalid_not_required(server: ServerThread) -> None:
    body = SERVICE.obj("s", ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "p"}])
    assert _causes(call(server, "POST", SERVICE.collection(), body)) == [
        ("FieldValueInvalid", "metadata.ownerReferences.uid",
         'Invalid value: "": uid must not be empty')]


def test_network_policy_ip_block_needs_its_cidr(server: ServerThread) -> None:
    body = _merged(NETWORK_POLICY.obj("np"), {"spec": {"egress": [{"to": [{"ipBlock": {}}]}]}})
    assert _causes(call(server, "POST", NETWORK_POLICY.collection(), body)) == [
        ("FieldValueRequired", "spec.egress[0].to[0].ipBlock.cidr", "Required value")]


def test_custom_resources_keep_their_schema_required(server: ServerThread) -> None:
    body = GATEWAY.obj("g")
    del body["spec"]["gatewayClassName"]
    # a Required error blocks the CRD's CEL rules, and kube says so (customresource/strategy.go
    # hasBlockingErr): Gateway's CRD has rules
    assert _causes(call(server, "POST", GATEWAY.collection(), body)) == [
        ("FieldValueRequired", "spec.gatewayClassName", "Required value"),
        ("FieldValueInvalid", "<nil>", 'Invalid value: "null": some validation rules were not '
         "checked because the object was invalid; correct the existing errors to complete "
         "validation")]
