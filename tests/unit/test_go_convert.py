"""Go's map-to-struct conversion errors for builtin kinds (kubewire.schema.go_convert)."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.quantity import QUANTITY_FORMAT_WRONG
from kubewire.schema.go_convert import convert_error, walked_convert_error
from tests.unit.test_go_decode_typed import SAMPLES, check_typed_fast_path


def _pod(**container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", **container}]}}


@pytest.mark.parametrize(("container", "error"), [
    ({"image": 5}, "cannot convert int64 to string"),
    ({"image": 5.5}, "unrecognized type: string"),
    ({"image": True}, "unrecognized type: string"),
    ({"imagePullPolicy": 1}, "cannot convert int64 to v1.PullPolicy"),
    ({"ports": [{"containerPort": "80"}]}, "unrecognized type: int32"),
    ({"ports": [{"containerPort": 80.5}]}, "cannot convert float64 to int32"),
    ({"stdin": 1}, "unrecognized type: bool"),
    ({"ports": "80"}, "cannot restore slice from string"),
    ({"securityContext": []}, "cannot restore struct from: slice"),
    ({"resources": {"limits": 1}}, "cannot restore map from int64"),
    ({"resources": {"limits": {"cpu": "x"}}},
     QUANTITY_FORMAT_WRONG),
    ({"livenessProbe": {"httpGet": {"port": True}}},
     "json: cannot unmarshal bool into Go value of type int32"),
])
def test_conversion_errors(container: dict[str, Any], error: str) -> None:
    assert convert_error("v1", "Pod", _pod(**container)) == error


@pytest.mark.parametrize("container", [
    {"image": "nginx"}, {"ports": [{"containerPort": 80.0}]},  # an integral float converts
    {"ports": [{"containerPort": 2**40}]},  # and an int64 is narrowed without a check
    {"livenessProbe": {"httpGet": {"port": "http"}}}, {"image": None},
])
def test_values_that_convert(container: dict[str, Any]) -> None:
    assert convert_error("v1", "Pod", _pod(**container)) is None


def test_secret_bytes_are_base64_decoded() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
              "data": {"k": "not base64"}}
    assert convert_error("v1", "Secret", secret) == (
        "error decoding from json: illegal base64 data at input byte 3")


@pytest.mark.parametrize("version_kind", sorted(SAMPLES), ids="/".join)
def test_the_typed_decode_accepts_nothing_the_conversion_rejects(
        version_kind: tuple[str, str]) -> None:
    # convert_error answers None at once for what the typed decode accepts: each accepted
    # object must be one the map-to-struct walk accepts, and the answers must be the walk's.
    check_typed_fast_path(version_kind, walked_convert_error, convert_error, "convert ")
