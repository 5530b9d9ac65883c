"""Decoded JSON values printed as Go prints its ``map[string]interface{}`` values.

kube-apiserver embeds such texts in patch errors (handlers/patch.go): ``json.Marshal`` of the
patched document (``go_json``) and ``fmt.Sprintf("%+v", patchMap)`` of a strategic merge patch
(``go_sprint``). Pure functions; none raises for decoded JSON.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import msgspec

JSON = Any

_HTML_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                 "\u2029": "\\u2029"}
_SHORT_ESCAPES = {"b": "\\u0008", "f": "\\u000c"}  # Go's encoder shortens only \n \r \t
_JSON_ESCAPE = re.compile(r"\\(.)")
_encode_sorted = msgspec.json.Encoder(order="sorted").encode


def go_json(value: JSON) -> str:
    """``json.Marshal`` of maps: compact, keys sorted, ``<``, ``>``, ``&`` and U+2028/2029
    escaped, control characters as ``\\u00XX`` except newline, return and tab."""
    text = _encode_sorted(value).decode()
    text = _JSON_ESCAPE.sub(lambda m: _SHORT_ESCAPES.get(m[1], m[0]), text)
    for char, escaped in _HTML_ESCAPES.items():
        text = text.replace(char, escaped)
    return text


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


def go_sprint(value: JSON) -> str:
    """``fmt.Sprintf("%+v", v)`` of a decoded JSON value: ``map[a:1 b:[x y]]``, keys sorted,
    strings bare, null as ``<nil>``."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_sprint(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_sprint(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    return str(value)


__all__ = ["go_float", "go_json", "go_sprint"]
