"""Times re-encoded as the API server's Go structs encode them.

kube decodes a builtin object into Go structs, so what it stores and sends back is Go's
encoding, not the text the client wrote (apimachinery pkg/apis/meta/v1/time.go, micro_time.go):

- ``metav1.Time`` marshals ``t.UTC().Format(time.RFC3339)``: UTC, whole seconds (truncated);
- ``metav1.MicroTime`` marshals ``t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")``;
- both marshal Go's zero time (``0001-01-01T00:00:00Z``) as ``null``.

Which fields are times comes from the schema facts (``go_types``: kinds ``time`` and
``microtime``), so every kind is covered by one walk. Values reach here after decoding checked
them (``go_decode``); a value this module cannot read is left as it is.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import cache

from kubewire.json_types import JSON
from kubewire.schema.go_types import GoType, go_type_of
from kubewire.times import format_micro_time, format_time

_TIME_KINDS = frozenset({"time", "microtime"})
# What time.Parse(RFC3339 or RFC3339Micro) accepted (go_values.time_error): a one- or
# two-digit hour, any fraction of seconds, and Z or a ±hh:mm offset.
_GO_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d?):(\d\d):(\d\d)(?:[.,](\d+))?"
                      r"(Z|([+-])(\d\d):(\d\d))")
_ZERO = datetime(1, 1, 1, tzinfo=UTC)
# Text already in the form encode_go_time produces (years 1000-9999: strftime does not pad
# smaller ones): it comes back unchanged, whether or not the date exists.
_CANONICAL_TIME = re.compile(r"[1-9]\d{3}-\d\d-\d\dT\d\d:\d\d:\d\dZ", re.ASCII)
_CANONICAL_MICRO_TIME = re.compile(r"[1-9]\d{3}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", re.ASCII)


def go_time_instant(text: str) -> datetime | None:
    """The instant ``text`` names, in UTC, to the microsecond (Go keeps nanoseconds; both
    encodings drop what is below a microsecond). None when it cannot be read here."""
    match = _GO_TIME.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.group(1, 2, 3, 4, 5, 6))
    fraction = (match.group(7) or "")[:6].ljust(6, "0")
    offset = timedelta(0)
    if match.group(8) != "Z":
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        if match.group(9) == "-":
            offset = -offset
    try:
        local = datetime(year, month, day, hour, minute, second, int(fraction), tzinfo=UTC)
        return local - offset
    except (ValueError, OverflowError):  # beyond Python's years 1..9999
        return None


def encode_go_time(text: str, micro: bool) -> str | None:
    """``text`` as metav1.Time (``micro`` False) or MicroTime encodes it; None for the zero
    time (Go's ``null``); ``text`` itself when it cannot be read here."""
    if (_CANONICAL_MICRO_TIME if micro else _CANONICAL_TIME).fullmatch(text):
        return text  # e.g. every time the server set itself
    instant = go_time_instant(text)
    if instant is None:
        return text
    if instant == _ZERO:
        return None
    return format_micro_time(instant) if micro else format_time(instant)


@cache
def _holds_times(go_type: GoType) -> bool:
    """Whether any value below ``go_type`` is a time (cached: types are shared, built once)."""
    return _search(go_type, set())


@cache
def _timed_fields(go_type: GoType) -> tuple[tuple[str, GoType], ...]:
    """A struct's fields that hold times: the only ones ``_encode`` needs to visit."""
    return tuple((key, field) for key, field in go_type.fields.items() if _holds_times(field))


def _search(go_type: GoType, seen: set[int]) -> bool:
    if go_type.kind in _TIME_KINDS:
        return True
    if id(go_type) in seen:  # a type containing itself (JSONSchemaProps-like)
        return False
    seen.add(id(go_type))
    children = [*go_type.fields.values(), go_type.items, go_type.values]
    return any(_search(child, seen) for child in children if child is not None)


def _encode(value: JSON, go_type: GoType) -> JSON:
    """``value`` with its times re-encoded; containers with nothing to change are returned as
    they are (no copy), others are new containers sharing their unchanged children."""
    if go_type.kind in _TIME_KINDS:
        return encode_go_time(value, go_type.kind == "microtime") if isinstance(value, str) \
            else value
    if not _holds_times(go_type):
        return value
    if go_type.kind == "struct" and isinstance(value, dict):
        out: dict[str, JSON] | None = None
        for key, field_type in _timed_fields(go_type):
            if key not in value:
                continue
            item = value[key]
            encoded = _encode(item, field_type)
            if encoded is not item:
                if out is None:
                    out = dict(value)
                out[key] = encoded
        return value if out is None else out
    if go_type.kind == "slice" and isinstance(value, list) and go_type.items is not None:
        items = [_encode(item, go_type.items) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if go_type.kind == "map" and isinstance(value, dict) and go_type.values is not None:
        mapped = {key: _encode(item, go_type.values) for key, item in value.items()}
        return value if all(mapped[k] is v for k, v in value.items()) else mapped
    return value


def encode_times(api_version: str, kind: str, obj: dict[str, JSON]) -> dict[str, JSON]:
    """``obj`` with every metav1.Time and MicroTime field as Go encodes it. The input is not
    changed: what needs re-encoding is copied, the rest is shared (``obj`` itself when nothing
    changes). Kinds without Go structs (custom resources) come back unchanged."""
    try:
        go_type = go_type_of(api_version, kind)
    except KeyError:
        return obj
    encoded: dict[str, JSON] = _encode(obj, go_type)
    return encoded


__all__ = ["encode_go_time", "encode_times", "go_time_instant"]
