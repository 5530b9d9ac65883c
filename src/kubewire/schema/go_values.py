"""Parsers of the value types Go decodes itself, giving Go's exact error texts (or None).

- ``time_error``: ``time.Parse`` with ``time.RFC3339`` (``metav1.Time.UnmarshalJSON``) or
  ``metav1.RFC3339Micro`` (``MicroTime``), with Go's ``time.ParseError`` messages;
- ``base64_error``: ``base64.StdEncoding.Decode``, which ``encoding/json`` runs for ``[]byte``.

Pure functions of their input; none raises. Quantities have their own core module,
``kubewire.quantity``.
"""

from __future__ import annotations

import calendar
from functools import lru_cache

_DIGITS = frozenset("0123456789")


def _skip_digits(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _DIGITS:
        pos += 1
    return pos

# --- time.Parse(time.RFC3339, ...) and time.Parse(metav1.RFC3339Micro, ...) ----------------

RFC3339 = "2006-01-02T15:04:05Z07:00"
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"
# Each layout's chunks in order: (layout element, parser name); "" marks a literal.
_CHUNKS = (("2006", "year"), ("-", ""), ("01", "month"), ("-", ""), ("02", "day"), ("T", ""),
           ("15", "hour"), (":", ""), ("04", "minute"), (":", ""), ("05", "second"))
_LAYOUTS = {RFC3339: (*_CHUNKS, ("Z07:00", "zone")),
            RFC3339_MICRO: (*_CHUNKS, (".000000", "micro"), ("Z07:00", "zone"))}
_RANGES = {"month": (1, 12), "hour": (0, 23), "minute": (0, 59), "second": (0, 59)}


class _ParseError(Exception):
    """A Go ``time.ParseError``: the element that failed, or a range message."""

    def __init__(self, layout_elem: str, value_elem: str, message: str = "") -> None:
        super().__init__(message)
        self.layout_elem = layout_elem
        self.value_elem = value_elem
        self.message = message


def _getnum(value: str, fixed: bool) -> tuple[int, str]:
    """Go's ``getnum``: one digit, or two (exactly two when ``fixed``)."""
    if not value or value[0] not in _DIGITS:
        raise ValueError
    if len(value) < 2 or value[1] not in _DIGITS:
        if fixed:
            raise ValueError
        return int(value[0]), value[1:]
    return int(value[:2]), value[2:]


def _parse_year(value: str) -> tuple[int, str]:
    digits = value[:4]
    body = digits[1:] if digits[:1] in ("+", "-") else digits
    if len(value) < 4 or not body or not set(body) <= _DIGITS:
        raise ValueError
    return int(digits), value[4:]


def _parse_zone(value: str) -> str:
    if value[:1] == "Z":
        return value[1:]
    if len(value) < 6 or value[3] != ":":
        raise ValueError
    hours, _ = _getnum(value[1:3], True)
    minutes, _ = _getnum(value[4:6], True)
    # Go checks the ranges (the later one winning) before the sign.
    message = "time zone offset minute" if minutes > 60 else (
        "time zone offset hour" if hours > 24 else "")
    if message:
        raise _ParseError("Z07:00", value[6:], message + " out of range")
    if value[0] not in "+-":
        raise ValueError
    return value[6:]


def _parse_micro(value: str) -> str:
    """``.000000``: a period or comma and exactly six digits."""
    if len(value) < 7 or value[0] not in ".," or not set(value[1:7]) <= _DIGITS:
        raise ValueError
    return value[7:]


def _skip_fraction(value: str) -> str:
    """Fractional seconds after ``05`` although the layout has none (Go accepts them)."""
    if len(value) >= 2 and value[0] in ".," and value[1] in _DIGITS:
        return value[_skip_digits(value, 1):]
    return value


def _parse_chunk(element: str, name: str, value: str, fields: dict[str, int]) -> str:
    if not name:
        if not value.startswith(element):
            raise ValueError
        return value[len(element):]
    if name == "year":
        fields[name], value = _parse_year(value)
    elif name == "zone":
        value = _parse_zone(value)
    elif name == "micro":
        value = _parse_micro(value)
    else:
        fields[name], value = _getnum(value, name != "hour")
    return value


def _parse_fields(layout: str, value: str) -> dict[str, int]:
    fields: dict[str, int] = {}
    chunks = _LAYOUTS[layout]
    for i, (element, name) in enumerate(chunks):
        held = value
        try:
            value = _parse_chunk(element, name, value, fields)
        except ValueError:
            raise _ParseError(element, held) from None
        bounds = _RANGES.get(name)
        if bounds is not None and not bounds[0] <= fields[name] <= bounds[1]:
            raise _ParseError(element, value, f"{name} out of range")
        if name == "second" and chunks[i + 1][1] != "micro":
            value = _skip_fraction(value)
    if value:
        raise _ParseError("", value, f"extra text: {_time_quote(value)}")
    return fields


def _time_quote(text: str) -> str:
    """``time.quote``: double quotes, with ``"`` and ``\\`` escaped (ASCII text)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


TIME_ERROR_CACHE_SIZE = 4096  # distinct times remembered: an object's times repeat per write


@lru_cache(maxsize=TIME_ERROR_CACHE_SIZE)
def time_error(value: str, layout: str = RFC3339) -> str | None:
    """``time.Parse(layout, value)``'s error text for ``RFC3339`` or ``RFC3339_MICRO``, or
    None when ``value`` parses (remembered: every write of an object checks its times)."""
    try:
        fields = _parse_fields(layout, value)
    except _ParseError as exc:
        if exc.message:
            return f"parsing time {_time_quote(value)}: {exc.message}"
        return (f"parsing time {_time_quote(value)} as {_time_quote(layout)}: cannot parse "
                f"{_time_quote(exc.value_elem)} as {_time_quote(exc.layout_elem)}")
    year, month, day = fields["year"], fields["month"], fields["day"]
    if not 1 <= day <= calendar.monthrange(year if year > 0 else 2000, month)[1]:
        return f"parsing time {_time_quote(value)}: day out of range"
    return None


# --- base64.StdEncoding.Decode ----------------------------------------------------------------

_B64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_NEWLINES = frozenset(b"\r\n")


def _skip_newlines(src: bytes, si: int) -> int:
    while si < len(src) and src[si] in _NEWLINES:
        si += 1
    return si


def _padding_error(src: bytes, si: int, j: int) -> int | None:
    """After a ``=`` at quantum position ``j``: the offset Go reports, or None if it is fine."""
    if j in (0, 1):
        return si - 1
    if j == 2:
        si = _skip_newlines(src, si)
        if si == len(src):
            return len(src)
        if src[si] != ord("="):
            return si - 1
        si += 1
    si = _skip_newlines(src, si)
    return si if si < len(src) else None


def base64_error(text: str) -> str | None:
    """``illegal base64 data at input byte N`` as Go's ``decodeQuantum`` finds it, or None."""
    src = text.encode("utf-8", "surrogatepass")
    si = 0
    while si < len(src):
        j = 0
        while j < 4:
            if si == len(src):
                return None if j == 0 else f"illegal base64 data at input byte {si - j}"
            byte = src[si]
            si += 1
            if byte in _B64:
                j += 1
            elif byte in _NEWLINES:
                continue
            elif byte != ord("="):
                return f"illegal base64 data at input byte {si - 1}"
            else:
                offset = _padding_error(src, si, j)
                return None if offset is None else f"illegal base64 data at input byte {offset}"
    return None


__all__ = ["RFC3339", "RFC3339_MICRO", "base64_error", "time_error"]
