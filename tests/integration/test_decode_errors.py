"""Builtin kinds decode like Go structs: a wrong JSON type is a decode error, and writes nothing.

kube-apiserver decodes builtin bodies into Go structs (``sigs.k8s.io/json``), so a value of the
wrong JSON type is answered 400 in create.go ``transformDecodeError``'s form, ``<Kind> in version
"<v>" cannot be handled as a <Kind>: json: cannot unmarshal <json kind> into Go struct field
<Struct>.<path> of type <Go type>``; types with their own ``UnmarshalJSON`` (Quantity,
IntOrString, Time) answer with their own text. A JSON or merge patch whose result does not decode
is 422 on ``patch`` (handlers/patch.go ``jsonPatcher``). Custom kinds keep their schema's 422
(test_bad_input.py). Every case compares the whole Status and checks the store is unchanged.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import ServerThread
from tests.integration.kinds import DEPLOYMENT, EVENT, POD, SECRET, SERVICE, Kind
from tests.integration.kubectl import needs_kubectl, run
from tests.integration.wire import Reply, call, create, get

QUANTITY_FORMAT = ("quantities must match the regular expression "
                   "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
SNAPSHOT = [POD.collection(None), DEPLOYMENT.collection(None), SERVICE.collection(None),
            SECRET.collection(None), EVENT.collection(None)]


def _snapshot(server: ServerThread) -> list[Any]:
    return [get(server, path) for path in SNAPSHOT]


@pytest.fixture
def seeded(server: ServerThread) -> Iterator[ServerThread]:
    """A server with a Pod and a Deployment; the store must be the same after each test."""
    create(server, POD.collection(), POD.obj("existing"))
    create(server, DEPLOYMENT.collection(), DEPLOYMENT.obj("existing"))
    before = _snapshot(server)
    yield server
    assert _snapshot(server) == before, "a rejected request changed the store"


def bad_request(message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "BadRequest", "code": 400}


def decode_failure(kind: Kind, error: str) -> dict[str, Any]:
    """transformDecodeError's 400 for a body whose kind and version were read."""
    version = kind.api_version.rpartition("/")[2]
    return bad_request(f'{kind.kind} in version "{version}" cannot be handled as a '
                       f"{kind.kind}: {error}")


def type_error(value: str, field: str, go_type: str) -> str:
    return f"json: cannot unmarshal {value} into Go struct field {field} of type {go_type}"


def expect(reply: Reply, expected: dict[str, Any]) -> None:
    assert reply.status == expected["code"], reply.body
    assert reply.headers["content-type"] == "application/json"
    assert reply.status_object() == expected


def post(server: ServerThread, kind: Kind, body: Any, **params: Any) -> Reply:
    reply = call(server, "POST", kind.collection(), body, params=params or None)
    assert reply.status != 500, reply.body
    return reply


def pod_with(**container: Any) -> dict[str, Any]:
    body = POD.obj("p")
    body["spec"]["containers"][0].update(container)
    return body


# --- create ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "error"), [
    (pod_with(securityContext={"privileged": "yes"}),
     type_error("string", "SecurityContext.spec.containers.securityContext.privileged", "bool")),
    ({**POD.obj("p"), "spec": {"containers": ["nginx"]}},
     type_error("string", "PodSpec.spec.containers", "v1.Container")),
    ({**POD.obj("p", labels={"app": "web"}), "metadata": {"name": "p", "labels": {"app": 1}}},
     type_error("number", "ObjectMeta.metadata.labels", "string")),
    (pod_with(name=5), type_error("number", "Container.spec.containers.name", "string")),
    (pod_with(ports=[{"containerPort": 80.5}]),
     type_error("number 80.5", "ContainerPort.spec.containers.ports.containerPort", "int32")),
    (pod_with(ports=[{"containerPort": 2**31}]),
     type_error("number 2147483648", "ContainerPort.spec.containers.ports.containerPort",
                "int32")),
    (pod_with(image={"name": "nginx"}),
     type_error("object", "Container.spec.containers.image", "string")),
    ({**POD.obj("p"), "spec": "nginx"}, type_error("string", "Pod.spec", "v1.PodSpec")),
    ({**POD.obj("p"), "spec": {"containers": {"name": "c"}}},
     type_error("object", "PodSpec.spec.containers", "[]v1.Container")),
    ({**POD.obj("p"), "spec": {"restartPolicy": True, "containers": [{"name": "c"}]}},
     type_error("bool", "PodSpec.spec.restartPolicy", "v1.RestartPolicy")),
    (pod_with(resources={"limits": ["1"]}),
     type_error("array", "ResourceRequirements.spec.containers.resources.limits",
                "v1.ResourceList")),
    (pod_with(resources={"limits": {"cpu": "lots"}}), QUANTITY_FORMAT),
    (pod_with(resources={"limits": {"memory": "1iK"}}), "unable to parse quantity's suffix"),
    ({**POD.obj("p"), "metadata": {"name": "p", "creationTimestamp": "yesterday"}},
     'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as '
     '"2006"'),
], ids=["nested-struct-bool", "array-item", "map-value", "number-into-string", "float-into-int32",
        "int32-overflow", "object-into-string", "string-into-struct", "object-into-slice",
        "named-string-type", "array-into-resource-list", "quantity", "quantity-suffix", "time"])
