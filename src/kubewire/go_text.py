"""Text exactly as Go prints or parses it: ``strconv.Quote``, ``strconv.ParseInt``, ``%#v`` of a
``[]string`` and ``encoding/json`` decode errors.

kube-apiserver's messages embed these forms and clients match on them (watch-protocol.md §9), so
every module that builds such a message renders through here. Nothing here raises except
``parse_int64``, which raises ``ValueError`` carrying Go's error text.
"""

from __future__ import annotations

from collections.abc import Sequence

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


class GoLiteral:
    """A value ``status.format_field_value`` prints verbatim (it falls back to ``repr``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def go_string_slice(values: Sequence[str]) -> GoLiteral:
    """A ``[]string`` as Go's ``%#v`` prints it: ``[]string{"a", "b"}``."""
    return GoLiteral("[]string{" + ", ".join(go_quote(v) for v in values) + "}")


def go_json_error(data: bytes, exc: msgspec.DecodeError) -> str:
    """Go ``encoding/json`` wording for the common failures; otherwise msgspec's position."""
    text = str(exc)
    if not data.strip() or "truncated" in text:
        return "unexpected end of JSON input"
    offset = int(text.rsplit("byte ", 1)[-1].rstrip(")")) if "(byte " in text else 0
    char = data[offset:offset + 1].decode("latin-1") or " "
    quoted = "'\\''" if char == "'" else "'" + go_quote(char)[1:-1] + "'"
    if "trailing" in text:
        return f"invalid character {quoted} after top-level value"
    if offset == len(data) - len(data.lstrip()):
        return f"invalid character {quoted} looking for beginning of value"
    return f"invalid character {quoted} at input byte {offset}"
