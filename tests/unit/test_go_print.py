"""Decoded JSON printed as Go prints it (kubewire.go_print)."""

from __future__ import annotations

from typing import Literal

import pytest

from kubewire.go_print import go_json, go_sprint
from kubewire.go_text import go_float
from kubewire.json_types import JSON


@pytest.mark.parametrize(("value", "text"), [
    (1.5, "1.5"), (3.0, "3"), (-2.5, "-2.5"), (0.0, "0"), (123456.0, "123456"),
    (1234567.0, "1.234567e+06"), (1e21, "1e+21"), (0.0001, "0.0001"), (0.00001, "1e-05"),
    (100.25, "100.25"),
])
def test_go_float(value: float, text: str) -> None:
    assert go_float(value) == text


def test_go_sprint_prints_maps_sorted_and_strings_bare() -> None:
    assert go_sprint({"spec": {"replicas": "three", "b": [1, None, True, 1.5]}, "a": {}}) == (
        "map[a:map[] spec:map[b:[1 <nil> true 1.5] replicas:three]]")


# fmt's %v (print.go printValue): maps as map[k:v] with keys sorted, nil interface <nil>,
# float64 as strconv 'g' shortest with %e from exponent 21 (fmtFloat's %v); %s on a non-string
# is a bad verb, %!s(T=v), and recurses into maps and slices.
@pytest.mark.parametrize(("value", "verb", "text"), [
    ({"b": [1e21, 1e-5, 3.0], "a": None}, "v", "map[a:<nil> b:[1e+21 1e-05 3]]"),
    ({"$patch": 1, "x": "y"}, "s", "map[$patch:%!s(int64=1) x:y]"),
    ([True, 2.5, None, "<&>"], "s", "[%!s(bool=true) %!s(float64=2.5) %!s(<nil>) <&>]"),
    (1e21, "s", "%!s(float64=1e+21)"),
    ("bare", "s", "bare"),
])
def test_go_sprint_verbs(value: JSON, verb: Literal["v", "s"], text: str) -> None:
    assert go_sprint(value, verb) == text


def test_go_json_sorts_keys_and_escapes_like_encoding_json() -> None:
    # Go 1.22+ (kube v1.32 is built with 1.23) writes \b and \f short, no longer \u0008/\u000c
    assert go_json({"b": "x\bq\f<&>\u2028\n", "a": [1, {"z": 1, "y": None}]}) == (
        '{"a":[1,{"y":null,"z":1}],"b":"x\\bq\\f\\u003c\\u0026\\u003e\\u2028\\n"}')


# Expected texts are Go's json.Marshal (encode.go appendString and floatEncoder, Go 1.23).
@pytest.mark.parametrize(("value", "text"), [
    ("\b\f\n\r\t", r'"\b\f\n\r\t"'),
    ("<a href='x'>&amp;</a>", '"\\u003ca href=\'x\'\\u003e\\u0026amp;\\u003c/a\\u003e"'),
    ("\u2028\u2029", r'"\u2028\u2029"'),
    ("\x00\x01\x1f\x7f", '"\\u0000\\u0001\\u001f\x7f"'),  # DEL is not escaped
    ('"\\b\\', r'"\"\\b\\"'),
    ("caf\u00e9 \U0001F600 \u65e5", '"caf\u00e9 \U0001F600 \u65e5"'),  # raw UTF-8, non-BMP too
    ("a\udc80b", r'"a\ufffdb"'),  # invalid UTF-8 (a lone surrogate) is replaced
])
def test_go_json_strings(value: str, text: str) -> None:
    assert go_json(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (1.0, "1"), (-1.0, "-1"), (0.0, "0"), (-0.0, "-0"), (0.1, "0.1"), (1.5, "1.5"),
    (123456789.0, "123456789"), (1e20, "100000000000000000000"), (1e21, "1e+21"),
    (1.5e300, "1.5e+300"), (1e-6, "0.000001"), (1e-7, "1e-7"), (1.234e-8, "1.234e-8"),
    (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
    (0.000123, "0.000123"), (100.25, "100.25"), (2.0 ** 53, "9007199254740992"),
])
def test_go_json_floats(value: float, text: str) -> None:
    assert go_json(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (0, "0"), (-7, "-7"), (2 ** 53 + 1, "9007199254740993"),
    (2 ** 63 - 1, "9223372036854775807"), (-(2 ** 63), "-9223372036854775808"),
    # outside int64 apimachinery's decoder keeps a float64
    (2 ** 63, "9223372036854776000"), (12345678901234567890, "12345678901234567000"),
    (10 ** 21, "1e+21"),
])
def test_go_json_ints_are_int64(value: int, text: str) -> None:
    assert go_json(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (3, "3"), (2 ** 53 + 1, "9007199254740992"), (10 ** 21, "1e+21"), (1.0, "1"),
])
def test_go_json_float64_numbers(value: int | float, text: str) -> None:
    """sigs.k8s.io/yaml decodes every number into a float64 (server-side apply's config)."""
    assert go_json({"n": [value]}, float64_numbers=True) == f'{{"n":[{text}]}}'


def test_go_json_sorts_nested_maps_bytewise_and_keeps_list_order() -> None:
    value = {"z": {"b": 1, "a": [{"y": True, "x": False}], "B": None}, "\u00e9": 1, "a<": "",
             "\U0001F600": 2, "\uffff": 3}
    assert go_json(value) == (
        '{"a\\u003c":"","z":{"B":null,"a":[{"x":false,"y":true}],"b":1},"\u00e9":1,'
        '"\uffff":3,"\U0001F600":2}')


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {"a": [float("-inf")]}])
def test_go_json_refuses_what_go_refuses(value: object) -> None:
    with pytest.raises(ValueError, match="json: unsupported value"):
        go_json(value)


def test_go_json_of_a_struct_keeps_field_order() -> None:
    """A Go struct encodes its fields in declaration order (``sort_keys=False``: the dict's
    insertion order), with the same escapes and numbers as a map."""
    struct = {"manager": "a<b", "operation": "Update", "n": 3.0, "m": {"z": 1, "a": 2}}
    assert go_json(struct, sort_keys=False) == (
        '{"manager":"a\\u003cb","operation":"Update","n":3,"m":{"z":1,"a":2}}')
    assert go_json(struct) == '{"m":{"a":2,"z":1},"manager":"a\\u003cb","n":3,"operation":"Update"}'
