"""Go's ``time.ParseDuration``, which flags and parameters share."""

from __future__ import annotations

import pytest

from kubewire.go_text import parse_go_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("0", 0.0), ("60s", 60.0), ("1m0s", 60.0), ("1.5h", 5400.0), ("300ms", 0.3),
    ("-2ms", -0.002), ("+1s", 1.0), ("1h2m3s", 3723.0), ("10us", 1e-5), ("5\u00b5s", 5e-6),
    (".5s", 0.5),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "message"), [
    ("", 'time: invalid duration ""'), ("1", 'time: missing unit in duration "1"'),
    ("abc", 'time: invalid duration "abc"'), ("-", 'time: invalid duration "-"'),
    # Go takes every character up to the next digit or dot as the unit
    ("1x", 'time: unknown unit "x" in duration "1x"'),
    ("7d", 'time: unknown unit "d" in duration "7d"'),
    ("7min", 'time: unknown unit "min" in duration "7min"'),
    ("1h1", 'time: missing unit in duration "1h1"'),
    ("1mx", 'time: unknown unit "mx" in duration "1mx"'),
])
def test_parse_duration_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_go_duration(text)
    assert str(err.value) == message
