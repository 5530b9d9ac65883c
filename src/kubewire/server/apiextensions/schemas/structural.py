"""A custom resource's ``openAPIV3Schema`` parsed once into a tree of ``Structural`` nodes.

Mirrors apiextensions-apiserver's ``Structural`` (``AE:pkg/apiserver/schema/structural.go``,
built by ``convert.go`` ``NewStructural``): the structure (``type``, ``properties``, ``items``,
``additionalProperties``), the generic fields (``nullable``, ``default``), the
``x-kubernetes-*`` extensions and the value validations. The junctors (``allOf``, ``anyOf``,
``oneOf``, ``not``) hold nodes of the same class: kube-openapi validates them as whole schemas.

Facts the per-request walks need are computed here once: the compiled ``pattern``, the types and
format kube-openapi checks (``crd_types``, ``crd_format``: the CRD form of
``AE:pkg/apiserver/validation/validation.go`` ``ConvertJSONSchemaPropsWithPostProcess``, where
``x-kubernetes-int-or-string`` means ``type: [integer, string]`` and unsupported formats are
dropped by ``formats.go`` ``StripUnsupportedFormatsPostProcess``), and whether a subtree holds
any default (defaulting skips the rest). ``parse`` assumes ``schema_rules.schema_errors``
returned no error for the schema.

Measured speed, for a CRD's 30,000 nodes (the hostile-CRD bound): the nodes are a plain slots
dataclass (a frozen one's ``__init__`` sets its 42 fields through ``object.__setattr__``,
~8 µs a node against ~1), and within one ``parse`` a node whose values are all scalars is
parsed once per distinct content (a schema's many ``{"type": "string"}`` leaves share one).
Nothing changes a node once made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.regexes import Matcher, compile_pattern

# AE:pkg/apiserver/validation/formats.go supportedFormats (names without "-").
SUPPORTED_FORMATS = frozenset({
    "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3",
    "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor",
    "byte", "password", "date", "duration", "datetime",
})


_PyType = type  # the class below has a field named ``type``


@dataclass(slots=True, eq=False)
class Structural:
    """One schema node (never changed once made). ``raw`` is the node's JSON as given (for a
    node of scalars only, the first of its equals in the schema)."""

    raw: Mapping[str, JSON]
    type: str = ""
    properties: Mapping[str, Structural] = field(default_factory=dict)
    items: Structural | None = None
    # A schema, or the boolean form (``additionalProperties: true|false``); None when absent.
    additional_properties: Structural | bool | None = None
    required: tuple[str, ...] = ()
    enum: tuple[JSON, ...] | None = None
    pattern: str = ""
    pattern_search: Matcher | None = None
    format: str = ""
    maximum: float | None = None
    exclusive_maximum: bool = False
    minimum: float | None = None
    exclusive_minimum: bool = False
    max_length: int | None = None
    min_length: int | None = None
    max_items: int | None = None
    min_items: int | None = None
    max_properties: int | None = None
    min_properties: int | None = None
    multiple_of: float | None = None
    unique_items: bool = False
    nullable: bool = False
    has_default: bool = False  # ``default`` given and not JSON null (Go: Default.Object != nil)
    default: JSON = None
    preserve_unknown_fields: bool = False
    embedded_resource: bool = False
    int_or_string: bool = False
    list_type: str | None = None
    list_map_keys: tuple[str, ...] = ()
    map_type: str | None = None
    validations: tuple[Mapping[str, JSON], ...] = ()
    all_of: tuple[Structural, ...] = ()
    any_of: tuple[Structural, ...] = ()
    one_of: tuple[Structural, ...] = ()
    not_: Structural | None = None
    crd_types: tuple[str, ...] = ()
    crd_format: str = ""
    has_defaults: bool = False  # some node below (properties, items, additionalProperties) has one
    # Python types of values that always pass the CRD-form type check (the fast path).
    crd_plain: frozenset[_PyType] = frozenset()
    # This node or one below is an embedded resource / a set or map list (walks skip the rest).
    has_embedded: bool = False
    has_list_checks: bool = False

    @property
    def additional_schema(self) -> Structural | None:
        """``additionalProperties`` when it is a schema (``AdditionalProperties.Structural``)."""
        ap = self.additional_properties
        return ap if isinstance(ap, Structural) else None


def _int(value: JSON) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    return None


def _float(value: JSON) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _nodes(values: JSON, leaves: _Leaves) -> tuple[Structural, ...]:
    if not isinstance(values, list):
        return ()
    return tuple(_parse(v, leaves) for v in values if isinstance(v, dict))


_PLAIN = {"string": frozenset({str}), "object": frozenset({dict}), "array": frozenset({list}),
          "boolean": frozenset({bool}), "integer": frozenset({int}),
          "number": frozenset({int, float})}


def _plain(types: tuple[str, ...], fmt: str) -> frozenset[type]:
    """``typeValidator`` passes these exact Python types (no format check can fail them)."""
    if fmt and types != ("string",):
        return frozenset()
    out: frozenset[type] = frozenset()
    for name in types:
        out |= _PLAIN.get(name, frozenset())
    return out


def _strings(values: JSON) -> tuple[str, ...]:
    return tuple(v for v in values if isinstance(v, str)) if isinstance(values, list) else ()


_SCALARS = (str, int, float, bool, type(None))
_Leaves = dict[tuple[tuple[str, _PyType, JSON], ...], "Structural"]


def parse(schema: Mapping[str, JSON]) -> Structural:
    """The ``Structural`` tree of ``schema`` (an ``openAPIV3Schema`` or a node of one)."""
    return _parse(schema, {})


def _parse(schema: Mapping[str, JSON], leaves: _Leaves) -> Structural:
    """``parse``; ``leaves``: the nodes of scalars only made so far in this schema, by their
    content (each value's type in the key: ``True`` and ``1`` are equal in Python)."""
    if all(isinstance(v, _SCALARS) for v in schema.values()):
        key = tuple((k, v.__class__, v) for k, v in schema.items())
        found = leaves.get(key)
        if found is None:
            found = leaves[key] = _node(schema, leaves)
        return found
    return _node(schema, leaves)


def _node(schema: Mapping[str, JSON], leaves: _Leaves) -> Structural:
    props_raw = schema.get("properties")
    properties = ({k: _parse(v, leaves) for k, v in props_raw.items() if isinstance(v, dict)}
                  if isinstance(props_raw, dict) else {})
    items_raw = schema.get("items")
    items = _parse(items_raw, leaves) if isinstance(items_raw, dict) else None
    ap_raw = schema.get("additionalProperties")
    additional: Structural | bool | None
    if isinstance(ap_raw, dict):
        additional = _parse(ap_raw, leaves)
    elif isinstance(ap_raw, bool):
        additional = ap_raw
    else:
        additional = None
    enum_raw = schema.get("enum")
    enum = tuple(enum_raw) if isinstance(enum_raw, list) and enum_raw else None
    pattern = schema.get("pattern")
    pattern = pattern if isinstance(pattern, str) else ""
    search = compile_pattern(pattern)[0] if pattern else None
    fmt = schema.get("format")
    fmt = fmt if isinstance(fmt, str) else ""
    type_ = schema.get("type")
    type_ = type_ if isinstance(type_, str) else ""
    int_or_string = schema.get("x-kubernetes-int-or-string") is True
    if int_or_string:
        crd_types: tuple[str, ...] = ("integer", "string")
    else:
        crd_types = (type_,) if type_ else ()
    not_raw = schema.get("not")
    list_type = schema.get("x-kubernetes-list-type")
    map_type = schema.get("x-kubernetes-map-type")
    validations = schema.get("x-kubernetes-validations")
    has_default = "default" in schema and schema["default"] is not None
    children = [c for c in (*properties.values(), items,
                            additional if isinstance(additional, Structural) else None)
                if c is not None]
    crd_format = fmt if fmt.replace("-", "") in SUPPORTED_FORMATS else ""
    embedded = schema.get("x-kubernetes-embedded-resource") is True
    return Structural(
        raw=schema,
        type=type_,
        properties=properties,
        items=items,
        additional_properties=additional,
        required=_strings(schema.get("required")),
        enum=enum,
        pattern=pattern,
        pattern_search=search,
        format=fmt,
        maximum=_float(schema.get("maximum")),
        exclusive_maximum=schema.get("exclusiveMaximum") is True,
        minimum=_float(schema.get("minimum")),
        exclusive_minimum=schema.get("exclusiveMinimum") is True,
        max_length=_int(schema.get("maxLength")),
        min_length=_int(schema.get("minLength")),
        max_items=_int(schema.get("maxItems")),
        min_items=_int(schema.get("minItems")),
        max_properties=_int(schema.get("maxProperties")),
        min_properties=_int(schema.get("minProperties")),
        multiple_of=_float(schema.get("multipleOf")),
        unique_items=schema.get("uniqueItems") is True,
        nullable=schema.get("nullable") is True,
        has_default=has_default,
        default=schema.get("default") if has_default else None,
        preserve_unknown_fields=schema.get("x-kubernetes-preserve-unknown-fields") is True,
        embedded_resource=embedded,
        int_or_string=int_or_string,
        list_type=list_type if isinstance(list_type, str) else None,
        list_map_keys=_strings(schema.get("x-kubernetes-list-map-keys")),
        map_type=map_type if isinstance(map_type, str) else None,
        validations=tuple(v for v in validations if isinstance(v, dict))
        if isinstance(validations, list) else (),
        all_of=_nodes(schema.get("allOf"), leaves),
        any_of=_nodes(schema.get("anyOf"), leaves),
        one_of=_nodes(schema.get("oneOf"), leaves),
        not_=_parse(not_raw, leaves) if isinstance(not_raw, dict) else None,
        crd_types=crd_types,
        crd_format=crd_format,
        has_defaults=any(c.has_default or c.has_defaults for c in children),
        crd_plain=_plain(crd_types, crd_format),
        has_embedded=embedded or any(c.has_embedded for c in children),
        has_list_checks=list_type in ("set", "map") or any(c.has_list_checks for c in children),
    )


__all__ = ["SUPPORTED_FORMATS", "Structural", "parse"]
