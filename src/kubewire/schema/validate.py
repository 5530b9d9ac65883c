"""Schema checks that run on every write: types, required fields, enums, unknown fields, defaults.

Messages follow kube-apiserver's structural-schema validation of custom resources
(``kube-openapi:pkg/validation/validate`` type/object validators, converted to field errors by
``apiextensions-apiserver:pkg/apiserver/validation/validation.go``
``kubeOpenAPIResultToFieldErrors``), applied to every kind. Paths are dotted with list indices
(``spec.containers[0].name``); map values append ``.<key>`` as kube-openapi does.

Each kind's schema is compiled once into small ``SchemaNode`` objects; each check walks the object
once. ``null`` is accepted wherever a field is optional (Go decodes it as the zero value) and
counts as missing for ``required``.

``required`` is a custom resource's rule only. kube-apiserver decodes a built-in kind into its Go
struct, where a missing field is its zero value, and only the kind's hand-written validation
(``pkg/apis/<group>/validation``) rejects anything; the OpenAPI ``required`` lists of built-in
types merely mirror the Go fields without ``omitempty``. Callers pass ``schema_required=False``
for built-in kinds, which the server's ``writes.validation`` covers with kube's own rules, and
``go_zero_fields`` fills such a missing field with the zero value Go then writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache

from kubewire.json_copy import copy_json
from kubewire.json_types import JSON
from kubewire.schema import TypeNode, type_for
from kubewire.status import FieldError, not_supported, required

# What encoding/json writes for a Go scalar field's zero value (a field without omitempty).
_GO_ZERO: dict[str, JSON] = {"string": "", "integer": 0, "boolean": False}
_RAW_EXTENSION = "io.k8s.apimachinery.pkg.runtime.RawExtension"
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
# Declared JSON types per compact type, as kube-openapi joins them in messages.
_DECLARED: dict[str, tuple[str, ...]] = {
    "string": ("string",), "integer": ("integer",), "number": ("number",),
    "boolean": ("boolean",), "object": ("object",), "array": ("array",),
    "int-or-string": ("integer", "string"), "quantity": ("string", "number"),
}


class SchemaNode:
    """A compiled schema node (structure resolved, facts flattened for fast walking)."""

    __slots__ = ("declared", "default", "default_props", "defaulted_props", "enum", "format",
                 "has_default", "has_defaults", "has_zeros", "is_open", "items", "nullable",
                 "plain", "props", "required", "type", "values", "zero_props", "zeros")

    def __init__(self) -> None:
        self.type = "any"
        self.declared: tuple[str, ...] = ()
        self.format = ""
        self.props: dict[str, SchemaNode] = {}
        self.required: tuple[str, ...] = ()
        self.items: SchemaNode | None = None
        self.values: SchemaNode | None = None
        self.enum: tuple[JSON, ...] | None = None
        self.has_default = False
        self.default: JSON = None
        self.nullable = False
        self.is_open = True  # unknown fields allowed (any / preserve-unknown-fields)
        self.has_defaults = False  # a default exists somewhere in this subtree
        self.plain: frozenset[type] = frozenset()  # value types _check_type always accepts
        self.zeros: tuple[tuple[str, JSON], ...] = ()  # required scalars: (name, Go zero value)
        self.has_zeros = False  # ``zeros`` somewhere in this subtree
        # The walks' plans (``_plan``, once the root is final): the properties whose subtree
        # ``_zero_filled`` or ``fill_defaults`` can change, so a walk visits only those keys of a
        # value instead of every key; None where ``values`` can change some other key too, or
        # where ``_plan`` did not run (the walks then visit every key, as they always could).
        self.zero_props: dict[str, SchemaNode] | None = None
        self.default_props: tuple[tuple[str, SchemaNode], ...] | None = None
        self.defaulted_props: dict[str, SchemaNode] | None = None


def _compile(node: TypeNode, memo: dict[str, SchemaNode]) -> SchemaNode:
    # A bare reference is the named type itself: share one compiled node per name.
    # A recursive type (the CRD's JSONSchemaProps) reaches its own node while it is being
    # compiled: the memo holds it from the start, so the cycle closes on the same object.
    bare = node.ref and set(node.raw) == {"ref"}
    if bare and node.ref in memo:
        return memo[node.ref]
    out = SchemaNode()
    if bare:
        memo[node.ref] = out
    # runtime.RawExtension decodes any JSON value (its UnmarshalJSON keeps the bytes), though
    # the OpenAPI documents call it an object: a ControllerRevision's data may be a string
    out.type = "any" if node.ref == _RAW_EXTENSION else node.type
    out.declared = _DECLARED.get(out.type, ())
    out.format = node.format
    out.enum = node.enum
    out.nullable = node.nullable
    out.has_default = node.has_default
    out.default = node.default
    out.props = {k: _compile(v, memo) for k, v in node.properties.items()}
    out.required = node.required
    out.items = _compile(node.items, memo) if node.items is not None else None
    out.values = _compile(node.values, memo) if node.values is not None else None
    if node.embedded_resource:
        for key in ("apiVersion", "kind", "metadata"):
            out.props.setdefault(key, SchemaNode())
    out.is_open = out.type == "any" or node.preserve_unknown_fields
    out.plain = _plain_types(out.declared)
    children = [*out.props.values(), out.items, out.values]
    out.has_defaults = any(c is not None and (c.has_default or c.has_defaults)
                           for c in children)
    out.zeros = tuple((name, _GO_ZERO[out.props[name].type]) for name in out.required
                      if name in out.props and out.props[name].type in _GO_ZERO
                      and not out.props[name].format.startswith("date-time"))
    out.has_zeros = bool(out.zeros) or any(c is not None and c.has_zeros for c in children)
    return out


def _strip_required(root: SchemaNode) -> None:
    """Drop every ``required`` list (and the zero values that follow them) under ``root``."""
    for node in _nodes(root):
        node.required, node.zeros, node.has_zeros = (), (), False


def _nodes(root: SchemaNode) -> list[SchemaNode]:
    """Every node under ``root`` once (recursive types close cycles on shared nodes)."""
    seen: set[int] = set()
    out: list[SchemaNode] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        stack.extend(c for c in (*node.props.values(), node.items, node.values) if c is not None)
    return out


def _plan(root: SchemaNode) -> SchemaNode:
    """Set each node's walk plans from its final facts (``has_zeros`` and ``has_defaults`` are
    settled only once the root is compiled and its ``required`` lists stripped; a recursive
    type's node is completed after its descendants reached it)."""
    for node in _nodes(root):
        values = node.values
        if values is not None and values.has_zeros and not values.is_open:
            node.zero_props = None  # any key may be a zero-bearing map value
        else:
            node.zero_props = {key: child for key, child in node.props.items()
                               if child.has_zeros and not child.is_open}
        node.default_props = tuple((key, child) for key, child in node.props.items()
                                   if child.has_default)
        if values is not None and (values.has_default or values.has_defaults):
            node.defaulted_props = None  # any key may be a map value to default
        else:
            node.defaulted_props = {key: child for key, child in node.props.items()
                                    if child.has_defaults}
    return root