def test_a_pod_field_of_the_wrong_type(seeded: ServerThread, body: dict[str, Any],
                                       error: str) -> None:
    expect(post(seeded, POD, body), decode_failure(POD, error))


@pytest.mark.parametrize(("target_port", "value"), [(True, "bool"), (8.5, "number 8.5"),
                                                    ({"port": 80}, "object")],
                         ids=["bool", "float", "object"])
def test_int_or_string(seeded: ServerThread, target_port: Any, value: str) -> None:
    body = SERVICE.obj("svc")
    body["spec"]["ports"][0]["targetPort"] = target_port
    # IntOrString.UnmarshalJSON decodes a non-string into its int32 (intstr.go).
    expect(post(seeded, SERVICE, body), decode_failure(SERVICE, type_error(
        value, "ServicePort.spec.ports.targetPort", "int32")))


def test_the_first_type_error_in_document_order_is_reported(seeded: ServerThread) -> None:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": 1}},
            "spec": {"containers": [{"name": 5}]}}
    expect(post(seeded, POD, body), decode_failure(POD, type_error(
        "number", "ObjectMeta.metadata.labels", "string")))


def test_an_unmarshaler_error_wins_over_an_earlier_type_error(seeded: ServerThread) -> None:
    # encoding/json keeps a type error and goes on; UnmarshalJSON's error ends decoding.
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": 1}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "x"}}}]}}
    expect(post(seeded, POD, body), decode_failure(POD, QUANTITY_FORMAT))


def test_a_type_error_wins_over_strict_unknown_fields(seeded: ServerThread) -> None:
    body = DEPLOYMENT.obj("web")
    body["spec"]["foo"] = 1
    body["spec"]["replicas"] = "three"
    reply = post(seeded, DEPLOYMENT, body, fieldValidation="Strict")
    expect(reply, decode_failure(DEPLOYMENT, type_error(
        "string", "DeploymentSpec.spec.replicas", "int32")))


def test_secret_data_must_be_base64(seeded: ServerThread) -> None:
    body = SECRET.obj("s")
    body["data"] = {"key": "not base64"}
    # encoding/json decodes []byte with base64.StdEncoding and keeps its error text.
    expect(post(seeded, SECRET, body),
           decode_failure(SECRET, "illegal base64 data at input byte 3"))


def test_micro_time_needs_six_fraction_digits(seeded: ServerThread) -> None:
    body = EVENT.obj("e")
    body["eventTime"] = "2024-12-11T09:15:02Z"
    expect(post(seeded, EVENT, body), decode_failure(EVENT, (
        'parsing time "2024-12-11T09:15:02Z" as "2006-01-02T15:04:05.000000Z07:00": '
        'cannot parse "Z" as ".000000"')))


def test_null_and_unknown_fields_are_not_type_errors(server: ServerThread) -> None:
    body = DEPLOYMENT.obj("web")
    body["spec"]["replicas"] = None
    body["spec"]["Replicas"] = "three"  # keys are case-sensitive: an unknown field, dropped
    created = create(server, DEPLOYMENT.collection(), body)
    assert "Replicas" not in created["spec"]


# --- update and patch -------------------------------------------------------------------------

def test_update_with_a_wrong_type(seeded: ServerThread) -> None:
    body = get(seeded, DEPLOYMENT.item("existing"))
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": "80"}]
    reply = call(seeded, "PUT", DEPLOYMENT.item("existing"), body)
    expect(reply, decode_failure(DEPLOYMENT, type_error(
        "string", "ContainerPort.spec.template.spec.containers.ports.containerPort", "int32")))


