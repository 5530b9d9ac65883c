"""Pruning and defaulting of custom resources, as kube's decoder does them.

Expected behaviour from ``apiextensions-apiserver``: ``pkg/apiserver/schema/pruning/algorithm.go``
(``prune``, ``skipPrune``, sorted unknown paths), ``pkg/apiserver/schema/options.go`` (path
form), ``pkg/apiserver/schema/defaulting/prunenulls.go``, ``defaulting/algorithm.go`` and
``pkg/apiserver/schema/objectmeta/coerce.go``; crds.md §4.2, §4.3 and §9 items 15, 16, 18.
"""

from __future__ import annotations

import copy
from typing import Any

from kubewire.server.apiextensions.schemas.defaulting import apply_defaults
from kubewire.server.apiextensions.schemas.pruning import prune, prune_unknown
from kubewire.server.apiextensions.schemas.structural import parse

SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "default": 1},
        "mode": {"type": "string", "default": "fast"},
        "note": {"type": "string", "nullable": True, "default": "n"},
        "plain": {"type": "string"},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "weight": {"type": "integer", "default": 5}}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                 "properties": {"known": {"type": "object", "properties": {
                     "a": {"type": "string"}}}}},
        "opaque": {"type": "object", "additionalProperties": True},
        "nested": {"type": "object", "default": {},
                   "properties": {"x": {"type": "integer", "default": 7}}},
        "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                     "x-kubernetes-preserve-unknown-fields": True},
    }},
    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
}}


def test_unknown_fields_pruned_and_reported_sorted() -> None:
    """``PruneWithOptions``: every undeclared key goes; paths sorted, ``[i]`` for items."""
    obj = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a", "junk": 1},
           "spec": {"zz": 1, "foo": {"b": 2}, "items": [{"name": "a", "extra": True}],
                    "labels": {"k": "v"}},
           "other": 3}
    assert prune(parse(SCHEMA), obj) == ["other", "spec.foo", "spec.items[0].extra", "spec.zz"]
    assert obj == {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a", "junk": 1},
                   "spec": {"items": [{"name": "a"}], "labels": {"k": "v"}}}


def test_root_meta_kept_but_nested_meta_names_pruned() -> None:
    """apiVersion/kind/metadata survive at the root (resource root); elsewhere they are keys."""
    obj = {"spec": {"metadata": {}, "kind": "x"}}
    assert prune(parse(SCHEMA), obj) == ["spec.kind", "spec.metadata"]


def test_preserve_unknown_fields_keeps_unknown_but_prunes_declared() -> None:
    """``skipPrune``: declared properties below are still pruned."""
    obj = {"spec": {"free": {"anything": {"deep": 1}, "known": {"a": "x", "b": "y"}}}}
    assert prune(parse(SCHEMA), obj) == ["spec.free.known.b"]
    assert obj["spec"]["free"] == {"anything": {"deep": 1}, "known": {"a": "x"}}


def test_additional_properties_true_empties_object_values() -> None:
    """``prune(v, AdditionalProperties.Structural=nil)``: an object value loses every key."""
    obj = {"spec": {"opaque": {"a": {"b": 1}, "c": 2}}}
    assert prune(parse(SCHEMA), obj) == ["spec.opaque.a.b"]
    assert obj["spec"]["opaque"] == {"a": {}, "c": 2}


def test_embedded_resource_keeps_its_meta() -> None:
    obj = {"spec": {"template": {"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": "p", "bogus": 1, "labels": {}},
                                 "spec": {"x": 1}}}}
    assert prune(parse(SCHEMA), obj) == ["spec.template.metadata.bogus"]
    assert obj["spec"]["template"] == {"apiVersion": "v1", "kind": "Pod",
                                       "metadata": {"name": "p"}, "spec": {"x": 1}}


def test_non_nullable_nulls_without_default_dropped() -> None:
    """``PruneNonNullableNullsWithoutDefaults``: map keys only, defaulted ones left."""
    obj = {"spec": {"plain": None, "mode": None, "note": None, "items": [None]}}
    assert prune(parse(SCHEMA), obj) == []
    assert obj == {"spec": {"mode": None, "note": None, "items": [None]}}


def test_defaults_applied_as_kube_does() -> None:
    """``Default``: absent keys and non-nullable nulls get a deep copy of the default; a
    nullable null stays; nested defaults apply inside a defaulted parent (crds.md §4.3)."""
    schema = parse(SCHEMA)
    obj: dict[str, Any] = {"spec": {"mode": None, "note": None, "items": [{"name": "a"}]}}
    apply_defaults(schema, obj)
    assert obj == {"spec": {"replicas": 1, "mode": "fast", "note": None,
                            "items": [{"name": "a", "weight": 5}], "nested": {"x": 7}}}


def test_defaults_are_deep_copies() -> None:
    schema = parse({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "m": {"type": "object", "default": {"a": [1]},
              "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}}}}})
    first: dict[str, Any] = {"spec": {}}
    second: dict[str, Any] = {"spec": {}}
    apply_defaults(schema, first)
    first["spec"]["m"]["a"].append(2)
    apply_defaults(schema, second)
    assert second == {"spec": {"m": {"a": [1]}}}


def test_no_defaults_for_absent_parents() -> None:
    schema = parse({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "x": {"type": "integer", "default": 1}}}}})
    obj: dict[str, Any] = {"status": {}}
    apply_defaults(schema, obj)
    assert obj == {"status": {}}


def test_item_and_map_value_nulls_take_their_default() -> None:
    schema = parse({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "l": {"type": "array", "items": {"type": "string", "default": "d"}},
        "m": {"type": "object", "additionalProperties": {"type": "string", "default": "v"}}}}}})
    obj: dict[str, Any] = {"spec": {"l": [None, "a"], "m": {"k": None}}}
    apply_defaults(schema, obj)
    assert obj == {"spec": {"l": ["d", "a"], "m": {"k": "v"}}}


def test_prune_unknown_without_root_meta() -> None:
    """``Prune(x, s, isResourceRoot=false)`` keeps nothing by name."""
    schema = parse({"type": "object", "properties": {"a": {"type": "string"}}})
    value = {"a": "x", "kind": "K"}
    assert prune_unknown(schema, value, root=False) == []
    assert value == {"a": "x"}


def test_prune_is_idempotent_and_leaves_known_objects_alone() -> None:
    schema = parse(SCHEMA)
    obj = {"spec": {"replicas": 2, "labels": {"a": "b"}}, "status": {"ready": True}}
    before = copy.deepcopy(obj)
    assert prune(schema, obj) == []
    assert obj == before
