"""Protobuf request bodies -> kube JSON (server/protobuf.py), with a test-side encoder."""

from __future__ import annotations

import base64
import copy
import json
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubewire.resources import REGISTRY
from kubewire.server.wire import protobuf
from kubewire.server.wire.protobuf import (
    ENVELOPE_PREFIX,
    FieldFact,
    decode_protobuf_object,
    load_proto_facts,
)
from kubewire.status import BadRequest

# --- a small encoder from the same facts (gogo's output shape) ---------------------------------

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _delimited(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def _seconds(text: str) -> tuple[int, int]:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(moment.timestamp()) // 1, moment.microsecond * 1000


def _special(value: Any, message: str) -> bytes | None:
    if message in ("string", "bytes", "int32", "int64", "bool"):
        return None
    if message in (_META + "Time", _META + "MicroTime"):
        if value is None:
            return b""
        seconds, nanos = _seconds(value)
        return _tag(1, 0) + _varint(seconds) + (_tag(2, 0) + _varint(nanos) if nanos else b"")
    if message.endswith("intstr.IntOrString"):
        if isinstance(value, str):
            return _tag(1, 0) + _varint(1) + _delimited(3, value.encode())
        return _tag(1, 0) + _varint(0) + _tag(2, 0) + _varint(value)
    if message.endswith("resource.Quantity"):
        return _delimited(1, value.encode())
    if message.endswith(("runtime.RawExtension", "v1.FieldsV1")):
        return _delimited(1, json.dumps(value).encode())
    return None


def _value(value: Any, fact: FieldFact, number: int) -> bytes:
    special = _special(value, fact.type)
    if special is not None:
        return _delimited(number, special)
    if fact.type == "string":
        return _delimited(number, value.encode())
    if fact.type == "bytes":
        return _delimited(number, base64.b64decode(value))
    if fact.type in ("int32", "int64", "bool"):
        return _tag(number, 0) + _varint(int(value))
    return _delimited(number, encode_message(value, fact.type))


def _field(obj: dict[str, Any], fact: FieldFact, gogo: bool) -> bytes:
    if fact.is_inline:
        return _delimited(fact.number, encode_message(obj, fact.type, gogo))
    if fact.json_name not in obj:
        zero = {"string": "", "int32": 0, "int64": 0, "bool": False}.get(fact.type)
        if gogo and fact.omits_zero and zero is not None:  # gogo writes non-pointer zeros
            return _value(zero, fact, fact.number)
        return b""
    value = obj[fact.json_name]
    if fact.is_map:
        entry = FieldFact(2, "v", fact.type, False, False, False, False)
        return b"".join(_delimited(fact.number, _delimited(1, k.encode()) + _value(v, entry, 2))
                        for k, v in sorted(value.items()))
    items = value if fact.is_repeated else [value]
    return b"".join(_value(item, fact, fact.number) for item in items)


def encode_message(obj: dict[str, Any], message: str, gogo: bool = False) -> bytes:
    facts = load_proto_facts().messages[message]
    return b"".join(_field(obj, fact, gogo) for fact in facts.values())


def encode_body(obj: dict[str, Any], gogo: bool = True) -> bytes:
    """``k8s\\0`` + runtime.Unknown{typeMeta, raw} for a JSON-form object."""
    message = load_proto_facts().kinds[obj["apiVersion"]][obj["kind"]]
    type_meta = _delimited(1, obj["apiVersion"].encode()) + _delimited(2, obj["kind"].encode())
    raw = encode_message(obj, message, gogo)
    return ENVELOPE_PREFIX + _delimited(1, type_meta) + _delimited(2, raw)


# --- realistic objects, as kubectl sends them --------------------------------------------------

DEPLOYMENT: dict[str, Any] = {  # kubectl create deployment web --image=nginx
    "kind": "Deployment", "apiVersion": "apps/v1",
    "metadata": {"name": "web", "creationTimestamp": None, "labels": {"app": "web"}},
    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "nginx", "image": "nginx",
                                                   "resources": {}}]}},
             "strategy": {}},
    "status": {},
}
NAMESPACE: dict[str, Any] = {"kind": "Namespace", "apiVersion": "v1",
             "metadata": {"name": "demo", "creationTimestamp": None}, "spec": {}, "status": {}}