@cache
def _root(api_version: str, kind: str) -> SchemaNode:
    root = _compile(type_for(api_version, kind), {})
    metadata = root.props.get("metadata")
    if metadata is not None:  # ObjectMeta is kube's ValidateObjectMeta's, for every kind
        _strip_required(metadata)
        children = [*root.props.values(), root.items, root.values]
        root.has_zeros = bool(root.zeros) or any(c is not None and c.has_zeros
                                                 for c in children)
    return _plan(root)


@cache
def _root_unrequired(api_version: str, kind: str) -> SchemaNode:
    """``_root`` without ``required`` lists (built-in kinds: see the module docstring)."""
    root = _compile(type_for(api_version, kind), {})
    _strip_required(root)
    return _plan(root)


def builtin_root(api_version: str, kind: str) -> SchemaNode:
    """The compiled schema a built-in kind is checked against (no ``required``): what
    ``check_object(..., schema_required=False)`` walks."""
    return _root_unrequired(api_version, kind)


def integer_range(node: SchemaNode) -> tuple[int, int]:
    """The values ``_check_type`` takes for an integer ``node`` (by its format)."""
    return _INT32 if node.format == "int32" else _INT64


def _checked_root(api_version: str, kind: str, schema_required: bool) -> SchemaNode:
    return (_root if schema_required else _root_unrequired)(api_version, kind)


