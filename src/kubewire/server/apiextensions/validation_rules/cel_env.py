"""The CEL environment of a CRD's validation rules: types from the schema, kube's libraries, values.

Written against k8s.io/apiserver v0.32 ``pkg/cel`` (``escaping.go``, ``common/schemas.go``
``SchemaDeclType``, ``types.go``, ``limits.go``, ``environment/base.go``) and ``pkg/cel/library``.

The CEL engine is ``cel-expr-python`` (Google's cel-cpp behind pybind11); it is not written here.
Chosen on 2026-11-26 over ``common-expression-language`` (Rust ``cel`` crate) and ``cel-python``
(pure Python) by compiling the 54 distinct rules of the Gateway API v1.2.1 standard CRDs plus 20
probes (macros, ``has``, ``matches``, string extensions, optionals, durations, int/uint/double):

====================================  ===========  ============  ======  ==========  =========
library                               compile/rule eval/rule      typed   strings ext optionals
====================================  ===========  ============  ======  ==========  =========
cel-expr-python 0.1.3                 0.12 ms      4.4 us        yes     yes (v2)    yes
common-expression-language 0.10.0     0.08 ms      11.6 us       no      no          no
cel-python 0.5.0                      0.58 ms      408 us        no      no          no
====================================  ===========  ============  ======  ==========  =========

Only cel-expr-python type-checks (so a rule kube rejects at CRD time is rejected here too, with
cel-go's ``ERROR: <input>:l:c: ...`` issue format), ships the strings extension at kube's version
2 (no ``reverse``) and optional types, and evaluates fast enough to run per list item. What it
lacks is added here: kube's lists, regex, sets, and the ``isURL``/``isIP``/``isCIDR``/
``isQuantity`` predicates as Python functions, and (``cel_objects``) kube's ``url``, ``ip``,
``cidr`` and ``quantity`` types as protobuf messages. kube's ``format`` library is missing: its
functions return optionals, which no Python function can return to cel-expr-python 0.1.3
("Unimplemented type: 13"). Its Python API has no object types except
protobuf messages, so a schema object is declared ``map(string, dyn)`` and ``cel_ast`` checks
field names against the schema the way cel-go's checker would. cel-cpp's checker has no
cross-type numeric ordering (``1 < 1.5``), which kube enables since 1.28: such rules fail to
compile here (rare in practice: numbers compared across types come through ``dyn`` fields, which
evaluate). The 1.32 CRD environment has neither ``cel.bind`` nor the math extension, so neither is
loaded; an ``optionalOldSelf`` rule is wrapped in ``cel.bind`` in a second environment only to
give ``oldSelf`` its optional value (cel-cpp's Python API cannot declare an optional variable).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from kubewire.go_text import parse_go_duration
from kubewire.json_types import JSON
from kubewire.quantity import quantity_error
from kubewire.server.apiextensions.validation_rules import cel_objects

MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024  # celconfig.MaxRequestSizeBytes
MAX_DURATION_SIZE_JSON = 32
MAX_DATETIME_SIZE_JSON = 32
MIN_DURATION_SIZE_JSON = 3
JSON_DATE_SIZE = 12
MIN_DATETIME_SIZE_JSON = 21
MIN_STRING_SIZE = 2
MIN_BOOL_SIZE = 4
MIN_NUMBER_SIZE = 1

SELF = "self"
OLD_SELF = "oldSelf"
_HAS_OLD = "__kubewire_has_old_self__"
_OLD_VALUE = "__kubewire_old_self__"

_RESERVED = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void",
    "while"})
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_EXPAND = re.compile(r"(__|[-./]|[^a-zA-Z0-9-./_])")
_EXPANSIONS = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}


def escape(name: str) -> str | None:
    """kube's ``cel.Escape``: the CEL name of a property, or None when CEL cannot address it."""
    if not name or name[0] in "0123456789":
        return None
    if name in _RESERVED:
        return f"__{name}__"
    if any(c not in _IDENT_CHARS and c not in "-./" for c in name):
        return None
    if "__" not in name and not any(c in "-./" for c in name):
        return name
    return _EXPAND.sub(lambda m: _EXPANSIONS[m.group(0)], name)


