"""Decoded JSON values printed as Go prints its ``map[string]interface{}`` values.

kube-apiserver embeds such texts in patch errors (handlers/patch.go): ``json.Marshal`` of the
patched document (``go_json``) and ``fmt.Sprintf("%+v", patchMap)`` of a strategic merge patch
(``go_sprint``); server-side apply writes ``go_json`` of the applied configuration into the
last-applied annotation. ``go_json`` is kubewire's one encoder for any text kube writes with
encoding/json (annotations, hashes of marshalled bytes, discovery documents, printed cells).
Pure functions; none raises for decoded JSON.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Literal, NamedTuple

from kubewire.go_text import go_float, go_type_name
from kubewire.json_types import JSON

_INT64 = range(-(1 << 63), 1 << 63)
_STRING_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                   "\r": "\\r", "\t": "\\t"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f<>&\u2028\u2029\ud800-\udfff]')


def go_json(value: JSON, *, float64_numbers: bool = False, sort_keys: bool = True) -> str:
    """``json.Marshal`` of a decoded ``map[string]interface{}`` (Go 1.22 and later, as kube
    v1.32 is built with): compact, map keys sorted, strings escaped as ``appendString`` does.

    ``sort_keys=False`` writes each dict's keys in their insertion order: a Go struct, whose
    encoder writes fields in declaration order (the caller builds the dict in that order).

    Numbers: an int is an ``int64`` and prints exactly; one outside int64's range, or any
    number when ``float64_numbers`` (a value sigs.k8s.io/yaml decoded, as server-side apply's
    configuration is), is a ``float64`` (``_json_float``). NaN and infinities raise
    ``ValueError`` (Go's ``UnsupportedValueError``); decoded JSON holds neither.
    """
    out: list[str] = []
    _append_json(value, out, _Options(float64_numbers, sort_keys))
    return "".join(out)


class _Options(NamedTuple):
    float64_numbers: bool
    sort_keys: bool


def _append_json(value: JSON, out: list[str], options: _Options) -> None:
    if isinstance(value, str):
        out.append(_json_string(value))
    elif isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(sorted(value) if options.sort_keys else value):
            out.append(("," if i else "") + _json_string(key) + ":")
            _append_json(value[key], out, options)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _append_json(item, out, options)
        out.append("]")
    else:
        out.append(_json_scalar(value, options.float64_numbers))


def _json_scalar(value: JSON, float64_numbers: bool) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if value in _INT64 and not float64_numbers \
            else _json_float(_as_float64(value))
    if isinstance(value, float):
        return _json_float(value)
    raise TypeError(f"json: unsupported type: {type(value).__name__}")


def _as_float64(value: int) -> float:
    try:
        return float(value)
    except OverflowError:  # beyond float64: Go's decoder would not have produced it
        return float("inf") if value > 0 else float("-inf")


def _json_string(text: str) -> str:
    """``appendString`` with HTML escaping: ``"``, ``\\``, ``\\b``, ``\\f``, ``\\n``,
    ``\\r``, ``\\t`` by their short escapes (``\\b`` and ``\\f`` since Go 1.22), other
    control characters, ``<``, ``>``, ``&``, U+2028 and U+2029 as ``\\u00XX``/``\\u20XX``, and a
    lone surrogate (invalid UTF-8) as ``\\ufffd``."""
    return '"' + _NEEDS_ESCAPE.sub(_escape, text) + '"'


def _escape(match: re.Match[str]) -> str:
    char = match[0]
    short = _STRING_ESCAPES.get(char)
    if short is not None:
        return short
    code = ord(char)
    return "\\ufffd" if 0xD800 <= code <= 0xDFFF else f"\\u{code:04x}"


def _json_float(value: float) -> str:
    """``floatEncoder``: strconv ``'f'`` (shortest) unless the magnitude is below 1e-6 or from
    1e21, then ``'e'`` with a one-digit negative exponent written without its zero
    (``1e-7``, ``1e+21``); negative zero is ``-0``."""
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"json: unsupported value: {go_float(value)}")
    minus = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return minus + "0"
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    point = exponent + len(digits)  # digits before the decimal point
    if abs(value) < 1e-6 or abs(value) >= 1e21:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        power = point - 1
        return f"{minus}{mantissa}e{'-' if power < 0 else '+'}{abs(power)}"  # |power| >= 7
    if point <= 0:
        return f"{minus}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return minus + digits + "0" * (point - len(digits))
    return f"{minus}{digits[:point]}.{digits[point:]}"


def go_sprint(value: JSON, verb: Literal["v", "s"] = "v") -> str:
    """``fmt.Sprintf("%+v", v)`` of a decoded JSON value (``%v`` prints the same: the ``+``
    flag only names struct fields): ``map[a:1 b:[x y]]``, keys sorted, strings bare, null as
    ``<nil>``, floats as ``go_text.go_float``.

    ``verb="s"``: ``%s``, applied inside maps and slices as well, which prints strings bare and
    any other scalar as a bad verb, ``%!s(int64=1)`` (null: ``%!s(<nil>)``), as
    strategic-merge-patch errors show a directive.
    """
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_sprint(value[k], verb)}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_sprint(v, verb) for v in value) + "]"
    if isinstance(value, str):
        return value
    if value is None:
        return "<nil>" if verb == "v" else "%!s(<nil>)"
    text = ("true" if value else "false") if isinstance(value, bool) else (
        str(value) if isinstance(value, int) else go_float(value))
    return text if verb == "v" else f"%!s({go_type_name(value)}={text})"


__all__ = ["go_float", "go_json", "go_sprint"]
