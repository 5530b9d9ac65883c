"""json_copy.copy_json: an independent deep copy of decoded JSON, equal to copy.deepcopy's."""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from kubewire.json_copy import copy_json


def _containers(value: Any) -> list[int]:
    """The ids of every dict and list in ``value``."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


def test_a_copy_is_equal_in_order_and_shares_no_container() -> None:
    doc = {"b": 1, "a": [1, {"x": [None, True, 1.5, "s", {"deep": []}]}, [[]]], "c": {},
           "d": {"z": {"y": {"x": "w"}}, "e": 2**70, "f": -0.0}}
    copied = copy_json(doc)
    assert json.dumps(copied) == json.dumps(doc)  # same values, same key order
    assert not set(_containers(copied)) & set(_containers(doc))
    copied["a"][1]["x"][4]["deep"].append(1)
    copied["d"]["z"]["y"]["x"] = "changed"
    assert doc["a"][1]["x"][4]["deep"] == [] and doc["d"]["z"]["y"]["x"] == "w"


def test_a_subtree_reached_twice_is_copied_twice() -> None:
    shared = {"k": [1]}
    copied = copy_json({"one": shared, "two": [shared, shared]})
    assert copied["one"] == shared and copied["one"] is not shared
    assert copied["one"] is not copied["two"][0] and copied["two"][0] is not copied["two"][1]


def test_values_that_are_not_plain_json_are_deep_copied_as_they_are() -> None:
    when = datetime(2024, 1, 2, tzinfo=UTC)
    ordered = OrderedDict(a=[1])
    doc: dict[str, Any] = {"when": when, "tuple": (1, [2]), "set": {3}, "ordered": ordered,
                           "list": [ordered]}
    copied = copy_json(doc)
    assert copied == copy.deepcopy(doc)
    assert type(copied["ordered"]) is OrderedDict and copied["ordered"] is not ordered
    assert copied["ordered"]["a"] is not ordered["a"]
    assert copied["tuple"][1] is not doc["tuple"][1] and copied["list"][0] is not ordered
