"""A tiny protobuf wire-format reader for tests, independent of the server's encoder.

It knows only the wire format (varints, 64-bit, length-delimited) and, in ``Doc``, the
gnostic ``openapi.v2`` field numbers that kubectl and cli-runtime read (from gnostic-models
``openapiv2/OpenAPIv2.proto``), written out here again on purpose rather than imported.
"""

from __future__ import annotations

import struct
from typing import Any

import yaml

Field = tuple[int, int, Any]  # number, wire type, value (int, bytes or float)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def fields(data: bytes) -> list[Field]:
    """Every field of one message, in wire order; raises on a malformed message."""
    out: list[Field] = []
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(data, pos)
            out.append((number, wire, value))
        elif wire == 1:
            out.append((number, wire, struct.unpack("<d", data[pos:pos + 8])[0]))
            pos += 8
        elif wire == 2:
            length, pos = read_varint(data, pos)
            assert pos + length <= len(data), "length past the end"
            out.append((number, wire, data[pos:pos + length]))
            pos += length
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    assert pos == len(data)
    return out


def all_of(data: bytes, number: int) -> list[Any]:
    return [value for n, _, value in fields(data) if n == number]


def one(data: bytes, number: int) -> Any:
    found = all_of(data, number)
    assert len(found) == 1, (number, found)
    return found[0]


def text(data: bytes, number: int) -> str:
    found = all_of(data, number)
    return found[-1].decode() if found else ""


def named(data: bytes, number: int) -> dict[str, bytes]:
    """A gnostic ``repeated Named*`` field as name -> value message (order kept)."""
    return {text(entry, 1): (all_of(entry, 2) or [b""])[0] for entry in all_of(data, number)}


def extensions(data: bytes, number: int) -> dict[str, Any]:
    """Vendor extensions (``repeated NamedAny``): name -> YAML-decoded ``Any.yaml``, as
    kube-openapi's ``VendorExtensionToMap`` does."""
    return {name: yaml.safe_load(text(value, 2)) for name, value in named(data, number).items()}


class Doc:
    """The parts of an ``openapi.v2.Document`` kubectl reads."""

    SWAGGER, INFO, PATHS, DEFINITIONS = 1, 2, 8, 9
    PATH_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.swagger = text(data, self.SWAGGER)
        info = one(data, self.INFO)
        self.title, self.version = text(info, 1), text(info, 2)
        self.paths = named(one(data, self.PATHS), 2)
        self.definitions = named(one(data, self.DEFINITIONS), 1)

    def operation(self, path: str, method: str) -> bytes:
        found: bytes = one(self.paths[path], self.PATH_METHODS[method])
        return found

    @staticmethod
    def operation_id(op: bytes) -> str:
        return text(op, 5)

    @staticmethod
    def query_parameter_names(op: bytes) -> list[str]:
        """Names of inline query parameters (ParametersItem.parameter.non_body.query.name)."""
        names = []
        for item in all_of(op, 8):
            for parameter in all_of(item, 1):
                for non_body in all_of(parameter, 2):
                    names += [text(query, 4) for query in all_of(non_body, 3)]
        return names

    @staticmethod
    def operation_extensions(op: bytes) -> dict[str, Any]:
        return extensions(op, 13)

    @staticmethod
    def schema_extensions(schema: bytes) -> dict[str, Any]:
        return extensions(schema, 31)

    @staticmethod
    def properties(schema: bytes) -> dict[str, bytes]:
        return named(one(schema, 25), 1)