# --- types, required, enums ------------------------------------------------------------------

def json_type(value: JSON) -> tuple[str, str]:
    """kube-openapi's (type, format) for a decoded JSON value (``schemaInfoForType``)."""
    if isinstance(value, bool):
        return "boolean", ""
    if isinstance(value, int):
        return "integer", "int64"
    if isinstance(value, float):
        return "number", "float64"
    if isinstance(value, str):
        return "string", ""
    if isinstance(value, list):
        return "array", ""
    return "object", ""


# Python types whose every value passes _check_type when the declared type names them (ints and
# floats are left to it: ranges and integral floats).
_PLAIN = {"string": str, "object": dict, "array": list, "boolean": bool}


def _plain_types(declared: tuple[str, ...]) -> frozenset[type]:
    if not declared:  # _check_type accepts anything
        return frozenset({str, dict, list, bool, int, float})
    return frozenset(_PLAIN[name] for name in declared if name in _PLAIN)


def _type_error(path: str, expected: str, actual: str) -> FieldError:
    detail = f"{path} in body must be of type {expected}: {json.dumps(actual)}"
    return FieldError("FieldValueTypeInvalid", path, actual, detail)


def _check_type(node: SchemaNode, value: JSON, path: str) -> FieldError | None:
    """kube-openapi ``typeValidator.Validate`` for one non-null value, plus integer ranges."""
    declared = node.declared
    if not declared:
        return None
    actual, fmt = json_type(value)
    float_int = actual == "number" and float(value).is_integer() and "integer" in declared
    int_float = actual == "integer" and "number" in declared
    matches = actual in declared or float_int or int_float
    if actual not in ("string", "array") and node.format and not (matches or fmt == node.format):
        return _type_error(path, node.format, fmt)
    if not ("number" in declared or "integer" in declared) and node.format and actual in (
            "string", "array"):
        return None
    if not matches:
        return _type_error(path, ",".join(declared), actual)
    if actual == "integer" and "integer" in declared:
        low, high = _INT32 if node.format == "int32" else _INT64
        if not low <= value <= high:
            return _type_error(path, node.format or "int64", "int64")
    return None


def _enum_error(node: SchemaNode, value: JSON, path: str) -> FieldError | None:
    if node.enum is None or value in node.enum:
        return None
    supported = [v if isinstance(v, str) else json.dumps(v) for v in node.enum]
    return not_supported(path, value, supported)


def validate_types(api_version: str, kind: str, obj: Mapping[str, JSON],
                   schema_required: bool = True) -> list[FieldError]:
    """Type, required and enum errors of ``obj`` against its kind's schema.

    Wrong JSON types give ``FieldValueTypeInvalid`` (``spec.replicas: Invalid value: "string":
    spec.replicas in body must be of type integer: "string"``); missing required properties
    give ``Required value`` unless ``schema_required`` is False (built-in kinds); enum
    violations ``Unsupported value``. Unknown fields are not errors here (see
    ``unknown_fields``). Raises KeyError for a kind without a schema.
    """
    errors: list[FieldError] = []
    _walk_checked(_checked_root(api_version, kind, schema_required), obj, "", errors, None)
    return errors


def _value_error(node: SchemaNode, value: JSON, path: str) -> FieldError | None:
    if type(value) in node.plain:  # the common case: skip the type check's branches
        return _enum_error(node, value, path) if node.enum is not None else None
    return _check_type(node, value, path) or _enum_error(node, value, path)


def _walk_checked(node: SchemaNode, value: JSON, path: str, errors: list[FieldError],
                  unknown: list[str] | None) -> None:
    """Type, required and enum errors into ``errors`` and (while ``unknown`` is given)
    ``_walk_unknown``'s paths, in one pass; the unknown paths are meaningful only when no error
    was found."""
    if value is None or node.type == "any":
        return
    error = _value_error(node, value, path)
    if error is not None:
        errors.append(error)
        return
    if node.is_open:
        unknown = None
    if isinstance(value, dict):
        _walk_checked_map(node, value, path, errors, unknown)
    elif isinstance(value, list) and node.items is not None:
        items = node.items
        for i, child in enumerate(value):
            _walk_checked(items, child, f"{path}[{i}]", errors, unknown)


