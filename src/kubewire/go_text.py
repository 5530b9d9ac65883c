"""Text exactly as Go prints or parses it: ``strconv.Quote``, ``strconv.ParseInt``, ``%#v`` of a
``[]string``, ``encoding/json`` syntax errors, and bytes that are not UTF-8 read as Go reads them.

kube-apiserver's messages embed these forms and clients match on them (watch-protocol.md §9), so
every module that builds such a message renders through here. Nothing here raises except
``parse_int64`` (``ValueError`` carrying Go's error text) and ``decode_go_json`` (the JSON
decoder's errors).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Sequence
from typing import Any

import msgspec

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
               "\v": "\\v", '"': '\\"', "\\": "\\\\"}
JSON_KIND_NAMES = {str: "string", bool: "bool", int: "number", float: "number", list: "array",
                   dict: "object"}  # the JSON kind Go's decoder names for a decoded value


def go_quote(text: str) -> str:
    """Quote ``text`` as Go's ``strconv.Quote`` (and so ``%q``) does; never raises."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    out = ['"']
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def go_byte_len(text: str) -> int:
    """Go's ``len`` of ``text``: its UTF-8 length in bytes."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _is_decimal(text: str) -> bool:
    digits = text[1:] if text[:1] in ("+", "-") else text
    return bool(digits) and digits.isascii() and digits.isdigit()


def int64_or_none(text: str) -> int | None:
    """Go ``strconv.ParseInt(text, 10, 64)``, or None where Go would fail."""
    if not _is_decimal(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def parse_int64(text: str) -> int:
    """Go ``strconv.ParseInt(text, 10, 64)``; raises ValueError with Go's error text."""
    value = int64_or_none(text)
    if value is None:
        reason = "value out of range" if _is_decimal(text) else "invalid syntax"
        raise ValueError(f"strconv.ParseInt: parsing {go_quote(text)}: {reason}")
    return value


# --- bytes that are not UTF-8 --------------------------------------------------------------------
#
# A Go string holds any bytes. Where Go turns them into characters (``utf8.DecodeRune``, used by
# encoding/json's decoder for string literals and by its encoder for every string) an invalid
# sequence yields U+FFFD and moves on by ONE byte, so each byte of a bad sequence becomes its own
# U+FFFD. Python's "replace" handler covers a whole maximal bad subpart with one U+FFFD
# (b"\xe2\x82" gives one, Go two); this handler gives one per byte. A maximal subpart is a lead
# byte plus continuation bytes, none of which starts a character, so per byte is Go's count.
_GO_UTF8_ERRORS = "kubewire.go-utf8"


