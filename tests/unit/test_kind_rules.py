"""Pure per-kind rule modules: kube's messages and decisions without a server."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.quantity import parse_quantity
from kubewire.resources import REGISTRY, Resource
from kubewire.server.writes.validation.apps import (
    go_int_or_string,
    go_label_selector,
    go_string_map,
)
from kubewire.server.writes.validation.config import config_key_problems
from kubewire.server.writes.validation.discovery import validate_endpoint_slice
from kubewire.server.writes.validation.node import finalizer_problems
from kubewire.server.writes.validation.pods.spec import (
    port_name_problems,
    validate_pod,
    validate_pod_spec,
)

POD = REGISTRY.lookup("", "v1", "pods")
SLICES = REGISTRY.lookup("discovery.k8s.io", "v1", "endpointslices")


def _resource(found: Resource | None) -> Resource:
    assert found is not None
    return found


def _spec(**fields: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "i", "terminationMessagePolicy": "File",
                 "imagePullPolicy": "IfNotPresent"}
    return {"containers": [container], "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            **fields}


@pytest.mark.parametrize(("name", "problems"), [
    ("http", []),
    ("a-very-long-port-name", ["must be no more than 15 characters"]),
    ("HTTP", ["must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
              "must contain at least one letter (a-z)"]),
    ("a--b", ["must not contain consecutive hyphens (-)"]),
    ("-ab", ["must not begin or end with a hyphen (-)"]),
    ("80", ["must contain at least one letter (a-z)"]),
])
def test_port_name_problems(name: str, problems: list[str]) -> None:
    assert port_name_problems(name) == problems


@pytest.mark.parametrize(("text", "value"), [
    ("1", 1), ("500m", 0.5), ("1Gi", 2**30), ("1e3", 1000), ("1.5k", 1500), ("-2", -2)])
def test_quantity_value(text: str, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


def test_template_spec_errors_carry_the_template_path() -> None:
    spec = _spec(containers=[{"name": "Bad", "image": "", "terminationMessagePolicy": "File",
                              "imagePullPolicy": "IfNotPresent"}])
    errors = [str(e) for e in validate_pod_spec(spec, "spec.template.spec")]
    assert errors[1] == "spec.template.spec.containers[0].image: Required value"
    assert errors[0].startswith('spec.template.spec.containers[0].name: Invalid value: "Bad": '
                                "a lowercase RFC 1123 label")


@pytest.mark.parametrize(("name", "ok"), [
    ("A_b", True), (" ~!", True), ("A=B", False), ("a\x7f", False), ("\x1f", False),
    ("é", False), ("a\tb", False)])
def test_env_names_are_printable_ascii_without_equals(name: str, ok: bool) -> None:
    """IsRelaxedEnvVarName: 32..126 but '=' (DEL, controls and non-ASCII refused)."""
    spec = _spec(containers=[{"name": "c", "image": "i", "terminationMessagePolicy": "File",
                              "imagePullPolicy": "IfNotPresent", "env": [{"name": name}]}])
    errors = [(e.type, e.field, e.value, e.detail) for e in validate_pod_spec(spec, "spec")]
    assert errors == ([] if ok else [
        ("FieldValueInvalid", "spec.containers[0].env[0].name", name, "a valid environment "
         "variable name must consist only of printable ASCII characters other than '='")])


def test_mount_errors_name_each_problem_of_each_mount() -> None:
    """A mount of an unknown volume, a repeated path and empty fields: each is reported on
    its own mount, in ValidateVolumeMounts' order."""
    spec = _spec(volumes=[{"name": "v", "emptyDir": {}}], containers=[{
        "name": "c", "image": "i", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "volumeMounts": [{"name": "v", "mountPath": "/a"}, {"name": "w", "mountPath": "/a"},
                         {"name": "", "mountPath": ""}, {"name": "v", "mountPath": "/b"}]}])
    errors = [str(e) for e in validate_pod_spec(spec, "spec")]
    assert errors == [
        'spec.containers[0].volumeMounts[1].name: Not found: "w"',
        'spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/a": must be unique',
        "spec.containers[0].volumeMounts[2].name: Required value",
        'spec.containers[0].volumeMounts[2].name: Not found: ""',
        "spec.containers[0].volumeMounts[2].mountPath: Required value"]


def test_pod_update_allows_images_deadlines_and_added_tolerations() -> None:
    old = {"spec": _spec(activeDeadlineSeconds=60, tolerations=[{"key": "a"}])}
    new = {"spec": _spec(activeDeadlineSeconds=30, tolerations=[{"key": "a"}, {"key": "b"}])}
    new["spec"]["containers"][0]["image"] = "j"
    assert validate_pod(_resource(POD), new, old) == []


def test_pod_update_refuses_a_longer_deadline_and_removed_tolerations() -> None:
    old = {"spec": _spec(activeDeadlineSeconds=60, tolerations=[{"key": "a"}])}
    longer = {"spec": _spec(activeDeadlineSeconds=61, tolerations=[{"key": "a"}])}
    assert [str(e) for e in validate_pod(_resource(POD), longer, old)] == [
        "spec.activeDeadlineSeconds: Invalid value: 61: must be less than or equal to previous "
        "value"]
    removed = {"spec": _spec(activeDeadlineSeconds=60)}
    [error] = validate_pod(_resource(POD), removed, old)
    assert error.type == "FieldValueForbidden" and "changed: tolerations" in error.detail


def test_go_renderings() -> None:
    assert repr(go_string_map(None)) == "map[string]string(nil)"
    assert repr(go_string_map({"b": "2", "a": "1"})) == 'map[string]string{"a":"1", "b":"2"}'
    assert repr(go_int_or_string("0%")) == 'intstr.IntOrString{Type:1, IntVal:0, StrVal:"0%"}'
    selector = {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}
    assert repr(go_label_selector(selector)) == (
        "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:"
        '[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"k", Operator:"In", '
        'Values:[]string{"v"}}}}')


@pytest.mark.parametrize(("key", "problems"), [
    ("ok.key_1", []), (".", ["must not be '.'"]), ("..a", ["must not start with '..'"]),
    ("a" * 254, ["must be no more than 253 characters"])])
def test_config_key_problems(key: str, problems: list[str]) -> None:
    assert config_key_problems(key) == problems


@pytest.mark.parametrize(("name", "ok"), [
    ("kubernetes", True), ("example.com/mine", True), ("mine", False)])
def test_finalizer_names(name: str, ok: bool) -> None:
    assert (finalizer_problems(name) == []) is ok


def test_endpoint_slice_address_families() -> None:
    slice_ = {"addressType": "IPv6", "endpoints": [{"addresses": ["fd00::1", "10.0.0.1"]}],
              "ports": [{"name": "", "protocol": "TCP"}]}
    assert [str(e) for e in validate_endpoint_slice(_resource(SLICES), slice_)] == [
        'endpoints[0].addresses[1]: Invalid value: "10.0.0.1": must be a valid IPv6 address']