def _walk_checked_map(node: SchemaNode, value: dict[str, JSON], path: str, errors: list[FieldError],
                      unknown: list[str] | None) -> None:
    prefix = path + "." if path else ""
    props, values = node.props, node.values
    for key, child in value.items():
        sub = props.get(key) or values
        if sub is not None:
            _walk_checked(sub, child, prefix + key, errors, unknown)
        elif unknown is not None:
            unknown.append(prefix + key)
    if node.required:
        errors.extend(required(prefix + name) for name in node.required
                      if value.get(name) is None)


def check_object(api_version: str, kind: str, obj: Mapping[str, JSON],
                 schema_required: bool = True) -> tuple[list[FieldError], list[str]]:
    """``validate_types`` and, when it finds nothing, ``unknown_fields``, in one walk.

    Raises KeyError for a kind without a schema.
    """
    errors: list[FieldError] = []
    unknown: list[str] = []
    _walk_checked(_checked_root(api_version, kind, schema_required), obj, "", errors, unknown)
    return errors, [] if errors else unknown


# --- Go zero values -------------------------------------------------------------------------

def _zero_filled(node: SchemaNode, value: JSON) -> JSON:
    """``value`` with its zeros filled: copies along the paths that get one, ``value`` itself
    when none does (most objects: their required scalars are there)."""
    if not node.has_zeros or node.is_open:
        return value
    if isinstance(value, dict):
        return _zero_filled_map(node, value)
    items = node.items
    if isinstance(value, list) and items is not None and items.has_zeros:
        out: list[JSON] | None = None
        for i, child in enumerate(value):
            filled = _zero_filled(items, child)
            if filled is not child:
                if out is None:
                    out = list(value)
                out[i] = filled
        return value if out is None else out
    return value


def _zero_filled_map(node: SchemaNode, value: dict[str, JSON]) -> dict[str, JSON]:
    out: dict[str, JSON] | None = None
    for name, zero in node.zeros:
        if value.get(name) is None:
            if out is None:
                out = dict(value)
            out[name] = zero
    plan = node.zero_props
    if plan is None:  # a map whose values take zeros: every key
        return _zero_filled_keys(node, value, out)
    # only the keys whose subtree can take a zero (each filled on its own, so in any order;
    # each plan node has zeros and is not open, so a map child goes straight to the map walk)
    for key in plan.keys() & value.keys():
        child = value[key]
        if isinstance(child, dict):
            filled: JSON = _zero_filled_map(plan[key], child)
        elif isinstance(child, list):
            filled = _zero_filled(plan[key], child)
        else:
            continue
        if filled is not child:
            if out is None:
                out = dict(value)
            out[key] = filled
    return value if out is None else out


def _zero_filled_keys(node: SchemaNode, value: dict[str, JSON],
                      out: dict[str, JSON] | None) -> dict[str, JSON]:
    """``_zero_filled_map``'s walk over every key of ``value`` (``out``: its copy so far)."""
    for key, child in value.items():
        sub = node.props.get(key) or node.values
        if sub is not None and sub.has_zeros:
            filled = _zero_filled(sub, child)
            if filled is not child:
                if out is None:
                    out = dict(value)
                out[key] = filled
    return value if out is None else out


def go_zero_fields(api_version: str, kind: str, obj: Mapping[str, JSON],
                   only: tuple[str, ...] | None = None) -> JSON:
    """A built-in ``obj`` with each missing scalar field that Go encodes without ``omitempty``
    set to the zero value kube writes for it (``""``, ``0``, ``false``).

    Those fields are exactly the schema's ``required`` ones (kube-openapi marks a field required
    when its json tag has no omitempty and it is not ``+optional``). A Node posted with a
    partial ``status.nodeInfo`` comes back with ``"machineID": ""``, as from kube. Time fields
    (Go writes ``null``) and structs, slices and maps are left alone. Containers along filled
    paths are copied, the rest is shared (``obj`` itself when nothing is filled); ``obj`` is
    never modified. ``only``: fill under these top-level fields
    alone (the rest is known to be filled already).
    """
    root = _root(api_version, kind)
    if only is None:
        return _zero_filled(root, obj)
    out = dict(obj)
    for key in only:
        sub = root.props.get(key) or root.values
        if key in out and sub is not None and sub.has_zeros and not root.is_open:
            out[key] = _zero_filled(sub, out[key])
    return out