@dataclass
class DeclType:
    """kube's ``apiservercel.DeclType``: a schema node's CEL type with its size bounds.

    ``kind`` is one of object, list, map, string, bytes, duration, timestamp, int, double, bool,
    dyn. ``fields`` maps escaped names to (JSON name, type); ``elem`` is a list's item or a map's
    value type. ``max_elements`` (string bytes, list items, map entries) and
    ``min_serialized_size`` feed the cost estimate.
    """

    kind: str
    fields: dict[str, tuple[str, DeclType]] = field(default_factory=dict)
    elem: DeclType | None = None
    max_elements: int = 0
    min_serialized_size: int = 0
    schema_format: str = ""
    list_type: str = ""
    # JSON name -> (CEL name, type): ``fields`` turned around, built on first use (per write)
    by_json: dict[str, tuple[str, DeclType]] | None = field(default=None, repr=False,
                                                             compare=False)

    def signature(self) -> str:
        """The CEL type as text (also the key of the environment cache)."""
        if self.kind == "object":
            return "map(string, dyn)"
        if self.kind == "list":
            assert self.elem is not None
            return f"list({self.elem.signature()})"
        if self.kind == "map":
            assert self.elem is not None
            return f"map(string, {self.elem.signature()})"
        return self.kind


def _int(value: JSON) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def with_type_and_object_meta(schema: Mapping[str, JSON]) -> dict[str, JSON]:
    """``WithTypeAndObjectMeta``: a resource root always exposes apiVersion, kind and name."""
    props = dict(schema.get("properties") or {})
    props["kind"] = {"type": "string"}
    props["apiVersion"] = {"type": "string"}
    props["metadata"] = {"type": "object", "properties": {
        "name": {"type": "string"}, "generateName": {"type": "string"}}}
    result = dict(schema)
    result["type"] = "object"
    result["properties"] = props
    return result


def _embedded(schema: Mapping[str, JSON]) -> bool:
    return schema.get("x-kubernetes-embedded-resource") is True


