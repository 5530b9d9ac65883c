"""Decoded JSON printed as Go prints it (kubewire.go_print)."""

from __future__ import annotations

import pytest

from kubewire.go_print import go_float, go_json, go_sprint


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


def test_go_json_sorts_keys_and_escapes_like_encoding_json() -> None:
    assert go_json({"b": "x\bq\f<&>\u2028\n", "a": [1, {"z": 1, "y": None}]}) == (
        '{"a":[1,{"y":null,"z":1}],"b":"x\\u0008q\\u000c\\u003c\\u0026\\u003e\\u2028\\n"}')
