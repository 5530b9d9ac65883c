"""The ``/openapi/v2`` document as gnostic's ``openapi.v2.Document`` protobuf message.

Pure (a JSON value in, bytes out). kube-openapi (``pkg/handler/handler.go`` ``ToProtoBinary``)
parses its JSON document with gnostic-models ``openapi_v2.ParseDocument`` and marshals the
message; kubectl 1.32 asks for this form (``application/com.github.proto-openapi.spec.v2@v1.0
+protobuf``) and reads it with the same gnostic types. This module mirrors that compiler
(``openapiv2/OpenAPIv2.go``) for the shapes our document holds, field numbers from
``openapiv2/OpenAPIv2.proto``:

- repeated named maps (paths, definitions, properties, response codes, vendor extensions) keep
  the JSON document's key order, as the compiler walks the parsed YAML node;
- ``x-*`` keys become ``NamedAny`` entries whose ``Any.yaml`` is the value as YAML text, and so
  do ``default``, ``example`` and each ``enum`` value (clients ``yaml.Unmarshal`` that text);
- ``type`` is a ``TypeItem`` list, ``items`` an ``ItemsItem`` list of one schema,
  ``additionalProperties`` a schema or a boolean (a oneof: ``false`` is written);
- proto3 scalars equal to their zero value are not written; set messages are, even empty.

Written by hand: the project has no protobuf library among its dependencies, the message set is
small and fixed, and the wire format needs only varints, 64-bit doubles and length prefixes. The
YAML text follows gopkg.in/yaml.v3's block style (4-space indent, ``- `` sequence items,
strings quoted when a plain scalar would read back as another type); it may quote differently
from yaml.v3 in rare cases but always reads back as the same value.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable, Mapping

from kubewire.json_types import JSON

# --- wire format -------------------------------------------------------------------------------

_VARINT, _FIXED64, _BYTES = 0, 1, 2


def varint(value: int) -> bytes:
    """Unsigned LEB128; negative int64 values as their 64-bit two's complement (10 bytes)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _key(number, _BYTES) + varint(len(payload)) + payload


def _string(number: int, value: JSON) -> bytes:
    """A proto3 string: nothing for ``""``."""
    text = value if isinstance(value, str) else ""
    return _bytes_field(number, text.encode()) if text else b""


def _strings(number: int, values: JSON) -> bytes:
    """A repeated string (every element written, empty ones too)."""
    items = values if isinstance(values, list) else []
    return b"".join(_bytes_field(number, str(item).encode()) for item in items)


def _bool(number: int, value: JSON) -> bytes:
    return _key(number, _VARINT) + b"\x01" if value is True else b""


def _int64(number: int, value: JSON) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value:
        return b""
    return _key(number, _VARINT) + varint(int(value))


def _double(number: int, value: JSON) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value:
        return b""
    return _key(number, _FIXED64) + struct.pack("<d", float(value))


def _message(number: int, payload: bytes) -> bytes:
    """A set message field: written even when its payload is empty."""
    return _bytes_field(number, payload)


# --- YAML text of Any values ---------------------------------------------------------------------

_INDENT = "    "
# Plain scalars YAML 1.1 or 1.2 would resolve to something other than a string.
_NOT_PLAIN = re.compile(
    r"^(?:~|null|Null|NULL|true|True|TRUE|false|False|FALSE|y|Y|yes|Yes|YES|n|N|no|No|NO"
    r"|on|On|ON|off|Off|OFF|[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|0x[0-9a-fA-F_]+|0o?[0-7_]+|0b[01_]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|<<|=)$")
_SPECIAL_FIRST = set("-?:,[]{}#&*!|>'\"%@`")


def _scalar_text(value: JSON) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    text = str(value)
    plain = (text and text == text.strip() and text[0] not in _SPECIAL_FIRST
             and not _NOT_PLAIN.match(text) and ": " not in text and " #" not in text
             and not text.endswith(":") and text.isprintable())
    return text if plain else json.dumps(text, ensure_ascii=False)


def _yaml_lines(value: JSON, indent: str) -> list[str]:
    """Block YAML lines of a mapping or sequence (non-empty), each prefixed by ``indent``."""
    lines: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            head = f"{indent}{_scalar_text(str(key))}:"
            if isinstance(item, Mapping | list) and item:
                lines += [head, *_yaml_lines(item, indent + _INDENT)]
            else:
                lines.append(f"{head} {_flow_or_scalar(item)}")
        return lines
    for item in value if isinstance(value, list) else []:
        if isinstance(item, Mapping | list) and item:
            inner = _yaml_lines(item, indent + "  ")
            lines += [f"{indent}- {inner[0].removeprefix(indent + '  ')}", *inner[1:]]
        else:
            lines.append(f"{indent}- {_flow_or_scalar(item)}")
    return lines


