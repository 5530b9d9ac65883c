"""The pure part of the client's kinds as data: which kinds are known up front, which are found
in discovery, and how a user's dicts, Structs and dataclasses are written."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from kubewire.client.discovery import APIResource, document_path, find, no_match
from kubewire.client.errors import ConfigError
from kubewire.client.resource import (
    DictCodec,
    ResourceInfo,
    StructCodec,
    is_user_type,
    resource_info,
    with_type_fields,
)
from kubewire.models import Pod


def test_built_in_kinds_are_known_and_custom_ones_are_discovered() -> None:
    assert resource_info("apps/v1", "Deployment") == ResourceInfo(
        "apps/v1", "Deployment", "deployments", True, custom=False)
    assert resource_info("v1", plural="nodes") == ResourceInfo("v1", "Node", "nodes", False,
                                                               custom=False)
    # kubewire serves Gateway from a pre-installed CRD; a cluster may not have it, and the
    # client knows it no better than any custom kind.
    assert resource_info("gateway.networking.k8s.io/v1", "Gateway") is None
    assert resource_info("gateway.networking.k8s.io/v1", "Gateway", "gateways", True) == \
        ResourceInfo("gateway.networking.k8s.io/v1", "Gateway", "gateways", True, custom=None)
    assert resource_info("example.com/v1", "Widget") is None
    assert resource_info("example.com/v1", plural="widgets", namespaced=False) == \
        ResourceInfo("example.com/v1", "", "widgets", False, custom=None)


@pytest.mark.parametrize(("api_version", "kind", "plural"), [
    ("", "Widget", None), ("a/b/c", "Widget", None), ("example.com/v1", None, None)])
def test_a_kind_needs_a_group_version_and_a_name(api_version: str, kind: str | None,
                                                 plural: str | None) -> None:
    with pytest.raises(ConfigError):
        resource_info(api_version, kind, plural)


def test_discovery_documents() -> None:
    resources = [APIResource("widgets/status", "Widget", True),
                 APIResource("widgets", "Widget", True),
                 APIResource("gadgets", "Gadget", False)]
    assert find(resources, "example.com/v1", "Widget", None) == ResourceInfo(
        "example.com/v1", "Widget", "widgets", True)
    assert find(resources, "example.com/v1", None, "gadgets") == ResourceInfo(
        "example.com/v1", "Gadget", "gadgets", False)
    assert find(resources, "example.com/v1", "Widget", "gadgets") is None
    assert find(resources, "example.com/v1", "Thing", None) is None
    assert document_path("v1") == "/api/v1"
    assert document_path("example.com/v1") == "/apis/example.com/v1"
    assert str(no_match("example.com/v1", "Widget", None)) == (
        'no matches for kind "Widget" in version "example.com/v1"')
    assert str(no_match("example.com/v1", None, "widgets")) == (
        "no matches for example.com/v1, Resource=widgets")


class Meta(msgspec.Struct, rename="camel"):
    name: str
    resource_version: str | None = None
    labels: dict[str, str] | None = None


class Thing(msgspec.Struct, omit_defaults=True):
    metadata: Meta
    api_version: str | None = msgspec.field(default=None, name="apiVersion")


@dataclasses.dataclass
class ThingDC:
    metadata: dict[str, str]
    kind: str | None = None


def test_user_types_are_written_with_their_kind_and_read_back() -> None:
    codec = StructCodec(Thing, {"apiVersion": "example.com/v1", "kind": "Thing"})
    thing = Thing(Meta("t", "5", {"a": "b"}))
    assert msgspec.json.decode(codec.encode(thing)) == {
        "apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "t", "resourceVersion": "5", "labels": {"a": "b"}}}
    assert codec.decode(codec.encode(thing)) == Thing(thing.metadata, "example.com/v1")
    assert codec.key(thing) == (None, "t", "5") and codec.labels(thing) == {"a": "b"}
    dc_codec = StructCodec(ThingDC, {"apiVersion": "v", "kind": "K"})
    assert msgspec.json.decode(dc_codec.encode(ThingDC({"name": "d", "namespace": "ns"}))) == {
        "apiVersion": "v", "kind": "K", "metadata": {"name": "d", "namespace": "ns"}}
    assert dc_codec.name_and_namespace(ThingDC({"name": "d", "namespace": "ns"})) == ("d", "ns")
    assert is_user_type(Thing) and is_user_type(ThingDC)
    assert not is_user_type(Pod) and not is_user_type(dict)


def test_dicts_keep_their_own_kind_fields() -> None:
    codec = DictCodec()
    codec.type_fields.update(apiVersion="example.com/v1", kind="Thing")
    assert list(msgspec.json.decode(codec.encode({"metadata": {"name": "x"}}))) == [
        "apiVersion", "kind", "metadata"]
    own = {"apiVersion": "example.com/v2", "kind": "Thing", "spec": {}}
    assert with_type_fields(own, codec.type_fields) is own
