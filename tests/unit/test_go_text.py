"""kubewire.go_text: strings exactly as Go's strconv, fmt and encoding/json print them."""

from __future__ import annotations

import msgspec
import pytest

from kubewire.go_text import (
    go_byte_len,
    go_json_error,
    go_quote,
    go_string_slice,
    int64_or_none,
    parse_int64,
)


def test_go_quote() -> None:
    assert go_quote('a"b\\c\n\x07é\u200b') == '"a\\"b\\\\c\\n\\aé\\u200b"'
    assert go_quote("plain") == '"plain"'
    assert go_quote("\x7f\U000e0001") == '"\\x7f\\U000e0001"'


def test_go_byte_len_counts_utf8_bytes() -> None:
    assert go_byte_len("abc") == 3
    assert go_byte_len("é") == 2


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("+7", 7), ("-9223372036854775808", -(2**63)), ("9223372036854775807", 2**63 - 1),
])
def test_parse_int64_accepts_what_go_accepts(text: str, value: int) -> None:
    assert parse_int64(text) == value == int64_or_none(text)


@pytest.mark.parametrize(("text", "reason"), [
    ("", "invalid syntax"), ("1.5", "invalid syntax"), ("+-1", "invalid syntax"),
    ("\u0661", "invalid syntax"), (" 1", "invalid syntax"),
    ("9223372036854775808", "value out of range"),
    ("-9223372036854775809", "value out of range"),
])
def test_parse_int64_rejects_with_go_text(text: str, reason: str) -> None:
    assert int64_or_none(text) is None
    with pytest.raises(ValueError) as info:
        parse_int64(text)
    assert str(info.value) == f"strconv.ParseInt: parsing {go_quote(text)}: {reason}"


def test_go_string_slice_is_percent_sharp_v() -> None:
    assert repr(go_string_slice([])) == "[]string{}"
    assert repr(go_string_slice(["All", "a\nb"])) == '[]string{"All", "a\\nb"}'


@pytest.mark.parametrize(("data", "message"), [
    (b"", "unexpected end of JSON input"),
    (b'{"a":', "unexpected end of JSON input"),
    (b"x", "invalid character 'x' looking for beginning of value"),
    # Go's scanner names the context it was in (encoding/json scanner.go stateXxx).
    (b'{"a" 1}', "invalid character '1' after object key"),
    (b'{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
    (b"[1 2]", "invalid character '2' after array element"),
    (b'["{\\"", 1 2]', "invalid character '2' after array element"),
    (b"{x}", "invalid character 'x' looking for beginning of object key string"),
    (b'{"a":1,}', "invalid character '}' looking for beginning of object key string"),
    (b"{}x", "invalid character 'x' after top-level value"),
    (b'{"a":"\tb"}', "invalid character '\\t' in string literal"),
    (b'{"a": NaN}', "invalid character 'N' looking for beginning of value"),
    (b"'", "invalid character '\\'' looking for beginning of value"),
])
def test_go_json_error(data: bytes, message: str) -> None:
    with pytest.raises(msgspec.DecodeError) as info:
        msgspec.json.decode(data)
    assert go_json_error(data, info.value) == message
