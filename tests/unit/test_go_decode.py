"""Go-struct decoding errors for builtin kinds (kubewire.schema.go_decode)."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.quantity import QUANTITY_FORMAT_WRONG
from kubewire.schema.go_decode import decode_error
from kubewire.schema.go_types import GoType, go_type_of


def _pod(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta}, "spec": spec}


def _cannot(value: str, field: str, go_type: str) -> str:
    return f"json: cannot unmarshal {value} into Go struct field {field} of type {go_type}"


@pytest.mark.parametrize(("path", "go_type"), [
    (["spec"], "v1.PodSpec"),
    (["spec", "containers"], "[]v1.Container"),
    (["spec", "nodeSelector"], "map[string]string"),
    (["spec", "containers", "ports", "containerPort"], "int32"),
    (["spec", "activeDeadlineSeconds"], "int64"),
    (["spec", "hostNetwork"], "bool"),
    (["metadata", "creationTimestamp"], "v1.Time"),
    (["spec", "containers", "resources", "limits", "cpu"], "resource.Quantity"),
])
def test_go_type_names(path: list[str], go_type: str) -> None:
    node: GoType | None = go_type_of("v1", "Pod")
    for key in path:
        while node is not None and node.items is not None:  # arrays are crossed implicitly
            node = node.items
        assert node is not None
        node = node.fields.get(key, node.values)
    assert node is not None
    assert node.name == go_type


def test_a_valid_object_decodes() -> None:
    assert decode_error("v1", "Pod", _pod({"containers": [{"name": "c", "image": "i",
                                                           "ports": [{"containerPort": 80}]}]},
                                          labels={"a": "b"})) is None


def test_the_innermost_struct_and_the_full_path_are_named() -> None:
    spec = {"containers": [{"name": "c", "livenessProbe": {"httpGet": {"port": 80,
                                                                       "path": 1}}}]}
    assert decode_error("v1", "Pod", _pod(spec)) == _cannot(
        "number", "HTTPGetAction.spec.containers.livenessProbe.httpGet.path", "string")


def test_named_go_types_come_from_the_generated_facts() -> None:
    spec = {"containers": [{"name": "c", "securityContext": {"capabilities": {"add": [1]}}}]}
    assert decode_error("v1", "Pod", _pod(spec)) == _cannot(
        "number", "Capabilities.spec.containers.securityContext.capabilities.add",
        "v1.Capability")
    assert decode_error("v1", "Pod", _pod({"containers": []}, uid=5)) == _cannot(
        "number", "ObjectMeta.metadata.uid", "types.UID")


def test_type_meta_fields_belong_to_the_kind_struct() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"strategy": {"rollingUpdate": "x"}}}
    assert decode_error("apps/v1", "Deployment", deployment) == _cannot(
        "string", "DeploymentStrategy.spec.strategy.rollingUpdate", "v1.RollingUpdateDeployment")


def test_only_the_first_saved_error_counts() -> None:
    pod = _pod({"containers": [{"name": 1, "image": 2}]})
    assert decode_error("v1", "Pod", pod) == _cannot(
        "number", "Container.spec.containers.name", "string")


def test_an_unmarshaler_error_ends_decoding() -> None:
    pod = _pod({"containers": [{"name": 1, "resources": {"limits": {"cpu": "1x"}}}]})
    assert decode_error("v1", "Pod", pod) == QUANTITY_FORMAT_WRONG


def test_free_form_fields_take_anything() -> None:
    entry = {"manager": "m", "operation": "Update", "fieldsV1": "anything"}
    assert decode_error("v1", "Pod", _pod({"containers": []}, managedFields=[entry])) is None


def test_bytes_as_an_array_of_numbers() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
              "data": {"a": [104, 105], "b": [256]}}
    assert decode_error("v1", "Secret", secret) == _cannot(
        "number 256", "Secret.data", "uint8")
