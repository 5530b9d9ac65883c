"""Text exactly as Go prints or parses it: ``strconv.Quote``, ``strconv.ParseInt``, ``%#v`` of a
``[]string``, ``encoding/json`` syntax errors, and bytes that are not UTF-8 read as Go reads them.

kube-apiserver's messages embed these forms and clients match on them (watch-protocol.md §9), so
every module that builds such a message renders through here. Nothing here raises except
``parse_int64`` (``ValueError`` carrying Go's error text) and ``decode_go_json`` (the JSON
decoder's errors).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence
from decimal import Decimal
from functools import cache
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


def go_json_kind(value: Any) -> str:
    """How Go's ``UnmarshalTypeError`` names a decoded JSON value (``cannot unmarshal array
    into ...``). Never asked of null, which Go decodes into anything; text-like values a YAML body
    may hold (timestamps) reach Go as JSON strings."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "string"


def go_type_name(value: Any) -> str:
    """Go's ``%T`` of a decoded unstructured JSON value (integers are ``int64``, as
    apimachinery's unstructured decoding makes them; ``null`` is ``<nil>``)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    return "map[string]interface {}"


def go_float(value: float) -> str:
    """``%v`` of a float64 (strconv ``'g'``, shortest): ``%e`` form below 1e-4 or from 1e6."""
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}[repr(value)]
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = exponent + len(text)  # digits before the decimal point
    minus = "-" if sign else ""
    if value == 0:
        return minus + "0"
    if point - 1 < -4 or point - 1 >= 6:  # strconv ftoa: eprec 6 when shortest
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        power = point - 1
        return f"{minus}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return minus + text + "0" * (point - len(text))
    return f"{minus}{text[:point]}.{text[point:]}"


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


def go_utf8_of_latin1(text: str) -> str:
    """``go_utf8`` of the bytes ``text`` stands for, one character a byte: the HTTP layer reads
    request heads (URLs, headers) as latin-1, and Go keeps them as bytes."""
    return text if text.isascii() else go_utf8(text.encode("latin-1", "replace"))


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
# A number, then its unit: as Go, every character up to the next digit or dot.
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([^\d.]*)")


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
            raise ValueError(f"time: invalid duration {go_quote(text)}")
        unit = found.group(2)
        if not unit:
            raise ValueError(f"time: missing unit in duration {go_quote(text)}")
        if unit not in _DURATION_UNITS:
            raise ValueError(f"time: unknown unit {go_quote(unit)} in duration {go_quote(text)}")
        seconds += float(found.group(1)) * _DURATION_UNITS[unit]
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


_UNEXPECTED_END = "unexpected end of JSON input"
_SPACE_RUN = re.compile(rb"[ \t\r\n]*")  # the only whitespace Go's JSON scanner skips
_STRING_RUN = re.compile(rb'[^"\\\x00-\x1f]*')  # string bytes that end nothing
_DIGIT_RUN = re.compile(rb"[0-9]*")
# Runs of further members or elements whose values are complete scalars: the scanner would pass
# them without a word, so they are skipped at C speed (a number only before a delimiter, since
# whatever else follows it is the number's own error).
_SCALAR = (rb'(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?=[ \t\r\n,\]}])'
           rb'|"[^"\\\x00-\x1f]*"|true|false|null)')
_WS = rb"[ \t\r\n]*+"
_KEY = rb'"[^"\\\x00-\x1f]*+"' + _WS + rb":" + _WS


def _nested(value: bytes, levels: int) -> bytes:
    """A regex for ``value`` or containers of it, ``levels`` deep ({}, [1, [2]], {"a": "b"})."""
    for _ in range(levels):
        more = rb"(?>" + _WS + rb"," + _WS
        value = (rb"(?>\[" + _WS + rb"(?:" + value + more + value + rb")*+)?" + _WS + rb"\]"
                 + rb"|\{" + _WS + rb"(?:" + _KEY + value + more + _KEY + value + rb")*+)?" + _WS
                 + rb"\}|" + _SCALAR + rb")")
    return value


# Atomic groups and possessive repeats: an element never matches two ways, and without them the
# engine keeps a backtrack point per element (7 times slower on a 3 MB array).
@cache
def _flat_runs() -> tuple[re.Pattern[bytes], re.Pattern[bytes], re.Pattern[bytes]]:
    """The value, element-run and member-run patterns, compiled at the first error worded: their
    compile takes ~60 ms, which every import of the server paid while few processes word one."""
    flat = _nested(_SCALAR, 3)
    return (re.compile(flat), re.compile(rb"(?>" + _WS + rb"," + _WS + flat + rb")*+"),
            re.compile(rb"(?>" + _WS + rb"," + _WS + _KEY + flat + rb")*+"))


def go_json_error(body: bytes, exc: msgspec.DecodeError | None = None) -> str:
    """Go ``encoding/json``'s SyntaxError text for ``body``, which a decoder rejected (``exc``).

    Go names the byte it stopped at and the scanner state it was in (``invalid character 'x'
    after object key``); a twin of that scanner finds both. A body the scanner accepts but
    msgspec refused is named by the byte msgspec stopped at.
    """
    message = _GoScanner(body).first_error()
    if message is not None:
        return message
    offset = 0
    if exc is not None and "(byte " in str(exc):
        offset = int(str(exc).rsplit("byte ", 1)[-1].rstrip(")"))
    char = body[offset:offset + 1] or b" "
    return f"invalid character {_quote_char(char[0])} looking for beginning of value"


def _run_end(run: re.Pattern[bytes], data: bytes, pos: int) -> int:
    found = run.match(data, pos)
    return found.end() if found is not None else pos


class _GoScanner:
    """Recursive-descent twin of Go's ``encoding/json`` scanner (``checkValid``), used only to
    word an error; runs of string bytes, spaces and digits are skipped by regular expressions,
    so a large body costs little more than the C decoder that refused it."""

    _LITERALS = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def first_error(self) -> str | None:
        try:
            self._value()
            self._skip_space()
            if self.pos < len(self.data):
                self._fail(self.data[self.pos], "after top-level value")
        except _SyntaxProblem as exc:
            return str(exc)
        except RecursionError:
            return "exceeded max depth"
        return None

    def _skip_space(self) -> None:
        self.pos = _run_end(_SPACE_RUN, self.data, self.pos)

    def _next_structural(self) -> int:
        self._skip_space()
        if self.pos >= len(self.data):
            raise _SyntaxProblem(_UNEXPECTED_END)
        return self.data[self.pos]

    def _next_in_token(self) -> int:
        # Go's scanner.eof() feeds a space: inside a token that space is the invalid character.
        return self.data[self.pos] if self.pos < len(self.data) else 0x20

    def _fail(self, char: int, context: str) -> None:
        raise _SyntaxProblem(f"invalid character {_quote_char(char)} {context}")

    def _value(self) -> None:
        char = self._next_structural()
        end = _run_end(_flat_runs()[0], self.data, self.pos)
        if end > self.pos:  # a well-formed value up to three levels deep: nothing to say
            self.pos = end
            return
        self.pos += 1
        if char == ord("{"):
            self._object()
        elif char == ord("["):
            self._array()
        elif char == ord('"'):
            self._string()
        elif char == ord("-") or ord("0") <= char <= ord("9"):
            self.pos -= 1
            self._number()
        elif char in self._LITERALS:
            self._literal(self._LITERALS[char])
        else:
            self._fail(char, "looking for beginning of value")

    def _object(self) -> None:
        char = self._next_structural()
        if char == ord("}"):
            self.pos += 1
            return
        while True:
            if char != ord('"'):
                self._fail(char, "looking for beginning of object key string")
            self.pos += 1
            self._string()
            if self._next_structural() != ord(":"):
                self._fail(self.data[self.pos], "after object key")
            self.pos += 1
            if self._member_or_element(_flat_runs()[2], ord("}"), "after object key:value pair"):
                return
            char = self._next_structural()

    def _array(self) -> None:
        if self._next_structural() == ord("]"):
            self.pos += 1
            return
        while not self._member_or_element(_flat_runs()[1], ord("]"), "after array element"):
            pass

    def _member_or_element(self, run: re.Pattern[bytes], close: int, context: str) -> bool:
        """A value in a container, then the well-formed ones after it (``run``), then a comma
        (False: more follow) or the container's end (True)."""
        self._value()
        self.pos = _run_end(run, self.data, self.pos)
        char = self._next_structural()
        self.pos += 1
        if char == close:
            return True
        if char != ord(","):
            self._fail(char, context)
        return False

    def _string(self) -> None:
        while True:
            self.pos = _run_end(_STRING_RUN, self.data, self.pos)
            if self.pos >= len(self.data):
                break
            char = self.data[self.pos]
            self.pos += 1
            if char == ord('"'):
                return
            if char == ord("\\"):
                self._escape()
            elif char < 0x20:
                self._fail(char, "in string literal")
        raise _SyntaxProblem(_UNEXPECTED_END)

    def _escape(self) -> None:
        char = self._next_in_token()
        self.pos += 1
        if char in b'bfnrt\\/"':
            return
        if char != ord("u"):
            self._fail(char, "in string escape code")
        for _ in range(4):
            char = self._next_in_token()
            self.pos += 1
            if char not in b"0123456789abcdefABCDEF":
                self._fail(char, "in \\u hexadecimal character escape")

    def _number(self) -> None:
        if self.data[self.pos] == ord("-"):
            self.pos += 1
            if not _is_digit(self._next_in_token()):
                self._fail(self._next_in_token(), "in numeric literal")
        if self.data[self.pos] == ord("0"):
            self.pos += 1
        else:
            self._digits()
        if self._peek() == ord("."):
            self.pos += 1
            if not _is_digit(self._next_in_token()):
                self._fail(self._next_in_token(), "after decimal point in numeric literal")
            self._digits()
        if self._peek() in (ord("e"), ord("E")):
            self.pos += 1
            if self._next_in_token() in (ord("+"), ord("-")):
                self.pos += 1
            if not _is_digit(self._next_in_token()):
                self._fail(self._next_in_token(), "in exponent of numeric literal")
            self._digits()

    def _peek(self) -> int | None:
        return self.data[self.pos] if self.pos < len(self.data) else None

    def _digits(self) -> None:
        self.pos = _run_end(_DIGIT_RUN, self.data, self.pos)

    def _literal(self, word: bytes) -> None:
        for expected in word[1:]:
            char = self._next_in_token()
            if char != expected:
                self._fail(char, f"in literal {word.decode()} (expecting {_quote_char(expected)})")
            self.pos += 1


class _SyntaxProblem(Exception):
    pass


def _is_digit(char: int | None) -> bool:
    return char is not None and ord("0") <= char <= ord("9")


def _quote_char(char: int) -> str:
    """Go encoding/json ``quoteChar``: the byte as a rune, quoted with single quotes."""
    if char == ord("'"):
        return "'\\''"
    if char == ord('"'):
        return "'\"'"
    return "'" + go_quote(chr(char))[1:-1] + "'"


def uuid4_text(bits: int) -> str:
    """A version-4 UUID as Go's ``uuid.New().String()`` prints it, from 128 random ``bits``:
    ``str(uuid.UUID(int=bits, version=4))`` without building the UUID object (object UIDs and
    Audit-IDs, one or two per request)."""
    bits = (bits & ~(0xc000 << 48)) | (0x8000 << 48)  # the RFC 4122 variant
    bits = (bits & ~(0xf000 << 64)) | (4 << 76)  # version 4
    text = f"{bits:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
