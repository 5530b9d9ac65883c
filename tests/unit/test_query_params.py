"""kubewire.server.request.query_params: query parameters decoded as kube's url.Values does."""

from __future__ import annotations

import pytest

from kubewire.server.request.query_params import parse_bool

# --- bool parsing (§1.2) ----------------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    ("false", False), ("FALSE", False), ("False", False), ("0", False),
    ("true", True), ("True", True), ("1", True), ("", True), ("no", True), ("00", True),
    ("yes", True), ("on", True), ("TRUE", True), ("t", True), (" false", True),
    ("fAlSe", False), ("fal\u017fe", False),  # strings.EqualFold folds the long s to s
])
def test_parse_bool(value: str, expected: bool) -> None:
    assert parse_bool(value) is expected