def _flow_or_scalar(value: JSON) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar_text(value)


def yaml_text(value: JSON) -> str:
    """``value`` as yaml.v3 ``Marshal`` writes it (block style, final newline)."""
    if isinstance(value, Mapping | list) and value:
        return "\n".join(_yaml_lines(value, "")) + "\n"
    return _flow_or_scalar(value) + "\n"


def _any(number: int, value: JSON) -> bytes:
    """An ``Any`` message: ``yaml`` (field 2) holds the value's YAML text."""
    return _message(number, _string(2, yaml_text(value)))


def _named(number: int, name: str, value: bytes) -> bytes:
    """A ``Named*`` entry: name (1) and value message (2)."""
    return _message(number, _string(1, name) + _message(2, value))


def _extensions(number: int, node: Mapping[str, JSON]) -> bytes:
    return b"".join(_named(number, key, _string(2, yaml_text(value)))
                    for key, value in node.items() if key.startswith("x-"))


# --- messages ----------------------------------------------------------------------------------

_Encoder = Callable[[int, JSON], bytes]


def _schema_field(encode: Callable[[Mapping[str, JSON]], bytes]) -> _Encoder:
    return lambda number, value: _message(number, encode(value)) if isinstance(
        value, Mapping) else b""


def schema(node: Mapping[str, JSON]) -> bytes:
    """``openapi.v2.Schema``."""
    out = [encoder(number, node[key]) for key, (number, encoder) in _SCHEMA_FIELDS.items()
           if key in node]
    return b"".join(out) + _extensions(31, node)


def _additional_properties(number: int, value: JSON) -> bytes:
    if isinstance(value, bool):  # oneof: written even when false
        return _message(number, _key(2, _VARINT) + (b"\x01" if value else b"\x00"))
    return _message(number, _message(1, schema(value))) if isinstance(value, Mapping) else b""


def _type_item(number: int, value: JSON) -> bytes:
    return _message(number, _strings(1, value if isinstance(value, list) else [value]))


def _items_item(number: int, value: JSON) -> bytes:
    return _message(number, _message(1, schema(value))) if isinstance(value, Mapping) else b""


def _all_of(number: int, value: JSON) -> bytes:
    items = value if isinstance(value, list) else []
    return b"".join(_message(number, schema(item)) for item in items if isinstance(item, Mapping))


def _properties(number: int, value: JSON) -> bytes:
    props = value if isinstance(value, Mapping) else {}
    return _message(number, b"".join(_named(1, name, schema(prop)) for name, prop in
                                     props.items() if isinstance(prop, Mapping)))


def _enum(number: int, value: JSON) -> bytes:
    return b"".join(_any(number, item) for item in (value if isinstance(value, list) else []))


_SCHEMA_FIELDS: Mapping[str, tuple[int, _Encoder]] = {
    "$ref": (1, _string), "format": (2, _string), "title": (3, _string),
    "description": (4, _string), "default": (5, _any), "multipleOf": (6, _double),
    "maximum": (7, _double), "exclusiveMaximum": (8, _bool), "minimum": (9, _double),
    "exclusiveMinimum": (10, _bool), "maxLength": (11, _int64), "minLength": (12, _int64),
    "pattern": (13, _string), "maxItems": (14, _int64), "minItems": (15, _int64),
    "uniqueItems": (16, _bool), "maxProperties": (17, _int64), "minProperties": (18, _int64),
    "required": (19, _strings), "enum": (20, _enum),
    "additionalProperties": (21, _additional_properties), "type": (22, _type_item),
    "items": (23, _items_item), "allOf": (24, _all_of), "properties": (25, _properties),
    "discriminator": (26, _string), "readOnly": (27, _bool), "example": (30, _any),
}

# Query (NonBodyParameter field 3) and path (field 4) sub-schemas: the fields our parameters use.
_QUERY_FIELDS = {"required": 1, "in": 2, "description": 3, "name": 4, "type": 6, "format": 7,
                 "uniqueItems": 20}
_PATH_FIELDS = {"required": 1, "in": 2, "description": 3, "name": 4, "type": 5, "format": 6,
                "uniqueItems": 19}


def _non_body(param: Mapping[str, JSON]) -> bytes:
    path = param.get("in") == "path"
    fields, oneof, vendor = (_PATH_FIELDS, 4, 22) if path else (_QUERY_FIELDS, 3, 23)
    out = []
    for key, number in fields.items():
        value = param.get(key)
        out.append(_bool(number, value) if isinstance(value, bool) else _string(number, value))
    return _message(oneof, b"".join(out) + _extensions(vendor, param))


