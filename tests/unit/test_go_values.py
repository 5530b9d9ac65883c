"""Go's own parsers as kube-apiserver runs them while decoding (kubewire.schema.go_values)."""

from __future__ import annotations

import pytest

from kubewire.quantity import QUANTITY_FORMAT_WRONG, QUANTITY_SUFFIX_WRONG, quantity_error
from kubewire.schema.go_values import RFC3339, RFC3339_MICRO, base64_error, time_error


@pytest.mark.parametrize("text", ["0", "1", "-1", "+1", "1.5", ".5", "1.", "100m", "1Gi", "2Ki",
                                  "1e3", "1E-3", "5E", " 2 ", "1.G", "+"])
def test_quantities_that_parse(text: str) -> None:
    assert quantity_error(text) is None


@pytest.mark.parametrize(("text", "error"), [
    ("", QUANTITY_FORMAT_WRONG), ("abc", QUANTITY_FORMAT_WRONG), ("1x", QUANTITY_FORMAT_WRONG),
    ("1.5.5", QUANTITY_FORMAT_WRONG), ("1Kb", QUANTITY_FORMAT_WRONG),
    ("true", QUANTITY_FORMAT_WRONG), ("{}", QUANTITY_FORMAT_WRONG),
    ("1iK", QUANTITY_SUFFIX_WRONG), ("1e", QUANTITY_SUFFIX_WRONG), ("1m5", QUANTITY_SUFFIX_WRONG),
    ("--1", QUANTITY_SUFFIX_WRONG),
])
def test_quantities_that_do_not(text: str, error: str) -> None:
    # quantity.go parseQuantityString / quantitySuffixer.interpret decide which of the two.
    assert quantity_error(text) == error


@pytest.mark.parametrize("value", ["2024-01-01T00:00:00Z", "2024-01-01T00:00:00.5+01:00",
                                   "2024-02-29T23:59:59-07:00", "2024-01-01T1:00:00Z"])
def test_rfc3339_times_that_parse(value: str) -> None:
    assert time_error(value) is None


def _cannot(value: str, value_elem: str, layout_elem: str, layout: str = RFC3339) -> str:
    return (f'parsing time "{value}" as "{layout}": cannot parse "{value_elem}" as '
            f'"{layout_elem}"')


@pytest.mark.parametrize(("value", "error"), [
    ("abc", _cannot("abc", "abc", "2006")),
    ("2024-1-01T00:00:00Z", _cannot("2024-1-01T00:00:00Z", "1-01T00:00:00Z", "01")),
    ("2024-01-01 00:00:00Z", _cannot("2024-01-01 00:00:00Z", " 00:00:00Z", "T")),
    ("2024-01-01T00:00:00", _cannot("2024-01-01T00:00:00", "", "Z07:00")),
    ("2024-13-01T00:00:00Z", 'parsing time "2024-13-01T00:00:00Z": month out of range'),
    ("2024-01-01T24:00:00Z", 'parsing time "2024-01-01T24:00:00Z": hour out of range'),
    ("2023-02-29T00:00:00Z", 'parsing time "2023-02-29T00:00:00Z": day out of range'),
    ("2024-01-01T00:00:00Zx", 'parsing time "2024-01-01T00:00:00Zx": extra text: "x"'),
])
def test_rfc3339_errors(value: str, error: str) -> None:
    assert time_error(value) == error


def test_micro_time_wants_six_fraction_digits() -> None:
    assert time_error("2024-12-11T09:15:02.123456Z", RFC3339_MICRO) is None
    assert time_error("2024-12-11T09:15:02Z", RFC3339_MICRO) == _cannot(
        "2024-12-11T09:15:02Z", "Z", ".000000", RFC3339_MICRO)


@pytest.mark.parametrize(("text", "offset"), [
    ("b25l", None), ("b2==", None), ("YQ==\n", None), ("Y\nQ==", None), ("", None),
    ("b25", 0), ("b", 0), ("b25l=", 4), ("b2=", 3), ("a!b", 1), ("YQ==YQ==", 4),
    ("not base64", 3),
])
def test_base64(text: str, offset: int | None) -> None:
    # encoding/base64 decodeQuantum: the offset it reports, not where the quantum starts.
    expected = None if offset is None else f"illegal base64 data at input byte {offset}"
    assert base64_error(text) == expected