SERVICE: dict[str, Any] = {  # kubectl create service clusterip web --tcp=80:8080, + "https"
    "kind": "Service", "apiVersion": "v1",
    "metadata": {"name": "web", "creationTimestamp": None, "labels": {"app": "web"}},
    "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080},
                       {"name": "https", "protocol": "TCP", "port": 443, "targetPort": "https"}],
             "selector": {"app": "web"}, "type": "ClusterIP"},
    "status": {"loadBalancer": {}},
}
SECRET: dict[str, Any] = {  # kubectl create secret generic s --from-literal=...
    "kind": "Secret", "apiVersion": "v1",
    "metadata": {"name": "s", "creationTimestamp": None},
    "data": {"bin": base64.b64encode(b"\x00\xff\xfe").decode(), "password": "czNjcjN0"},
    "type": "Opaque",
}
CONFIGMAP: dict[str, Any] = {"kind": "ConfigMap", "apiVersion": "v1",
             "metadata": {"name": "cm", "creationTimestamp": None},
             "data": {"a": "1", "b": ""}}
SERVICE_ACCOUNT: dict[str, Any] = {"kind": "ServiceAccount", "apiVersion": "v1",
                   "metadata": {"name": "robot", "creationTimestamp": None}}
POD: dict[str, Any] = {
    "kind": "Pod", "apiVersion": "v1",
    "metadata": {"name": "p", "namespace": "default", "uid": "u-1", "resourceVersion": "7",
                 "creationTimestamp": "2024-12-11T09:15:02Z",
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                      "name": "rs", "uid": "u-0", "controller": True}]},
    "spec": {
        "volumes": [{"name": "cfg", "configMap": {"name": "cm", "defaultMode": 420}}],
        "containers": [{
            "name": "c", "image": "nginx", "ports": [{"containerPort": 80}],
            "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}},
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5},
            "securityContext": {"privileged": False, "runAsUser": 0},
        }],
        "automountServiceAccountToken": False,
    },
    "status": {},
}
LEASE: dict[str, Any] = {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
         "metadata": {"name": "l", "creationTimestamp": None},
         "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                  "renewTime": "2024-12-11T09:15:02.123456Z"}}
SCALE: dict[str, Any] = {"kind": "Scale", "apiVersion": "autoscaling/v1",
         "metadata": {"name": "web", "namespace": "default", "creationTimestamp": None},
         "spec": {"replicas": 4}, "status": {"replicas": 0}}
CSR: dict[str, Any] = {"kind": "CertificateSigningRequest", "apiVersion": "certificates.k8s.io/v1",
       "metadata": {"name": "c", "creationTimestamp": None},
       "spec": {"request": base64.b64encode(b"-----BEGIN").decode(),
                "signerName": "kubernetes.io/kube-apiserver-client", "expirationSeconds": 0,
                "usages": ["client auth"], "username": "u", "groups": ["g"]},
       "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "R",
                                  "lastUpdateTime": "2024-12-11T09:15:02Z",
                                  "lastTransitionTime": None}]}}

# issue 20 kinds: pointer zeros (suspend: false, completions: 0) and value 0 survive
_TEMPLATE: dict[str, Any] = {"metadata": {"creationTimestamp": None},
                             "spec": {"containers": [{"name": "c", "image": "busybox"}],
                                      "restartPolicy": "Never"}}
JOB: dict[str, Any] = {"kind": "Job", "apiVersion": "batch/v1",
       "metadata": {"name": "j", "creationTimestamp": None},
       "spec": {"parallelism": 0, "completions": 1, "backoffLimit": 6,
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
                "manualSelector": False, "template": _TEMPLATE,
                "completionMode": "NonIndexed", "suspend": False,
                "podReplacementPolicy": "TerminatingOrFailed"},
       "status": {"ready": 0, "terminating": 0}}
