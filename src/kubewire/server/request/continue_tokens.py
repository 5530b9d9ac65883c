"""Continue tokens of paginated lists, exactly as kube writes and checks them.

Sources: apiserver ``pkg/storage/continue.go`` (``EncodeContinue``, ``DecodeContinue``) and Go's
``encoding/base64`` and ``encoding/json``, whose error texts reach clients verbatim
(watch-protocol.md §10.2). ``decode_continue`` raises BadRequest ``invalid continue token: ...``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec

from kubewire.go_print import go_json
from kubewire.go_text import JSON_KIND_NAMES, decode_go_json, go_json_error
from kubewire.status import BadRequest

CONTINUE_VERSION = "meta.k8s.io/v1"

_B64URL = {c: i for i, c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                      b"0123456789-_")}


def _go_raw_url_b64decode(token: str) -> bytes:
    """Go ``base64.RawURLEncoding.DecodeString``: CR/LF skipped, same error offsets as Go."""
    src = token.encode("utf-8", "surrogatepass")
    out, si, n = bytearray(), 0, len(src)
    while True:
        quantum: list[int] = []
        while len(quantum) < 4 and si < n:
            ch = src[si]
            si += 1
            if ch in (10, 13):
                continue
            if ch not in _B64URL:
                raise ValueError(f"illegal base64 data at input byte {si - 1}")
            quantum.append(_B64URL[ch])
        if len(quantum) == 1:
            raise ValueError(f"illegal base64 data at input byte {si - 1}")
        if len(quantum) < 2:
            return bytes(out)
        bits = 0
        for value in quantum + [0] * (4 - len(quantum)):
            bits = bits << 6 | value
        out += bits.to_bytes(3, "big")[:len(quantum) - 1]


def _token_fields(data: bytes) -> dict[str, Any]:
    """``json.Unmarshal`` into ``continueToken``: case-insensitive keys, null leaves zero."""
    try:
        doc = decode_go_json(data)
    except msgspec.DecodeError as exc:
        raise ValueError(go_json_error(data, exc)) from None
    except RecursionError:  # Go refuses past 10000 levels; msgspec stops sooner
        raise ValueError("exceeded max depth") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ValueError(f"json: cannot unmarshal {JSON_KIND_NAMES[type(doc)]} into Go value of "
                         "type storage.continueToken")
    fields: dict[str, Any] = {}
    for key, value in doc.items():
        name = next((n for n in ("v", "rv", "start") if n == key.casefold()), None)
        if name is None or value is None:
            continue
        expected = int if name == "rv" else str
        in_range = not isinstance(value, int) or -(2**63) <= value < 2**63
        if type(value) is not expected or not in_range:
            kind = JSON_KIND_NAMES[type(value)]
            shown = f"number {json.dumps(value)}" if kind == "number" and name == "rv" else kind
            go_type = "int64" if name == "rv" else "string"
            raise ValueError(f"json: cannot unmarshal {shown} into Go struct field "
                             f"continueToken.{name} of type {go_type}")
        fields[name] = value
    return fields


def _go_clean_rooted(path: str) -> str:
    """Go ``path.Clean`` for a path starting with ``/``."""
    parts: list[str] = []
    for seg in path.split("/"):
        if seg == "..":
            if parts:
                parts.pop()
        elif seg not in ("", "."):
            parts.append(seg)
    return "/" + "/".join(parts)


def decode_continue(token: str) -> tuple[int, str]:
    """Decode a continue token into (resourceVersion, start key relative to the collection).

    ``rv == -1`` means "continue at the latest revision" (410 recovery, §10.4). Raises
    BadRequest ``invalid continue token: ...`` with ``storage.DecodeContinue``'s reasons.
    """
    try:
        fields = _token_fields(_go_raw_url_b64decode(token))
    except ValueError as exc:
        raise BadRequest(f"invalid continue token: continue key is not valid: {exc}") from None
    version, rv, start = fields.get("v", ""), fields.get("rv", 0), fields.get("start", "")
    prefix = "invalid continue token: continue key is not valid: "
    if version != CONTINUE_VERSION:
        raise BadRequest(f"{prefix}server does not recognize this encoded version {version}")
    if rv == 0:
        raise BadRequest(f"{prefix}incorrect encoded start resourceVersion (version "
                         f"{CONTINUE_VERSION})")
    if not start:
        raise BadRequest(f"{prefix}encoded start key empty (version {CONTINUE_VERSION})")
    key = start if start.startswith("/") else "/" + start
    if _go_clean_rooted(key) != key:  # no climbing out of the collection prefix
        raise BadRequest(prefix + start)
    return rv, key[1:]


def encode_continue(rv: int, start: str) -> str:
    """A continue token as kube writes it (``storage.EncodeContinue``, Go ``json.Marshal``).

    ``start`` is the last returned key relative to the collection prefix plus ``"\\u0000"``.
    """
    # the continueToken struct's fields in order, through the one Go-exact encoder
    doc = go_json({"v": CONTINUE_VERSION, "rv": rv, "start": start}, sort_keys=False)
    return base64.urlsafe_b64encode(doc.encode()).rstrip(b"=").decode()