# --- unknown fields ---------------------------------------------------------------------------

def _walk_unknown(node: SchemaNode, value: JSON, path: str, out: list[str]) -> None:
    if node.is_open:
        return
    if isinstance(value, dict):
        prefix = path + "." if path else ""
        for key, child in value.items():
            sub = node.props.get(key) or node.values
            if sub is None:
                out.append(prefix + key)
            else:
                _walk_unknown(sub, child, prefix + key, out)
    elif isinstance(value, list) and node.items is not None:
        for i, child in enumerate(value):
            _walk_unknown(node.items, child, f"{path}[{i}]", out)


def unknown_fields(api_version: str, kind: str, obj: Mapping[str, JSON]) -> list[str]:
    """Paths of fields the schema does not declare (``spec.foo``, ``spec.containers[0].x``).

    Free-form and preserve-unknown-fields subtrees and map keys are never unknown. kube's
    strict decoding reports each as ``unknown field "<path>"``.
    """
    out: list[str] = []
    _walk_unknown(_root(api_version, kind), obj, "", out)
    return out


def _pruned(node: SchemaNode, value: JSON) -> JSON:
    if node.is_open:
        return copy_json(value)
    if isinstance(value, dict):
        out = {}
        for key, child in value.items():
            sub = node.props.get(key) or node.values
            if sub is not None:
                out[key] = _pruned(sub, child)
        return out
    if isinstance(value, list) and node.items is not None:
        return [_pruned(node.items, v) for v in value]
    return copy_json(value)


def prune_unknown_fields(api_version: str, kind: str, obj: Mapping[str, JSON]) -> JSON:
    """A deep copy of ``obj`` without the fields ``unknown_fields`` reports."""
    return _pruned(_root(api_version, kind), obj)


# --- defaults ---------------------------------------------------------------------------------

def _is_null_to_default(node: SchemaNode, value: JSON) -> bool:
    return value is None and not node.nullable and node.has_default


def fill_defaults(node: SchemaNode, value: JSON) -> None:
    """apiextensions structural defaulting (``structuraldefaulting.Default``) in place, on the
    caller's own copy of ``value`` (a write's body, defaulted by
    ``server/writes/defaults.apply_kind_defaults``): a default applies to a missing property
    (or a null one that is not nullable) of an object that is present, and recursion continues
    into defaulted values; only the keys whose subtree has a default are visited
    (``defaulted_props``)."""
    if not node.has_defaults:
        return
    if isinstance(value, dict):
        plan = node.defaulted_props
        if plan is None or node.default_props is None:
            _fill_defaults_keys(node, value)
            return
        for key, prop in node.default_props:
            if key not in value or _is_null_to_default(prop, value[key]):
                value[key] = copy_json(prop.default)
        for key in plan.keys() & value.keys():
            fill_defaults(plan[key], value[key])
    elif isinstance(value, list) and node.items is not None:
        items = node.items
        for index, child in enumerate(value):
            if _is_null_to_default(items, child):
                child = value[index] = copy_json(items.default)
            fill_defaults(items, child)


def _fill_defaults_keys(node: SchemaNode, value: dict[str, JSON]) -> None:
    """``fill_defaults`` of a map over every key (a map whose values have defaults, or a node
    without a plan of its defaulted properties)."""
    for key, prop in node.props.items():
        if prop.has_default and (key not in value or _is_null_to_default(prop, value[key])):
            value[key] = copy_json(prop.default)
    for key, child in value.items():  # replacing values of existing keys only
        sub = node.props.get(key) or node.values
        if sub is not None:
            if key not in node.props and _is_null_to_default(sub, child):
                child = value[key] = copy_json(sub.default)
            fill_defaults(sub, child)


def apply_defaults(api_version: str, kind: str, obj: Mapping[str, JSON]) -> JSON:
    """A copy of ``obj`` with the schema's ``default`` values filled in (``fill_defaults``);
    ``obj`` is not modified."""
    out = copy_json(obj)
    fill_defaults(_root(api_version, kind), out)
    return out


__all__ = ["SchemaNode", "apply_defaults", "builtin_root", "check_object", "fill_defaults",
           "go_zero_fields", "integer_range", "prune_unknown_fields", "unknown_fields",
           "validate_types"]
