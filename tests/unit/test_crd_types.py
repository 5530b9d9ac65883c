"""``schema.crd_types``: a CRD version's schema in the form server-side apply walks."""

from __future__ import annotations

from kubewire.schema.crd_types import OBJECT_META, compact, crd_type
from kubewire.server.patch.field_paths import FieldSetError, field_set

SCHEMA = {
    "type": "object",
    "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
        "spec": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {
                          "name": {"type": "string"},
                          "port": {"x-kubernetes-int-or-string": True}}}},
            "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                         "x-kubernetes-preserve-unknown-fields": True},
            "sel": {"type": "object", "x-kubernetes-map-type": "atomic",
                    "additionalProperties": {"type": "string", "maxLength": 3}}}}},
}


def test_root_and_embedded_objects_get_type_meta_and_object_meta() -> None:
    out = compact(SCHEMA, root=True)
    assert out["properties"]["metadata"] == {"ref": OBJECT_META}  # kube's ObjectMeta wins
    assert out["properties"]["apiVersion"] == {"type": "string"}
    template = out["properties"]["spec"]["properties"]["template"]
    assert set(template["properties"]) == {"apiVersion", "kind", "metadata"}
    assert template["x-kubernetes-preserve-unknown-fields"] is True
    port = out["properties"]["spec"]["properties"]["ports"]["items"]["properties"]["port"]
    assert port == {"type": "int-or-string"}
    sel = out["properties"]["spec"]["properties"]["sel"]
    assert sel == {"type": "object", "x-kubernetes-map-type": "atomic",
                   "additionalProperties": {"type": "string"}}  # value validations dropped


def test_field_sets_follow_the_list_and_map_types() -> None:
    root = crd_type(SCHEMA)
    obj = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a", "labels": {"l": "1"}},
           "spec": {"ports": [{"name": "p", "port": 1}], "sel": {"a": "b"},
                    "template": {"apiVersion": "v1", "kind": "Pod", "anything": 1}}}
    paths = field_set(obj, root)
    assert ("f:spec", "f:ports", 'k:{"name":"p"}', "f:port") in paths
    assert ("f:spec", "f:sel") in paths and ("f:spec", "f:sel", "f:a") not in paths
    assert ("f:metadata", "f:labels", "f:l") in paths
    assert ("f:spec", "f:template", "f:anything") in paths
    try:
        field_set({"spec": {"nope": 1}}, root)
    except FieldSetError as exc:
        assert str(exc) == ".spec.nope: field not declared in schema"
    else:
        raise AssertionError("an undeclared field passed")
