"""kubewire.server.request.continue_tokens: kube's continue-token format and rejections (§10.2)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.server.request.continue_tokens import decode_continue, encode_continue
from kubewire.status import BadRequest


def token(doc: Any) -> str:
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# --- continue tokens (§10.2) ------------------------------------------------------------------

def test_encode_continue_is_kube_format() -> None:
    assert encode_continue(12345, "web-2\x00") == (
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDUsInN0YXJ0Ijoid2ViLTJcdTAwMDAifQ")
    assert encode_continue(-1, "web-2\x00") == (
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0Ijoid2ViLTJcdTAwMDAifQ")
    decoded = base64.urlsafe_b64decode(encode_continue(1, "<a&b>") + "==")
    assert decoded == b'{"v":"meta.k8s.io/v1","rv":1,"start":"\\u003ca\\u0026b\\u003e"}'


def test_encode_continue_writes_invalid_utf8_as_go_does() -> None:
    """encode.go appendString writes invalid UTF-8 (a lone surrogate here) as \\ufffd, and
    U+2028 escaped."""
    decoded = base64.urlsafe_b64decode(encode_continue(1, "a\udc80\u2028") + "==")
    assert decoded == b'{"v":"meta.k8s.io/v1","rv":1,"start":"a\\ufffd\\u2028"}'


def test_decode_continue_accepts_kube_tokens() -> None:
    assert decode_continue(encode_continue(-1, "demo/web-2\x00")) == (-1, "demo/web-2\x00")
    assert decode_continue(token({"v": "meta.k8s.io/v1", "rv": 5, "start": "/a\x00"})) == (
        5, "a\x00")
    assert decode_continue(token({"V": "meta.k8s.io/v1", "RV": 5, "Start": "a", "x": 1})) == (
        5, "a")


PREFIX = "invalid continue token: continue key is not valid: "


@pytest.mark.parametrize(("tok", "reason"), [
    (token({"v": "meta.k8s.io/v1", "rv": 0, "start": "a"}),
     "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    (token({"v": "meta.k8s.io/v1", "start": "a"}),
     "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    (token({"v": "meta.k8s.io/v1", "rv": 3, "start": ""}),
     "encoded start key empty (version meta.k8s.io/v1)"),
    (token({"v": "meta.k8s.io/v2", "rv": 3, "start": "a"}),
     "server does not recognize this encoded version meta.k8s.io/v2"),
    (token({}), "server does not recognize this encoded version "),
    (token(None), "server does not recognize this encoded version "),
    (token({"v": "meta.k8s.io/v1", "rv": 3, "start": "../secrets/x"}), "../secrets/x"),
    (token({"v": "meta.k8s.io/v1", "rv": 3, "start": "a/../../b"}), "a/../../b"),
    (token({"v": "meta.k8s.io/v1", "rv": 3, "start": "a//b"}), "a//b"),
    (token([1]), "json: cannot unmarshal array into Go value of type storage.continueToken"),
    (token({"v": "meta.k8s.io/v1", "rv": "3", "start": "a"}),
     "json: cannot unmarshal string into Go struct field continueToken.rv of type int64"),
    (token({"v": "meta.k8s.io/v1", "rv": 1.5, "start": "a"}),
     "json: cannot unmarshal number 1.5 into Go struct field continueToken.rv of type int64"),
    (token({"v": 1, "rv": 3, "start": "a"}),
     "json: cannot unmarshal number into Go struct field continueToken.v of type string"),
    ("", "unexpected end of JSON input"),
    ("!!!!", "illegal base64 data at input byte 0"),
    ("abcde", "illegal base64 data at input byte 4"),
    ("abc=", "illegal base64 data at input byte 3"),
    (base64.urlsafe_b64encode(b"x").rstrip(b"=").decode(),
     "invalid character 'x' looking for beginning of value"),
    # Go's JSON scanner names the offending byte as a rune, not a UTF-8 character.
    ("garbage", "invalid character '\\u0081' looking for beginning of value"),
    (base64.urlsafe_b64encode("é".encode()).rstrip(b"=").decode(),
     "invalid character 'Ã' looking for beginning of value"),
    (base64.urlsafe_b64encode(b"\xff").rstrip(b"=").decode(),
     "invalid character 'ÿ' looking for beginning of value"),
    (base64.urlsafe_b64encode(b"\xa0").rstrip(b"=").decode(),
     "invalid character '\\u00a0' looking for beginning of value"),
    (base64.urlsafe_b64encode(b"[" * 5000).rstrip(b"=").decode(), "exceeded max depth"),
])
def test_decode_continue_rejections(tok: str, reason: str) -> None:
    with pytest.raises(BadRequest) as info:
        decode_continue(tok)
    assert info.value.message == PREFIX + reason


def test_a_start_key_that_is_not_utf8_reads_as_go_reads_it() -> None:
    raw = b'{"v":"meta.k8s.io/v1","rv":3,"start":"a\xff\\ud800"}'
    assert decode_continue(base64.urlsafe_b64encode(raw).decode()) == (3, "a\ufffd\ufffd")


@given(st.integers(min_value=-1, max_value=2**63 - 1).filter(lambda rv: rv != 0),
       st.text(min_size=1).filter(lambda s: "/" not in s and s not in (".", "..")))
def test_continue_round_trip(rv: int, start: str) -> None:
    assert decode_continue(encode_continue(rv, start + "\x00")) == (rv, start + "\x00")


@given(st.text())
def test_decode_continue_only_raises_bad_request(tok: str) -> None:
    try:
        decode_continue(tok)
    except BadRequest as exc:
        assert exc.message.startswith(PREFIX)
