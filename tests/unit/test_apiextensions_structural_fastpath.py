"""The validator's fast path agrees with its full (kube-openapi faithful) walk.

``openapi_validator.is_valid`` answers "no error" without building results; ``validate_value``
trusts it for valid objects. Generated values against schemas exercising every check must get
the same verdict from both.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubewire.server.apiextensions.schemas.openapi_validator import is_valid, validate_node
from kubewire.server.apiextensions.schemas.structural import Structural, parse

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-20, 20),
                     st.floats(-20, 20, allow_nan=False), st.sampled_from(
                         ["", "a", "ab", "abcd", "A1", "2024-01-02", "80", "x@y.io"]))
_JSON = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["a", "b", "n", "s", "l", "m"]), inner, max_size=4)),
    max_leaves=12)

_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "required": ["a"], "minProperties": 1, "maxProperties": 3, "properties": {
        "a": {"type": "string", "minLength": 1, "maxLength": 3, "pattern": "^[a-z]"},
        "b": {"type": "integer", "minimum": 0, "maximum": 10, "multipleOf": 2},
        "n": {"type": "number", "nullable": True, "exclusiveMinimum": True, "minimum": -1},
        "s": {"type": "string", "enum": ["a", "ab"], "format": "date"},
        "l": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "boolean"}},
        "m": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True,
                                                        "anyOf": [{"type": "integer"},
                                                                  {"type": "string"}]}}}},
    {"type": "object", "properties": {
        "a": {"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 5}],
              "not": {"enum": [3]}},
        "b": {"allOf": [{"type": "string"}, {"maxLength": 2}], "x-kubernetes-preserve-"
              "unknown-fields": True},
        "l": {"type": "array", "uniqueItems": True, "items": {"type": "number"}},
        "m": {"type": "object", "additionalProperties": False},
        "c": {"type": "integer", "not": {"enum": [3]}}}},
    {"type": "object", "properties": {"s": {"type": "string", "format": "int32"},
                                      "n": {"type": "integer", "format": "email"}}},
]
_PARSED = [parse(s) for s in _SCHEMAS]
# Mostly-valid values per key, so that single failing checks are common.
_NEAR = {"a": ["ab", "a", "A1", "abcd", 3, 2, 7, -3, None], "b": [0, 2, 4, 3, 11, -2, 2.0, "2"],
         "n": [None, 0.5, -1, -1.0, 3, "x"], "s": ["a", "ab", "2024-01-02", "b", 5],
         "l": [[True], [True, False], [], [1], [1.5, 1.5], [1, 2], [True, True, True]],
         "m": [{"x": 1}, {"x": "a"}, {"x": True}, {}, {"x": None}]}
_OBJECTS = st.fixed_dictionaries({}, optional={
    k: st.one_of(st.sampled_from(v), _JSON) for k, v in _NEAR.items()})


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(range(len(_SCHEMAS))), st.one_of(_OBJECTS, _JSON), st.booleans())
def test_fast_path_matches_full_walk(index: int, value: Any, crd_form: bool) -> None:
    schema = _PARSED[index]
    assert is_valid(schema, value, crd_form) == (not validate_node(schema, value, "",
                                                                   crd_form).errors)


def _nodes(node: Structural) -> list[Structural]:
    out = [node]
    children = [*node.properties.values(), node.items, node.additional_schema, node.not_,
                *node.any_of, *node.one_of, *node.all_of]
    for child in children:
        if child is not None:
            out += _nodes(child)
    return out


_NODES = [n for p in _PARSED for n in _nodes(p)]
_VALUES = st.one_of(st.sampled_from([v for pool in _NEAR.values() for v in pool]), _JSON)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(range(len(_NODES))), _VALUES, st.booleans())
def test_fast_path_matches_full_walk_per_node(index: int, value: Any, crd_form: bool) -> None:
    node = _NODES[index]
    assert is_valid(node, value, crd_form) == (not validate_node(node, value, "",
                                                                 crd_form).errors)


def test_fast_path_matches_full_walk_on_every_node_and_pool_value() -> None:
    """Exhaustive over the near-valid pools: each node against each value, both forms."""
    pool = [v for values in _NEAR.values() for v in values] + [
        [1.5, 1.5], [1, 1], {"x": 1, "y": 2}, {"a": "ab"}, {"a": "ab", "b": 2},
        {"a": 2}, {"a": 3}, {"a": 7}, "abc", "", -1, 0, 10, 12, 2.5]
    for node in _NODES:
        for value in pool:
            for crd_form in (True, False):
                assert is_valid(node, value, crd_form) == (
                    not validate_node(node, value, "", crd_form).errors), (node.raw, value)
