"""JSON bytes escaped as Go's json.Encoder escapes them (kubewire.go_json_bytes)."""

from __future__ import annotations

import json

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder, go_escaped
from kubewire.go_print import go_json


def test_html_characters_and_line_terminators_are_escaped_as_go_escapes_them() -> None:
    # encoding/json's encodeState.string with escapeHTML (json.Encoder's default): <, >, &
    # as \u003c \u003e \u0026; U+2028 and U+2029 always as \u2028 \u2029.
    value = {"a": "x && y <z>", "b": "line\u2028sep\u2029", "c": "plain é"}
    encoded = GoJSONEncoder().encode(value)
    assert encoded == (b'{"a":"x \\u0026\\u0026 y \\u003cz\\u003e",'
                       b'"b":"line\\u2028sep\\u2029","c":"plain \xc3\xa9"}')
    assert json.loads(encoded) == value
    # the same text go_print writes, key order aside (that one sorts map keys as Go does)
    assert encoded == go_json(value).encode()


def test_text_without_them_is_returned_as_it_is() -> None:
    data = msgspec.json.encode({"a": "b", "n": 1.5})
    assert go_escaped(data) is data
    escaped = go_escaped(b'"<"')
    assert go_escaped(escaped) == escaped == b'"\\u003c"'  # nothing raw is left to escape


def test_keys_lines_and_sorted_order_are_escaped_too() -> None:
    assert GoJSONEncoder(order="sorted").encode({"b&": 1, "a": "<"}) == (
        b'{"a":"\\u003c","b\\u0026":1}')
    assert GoJSONEncoder().encode_lines([{"m": ">"}, {"m": "&"}]) == (
        b'{"m":"\\u003e"}\n{"m":"\\u0026"}\n')
