"""server.apiextensions.crd.crd_resources: the registry entries a CRD serves (crds.md §3.1, §3.5,
§6.4) and their use by the shared registry and field selectors."""

from __future__ import annotations

import copy
import glob
import itertools
from typing import Any

import pytest
import yaml

from kubewire.resources import Registry
from kubewire.selectors.field_sets import field_set, selectable_field_labels
from kubewire.server.apiextensions.crd.crd_defaults import default_crd
from kubewire.server.apiextensions.crd.crd_resources import (
    CRD_RESOURCE,
    compare_kube_aware_versions,
    default_deprecation_warning,
    resources_for,
)
from kubewire.server.apiextensions.crd.crd_strategy import prepare_for_create
from kubewire.server.apiextensions.crd.naming import accepted_names

GATEWAY_CRDS = sorted(glob.glob("/work/shared/openapi/gateway-api-v1.2.1/standard/*.yaml"))


def accepted(obj: dict[str, Any]) -> dict[str, Any]:
    default_crd(obj)
    prepare_for_create(obj)
    names, _ = accepted_names(obj, [])
    obj["status"]["acceptedNames"] = names
    return obj


def widget_crd(*versions: dict[str, Any], scope: str = "Namespaced") -> dict[str, Any]:
    return accepted({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": scope,
                 "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"],
                           "categories": ["all"], "listKind": "WidgetCollection"},
                 "versions": list(versions)}})


@pytest.mark.skipif(not GATEWAY_CRDS, reason="Gateway API v1.2.1 CRDs not present")
def test_gateway_api_entries() -> None:
    entries = []
    for path in GATEWAY_CRDS:
        with open(path) as f:
            entries += resources_for(accepted(yaml.safe_load(f)))
    got = [(r.api_version, r.kind, r.plural, r.singular, r.namespaced, r.short_names,
            r.categories, r.subresources, r.stored_as, r.id) for r in entries]
    group = "gateway.networking.k8s.io"
    assert got == [
        (f"{group}/v1", "GatewayClass", "gatewayclasses", "gatewayclass", False, ("gc",),
         ("gateway-api",), ("status",), "", f"{group}/gatewayclasses"),
        (f"{group}/v1beta1", "GatewayClass", "gatewayclasses", "gatewayclass", False, ("gc",),
         ("gateway-api",), ("status",), f"{group}/gatewayclasses", f"{group}/gatewayclasses"),
        (f"{group}/v1", "Gateway", "gateways", "gateway", True, ("gtw",), ("gateway-api",),
         ("status",), "", f"{group}/gateways"),
        (f"{group}/v1beta1", "Gateway", "gateways", "gateway", True, ("gtw",), ("gateway-api",),
         ("status",), f"{group}/gateways", f"{group}/gateways"),
        (f"{group}/v1", "HTTPRoute", "httproutes", "httproute", True, (), ("gateway-api",),
         ("status",), "", f"{group}/httproutes"),
        (f"{group}/v1beta1", "HTTPRoute", "httproutes", "httproute", True, (), ("gateway-api",),
         ("status",), f"{group}/httproutes", f"{group}/httproutes")]
    for entry in entries:
        assert entry.is_custom and entry.field_label_style == "crd"
        assert entry.generation == "non_metadata" and not entry.allow_unconditional_update
        assert not entry.allow_create_on_update and not entry.return_deleted_object
        assert entry.deprecation_warning is None and entry.list_kind == entry.kind + "List"
        assert entry.crd is not None and entry.crd["spec"]["group"] == group
    registry = Registry(tuple(entries))  # the entries form a consistent registry
    assert registry.by_id(f"{group}/gateways") is entries[2]
    assert registry.by_kind(f"{group}/v1beta1", "HTTPRoute") is entries[5]


def test_served_versions_share_the_storage_version() -> None:
    obj = widget_crd({"name": "v1alpha1", "served": False, "storage": False},
                     {"name": "v1beta1", "served": True, "storage": True,
                      "subresources": {"status": {}, "scale": {
                          "specReplicasPath": ".spec.replicas",
                          "statusReplicasPath": ".status.replicas"}}},
                     {"name": "v1", "served": True, "storage": False})
    entries = resources_for(obj)
    assert [(r.version, r.stored_as, r.subresources) for r in entries] == [
        ("v1beta1", "", ("status", "scale")), ("v1", "example.com/widgets", ())]
    assert entries[0].list_kind == "WidgetCollection"
    assert entries[0].short_names == ("wd",) and entries[0].categories == ("all",)
    assert entries[0].storage_key("ns", "a") == entries[1].storage_key("ns", "a")