def _go_json(value: Any) -> str:
    """Go's json.Marshal of a map: compact, keys sorted (the test objects need no escaping)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def patch_failure(patched: dict[str, Any], error: str) -> dict[str, Any]:
    """jsonPatcher's 422: NewInvalid with an empty GroupKind and name, on field ``patch``."""
    cause = f"Invalid value: {json.dumps(_go_json(patched), ensure_ascii=False)}: {error}"
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f' "" is invalid: patch: {cause}', "reason": "Invalid",
            "details": {"causes": [{"reason": "FieldValueInvalid", "message": cause,
                                    "field": "patch"}]},
            "code": 422}


@pytest.mark.parametrize("media_type", ["application/merge-patch+json",
                                        "application/json-patch+json"])
def test_patch_whose_result_does_not_decode(seeded: ServerThread, media_type: str) -> None:
    current = get(seeded, DEPLOYMENT.item("existing"))
    patched = copy.deepcopy(current)
    patched["spec"]["replicas"] = "three"
    body = ([{"op": "replace", "path": "/spec/replicas", "value": "three"}]
            if media_type == "application/json-patch+json" else {"spec": {"replicas": "three"}})
    reply = call(seeded, "PATCH", DEPLOYMENT.item("existing"), body,
                 {"Content-Type": media_type})
    expect(reply, patch_failure(patched, type_error(
        "string", "DeploymentSpec.spec.replicas", "int32")))


# --- a real client ------------------------------------------------------------------------------

@needs_kubectl
def test_kubectl_prints_the_decode_error(seeded: ServerThread, tmp_path: Path) -> None:
    body = DEPLOYMENT.obj("web")
    body["spec"]["replicas"] = "three"
    manifest = tmp_path / "web.json"
    manifest.write_text(json.dumps(body))
    done = run(seeded, "create", "-n", "default", "-f", str(manifest))
    assert done.returncode == 1, done
    assert done.stderr == (
        f'Error from server (BadRequest): error when creating "{manifest}": Deployment in '
        'version "v1" cannot be handled as a Deployment: json: cannot unmarshal string into Go '
        "struct field DeploymentSpec.spec.replicas of type int32\n")


def smp_failure(patch: dict[str, Any], error: str) -> dict[str, Any]:
    """applyPatchToObject's 422: the patch map printed with %+v, the converter's error."""
    cause = f"Invalid value: {json.dumps(_go_sprint(patch))}: {error}"
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f' "" is invalid: patch: {cause}', "reason": "Invalid",
            "details": {"causes": [{"reason": "FieldValueInvalid", "message": cause,
                                    "field": "patch"}]},
            "code": 422}


def _go_sprint(value: Any) -> str:
    """fmt's %v of a decoded map (keys sorted; the test patches hold strings and ints)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_sprint(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_sprint(v) for v in value) + "]"
    return str(value)


@pytest.mark.parametrize(("patch", "error"), [
    ({"spec": {"replicas": "three"}}, "unrecognized type: int32"),
    ({"spec": {"replicas": 2.5}}, "cannot convert float64 to int32"),
    ({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": 5}]}}}},
     "cannot convert int64 to string"),
    ({"spec": {"selector": "app=web"}}, "cannot restore struct from: string"),
    ({"spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {
        "limits": {"cpu": "lots"}}}]}}}}, QUANTITY_FORMAT),
], ids=["string-into-int32", "float-into-int32", "int-into-string", "string-into-struct",
        "quantity"])
def test_strategic_merge_patch_whose_result_does_not_convert(
        seeded: ServerThread, patch: dict[str, Any], error: str) -> None:
    # The patched map is converted into the Go struct (runtime.DefaultUnstructuredConverter),
    # whose errors name no field.
    reply = call(seeded, "PATCH", DEPLOYMENT.item("existing"), patch,
                 {"Content-Type": "application/strategic-merge-patch+json"})
    expect(reply, smp_failure(patch, error))


@needs_kubectl
def test_kubectl_patch_prints_the_conversion_error(seeded: ServerThread, tmp_path: Path) -> None:
    done = run(seeded, "patch", "-n", "default", "deployment", "existing", "-p",
               '{"spec":{"replicas":"three"}}')
    # kubectl patch sends a strategic merge patch; an Invalid without kind reads "The request".
    assert done.returncode == 1, done
    assert done.stderr == ('The request is invalid: patch: Invalid value: '
                           '"map[spec:map[replicas:three]]": unrecognized type: int32\n')