CRON_JOB: dict[str, Any] = {"kind": "CronJob", "apiVersion": "batch/v1",
            "metadata": {"name": "c", "creationTimestamp": None},
            "spec": {"schedule": "*/5 * * * *", "timeZone": "", "concurrencyPolicy": "Allow",
                     "suspend": False,
                     "jobTemplate": {"metadata": {"creationTimestamp": None},
                                     "spec": {"template": _TEMPLATE}},
                     "successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 1},
            "status": {}}
PDB: dict[str, Any] = {"kind": "PodDisruptionBudget", "apiVersion": "policy/v1",
       "metadata": {"name": "b", "creationTimestamp": None},
       "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}},
       "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                  "expectedPods": 0}}
PRIORITY_CLASS: dict[str, Any] = {"kind": "PriorityClass", "apiVersion": "scheduling.k8s.io/v1",
                  "metadata": {"name": "p", "creationTimestamp": None}, "value": 0,
                  "preemptionPolicy": "Never"}

HPA: dict[str, Any] = {
    "kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2",
    "metadata": {"name": "h", "creationTimestamp": None},
    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
             "minReplicas": 1, "maxReplicas": 3,
             "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                 "type": "Utilization", "averageUtilization": 80}}}],
             "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                                      "policies": [{"type": "Pods", "value": 4,
                                                    "periodSeconds": 15}]}}},
    "status": {"currentReplicas": 2, "desiredReplicas": 2, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {
            "averageValue": "50m", "averageUtilization": 50}}}]}}
HPA_V1: dict[str, Any] = {
    "kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v1",
    "metadata": {"name": "h", "creationTimestamp": None},
    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 1,
             "maxReplicas": 3, "targetCPUUtilizationPercentage": 80},
    "status": {"currentReplicas": 0, "desiredReplicas": 0}}

REALISTIC = [DEPLOYMENT, NAMESPACE, SERVICE, SECRET, CONFIGMAP, SERVICE_ACCOUNT, POD, LEASE, SCALE,
             CSR, JOB, CRON_JOB, PDB, PRIORITY_CLASS, HPA, HPA_V1]


def test_csr_extra_values_decode_as_their_lists() -> None:
    # ExtraValue is Go's []string in a message of items: its JSON is the list (nil when empty)
    sent = {**CSR, "spec": {**CSR["spec"], "extra": {"a": {"items": ["1", "2"]}, "b": {}}}}
    decoded = decode_protobuf_object(encode_body(sent), "certificates.k8s.io/v1",
                                     "CertificateSigningRequest")
    assert decoded["spec"]["extra"] == {"a": ["1", "2"], "b": None}


@pytest.mark.parametrize("obj", REALISTIC, ids=[f'{o["kind"]}-{o["apiVersion"]}'
                                                 for o in REALISTIC])
def test_round_trip_of_gogo_shaped_bodies(obj: dict[str, Any]) -> None:
    decoded = decode_protobuf_object(encode_body(obj), obj["apiVersion"], obj["kind"])
    assert decoded == obj
    assert list(decoded)[:2] == ["kind", "apiVersion"]


def test_keys_follow_go_struct_order() -> None:
    decoded = decode_protobuf_object(encode_body(SECRET), "v1", "Secret")
    assert list(decoded) == ["kind", "apiVersion", "metadata", "data", "type"]
    pod = decode_protobuf_object(encode_body(POD), "v1", "Pod")
    assert list(pod["metadata"]) == ["name", "namespace", "uid", "resourceVersion",
                                     "creationTimestamp", "ownerReferences"]


def test_every_builtin_registry_kind_and_kubectl_kind_is_decodable() -> None:
    kinds = load_proto_facts().kinds
    # apiextensions' generated.proto is not among the inputs (../shared/proto): CRDs are JSON.
    for res in REGISTRY:
        if not res.is_custom and res.group != "apiextensions.k8s.io":
            assert res.kind in kinds[res.api_version], res.kind
            obj = {"kind": res.kind, "apiVersion": res.api_version, "metadata": {"name": "x"}}
            assert decode_protobuf_object(encode_body(obj), res.api_version, res.kind) == obj
    assert "Scale" in kinds["autoscaling/v1"] and "DeleteOptions" in kinds["apps/v1"]


