"""Object-metadata validation (kubewire.server.writes.validation.meta): kube's exact messages."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kubewire.resources import REGISTRY, Resource
from kubewire.server.writes.validation.meta import (
    name_problems,
    pod_name_warnings,
    validate_name,
    validate_object_meta,
)
from kubewire.status import invalid_object


def _resource(kind: str) -> Resource:
    res = REGISTRY.by_kind("v1", kind)
    assert res is not None
    return res


POD = _resource("Pod")
NAMESPACE = _resource("Namespace")
SERVICE = _resource("Service")
NODE = _resource("Node")
PATH_ONLY = replace(POD, name_rule="path")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
QUALIFIED_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


def _names(resource: Resource, name: str) -> list[str]:
    return [str(e) for e in validate_name(resource, name)]


def _meta(resource: Resource, meta: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate_object_meta(resource, {"metadata": meta})]


# --- names per rule -----------------------------------------------------------------------------

def test_subdomain_rule() -> None:
    assert _names(POD, "web-0.example") == []
    assert _names(POD, "Bad_Name") == [f'metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN_MSG}']
    assert _names(POD, "a" * 254) == [
        f'metadata.name: Invalid value: "{"a" * 254}": must be no more than 253 characters']


def test_label_rule() -> None:
    assert _names(NAMESPACE, "team-a") == []
    assert _names(NAMESPACE, "a.b") == [
        'metadata.name: Invalid value: "a.b": must not contain dots']
    assert _names(NAMESPACE, "-x") == [f'metadata.name: Invalid value: "-x": {LABEL_MSG}']
    assert _names(NAMESPACE, "a" * 64) == [
        f'metadata.name: Invalid value: "{"a" * 64}": must be no more than 63 characters']


def test_dns1035_rule() -> None:
    assert _names(SERVICE, "web") == []
    assert _names(SERVICE, "1web") == [f'metadata.name: Invalid value: "1web": {DNS1035_MSG}']


def test_path_segment_rule() -> None:
    assert _names(PATH_ONLY, "Any_Name:ok") == []
    assert _names(PATH_ONLY, ".") == ["metadata.name: Invalid value: \".\": may not be '.'"]
    assert _names(PATH_ONLY, "..") == ["metadata.name: Invalid value: \"..\": may not be '..'"]
    assert _names(PATH_ONLY, "a/b%c") == [
        "metadata.name: Invalid value: \"a/b%c\": may not contain '/'",
        "metadata.name: Invalid value: \"a/b%c\": may not contain '%'",
    ]


def test_every_registry_rule_is_checked() -> None:
    for res in REGISTRY:
        assert _names(res, "") == [
            "metadata.name: Required value: name or generateName is required"]
        assert _names(res, "ok-name") == []


def test_invalid_status_message() -> None:
    err = invalid_object("", "Pod", "Bad_Name", validate_name(POD, "Bad_Name"))
    assert err.message == (
        f'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN_MSG}')
    assert err.details is not None
    assert err.details["causes"] == [{"reason": "FieldValueInvalid", "field": "metadata.name",
                                      "message": f'Invalid value: "Bad_Name": {SUBDOMAIN_MSG}'}]


def test_generate_name_prefix_masks_trailing_dash() -> None:
    assert name_problems("subdomain", "web-", prefix=True) == []
    assert name_problems("label", "x-", prefix=True) == []
    assert name_problems("path", "./", prefix=True) == ["may not contain '/'"]
    assert name_problems("path", "..", prefix=True) == []
    assert _meta(POD, {"generateName": "Web-"}) == [
        f'metadata.generateName: Invalid value: "Web-": {SUBDOMAIN_MSG}',
        "metadata.name: Required value: name or generateName is required",
        "metadata.namespace: Required value",
    ]
    assert _meta(POD, {"generateName": "web-", "namespace": "default"}) == [
        "metadata.name: Required value: name or generateName is required"]


def test_pod_name_warnings() -> None:
    assert pod_name_warnings("web-0") == []
    assert pod_name_warnings("web.example") == [
        "metadata.name: this is used in the Pod's hostname, which can result in surprising "
        "behavior; a DNS label is recommended: [must not contain dots]"]


# --- object metadata ----------------------------------------------------------------------------

def test_namespace_rules() -> None:
    assert _meta(POD, {"name": "p", "namespace": "default"}) == []
    assert _meta(POD, {"name": "p"}) == ["metadata.namespace: Required value"]
    assert _meta(POD, {"name": "p", "namespace": "Bad.NS"}) == [
        f'metadata.namespace: Invalid value: "Bad.NS": {LABEL_MSG}']
    assert _meta(NODE, {"name": "n", "namespace": "x"}) == [
        "metadata.namespace: Forbidden: not allowed on this type"]


def test_labels() -> None:
    meta = {"name": "n", "labels": {"example.com/app": "web", "-bad": "ok", "k": "-v",
                                    "a/b/c": "", "Bad_Prefix/x": "v", "/x": "v"}}
    assert _meta(NODE, meta) == [
        f'metadata.labels: Invalid value: "-bad": name part {QUALIFIED_MSG}',
        f'metadata.labels: Invalid value: "-v": {LABEL_VALUE_MSG}',
        f'metadata.labels: Invalid value: "a/b/c": a qualified name {QUALIFIED_MSG} with an '
        "optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        f'metadata.labels: Invalid value: "Bad_Prefix/x": prefix part {SUBDOMAIN_MSG}',
        'metadata.labels: Invalid value: "/x": prefix part must be non-empty',
    ]
    assert _meta(NODE, {"name": "n", "labels": {"k": "v" * 64}}) == [
        f'metadata.labels: Invalid value: "{"v" * 64}": must be no more than 63 characters']


def test_annotations() -> None:
    assert _meta(NODE, {"name": "n", "annotations": {"Example.COM/Key": "any value"}}) == []
    assert _meta(NODE, {"name": "n", "annotations": {"bad key": "v"}}) == [
        f'metadata.annotations: Invalid value: "bad key": name part {QUALIFIED_MSG}']
    huge = {"a": "x" * (256 * 1024)}
    assert _meta(NODE, {"name": "n", "annotations": huge}) == [
        "metadata.annotations: Too long: must have at most 262144 bytes"]


def test_finalizers() -> None:
    assert _meta(NODE, {"name": "n", "finalizers": ["example.com/cleanup", "kubernetes"]}) == []
    assert _meta(NODE, {"name": "n", "finalizers": ["bad finalizer"]}) == [
        f'metadata.finalizers: Invalid value: "bad finalizer": name part {QUALIFIED_MSG}']
    assert _meta(NODE, {"name": "n", "finalizers": ["orphan", "foregroundDeletion"]}) == [
        'metadata.finalizers: Invalid value: []string{"orphan", "foregroundDeletion"}: '
        "finalizer orphan and foregroundDeletion cannot be both set"]


def test_generation_must_not_be_negative() -> None:
    assert _meta(NODE, {"name": "n", "generation": -1}) == [
        "metadata.generation: Invalid value: -1: must be greater than or equal to 0"]


@pytest.mark.parametrize(("metadata", "actual"), [("x", "string"), ([], "array")])
def test_metadata_must_be_an_object(metadata: Any, actual: str) -> None:
    errors = validate_object_meta(NODE, {"metadata": metadata})
    assert [str(e) for e in errors] == [
        f'metadata: Invalid value: "{actual}": metadata in body must be of type object: '
        f'"{actual}"']
    assert errors[0].type == "FieldValueTypeInvalid"


def test_lengths_are_go_byte_lengths() -> None:
    name = "é" * 32  # 32 characters, 64 bytes
    assert _meta(NODE, {"name": "n", "labels": {"k": name}}) == [
        f'metadata.labels: Invalid value: "{name}": must be no more than 63 characters',
        f'metadata.labels: Invalid value: "{name}": {LABEL_VALUE_MSG}']


def test_finalizer_slice_is_quoted_as_go_prints_it() -> None:
    assert _meta(NODE, {"name": "n", "finalizers": ["orphan", "foregroundDeletion", "a\tb"]})[-1] \
        == ('metadata.finalizers: Invalid value: []string{"orphan", "foregroundDeletion", '
            '"a\\tb"}: finalizer orphan and foregroundDeletion cannot be both set')