def _replace_each_byte(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "\ufffd" * (exc.end - exc.start), exc.end


codecs.register_error(_GO_UTF8_ERRORS, _replace_each_byte)


def go_utf8(data: bytes) -> str:
    """``data`` as text the way Go renders a string's bytes: each byte of an invalid UTF-8
    sequence becomes U+FFFD (``utf8.DecodeRune``)."""
    return data.decode("utf-8", _GO_UTF8_ERRORS)


# A JSON escape: a valid surrogate pair, a lone surrogate, or any other escape (matched so that
# an escaped backslash is consumed and the next character is not read as an escape).
_JSON_ESCAPE = re.compile(r"\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
                          r"|u[dD][89a-fA-F][0-9a-fA-F]{2}|[\s\S])")


def _lone_surrogate_as_fffd(found: re.Match[str]) -> str:
    escape = found.group()
    return "\\ufffd" if len(escape) == 6 else escape  # 2: another escape; 12: a valid pair


def go_json_surrogates(text: str) -> str:
    """JSON ``text`` with each ``\\u`` escape of an unpaired surrogate spelled ``\\ufffd``: Go's
    decoder (decode.go ``unquote``) reads it as U+FFFD, where Python keeps a lone surrogate (which
    no UTF-8 encoder accepts) and msgspec refuses the document."""
    if "\\u" not in text:
        return text
    return _JSON_ESCAPE.sub(_lone_surrogate_as_fffd, text)


_decode_json = msgspec.json.Decoder().decode


def decode_go_json(body: bytes) -> Any:
    """Decode JSON that Go's encoding/json accepts, with the values it gives.

    Invalid UTF-8 inside strings and escaped unpaired surrogates become U+FFFD, as in Go (msgspec
    refuses both); the document is read again only when the first read failed, so valid bodies
    cost one read. Raises ``msgspec.DecodeError`` for what Go refuses too (name it with
    ``go_json_error`` of the original body) and ``RecursionError`` past msgspec's depth.
    """
    try:
        return _decode_json(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        fixed = go_json_surrogates(go_utf8(body)).encode()
        if fixed == body:
            raise
    return _decode_json(fixed)


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3,
                   "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Go ``time.ParseDuration`` in seconds (``1m30s``, ``-1.5h``, ``0``); raises ValueError
    with Go's error text."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if body == "0":
        return 0.0
    seconds, pos = 0.0, 0
    while pos < len(body):
        found = _DURATION_PART.match(body, pos)
        if found is None:
            reason = ("missing unit in duration " if re.fullmatch(r"[\d.]+", body[pos:])
                      else "invalid duration ")
            raise ValueError(f"time: {reason}{go_quote(text)}")
        seconds += float(found.group(1)) * _DURATION_UNITS[found.group(2)]
        pos = found.end()
    if not body:
        raise ValueError(f"time: invalid duration {go_quote(text)}")
    return -seconds if text.startswith("-") else seconds


class GoLiteral:
    """A value ``status.format_field_value`` prints verbatim (it falls back to ``repr``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def go_string_slice(values: Sequence[str]) -> GoLiteral:
    """A ``[]string`` as Go's ``%#v`` prints it: ``[]string{"a", "b"}``."""
    return GoLiteral("[]string{" + ", ".join(go_quote(v) for v in values) + "}")


_GO_CONTEXT = {
    "Expecting value": "looking for beginning of value",
    "Expecting property name enclosed in double quotes": "looking for beginning of object key "
                                                         "string",
    "Expecting ':' delimiter": "after object key",
    "Extra data": "after top-level value",
    "Invalid control character at": "in string literal",
}


_JSON_SPACE = " \t\r\n"  # the only whitespace Go's JSON scanner skips


def go_json_error(body: bytes, exc: msgspec.DecodeError | None = None) -> str:
    """Go ``encoding/json``'s SyntaxError text for ``body``, which msgspec rejected (``exc``).

    The standard library's decoder finds the offending offset and what it expected; Go names the
    character found there and the context (``invalid character 'x' after object key``).
    """
    # Go's scanner reads bytes and names the offending byte as a rune (0xc3 is 'Ã'): Latin-1
    # keeps one character per byte, so positions and the character shown match Go's.
    text = body.decode("latin-1")
    if not text.strip(_JSON_SPACE):
        return "unexpected end of JSON input"
    try:
        json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        if err.pos >= len(text.rstrip(_JSON_SPACE)):
            return "unexpected end of JSON input"
        found = _go_quote_char(text[err.pos])
        context = _GO_CONTEXT.get(err.msg)
        if err.msg == "Expecting ',' delimiter":
            context = _container_context(text, err.pos)
        return f"invalid character {found} {context or 'looking for beginning of value'}"
    except ValueError as err:  # NaN / Infinity: JSON to Python, not to Go
        char = str(err)[:1]
    else:  # valid to Python but not to msgspec: name the byte msgspec stopped at
        offset = 0
        if exc is not None and "(byte " in str(exc):
            offset = int(str(exc).rsplit("byte ", 1)[-1].rstrip(")"))
        char = body[offset:offset + 1].decode("latin-1") or " "
    return f"invalid character {_go_quote_char(char)} looking for beginning of value"


def _reject_constant(name: str) -> None:
    """NaN and Infinity are not JSON to Go."""
    raise ValueError(name)


def _container_context(text: str, pos: int) -> str:
    """After a value inside an object or an array: which one is open at ``pos``."""
    depth: list[str] = []
    in_string = escaped = False
    for char in text[:pos]:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "[{":
            depth.append(char)
        elif char in "]}" and depth:
            depth.pop()
    if depth and depth[-1] == "[":
        return "after array element"
    return "after object key:value pair"


def _go_quote_char(char: str) -> str:
    """Go's ``quoteChar``: the character in single quotes, escaped as ``strconv.Quote`` does."""
    if char == "'":
        return "'\\''"
    if char == '"':
        return "'\"'"
    if char.isprintable():
        return f"'{char}'"
    return json.dumps(char)[1:-1].join("''")
