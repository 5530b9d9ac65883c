"""server.apiextensions.crd.crd_validation: a CRD's create/update/status validation, kube's paths
and texts (apiextensions-apiserver v0.32 validation.go; crds.md §1.2-1.4, §1.10-1.14, §9 items
1-3, 7, 10, 34)."""

from __future__ import annotations

import base64
import copy
import datetime
import glob
from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubewire.json_types import JSON
from kubewire.server.apiextensions.crd.crd_defaults import default_crd
from kubewire.server.apiextensions.crd.crd_strategy import prepare_for_create
from kubewire.server.apiextensions.crd.crd_validation import validate_crd, validate_crd_status
from kubewire.server.apiextensions.crd.webhook_config import ca_bundle_problem
from kubewire.status import FieldError, aggregate_messages

GATEWAY_CRDS = sorted(glob.glob("/work/shared/openapi/gateway-api-v1.2.1/standard/*.yaml"))
DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
           "with an alphabetic character, and end with an alphanumeric character (e.g. "
           "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"spec": {
    "type": "object", "properties": {
    "color": {"type": "string"}, "size": {"type": "integer"}, "on": {"type": "boolean"},
    "ratio": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "replicas": {"type": "integer"}}}, "status": {"type": "object"}}}
ESTABLISHED = {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
               "message": "the initial names have been accepted",
               "lastTransitionTime": "2024-01-01T00:00:00Z"}