def test_no_entries_until_names_are_accepted() -> None:
    obj = widget_crd({"name": "v1", "served": True, "storage": True})
    obj["status"]["acceptedNames"] = {"plural": "", "kind": ""}
    assert resources_for(obj) == ()


def test_accepted_names_not_spec_names_name_the_entries() -> None:
    obj = widget_crd({"name": "v1", "served": True, "storage": True})
    renamed = copy.deepcopy(obj)
    renamed["spec"]["names"]["shortNames"] = ["other"]  # requested, not yet accepted
    assert resources_for(renamed)[0].short_names == ("wd",)


def test_selectable_fields_become_field_labels() -> None:
    obj = widget_crd({"name": "v1", "served": True, "storage": True, "selectableFields": [
        {"jsonPath": ".spec.color"}, {"jsonPath": ".spec.on"}, {"jsonPath": ".spec.size"}]},
        scope="Cluster")
    entry = resources_for(obj)[0]
    assert selectable_field_labels(entry) == {"metadata.name", "spec.color", "spec.on",
                                              "spec.size"}
    assert field_set(entry, {"metadata": {"name": "a"}, "spec": {"on": True, "size": 5}}) == {
        "metadata.name": "a", "spec.color": "", "spec.on": "true", "spec.size": "5"}


def test_deprecation_warnings() -> None:
    obj = widget_crd(
        {"name": "v1alpha1", "served": True, "storage": False, "deprecated": True},
        {"name": "v1beta1", "served": True, "storage": False, "deprecated": True,
         "deprecationWarning": "use v1 instead"},
        {"name": "v1beta2", "served": True, "storage": False},
        {"name": "v1", "served": True, "storage": True},
        {"name": "v2", "served": False, "storage": False})
    warnings = {r.version: r.deprecation_warning for r in resources_for(obj)}
    assert warnings == {
        "v1alpha1": "example.com/v1alpha1 Widget is deprecated; use example.com/v1 Widget",
        "v1beta1": "use v1 instead", "v1beta2": None, "v1": None}
    obj["spec"]["versions"][3]["deprecated"] = True
    assert default_deprecation_warning("v1", obj) == "example.com/v1 Widget is deprecated"


def test_kube_aware_version_order() -> None:
    ordered = ["v2", "v1", "v11beta2", "v10beta3", "v3beta1", "v12alpha1", "v11alpha2",
               "foo1", "foo10"]
    for newer, older in itertools.pairwise(ordered):
        assert compare_kube_aware_versions(newer, older) > 0
        assert compare_kube_aware_versions(older, newer) < 0
    assert compare_kube_aware_versions("v1", "v1") == 0


def test_the_crd_kind_itself() -> None:
    assert (CRD_RESOURCE.api_version, CRD_RESOURCE.plural, CRD_RESOURCE.namespaced,
            CRD_RESOURCE.short_names, CRD_RESOURCE.categories) == (
        "apiextensions.k8s.io/v1", "customresourcedefinitions", False, ("crd", "crds"),
        ("api-extensions",))
    assert CRD_RESOURCE.list_kind == "CustomResourceDefinitionList"


def test_reads_are_defaulted_with_the_storage_versions_schema() -> None:
    """crds.md §4.3 (b): a default of the storage version fills objects read from storage, in
    the entries' shared conversion (the CRD's storage codec)."""
    with_default = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "color": {"type": "string", "default": "teal"}}}}}
    crd = widget_crd(
        {"name": "v1", "served": True, "storage": False,
         "schema": {"openAPIV3Schema": {"type": "object", "properties": {
             "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}},
        {"name": "v2", "served": True, "storage": True,
         "schema": {"openAPIV3Schema": with_default}})
    conversion = resources_for(crd)[0].conversion
    assert conversion is not None
    stored = {"apiVersion": "example.com/v2", "kind": "Widget", "spec": {}}
    assert conversion.read(stored, "example.com/v2")["spec"] == {"color": "teal"}
    red = {"apiVersion": "example.com/v2", "kind": "Widget", "spec": {"color": "red"}}
    assert conversion.read(red, "example.com/v2")["spec"] == {"color": "red"}