def test_time_drops_nanos_micro_time_keeps_microseconds() -> None:
    time = _tag(1, 0) + _varint(1733908502) + _tag(2, 0) + _varint(123456789)
    meta = _delimited(8, time)
    lease = encode_message({"metadata": {"name": "l"}}, "k8s.io.api.coordination.v1.Lease")
    spec = _delimited(2, _delimited(4, time))
    body = _envelope("coordination.k8s.io/v1", "Lease", lease + _delimited(1, meta) + spec)
    decoded = decode_protobuf_object(body, "coordination.k8s.io/v1", "Lease")
    assert decoded["metadata"]["creationTimestamp"] == "2024-12-11T09:15:02Z"
    assert decoded["spec"]["renewTime"] == "2024-12-11T09:15:02.123456Z"


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _delimited(1, api_version.encode()) + _delimited(2, kind.encode())
    return ENVELOPE_PREFIX + _delimited(1, type_meta) + _delimited(2, raw)


def test_pointer_zeros_stay_and_omitempty_zeros_go() -> None:
    obj = copy.deepcopy(DEPLOYMENT)
    obj["spec"]["replicas"] = 0
    obj["spec"]["revisionHistoryLimit"] = 0
    body = encode_body(obj, gogo=True)  # also writes minReadySeconds: 0, paused: false, ...
    decoded = decode_protobuf_object(body, "apps/v1", "Deployment")
    assert decoded["spec"]["replicas"] == 0 and decoded["spec"]["revisionHistoryLimit"] == 0
    assert "minReadySeconds" not in decoded["spec"] and "paused" not in decoded["spec"]
    assert decoded["metadata"] == {"name": "web", "creationTimestamp": None,
                                   "labels": {"app": "web"}}


def test_kind_and_version_default_to_the_url_and_a_mismatch_is_returned() -> None:
    raw = encode_message({"metadata": {"name": "n"}}, "k8s.io.api.core.v1.Namespace")
    body = ENVELOPE_PREFIX + _delimited(2, raw)
    assert decode_protobuf_object(body, "v1", "Namespace") == {
        "kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "n"}}
    pod = encode_body({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}})
    assert decode_protobuf_object(pod, "apps/v1", "Deployment")["kind"] == "Pod"


def test_unknown_fields_and_groups_are_skipped_and_repeated_messages_merge() -> None:
    extra = (_tag(99, 0) + _varint(5) + _tag(98, 1) + b"\0" * 8 + _tag(97, 5) + b"\0" * 4
             + _tag(96, 3) + _tag(1, 0) + _varint(1) + _tag(96, 4) + _delimited(95, b"zz"))
    raw = (encode_message({"metadata": {"name": "n"}}, "k8s.io.api.core.v1.Namespace") + extra
           + _delimited(1, _delimited(11, _delimited(1, b"a") + _delimited(2, b"b"))))
    decoded = decode_protobuf_object(_envelope("v1", "Namespace", raw), "v1", "Namespace")
    assert decoded["metadata"] == {"name": "n", "labels": {"a": "b"}}


def test_packed_repeated_numbers() -> None:
    ctx = _delimited(4, _varint(1) + _varint(2))  # PodSecurityContext.supplementalGroups
    raw = _delimited(2, _delimited(14, ctx))
    decoded = decode_protobuf_object(_envelope("v1", "Pod", raw), "v1", "Pod")
    assert decoded["spec"]["securityContext"]["supplementalGroups"] == [1, 2]


# --- errors: kube's Status texts ---------------------------------------------------------------

UNRECOGNIZED = "the object provided is unrecognized (must be of type Deployment): "


@pytest.mark.parametrize(("body", "message"), [
    (b"", "empty data (<empty>)"),
    (b'{"kind":"Deployment","apiVersion":"apps/v1"}',
     "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] "
     '({"kind":"Deployment","apiVersi ...)'),
    (b"k8s\x00", "empty body (6b387300)"),
    (b"k8s\x00\x0a\x05ab", "unexpected EOF (6b3873000a056162)"),
    (b"k8s\x00\x28", "unexpected EOF (6b38730028)"),
    (b"k8s\x00\x08", "proto: wrong wireType = 0 for field TypeMeta (6b38730008)"),
    (b"k8s\x00\x00", "proto: Unknown: illegal tag 0 (wire type 0) (6b38730000)"),
    (b"k8s\x00\x0c", "proto: Unknown: wiretype end group for non-group (6b3873000c)"),
    (b"k8s\x00\x28" + b"\xff" * 10, "proto: integer overflow (6b38730028ffffffffffffffffffff)"),
    (b"k8s\x00\x0a" + b"\xff" * 9 + b"\x01",
     "proto: negative length found during unmarshaling (6b3873000affffffffffffffffff01)"),
    (b"k8s\x00\x2f", "proto: illegal wireType 7 (6b3873002f)"),
])
def test_envelope_errors(body: bytes, message: str) -> None:
    with pytest.raises(BadRequest) as info:
        decode_protobuf_object(body, "apps/v1", "Deployment")
    assert info.value.message == UNRECOGNIZED + message
    assert info.value.to_status()["code"] == 400