def version(name: str = "v1", *, storage: bool = True, served: bool = True,
            **extra: Any) -> dict[str, Any]:
    return {"name": name, "served": served, "storage": storage,
            "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)}, **extra}


def crd(**spec: Any) -> dict[str, Any]:
    """A valid CRD (widgets.example.com), as the strategy hands it to validation."""
    base: dict[str, Any] = {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget"}, "versions": [version()]}
    base.update(spec)
    obj = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"}, "spec": base}
    default_crd(obj)
    prepare_for_create(obj)
    return obj


class Recorder:
    """A schema check that reports nothing and remembers the paths it was called with."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, schema: Mapping[str, JSON], path: str) -> list[FieldError]:
        self.paths.append(path)
        return []


def errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[str]:
    return [str(e) for e in validate_crd(obj, old, schema_check=Recorder())]


def established(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["status"]["conditions"] = [dict(ESTABLISHED)]
    return out


# --- valid inputs ------------------------------------------------------------------------------

@pytest.mark.skipif(not GATEWAY_CRDS, reason="Gateway API v1.2.1 CRDs not present")
@pytest.mark.parametrize("path", GATEWAY_CRDS, ids=lambda p: p.rsplit("/", 1)[-1])
def test_gateway_api_crds_validate_cleanly(path: str) -> None:
    with open(path) as f:
        obj = yaml.safe_load(f)
    default_crd(obj)
    prepare_for_create(obj)
    check = Recorder()
    assert validate_crd(obj, None, schema_check=check) == []
    # both versions carry the same schema: kube hoists it and validates it once, there
    assert check.paths == ["spec.validation.openAPIV3Schema"]
    updated = copy.deepcopy(obj)
    assert validate_crd(updated, established(obj), schema_check=Recorder()) == []


def test_minimal_crd_is_valid_and_schema_checked_once() -> None:
    check = Recorder()
    assert validate_crd(crd(), None, schema_check=check) == []
    assert check.paths == ["spec.validation.openAPIV3Schema"]


def test_schema_errors_are_passed_through_in_order() -> None:
    def check(schema: Mapping[str, JSON], path: str) -> list[FieldError]:
        return [FieldError("FieldValueRequired", f"{path}.properties[x].type", detail="boom")]

    found = validate_crd(crd(scope="Global"), None, schema_check=check)
    assert [str(e) for e in found] == [
        'spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"',
        "spec.validation.openAPIV3Schema.properties[x].type: Required value: boom"]


# --- metadata.name, group, scope (§9 items 1, 2) -------------------------------------------------

def test_name_must_be_plural_dot_group() -> None:
    obj = crd()
    obj["metadata"]["name"] = "gadgets.example.com"
    assert errors(obj) == [
        'metadata.name: Invalid value: "gadgets.example.com": must be '
        'spec.names.plural+"."+spec.group']
    # only on create: the update path runs ValidateObjectMetaUpdate, which has no name rule
    assert errors(obj, crd()) == []


def test_group_rules() -> None:
    obj = crd(group="example")
    obj["metadata"]["name"] = "widgets.example"
    assert errors(obj) == [
        'spec.group: Invalid value: "example": should be a domain with at least one dot']
    obj = crd(group="")
    obj["metadata"]["name"] = "widgets."
    assert errors(obj) == ["spec.group: Required value"]
    obj = crd(group="Example.com")
    obj["metadata"]["name"] = "widgets.Example.com"
    assert errors(obj)[0].startswith(
        'spec.group: Invalid value: "Example.com": a lowercase RFC 1123 subdomain must consist')


def test_scope_required_and_enum() -> None:
    assert errors(crd(scope="")) == ["spec.scope: Required value"]
    assert errors(crd(scope="namespaced")) == [
        'spec.scope: Unsupported value: "namespaced": supported values: "Cluster", "Namespaced"']


# --- names -------------------------------------------------------------------------------------

def test_names_rules() -> None:
    obj = crd(names={"plural": "widgets", "kind": "Wid_get", "singular": "Widget",
                     "listKind": "Wid_get", "shortNames": ["ok", "Bad"], "categories": ["a_b"]})
    assert errors(obj) == [
        f'spec.names.singular: Invalid value: "Widget": {DNS1035}',
        'spec.names.kind: Invalid value: "Wid_get": may have mixed case, but should otherwise '
        f"match: {DNS1035}",
        'spec.names.listKind: Invalid value: "Wid_get": may have mixed case, but should '
        f"otherwise match: {DNS1035}",
        f'spec.names.shortNames[1]: Invalid value: "Bad": {DNS1035}',
        'spec.names.listKind: Invalid value: "Wid_get": kind and listKind may not be the same',
        f'spec.names.categories[0]: Invalid value: "a_b": {DNS1035}']


def test_required_names_after_defaults() -> None:
    obj = crd(names={"plural": "widgets"})  # no kind: no singular or listKind default either
    assert errors(obj) == ["spec.names.singular: Required value", "spec.names.kind: Required value",
                           "spec.names.listKind: Required value"]


# --- versions (§9 item 3) -----------------------------------------------------------------------

GO_V1 = ('apiextensions.CustomResourceDefinitionVersion{Name:"v1", Served:true, Storage:true, '
         "Deprecated:false, DeprecationWarning:(*string)(nil), "
         "Schema:(*apiextensions.CustomResourceValidation)(nil), "
         "Subresources:(*apiextensions.CustomResourceSubresources)(nil), "
         "AdditionalPrinterColumns:[]apiextensions.CustomResourceColumnDefinition(nil), "
         "SelectableFields:[]apiextensions.SelectableField(nil)}")


def test_exactly_one_storage_version() -> None:
    obj = crd(versions=[version("v1"), version("v2")])
    obj["status"]["storedVersions"] = ["v1"]
    assert errors(obj) == [
        f"spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{{{GO_V1}, "
        + GO_V1.replace('"v1"', '"v2"')
        + "}: must have exactly one version marked as storage version",
        'status.storedVersions: Invalid value: []string{"v1"}: must have the storage version v2']
    obj = crd(versions=[version("v1", storage=False)])
    assert [e.split(": ")[-1] for e in errors(obj)] == [
        "must have exactly one version marked as storage version",
        "must have at least one stored version"]
    assert errors(obj)[1] == (
        "status.storedVersions: Invalid value: []string(nil): must have at least one stored "
        "version")


def test_unique_and_dns1035_version_names() -> None:
    obj = crd(versions=[version("v1"), version("v1", storage=False)])
    assert [e.rsplit(": ", 1)[-1] for e in errors(obj)] == ["must contain unique version names"]
    obj = crd(versions=[version("V1")])
    assert errors(obj) == [f'spec.versions[0].name: Invalid value: "V1": {DNS1035}',
                           f'spec.version: Invalid value: "V1": {DNS1035}']


def test_no_rule_requires_a_served_version() -> None:
    assert errors(crd(versions=[version(served=False)])) == []


def test_deprecation_warning_rules() -> None:
    obj = crd(versions=[version(deprecationWarning="old")])
    assert errors(obj) == ['spec.versions[0].deprecationWarning: Invalid value: "old": can only '
                           "be set for deprecated versions"]
    obj = crd(versions=[version(deprecated=True, deprecationWarning="")])
    assert errors(obj) == ['spec.versions[0].deprecationWarning: Invalid value: "": must not be '
                           "an empty string"]
    obj = crd(versions=[version(deprecated=True, deprecationWarning="x" * 257 + "\n")])
    assert [e.split(": ", 3)[-1] for e in errors(obj)] == [
        "must be <= 256 characters long",
        "must only contain printable UTF-8 characters; non-printable character found at index 257"]
    assert errors(crd(versions=[version(deprecated=True, deprecationWarning="use v2")])) == []


def test_schemas_are_required_per_version() -> None:
    bare = version()
    del bare["schema"]
    obj = crd(versions=[bare, {**bare, "name": "v2", "storage": False}])
    assert errors(obj) == [
        "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required",
        "spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required"]
    obj = crd(versions=[version(), {**bare, "name": "v2", "storage": False}])
    assert errors(obj) == [
        "spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required"]


def test_schema_paths_follow_the_internal_form() -> None:
    check = Recorder()
    other = version("v2", storage=False)
    other["schema"]["openAPIV3Schema"]["description"] = "different"
    validate_crd(crd(versions=[version(), other]), None, schema_check=check)
    assert check.paths == ["spec.versions[0].schema.openAPIV3Schema",
                           "spec.versions[1].schema.openAPIV3Schema"]


def test_status_subresource_limits_the_root_schema() -> None:
    v = version(subresources={"status": {}})
    v["schema"]["openAPIV3Schema"]["type"] = "array"
    assert errors(crd(versions=[v])) == [
        'spec.validation.openAPIV3Schema.type: Invalid value: "array": only "object" is allowed '
        "as the type at the root of the schema if the status subresource is enabled"]
    v = version(subresources={"status": {}})
    v["schema"]["openAPIV3Schema"]["anyOf"] = [{"required": ["spec"]}]
    assert [e.rsplit(": ", 1)[-1] for e in errors(crd(versions=[v]))] == [
        "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum "
        "MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items "
        "Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed "
        "at the root of the schema if the status subresource is enabled"]
    v = version()  # no status subresource: anyOf at the root is the schema check's business
    v["schema"]["openAPIV3Schema"]["anyOf"] = [{"required": ["spec"]}]
    assert errors(crd(versions=[v])) == []


# --- printer columns (§9 item 7), subresources, selectable fields --------------------------------

def test_printer_columns_report_the_internal_json_path_name() -> None:
    obj = crd(versions=[version(additionalPrinterColumns=[
        {"name": "X", "type": "foo", "jsonPath": "spec.x"}])])
    assert errors(obj) == [
        'spec.additionalPrinterColumns[0].type: Invalid value: "foo": must be one of '
        "boolean,date,integer,number,string",
        'spec.additionalPrinterColumns[0].JSONPath: Invalid value: "spec.x": must be a simple '
        "json path starting with ."]
    obj = crd(versions=[version(additionalPrinterColumns=[{"format": "uint"}])])
    assert errors(obj) == [
        "spec.additionalPrinterColumns[0].name: Required value",
        "spec.additionalPrinterColumns[0].type: Required value: must be one of "
        "boolean,date,integer,number,string",
        'spec.additionalPrinterColumns[0].format: Invalid value: "uint": must be one of '
        "byte,date,date-time,double,float,int32,int64,password",
        "spec.additionalPrinterColumns[0].JSONPath: Required value"]


def test_per_version_columns_keep_the_version_path() -> None:
    obj = crd(versions=[version(additionalPrinterColumns=[{"name": "A", "type": "string",
                                                           "jsonPath": ".spec.color"}]),
                        version("v2", storage=False, additionalPrinterColumns=[
                            {"name": "B", "type": "bogus", "jsonPath": ".spec.color"}])])
    assert errors(obj) == [
        'spec.versions[1].additionalPrinterColumns[0].type: Invalid value: "bogus": must be one '
        "of boolean,date,integer,number,string"]


def test_scale_paths() -> None:
    scale = {"specReplicasPath": "spec.replicas", "statusReplicasPath": ".spec.replicas",
             "labelSelectorPath": ".metadata.labels"}
    assert errors(crd(versions=[version(subresources={"scale": scale})])) == [
        'spec.subresources.scale.specReplicasPath: Invalid value: "spec.replicas": must be a '
        "simple json path starting with .",
        'spec.subresources.scale.statusReplicasPath: Invalid value: ".spec.replicas": should be '
        "a json path under .status",
        'spec.subresources.scale.labelSelectorPath: Invalid value: ".metadata.labels": should be '
        "a json path under either .spec or .status"]
    assert errors(crd(versions=[version(subresources={"scale": {}})])) == [
        "spec.subresources.scale.specReplicasPath: Required value",
        "spec.subresources.scale.statusReplicasPath: Required value"]
    good = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"}
    assert errors(crd(versions=[version(subresources={"status": {}, "scale": good})])) == []


def test_selectable_fields() -> None:
    fields = [{"jsonPath": p} for p in (
        ".spec.color", ".spec.tags[0]", ".metadata.name", ".spec.ratio", ".spec.color",
        ".spec.missing", "spec.color", ".spec.", "", ".spec.labels.app")]
    assert errors(crd(versions=[version(selectableFields=fields)])) == [
        'spec.selectableFields[1].jsonPath: Invalid value: ".spec.tags[0]": is an invalid path: '
        "array notation is not allowed",
        'spec.selectableFields[2].jsonPath: Invalid value: ".metadata.name": is an invalid path: '
        "does not refer to a valid field",
        'spec.selectableFields[3].jsonPath: Invalid value: ".spec.ratio": must point to a field '
        "of type string, boolean or integer. Enum string fields and strings with formats are "
        "allowed.",
        'spec.selectableFields[4].jsonPath: Duplicate value: ".spec.color"',
        'spec.selectableFields[5].jsonPath: Invalid value: ".spec.missing": is an invalid path: '
        "does not refer to a valid field",
        'spec.selectableFields[6].jsonPath: Invalid value: "spec.color": is an invalid path: '
        "expected [ or . but got: spec",
        'spec.selectableFields[7].jsonPath: Invalid value: ".spec.": is an invalid path: '
        "unexpected end of JSON path",
        "spec.selectableFields[8].jsonPath: Required value"]


def test_selectable_fields_in_metadata_and_too_many() -> None:
    v = version(selectableFields=[{"jsonPath": ".metadata.name"}])
    v["schema"]["openAPIV3Schema"]["properties"]["metadata"] = {
        "type": "object", "properties": {"name": {"type": "string"}}}
    assert errors(crd(versions=[v])) == [
        'spec.selectableFields[0].jsonPath: Invalid value: ".metadata.name": must not point to '
        "fields in metadata"]
    v = version(selectableFields=[{"jsonPath": f".spec.labels.k{i}"} for i in range(9)])
    assert errors(crd(versions=[v])) == [
        "spec.selectableFields: Too many: 9: must have at most 8 items"]


def test_selectable_fields_hoisted_beside_per_version_schemas() -> None:
    """Identical selectable fields are hoisted, different schemas are not: kube then finds no
    top-level schema and prints its (misspelled) message."""
    other = version("v2", storage=False, selectableFields=[{"jsonPath": ".spec.color"}])
    other["schema"]["openAPIV3Schema"]["description"] = "v2"
    first = version(selectableFields=[{"jsonPath": ".spec.color"}])
    assert errors(crd(versions=[first, other])) == [
        'spec.selectableFields: Invalid value: "": selectableFields may only be set when '
        "validations.schema is included"]


# --- conversion (§1.13) ------------------------------------------------------------------------

def webhook(**client: Any) -> dict[str, Any]:
    return {"strategy": "Webhook",
            "webhook": {"clientConfig": client, "conversionReviewVersions": ["v1"]}}


def test_conversion_strategy_and_none_rules() -> None:
    assert errors(crd(conversion={"strategy": "Magic"})) == [
        'spec.conversion.strategy: Unsupported value: "Magic": supported values: "None", '
        '"Webhook"']
    obj = crd(conversion={"strategy": "None", "webhook": {
        "clientConfig": {"url": "https://x"}, "conversionReviewVersions": ["v1"]}})
    assert errors(obj) == [
        "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not "
        "set to Webhook",
        "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is "
        "not set to Webhook"]


def test_webhook_client_config() -> None:
    assert errors(crd(conversion={"strategy": "Webhook"})) == [
        "spec.conversion.webhookClientConfig: Required value: required when strategy is set to "
        "Webhook",
        "spec.conversion.conversionReviewVersions: Required value"]
    assert errors(crd(conversion=webhook())) == [
        "spec.conversion.webhookClientConfig: Required value: exactly one of url or service is "
        "required"]
    assert errors(crd(conversion=webhook(url="http://u:p@host/convert?x=1#f"))) == [
        'spec.conversion.webhookClientConfig.url: Invalid value: "http": \'https\' is the only '
        "allowed URL scheme; desired format: https://host[/path]",
        'spec.conversion.webhookClientConfig.url: Invalid value: "u:p": user information is not '
        "permitted in the URL",
        'spec.conversion.webhookClientConfig.url: Invalid value: "f": fragments are not '
        "permitted in the URL",
        'spec.conversion.webhookClientConfig.url: Invalid value: "x=1": query parameters are not '
        "permitted in the URL"]
    assert errors(crd(conversion=webhook(url="https:///path"))) == [
        'spec.conversion.webhookClientConfig.url: Invalid value: "": host must be specified; '
        "desired format: https://host[/path]"]
    assert errors(crd(conversion=webhook(url="https://conv.example.com/convert"))) == []


def test_webhook_service_name_and_namespace_are_swapped_as_in_kube() -> None:
    obj = crd(conversion=webhook(service={"namespace": "ns", "path": "no-slash//x"}))
    assert errors(obj) == [
        "spec.conversion.webhookClientConfig.service.namespace: Required value: service "
        "namespace is required",
        'spec.conversion.webhookClientConfig.service.path: Invalid value: "no-slash//x": must '
        "start with a '/'",
        'spec.conversion.webhookClientConfig.service.path: Invalid value: "no-slash//x": '
        "segment[1] may not be empty"]
    assert default_port(crd(conversion=webhook(service={"name": "n", "namespace": "ns"}))) == 443
    obj = crd(conversion=webhook(service={"name": "conv", "port": 70000}))
    assert errors(obj) == [
        "spec.conversion.webhookClientConfig.service.name: Required value: service name is "
        "required",
        "spec.conversion.webhookClientConfig.service.port: Invalid value: 70000: port is not "
        "valid: must be between 1 and 65535, inclusive"]


def default_port(obj: Mapping[str, Any]) -> int:
    port: int = obj["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"]
    assert errors(obj) == []
    return port


def test_conversion_review_versions() -> None:
    conv = webhook(url="https://h")
    conv["webhook"]["conversionReviewVersions"] = ["v2", "v2", "V3"]
    assert errors(crd(conversion=conv)) == [
        'spec.conversion.conversionReviewVersions[1]: Invalid value: "v2": duplicate version',
        f'spec.conversion.conversionReviewVersions[2]: Invalid value: "V3": {DNS1035}',
        'spec.conversion.conversionReviewVersions: Invalid value: []string{"v2", "v2", "V3"}: '
        "must include at least one of v1, v1beta1"]


def test_ca_bundle_checked_only_once_established_with_a_valid_one() -> None:
    bad = base64.b64encode(b"not a pem").decode()
    obj = crd(conversion=webhook(url="https://h", caBundle=bad))
    assert errors(obj) == []  # create: allowInvalidCABundle
    old = established(crd(conversion=webhook(url="https://h")))
    found = errors(obj, old)
    assert found == ["spec.conversion.webhookClientConfig.caBundle: Invalid value: "
                     "[]byte{0x6e, 0x6f, 0x74, 0x20, 0x61, 0x20, 0x70, 0x65, 0x6d}: unable to "
                     "load root certificates: unable to parse bytes as PEM block"]
    assert errors(obj, established(obj)) == []  # the stored bundle is already invalid


def test_webhook_needs_preserve_unknown_fields_false() -> None:
    obj = crd(conversion=webhook(url="https://h"), preserveUnknownFields=True)
    assert errors(obj) == [
        'spec.conversion.strategy: Invalid value: "Webhook": must be None if '
        "spec.preserveUnknownFields is true",
        "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set "
        "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"]


def test_preserve_unknown_fields_allowed_only_when_already_set() -> None:
    obj = crd(preserveUnknownFields=True)
    assert errors(obj) == [
        "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set "
        "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"]
    assert errors(obj, obj) == []
    v = version()
    v["schema"]["openAPIV3Schema"]["properties"]["spec"]["default"] = {}
    obj = crd(preserveUnknownFields=True, versions=[v])
    assert errors(obj, obj) == [
        "spec.preserveUnknownFields: Invalid value: true: must be false in order to use defaults "
        "in the schema"]


# --- updates (§9 items 10, 34) ---------------------------------------------------------------

def test_immutable_fields() -> None:
    old = crd()
    new = copy.deepcopy(old)
    new["spec"]["scope"] = "Cluster"
    new["spec"]["names"]["kind"] = "Gadget"
    new["spec"]["names"]["listKind"] = "GadgetList"
    assert errors(new, old) == []  # not established yet: scope and kind may change
    assert errors(new, established(old)) == [
        'spec.scope: Invalid value: "Cluster": field is immutable',
        'spec.names.kind: Invalid value: "Gadget": field is immutable']
    new = copy.deepcopy(old)
    new["spec"]["group"] = "other.example.com"
    new["spec"]["names"]["plural"] = "gadgets"
    new["metadata"]["name"] = "gadgets.other.example.com"
    assert errors(new, old) == [
        'spec.group: Invalid value: "other.example.com": field is immutable',
        'spec.names.plural: Invalid value: "gadgets": field is immutable']


def test_stored_versions() -> None:
    obj = crd(versions=[version("v1", storage=False), version("v2")])
    obj["status"]["storedVersions"] = ["v1", "v0"]
    assert errors(obj, obj) == [
        'status.storedVersions: Invalid value: []string{"v1", "v0"}: must have the storage '
        "version v2",
        'status.storedVersions[1]: Invalid value: "v0": must appear in spec.versions']
    obj["status"]["storedVersions"] = []
    assert errors(obj, obj) == ["status.storedVersions: Invalid value: []string{}: must have at "
                                "least one stored version"]


def test_removing_a_stored_version_from_spec_versions() -> None:
    old = crd(versions=[version("v1", storage=False), version("v2")])
    old["status"]["storedVersions"] = ["v1", "v2"]
    new = copy.deepcopy(old)
    new["spec"]["versions"] = [version("v2")]
    assert errors(new, old) == [
        'status.storedVersions[0]: Invalid value: "v1": must appear in spec.versions']


# --- API approval ------------------------------------------------------------------------------

def protected(annotation: str | None) -> dict[str, Any]:
    obj = crd(group="things.k8s.io")
    obj["metadata"]["name"] = "widgets.things.k8s.io"
    if annotation is not None:
        obj["metadata"]["annotations"] = {"api-approved.kubernetes.io": annotation}
    return obj


def test_api_approval_for_protected_groups() -> None:
    assert errors(protected(None)) == [
        "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups "
        'must have approval annotation "api-approved.kubernetes.io", see '
        "https://github.com/kubernetes/enhancements/pull/1111"]
    assert errors(protected("yes")) == [
        'metadata.annotations[api-approved.kubernetes.io]: Invalid value: "yes": protected '
        'groups must have approval annotation "api-approved.kubernetes.io" with either a URL or '
        'a reason starting with "unapproved", see '
        "https://github.com/kubernetes/enhancements/pull/1111"]
    assert errors(protected("https://github.com/kubernetes/enhancements/pull/1111")) == []
    assert errors(protected("unapproved, experimental")) == []
    assert errors(protected(None), protected(None)) == []  # unchanged state: never re-checked


# --- the /status strategy ----------------------------------------------------------------------

def test_status_update_validates_accepted_names_only() -> None:
    obj = crd()
    obj["status"]["acceptedNames"] = {"plural": "Widgets", "kind": "Widget"}
    obj["spec"]["scope"] = "bogus"
    assert [str(e) for e in validate_crd_status(obj, crd())] == [
        f'status.acceptedNames.plural: Invalid value: "Widgets": {DNS1035}']


def test_full_invalid_message() -> None:
    obj = crd(group="example")
    found = validate_crd(obj, None, schema_check=Recorder())
    assert ('CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: '
            + aggregate_messages(found)) == (
        'CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: ['
        'metadata.name: Invalid value: "widgets.example.com": must be '
        'spec.names.plural+"."+spec.group, spec.group: Invalid value: "example": should be a '
        "domain with at least one dot]")


def _self_signed_pem() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ca")])
    now = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def test_ca_bundle_texts() -> None:
    pem = _self_signed_pem()
    assert ca_bundle_problem(pem) is None
    assert ca_bundle_problem(b"junk\n" + pem) is None  # pem.Decode skips to the first block
    assert ca_bundle_problem(pem.replace(b"CERTIFICATE", b"PUBLIC KEY")) == (
        "unable to load root certificates: no valid certificate authority data seen")
    broken = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    assert ca_bundle_problem(broken) == (
        "unable to load root certificates: failed to parse certificate: x509: malformed "
        "certificate")
    obj = crd(conversion=webhook(url="https://h", caBundle=base64.b64encode(pem).decode()))
    assert errors(obj, established(obj)) == []


def test_unparsable_webhook_urls() -> None:
    assert errors(crd(conversion=webhook(url="://h"))) == [
        'spec.conversion.webhookClientConfig.url: Required value: url must be a valid URL: parse '
        '"://h": missing protocol scheme; desired format: https://host[/path]']
    assert errors(crd(conversion=webhook(url="https://h:port/x"))) == [
        'spec.conversion.webhookClientConfig.url: Required value: url must be a valid URL: parse '
        '"https://h:port/x": invalid port ":port" after host; desired format: '
        "https://host[/path]"]
