"""A create's managedFields come from one walk of the object (``field_ownership._track_create``).

The general path (diff against nothing, then ``record_update`` from no entries) is the
reference: a body with ``managedFields: []`` takes it, a body without any takes the walk, and
both must store the same entry, byte for byte, for any object and any kind.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubewire.resources import REGISTRY, Resource
from kubewire.server.patch.field_ownership import WriteFacts, track_write
from kubewire.server.request.routes import Route
from kubewire.server.request.write_options import WriteOptions

NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)


def _resource(group: str, version: str, plural: str) -> Resource:
    resource = REGISTRY.lookup(group, version, plural)
    assert resource is not None
    return resource


PODS = _resource("", "v1", "pods")
RESOURCES = [
    PODS,
    _resource("apps", "v1", "deployments"),
    _resource("", "v1", "services"),
    _resource("", "v1", "configmaps"),
    _resource("", "v1", "namespaces"),
    # a custom resource without a schema: every field's kind is deduced from its value
    replace(PODS, group="example.com", version="v1", kind="Widget", plural="widgets",
            is_custom=True),
]


def _both(resource: Resource, prepared: dict[str, Any]) -> tuple[bytes, bytes]:
    route = Route(resource, "ns", "", "", False)
    facts = WriteFacts(route, WriteOptions(field_manager="m"), NOW)
    fast = track_write(facts, None, copy.deepcopy(prepared), copy.deepcopy(prepared))
    new = copy.deepcopy(prepared)
    new.setdefault("metadata", {})["managedFields"] = []  # takes the general path
    general = track_write(facts, None, new, copy.deepcopy(prepared))
    return msgspec.json.encode(fast), msgspec.json.encode(general)


POD = {
    "kind": "Pod", "apiVersion": "v1",
    "metadata": {"name": "p", "namespace": "ns", "uid": "u", "generation": 1,
                 "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"a": "b"},
                 "annotations": {}, "finalizers": ["x", "y", "x"],
                 "ownerReferences": [{"uid": "1", "name": "o", "kind": "K",
                                      "apiVersion": "v1"}]},
    "spec": {"containers": [{"name": "c", "image": "i", "ports": [
        {"containerPort": 80, "protocol": "TCP"}, {"containerPort": 80, "protocol": "UDP"}],
        "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}],
        "resources": {}}, {"name": "d", "image": "j"}],
        "securityContext": {}, "volumes": [], "nodeSelector": {"k": "v"},
        "tolerations": [{"key": "k"}], "dnsPolicy": None},
    "status": {"phase": "Pending", "conditions": [{"type": "Ready"}]},
}


def test_a_pod_gets_the_same_entry_as_the_general_path() -> None:
    fast, general = _both(PODS, POD)
    assert fast == general
    assert b'"managedFields"' in fast


def test_nothing_owned_means_no_entry() -> None:
    for resource in RESOURCES:
        fast, general = _both(resource, {"kind": resource.kind, "apiVersion": "v1",
                                         "metadata": {"name": "x", "namespace": "ns"}})
        assert fast == general
        assert b"managedFields" not in fast


def test_a_map_list_item_without_its_key_gives_no_entry_on_both_paths() -> None:
    pod = copy.deepcopy(POD)
    pod["spec"]["containers"].append({"image": "no-name"})
    fast, general = _both(PODS, pod)
    assert fast == general


_keys = st.sampled_from(["name", "image", "spec", "metadata", "status", "labels", "data",
                         "containers", "ports", "env", "value", "x", "containerPort",
                         "protocol", "selector", "template", "finalizers", "type"])
_scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["a", "TCP", ""])
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_keys, inner, max_size=4), max_leaves=25)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(resource=st.sampled_from(RESOURCES), body=st.dictionaries(_keys, _json, max_size=5),
       base=st.sampled_from([POD, {}]))
@example(resource=PODS, body={"metadata": {"finalizers": [[], {"name": None}]}}, base=POD)
def test_any_object_gets_the_same_entry_as_the_general_path(
        resource: Resource, body: dict[str, Any], base: dict[str, Any]) -> None:
    prepared = {**copy.deepcopy(base), **body}
    if not isinstance(prepared.get("metadata"), dict):
        prepared["metadata"] = {}
    fast, general = _both(resource, prepared)
    assert fast == general


def test_objects_of_one_shape_each_get_their_own_entry() -> None:
    """The walk remembers each struct's shapes (fields and their values' types): objects of a
    shape met before still get their own lists' keys, and a value of another type (a map
    where a string was, a null) is another shape."""
    pods = []
    for names, image, security in [(["c", "d"], "i", {}), (["e"], "j", {}),
                                   (["f", "g", "h"], "k", {"runAsUser": 1}),
                                   (["f"], {"a": "b"}, None)]:
        pod = copy.deepcopy(POD)
        pod["spec"]["containers"] = [{"name": name, "image": image} for name in names]
        pod["spec"]["securityContext"] = security
        pods.append(pod)
    entries = []
    for pod in pods:
        fast, general = _both(PODS, pod)
        assert fast == general
        entries.append(msgspec.json.decode(fast)["metadata"]["managedFields"][0]["fieldsV1"])
    containers = [sorted(entry["f:spec"]["f:containers"]) for entry in entries]
    assert containers == [['k:{"name":"c"}', 'k:{"name":"d"}'], ['k:{"name":"e"}'],
                          ['k:{"name":"f"}', 'k:{"name":"g"}', 'k:{"name":"h"}'],
                          ['k:{"name":"f"}']]
    assert "f:securityContext" in entries[2]["f:spec"]
    assert "f:securityContext" not in entries[0]["f:spec"]


def test_each_create_gets_fresh_field_trees() -> None:
    """A remembered shape gives new dicts each time: changing one object's entry in place
    (as later writes may) changes no other's."""
    route = Route(PODS, "ns", "", "", False)
    facts = WriteFacts(route, WriteOptions(field_manager="m"), NOW)
    first = track_write(facts, None, copy.deepcopy(POD), copy.deepcopy(POD))
    second = track_write(facts, None, copy.deepcopy(POD), copy.deepcopy(POD))
    tree = first["metadata"]["managedFields"][0]["fieldsV1"]
    other = second["metadata"]["managedFields"][0]["fieldsV1"]
    assert tree == other
    tree["f:spec"]["f:containers"].clear()
    tree["f:metadata"]["f:labels"]["f:a"]["x"] = {}
    assert other != tree
    assert other["f:spec"]["f:containers"]
    assert other["f:metadata"]["f:labels"]["f:a"] == {}
