"""JSON bytes as kube-apiserver's JSON serializer writes them.

kube encodes every JSON response, watch event and stored value with Go's ``json.Encoder``
(apimachinery ``runtime/serializer/json`` ``doEncode``: ``json.NewEncoder(w).Encode(obj)``),
whose ``SetEscapeHTML`` is on by default: ``<``, ``>`` and ``&`` are written ``\\u003c``,
``\\u003e``, ``\\u0026``, and U+2028/U+2029 (JavaScript's line terminators) ``\\u2028`` and
``\\u2029``, wherever they occur in a string. ``GoJSONEncoder`` is msgspec's compact encoder
followed by those escapes. By hand because msgspec has no such option; the characters can only
occur inside JSON strings, so replacing their bytes is exact, and when none occurs (the common
case) it costs four byte scans. (``go_print.go_json`` is the slower encoder for texts that
must also match Go's number and key-order rules.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import msgspec

_HTML_ESCAPES = ((b"&", b"\\u0026"), (b"<", b"\\u003c"), (b">", b"\\u003e"))
_LINE_ESCAPES = (("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))
# The first byte of U+2028 and U+2029 in UTF-8: one byte is found by memchr, a three-byte
# pattern by a slower search (~8x on a 2.5 KB object), so look for it first.
_LINE_LEAD = b"\xe2"


def go_escaped(data: bytes) -> bytes:
    """``data`` (JSON text) with Go's HTML and line-terminator escapes."""
    for raw, escaped in _HTML_ESCAPES:
        if raw in data:
            data = data.replace(raw, escaped)
    if _LINE_LEAD in data:
        for raw, escaped in _LINE_ESCAPES:
            if raw in data:
                data = data.replace(raw, escaped)
    return data


class GoJSONEncoder:
    """``msgspec.json.Encoder`` whose output Go's ``json.Encoder`` would have written."""

    __slots__ = ("_encoder",)

    def __init__(self, order: Literal["deterministic", "sorted"] | None = None) -> None:
        self._encoder = msgspec.json.Encoder(order=order)

    def encode(self, obj: Any) -> bytes:
        return go_escaped(self._encoder.encode(obj))

    def encode_lines(self, items: Iterable[Any]) -> bytes:
        return go_escaped(self._encoder.encode_lines(items))
