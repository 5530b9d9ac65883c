"""kubewire.go_text: strings exactly as Go's strconv, fmt and encoding/json print them."""

from __future__ import annotations

import msgspec
import pytest

from kubewire.go_text import (
    decode_go_json,
    go_byte_len,
    go_json_error,
    go_json_surrogates,
    go_quote,
    go_string_slice,
    go_utf8,
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
    # Inside a token Go's scanner names the byte and the token (scanner.go stateInStringEsc,
    # stateNeg, stateDot, stateT...); at the end it feeds a space (scanner.eof).
    (b'{"a":"\\x"}', "invalid character 'x' in string escape code"),
    (b'{"a":"\\u12g4"}', "invalid character 'g' in \\u hexadecimal character escape"),
    (b'{"a":"\x01"}', "invalid character '\\x01' in string literal"),
    (b'{"a":-x}', "invalid character 'x' in numeric literal"),
    (b'{"a":1.}', "invalid character '}' after decimal point in numeric literal"),
    (b"[1.5e]", "invalid character ']' in exponent of numeric literal"),
    (b"1e", "invalid character ' ' in exponent of numeric literal"),
    (b'{"a":trux}', "invalid character 'x' in literal true (expecting 'e')"),
    (b'{"a":"b', "unexpected end of JSON input"),
    # Runs of well-formed values are skipped by regular expressions: the error after them is
    # still named in its container's context.
    (b"[" + b"[1, {}, {\"a\": [2]}], " * 1000 + b"3 4]",
     "invalid character '4' after array element"),
    (b'{"a": [[[["deep"]]]], "b": 1, "c" 2}', "invalid character '2' after object key"),
])
def test_go_json_error(data: bytes, message: str) -> None:
    with pytest.raises(msgspec.DecodeError) as info:
        msgspec.json.decode(data)
    assert go_json_error(data, info.value) == message


# --- bytes that are not UTF-8 (utf8.DecodeRune: one U+FFFD per byte of a bad sequence) ---------

@pytest.mark.parametrize(("data", "text"), [
    (b"plain \xc3\xa9", "plain \u00e9"),
    (b"a\xffb", "a\ufffdb"),
    (b"\xe2\x82", "\ufffd\ufffd"),  # a cut 3-byte sequence: Python's "replace" gives one
    (b"\xe2\x82\"", "\ufffd\ufffd\""),
    (b"\xed\xa0\x80", "\ufffd\ufffd\ufffd"),  # an encoded surrogate
    (b"\xc0\xaf", "\ufffd\ufffd"),  # overlong
    (b"\xf4\x90\x80\x80", "\ufffd" * 4),  # past U+10FFFF
    (b"\xf0\x9f\x98", "\ufffd" * 3),
    (b"\x80\xe2\x82\xac", "\ufffd\u20ac"),
])
def test_go_utf8_gives_one_replacement_per_bad_byte(data: bytes, text: str) -> None:
    assert go_utf8(data) == text


@pytest.mark.parametrize(("text", "fixed"), [
    (r'"\ud800"', r'"\ufffd"'),
    (r'"\udc00x"', r'"\ufffdx"'),
    (r'"\uD83D\uDE00"', r'"\uD83D\uDE00"'),  # a pair stays
    (r'"\ud83d\ud83d\ude00"', r'"\ufffd\ud83d\ude00"'),
    (r'"\udc00\ud800"', r'"\ufffd\ufffd"'),
    (r'"\\ud800"', r'"\\ud800"'),  # an escaped backslash, then text
    (r'"\\\ud800"', r'"\\\ufffd"'),
    (r'"\u0041\n"', r'"\u0041\n"'),
])
def test_go_json_surrogates(text: str, fixed: str) -> None:
    assert go_json_surrogates(text) == fixed


@pytest.mark.parametrize(("body", "value"), [
    (b'{"k":"x\xffy"}', {"k": "x\ufffdy"}),
    (b'{"\xfe":"\xe2\x82"}', {"\ufffd": "\ufffd\ufffd"}),
    (b'{"k":"\\ud800\\u0041"}', {"k": "\ufffdA"}),
    (b'["\\udc00", "\xff"]', ["\ufffd", "\ufffd"]),
    (b'{"k":"\\ud83d\\ude00"}', {"k": "\U0001f600"}),
])
def test_decode_go_json_reads_what_go_reads(body: bytes, value: object) -> None:
    assert decode_go_json(body) == value
    msgspec.json.encode(value)  # nothing left that an encoder refuses


@pytest.mark.parametrize("body", [b'{"k": \xff}', b'{"k":"\xff"', b"[1,]", b'{"\\ud800"}'])
def test_decode_go_json_still_refuses_what_go_refuses(body: bytes) -> None:
    with pytest.raises(msgspec.DecodeError):
        decode_go_json(body)