def parameter(param: Mapping[str, JSON]) -> bytes:
    """``ParametersItem``: a ``$ref`` (JsonReference) or a body / query / path parameter."""
    if "$ref" in param:
        return _message(2, _string(1, param["$ref"]))
    if param.get("in") == "body":
        body = (_string(1, param.get("description")) + _string(2, param.get("name"))
                + _string(3, "body") + _bool(4, param.get("required"))
                + _schema_field(schema)(5, param.get("schema")) + _extensions(6, param))
        return _message(1, _message(1, body))
    return _message(1, _message(2, _non_body(param)))


def _responses(codes: Mapping[str, JSON]) -> bytes:
    out = []
    for code, response in codes.items():
        if code.startswith("x-") or not isinstance(response, Mapping):
            continue
        body = _string(1, response.get("description"))
        if isinstance(response.get("schema"), Mapping):
            body += _message(2, _schema_field(schema)(1, response["schema"]))
        out.append(_named(1, code, _message(1, body + _extensions(5, response))))
    return b"".join(out) + _extensions(2, codes)


def operation(op: Mapping[str, JSON]) -> bytes:
    """``openapi.v2.Operation``."""
    params = op.get("parameters")
    responses = op.get("responses")
    return b"".join((
        _strings(1, op.get("tags")), _string(2, op.get("summary")),
        _string(3, op.get("description")), _string(5, op.get("operationId")),
        _strings(6, op.get("produces")), _strings(7, op.get("consumes")),
        b"".join(_message(8, parameter(p)) for p in (params if isinstance(params, list) else [])
                 if isinstance(p, Mapping)),
        _message(9, _responses(responses)) if isinstance(responses, Mapping) else b"",
        _strings(10, op.get("schemes")), _bool(11, op.get("deprecated")),
        _extensions(13, op)))


_PATH_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7,
                 "patch": 8}


def path_item(item: Mapping[str, JSON]) -> bytes:
    """``openapi.v2.PathItem``: operations in field order, then shared parameters."""
    out = [_message(number, operation(op)) for method, number in _PATH_METHODS.items()
           if isinstance(op := item.get(method), Mapping)]
    params = item.get("parameters")
    out += [_message(9, parameter(p)) for p in (params if isinstance(params, list) else [])
            if isinstance(p, Mapping)]
    return b"".join(out) + _extensions(10, item)


def _security_definitions(value: JSON) -> bytes:
    items = value if isinstance(value, Mapping) else {}
    out = []
    for name, item in items.items():  # only apiKey schemes: SecurityDefinitionsItem field 2
        if isinstance(item, Mapping) and item.get("type") == "apiKey":
            key = (_string(1, "apiKey") + _string(2, item.get("name")) + _string(3, item.get("in"))
                   + _string(4, item.get("description")) + _extensions(5, item))
            out.append(_named(1, name, _message(2, key)))
    return b"".join(out)


def _security(value: JSON) -> bytes:
    out = []
    for requirement in value if isinstance(value, list) else []:
        if isinstance(requirement, Mapping):
            entries = b"".join(_named(1, name, _strings(1, scopes))
                               for name, scopes in requirement.items())
            out.append(_message(12, entries))
    return b"".join(out)


def document(doc: Mapping[str, JSON]) -> bytes:
    """``openapi.v2.Document`` of a Swagger 2.0 document (the shapes ``openapi_v2`` builds)."""
    info = doc.get("info") if isinstance(doc.get("info"), Mapping) else {}
    assert isinstance(info, Mapping)
    paths = doc.get("paths") if isinstance(doc.get("paths"), Mapping) else {}
    assert isinstance(paths, Mapping)
    definitions = doc.get("definitions") if isinstance(doc.get("definitions"), Mapping) else {}
    assert isinstance(definitions, Mapping)
    info_bytes = (_string(1, info.get("title")) + _string(2, info.get("version"))
                  + _string(3, info.get("description")) + _extensions(7, info))
    paths_bytes = _extensions(1, paths) + b"".join(
        _named(2, name, path_item(item)) for name, item in paths.items()
        if name.startswith("/") and isinstance(item, Mapping))
    definitions_bytes = b"".join(_named(1, name, schema(node)) for name, node
                                 in definitions.items() if isinstance(node, Mapping))
    out = [_string(1, doc.get("swagger")), _message(2, info_bytes), _message(8, paths_bytes)]
    if "definitions" in doc:
        out.append(_message(9, definitions_bytes))
    out.append(_security(doc.get("security")))
    if "securityDefinitions" in doc:
        out.append(_message(13, _security_definitions(doc["securityDefinitions"])))
    return b"".join(out) + _extensions(16, doc)


__all__ = ["document", "operation", "parameter", "path_item", "schema", "varint", "yaml_text"]