@pytest.mark.parametrize(("raw", "message"), [
    (b"\x0a\x05", "unexpected EOF"),
    (b"\x08\x01", "proto: wrong wireType = 0 for field Metadata"),
    (b"\x0a\x02\x0a\x00\x12\x02\x0a\x00", "proto: wrong wireType = 2 for field Replicas"),
    (b"\x0a\x02\x08\x01", "proto: wrong wireType = 0 for field Name"),
])
def test_object_errors_name_the_kind(raw: bytes, message: str) -> None:
    body = _envelope("apps/v1", "Deployment", raw)
    with pytest.raises(BadRequest) as info:
        decode_protobuf_object(body, "apps/v1", "Deployment")
    assert info.value.message.startswith(
        'Deployment in version "v1" cannot be handled as a Deployment: ')
    assert info.value.message.endswith(message)


def test_unregistered_kind() -> None:
    with pytest.raises(BadRequest) as info:
        decode_protobuf_object(_envelope("apps/v1", "Gadget", b""), "apps/v1", "Deployment")
    assert info.value.message == (
        'Gadget in version "v1" cannot be handled as a Deployment: no kind "Gadget" is '
        'registered for version "apps/v1" in scheme "pkg/api/legacyscheme/scheme.go:30"')


def test_nesting_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protobuf, "MAX_MESSAGE_DEPTH", 2)
    with pytest.raises(BadRequest, match="nesting deeper than 2 messages"):
        decode_protobuf_object(encode_body(DEPLOYMENT), "apps/v1", "Deployment")


def test_strings_that_are_not_utf8_read_as_go_encodes_them() -> None:
    """gogo keeps a string's bytes; the stored JSON has one U+FFFD per invalid byte."""
    body = encode_body(dict(CONFIGMAP, data={"PLACEHOLDER": "PLACEHOLDER"}))
    body = body.replace(b"PLACEHOLDER", b"x\xff\xe2\x82yyyyyyy")
    assert decode_protobuf_object(body, "v1", "ConfigMap")["data"] == {
        "x\ufffd\ufffd\ufffdyyyyyyy": "x\ufffd\ufffd\ufffdyyyyyyy"}


def test_embedded_json_nested_too_deep_is_a_bad_request() -> None:
    raw = json.dumps({"f:data": {"f:" + "x" * 3000: {}}})
    entry = {"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
             "fieldsV1": json.loads(raw)}
    obj = dict(CONFIGMAP, metadata=dict(CONFIGMAP["metadata"], managedFields=[entry]))
    body = encode_body(obj).replace(raw.encode(), b"[" * len(raw))
    with pytest.raises(BadRequest) as info:
        decode_protobuf_object(body, "v1", "ConfigMap")
    assert info.value.message == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: exceeded max depth')


# --- fuzzing: nothing but BadRequest escapes ---------------------------------------------------

def _decode_or_bad_request(body: bytes) -> None:
    try:
        result = decode_protobuf_object(body, "apps/v1", "Deployment")
    except BadRequest:
        return
    assert isinstance(result, dict)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    _decode_or_bad_request(data)
    _decode_or_bad_request(ENVELOPE_PREFIX + data)
    _decode_or_bad_request(_envelope("apps/v1", "Deployment", data))
    _decode_or_bad_request(_envelope("v1", "Pod", data))


_VALID = encode_body(POD)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, len(_VALID) - 1), st.integers(0, 255), st.integers(1, len(_VALID)))
def test_mutated_valid_bodies(at: int, byte: int, cut: int) -> None:
    mutated = bytearray(_VALID)
    mutated[at] = byte
    _decode_or_bad_request(bytes(mutated[:cut]))
    _decode_or_bad_request(bytes(mutated))