def _array_type(schema: Mapping[str, JSON]) -> DeclType | None:
    items = schema.get("items")
    if not isinstance(items, Mapping):
        return None
    item_type = schema_decl_type(items, _embedded(items))
    if item_type is None:
        return None
    max_items = _int(schema.get("maxItems"))
    bound = max(max_items, 0) if max_items is not None else (
        (MAX_REQUEST_SIZE_BYTES - 2) // (item_type.min_serialized_size + 1))
    return DeclType("list", elem=item_type, max_elements=bound, min_serialized_size=2,
                    list_type=str(schema.get("x-kubernetes-list-type") or "atomic"))


def _map_type(extra: Mapping[str, JSON], schema: Mapping[str, JSON]) -> DeclType | None:
    value_type = schema_decl_type(extra, _embedded(extra))
    if value_type is None:
        return None
    max_props = _int(schema.get("maxProperties"))
    bound = max(max_props, 0) if max_props is not None else (
        (MAX_REQUEST_SIZE_BYTES - 2) // (value_type.min_serialized_size + 6))
    return DeclType("map", elem=value_type, max_elements=bound, min_serialized_size=2)


def _object_type(schema: Mapping[str, JSON]) -> DeclType | None:
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        return _map_type(extra, schema)
    required = set(schema.get("required") or ())
    fields: dict[str, tuple[str, DeclType]] = {}
    min_size = 2  # "{}"
    for name, prop in (schema.get("properties") or {}).items():
        prop_type = schema_decl_type(prop, _embedded(prop)) if isinstance(prop, Mapping) else None
        if prop_type is None:
            continue
        escaped = escape(name)
        if escaped is not None:
            fields[escaped] = (name, prop_type)
        if name in required and "default" not in prop:
            min_size += len(name) + prop_type.min_serialized_size + 4
    return DeclType("object", fields=fields, min_serialized_size=min_size)


_FORMATTED = {
    "duration": ("duration", MIN_DURATION_SIZE_JSON, MAX_DURATION_SIZE_JSON),
    "date": ("timestamp", JSON_DATE_SIZE, JSON_DATE_SIZE),
    "date-time": ("timestamp", MIN_DATETIME_SIZE_JSON, MAX_DATETIME_SIZE_JSON),
}


def _string_type(schema: Mapping[str, JSON]) -> DeclType:
    fmt = schema.get("format")
    max_len = _int(schema.get("maxLength"))
    if fmt == "byte":
        return DeclType("bytes", min_serialized_size=MIN_STRING_SIZE, schema_format="byte",
                        max_elements=max(max_len, 0) if max_len is not None
                        else MAX_REQUEST_SIZE_BYTES - 2)
    if isinstance(fmt, str) and fmt in _FORMATTED:
        kind, min_size, max_size = _FORMATTED[fmt]
        return DeclType(kind, min_serialized_size=min_size, max_elements=max_size,
                        schema_format=fmt)
    if max_len is not None:
        bound = max(max_len, 0) * 4  # maxLength counts runes; sizes are bytes
    elif schema.get("enum"):
        bound = max((len(v) for v in schema["enum"] if isinstance(v, str)), default=0)
    else:
        bound = MAX_REQUEST_SIZE_BYTES - 2
    return DeclType("string", max_elements=bound, min_serialized_size=MIN_STRING_SIZE)


_SIMPLE = {"boolean": ("bool", MIN_BOOL_SIZE), "number": ("double", MIN_NUMBER_SIZE),
           "integer": ("int", MIN_NUMBER_SIZE)}


def schema_decl_type(schema: Mapping[str, JSON] | None, is_resource_root: bool) -> DeclType | None:
    """``SchemaDeclType``: the CEL type of a structural schema node, or None if not exposed."""
    if not isinstance(schema, Mapping):
        return None
    if schema.get("x-kubernetes-int-or-string") is True:
        return DeclType("dyn", max_elements=MAX_REQUEST_SIZE_BYTES - 2, min_serialized_size=1)
    if is_resource_root:
        schema = with_type_and_object_meta(schema)
    kind = schema.get("type")
    if kind == "array":
        return _array_type(schema)
    if kind == "object":
        return _object_type(schema)
    if kind == "string":
        return _string_type(schema)
    if isinstance(kind, str) and kind in _SIMPLE:
        name, min_size = _SIMPLE[kind]
        return DeclType(name, min_serialized_size=min_size)
    return None


# --- values ---------------------------------------------------------------------------------

def _duration(text: str) -> timedelta | None:
    try:
        return timedelta(seconds=parse_go_duration(text))
    except ValueError:
        return None


def _parse_datetime(text: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def to_cel(value: JSON, decl: DeclType | None, top: bool = True) -> Any:
    """A JSON value as the CEL value kube's ``UnstructuredToVal`` gives for its schema type.

    Object keys become their escaped CEL names (keys CEL cannot address, and keys the schema
    does not declare, are left out as kube leaves them unaddressable); ``number`` is a double;
    ``byte`` strings become bytes. ``duration``/``date``/``date-time`` strings become a
    duration/timestamp only at the top (``self`` itself, or items of a typed list):
    cel-expr-python cannot carry them inside a ``map(string, dyn)``, so nested in an object
    they stay strings (a known gap: comparing them as timestamps fails at run time).
    """
    if value is None or decl is None or decl.kind == "dyn":
        return value
    if decl.kind == "object":
        return _object_value(value, decl) if isinstance(value, Mapping) else value
    if decl.kind == "list":
        return [to_cel(v, decl.elem, top) for v in value] if isinstance(value, list) else value
    if decl.kind == "map":
        if not isinstance(value, Mapping):
            return value
        return {k: to_cel(v, decl.elem, top) for k, v in value.items()}
    if decl.kind == "double" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        return _string_value(value, decl, top)
    return value


def _object_value(value: Mapping[str, JSON], decl: DeclType) -> dict[str, Any]:
    by_json = decl.by_json
    if by_json is None:
        by_json = decl.by_json = {json_name: (cel_name, t)
                                  for cel_name, (json_name, t) in decl.fields.items()}
    out: dict[str, Any] = {}
    for key, item in value.items():
        hit = by_json.get(key)
        if hit is not None:
            out[hit[0]] = to_cel(item, hit[1], False)
    return out


def _string_value(value: str, decl: DeclType, top: bool) -> Any:
    if decl.kind == "bytes":
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            return value
    if not top:
        return value
    if decl.kind == "duration":
        duration = _duration(value)
        return value if duration is None else duration
    if decl.schema_format == "date":
        try:
            day = date.fromisoformat(value)
        except ValueError:
            return value
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    if decl.kind == "timestamp":
        return _parse_datetime(value) or value
    return value


# --- kube's libraries (k8s.io/apiserver/pkg/cel/library) ------------------------------------

def _is_sorted(items: list[Any]) -> bool:
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _sum(items: list[Any]) -> Any:
    total: Any = 0
    for item in items:
        total = total + item
    return total


def _extreme(name: str, pick: Callable[[list[Any]], Any]) -> Callable[[list[Any]], Any]:
    def impl(items: list[Any]) -> Any:
        if not items:
            raise ValueError(f"{name} called on empty list")
        return pick(items)
    return impl


def _index_of(items: list[Any], item: Any) -> int:
    for i, value in enumerate(items):
        if value == item:
            return i
    return -1


def _last_index_of(items: list[Any], item: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if items[i] == item:
            return i
    return -1


def _find(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = [m.group(0) for m in re.finditer(pattern, text)]
    return found if limit < 0 else found[:limit]


def _library() -> cel.CelExtension:
    t = cel.Type
    dyn_list = t.List(t.DYN)

    def member(name: str, ret: cel.Type, params: Sequence[cel.Type],
               impl: Callable[..., Any], oid: str) -> cel.Overload:
        return cel.Overload(oid, ret, list(params), is_member=True, impl=impl)

    def glob(name: str, ret: cel.Type, params: Sequence[cel.Type],
             impl: Callable[..., Any], oid: str) -> cel.Overload:
        return cel.Overload(oid, ret, list(params), impl=impl)

    decls = [
        cel.FunctionDecl("isSorted", [member("isSorted", t.BOOL, [dyn_list], _is_sorted,
                                             "list_is_sorted")]),
        cel.FunctionDecl("sum", [member("sum", t.DYN, [dyn_list], _sum, "list_sum")]),
        cel.FunctionDecl("min", [member("min", t.DYN, [dyn_list], _extreme("min", min),
                                        "list_min")]),
        cel.FunctionDecl("max", [member("max", t.DYN, [dyn_list], _extreme("max", max),
                                        "list_max")]),
        cel.FunctionDecl("indexOf", [member("indexOf", t.INT, [dyn_list, t.DYN], _index_of,
                                            "list_index_of")]),
        cel.FunctionDecl("lastIndexOf", [member("lastIndexOf", t.INT, [dyn_list, t.DYN],
                                                _last_index_of, "list_last_index_of")]),
        cel.FunctionDecl("find", [member("find", t.STRING, [t.STRING, t.STRING], _find,
                                         "string_find_string")]),
        cel.FunctionDecl("findAll", [
            member("findAll", t.List(t.STRING), [t.STRING, t.STRING], _find_all,
                   "string_find_all_string"),
            member("findAll", t.List(t.STRING), [t.STRING, t.STRING, t.INT], _find_all,
                   "string_find_all_string_int")]),
        cel.FunctionDecl("sets.contains", [glob(
            "sets.contains", t.BOOL, [dyn_list, dyn_list],
            lambda a, b: all(x in a for x in b), "list_sets_contains_list")]),
        cel.FunctionDecl("sets.equivalent", [glob(
            "sets.equivalent", t.BOOL, [dyn_list, dyn_list],
            lambda a, b: all(x in a for x in b) and all(x in b for x in a),
            "list_sets_equivalent_list")]),
        cel.FunctionDecl("sets.intersects", [glob(
            "sets.intersects", t.BOOL, [dyn_list, dyn_list],
            lambda a, b: any(x in a for x in b), "list_sets_intersects_list")]),
        cel.FunctionDecl("isURL", [glob("isURL", t.BOOL, [t.STRING], cel_objects.is_url,
                                        "is_url_string")]),
        cel.FunctionDecl("isIP", [glob("isIP", t.BOOL, [t.STRING], cel_objects.is_ip, "is_ip")]),
        cel.FunctionDecl("isCIDR", [glob("isCIDR", t.BOOL, [t.STRING], cel_objects.is_cidr,
                                          "is_cidr")]),
        cel.FunctionDecl("isQuantity", [glob(
            "isQuantity", t.BOOL, [t.STRING], lambda s: quantity_error(s) is None,
            "is_quantity_string")]),
    ]
    return cel.CelExtension("kubewire.k8s", decls)


_SCALAR_TYPES = {"string": cel.Type.STRING, "bytes": cel.Type.BYTES, "int": cel.Type.INT,
                 "double": cel.Type.DOUBLE, "bool": cel.Type.BOOL, "dyn": cel.Type.DYN,
                 "duration": cel.Type.DURATION, "timestamp": cel.Type.TIMESTAMP}


def cel_type(decl: DeclType) -> cel.Type:
    """The declared CEL type (objects as ``map(string, dyn)``, see the module docstring)."""
    if decl.kind == "object":
        return cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
    if decl.kind == "list":
        assert decl.elem is not None
        return cel.Type.List(cel_type(decl.elem))
    if decl.kind == "map":
        assert decl.elem is not None
        return cel.Type.Map(cel.Type.STRING, cel_type(decl.elem))
    return _SCALAR_TYPES[decl.kind]


_ENVS: dict[tuple[str, str], cel.Env] = {}


def _base_extensions() -> list[cel.CelExtensionBase]:
    return [ext_strings.ExtStrings(2), ext_optional.ExtOptional(), _library(),
            cel_objects.library()]


def rule_env(self_type: DeclType, optional_old_self: bool = False) -> cel.Env:
    """The environment a rule is checked in: ``self`` and ``oldSelf`` of the node's type.

    With ``optional_old_self`` ``oldSelf`` is ``dyn`` (cel-cpp's Python API cannot declare an
    optional variable): the rule is checked here and run as ``optional_wrapper`` in
    ``wrapper_env``, where ``oldSelf`` is a bound ``optional``.
    """
    key = (self_type.signature(), "optional" if optional_old_self else "plain")
    env = _ENVS.get(key)
    if env is None:
        declared = cel_type(self_type)
        old_type = cel.Type.DYN if optional_old_self else declared
        env = cel.NewEnv(descriptor_pool=cel_objects.pool(),
                         variables={SELF: declared, OLD_SELF: old_type},
                         extensions=_base_extensions())
        _ENVS[key] = env
    return env


def wrapper_env(self_type: DeclType) -> cel.Env:
    """The environment ``optional_wrapper`` expressions run in (adds ``cel.bind``)."""
    key = (self_type.signature(), "wrapper")
    env = _ENVS.get(key)
    if env is None:
        declared = cel_type(self_type)
        env = cel.NewEnv(descriptor_pool=cel_objects.pool(),
                         variables={SELF: declared, _OLD_VALUE: declared,
                                    _HAS_OLD: cel.Type.BOOL},
                         extensions=[*_base_extensions(), ext_bindings.ExtBindings()])
        _ENVS[key] = env
    return env


def optional_wrapper(expression: str) -> str:
    """``expression`` with ``oldSelf`` bound to ``optional.of(old)`` or ``optional.none()``."""
    return (f"cel.bind({OLD_SELF}, {_HAS_OLD} ? optional.of({_OLD_VALUE}) "
            f": optional.none(), {expression}\n)")


def activation(self_value: Any, old_value: Any, has_old: bool,
               optional_old_self: bool) -> dict[str, Any]:
    """The variables of one evaluation."""
    if optional_old_self:
        return {SELF: self_value, _OLD_VALUE: old_value, _HAS_OLD: has_old}
    return {SELF: self_value, OLD_SELF: old_value}


def bound_activation(self_type: DeclType, optional_old_self: bool,
                     data: Mapping[str, Any]) -> cel.Activation:
    """``data`` converted once, for every rule of a node run in the same environment: passing
    ``data=`` to each ``eval`` converts the whole value again per rule (half a rule's cost)."""
    env = wrapper_env(self_type) if optional_old_self else rule_env(self_type)
    return env.Activation(data=data)


__all__ = ["MAX_REQUEST_SIZE_BYTES", "OLD_SELF", "SELF", "DeclType", "activation",
           "bound_activation", "cel_type",
           "escape", "optional_wrapper", "rule_env", "schema_decl_type", "to_cel",
           "with_type_and_object_meta", "wrapper_env"]
