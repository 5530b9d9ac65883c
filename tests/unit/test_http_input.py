"""server/http_input.py: request targets of any length, queries, head facts, the body budget."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote

import httptools
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.go_text import go_utf8_of_latin1
from kubewire.server.wire.http_input import (
    BodyBudget,
    InvalidTarget,
    expects_continue,
    has_body,
    parse_query,
    split_target,
)

# what llhttp lets through in an origin-form target (no space, no control bytes, no '#')
_TARGET_BYTES = st.binary(max_size=200).map(
    lambda b: bytes(c for c in b if 0x21 <= c < 0x7F and c != ord("#")))


def test_a_target_past_httptools_64_kib_is_split() -> None:
    selector = "app in (" + ",".join(f"v{i:05d}" for i in range(30_000)) + ")"
    target = f"/api/v1/pods?labelSelector={selector}&limit=5".encode()
    assert len(target) > 200 * 1024
    with pytest.raises(httptools.HttpParserInvalidURLError):
        httptools.parse_url(target)  # why split_target exists
    assert split_target(target) == ("/api/v1/pods", f"labelSelector={selector}&limit=5")


@given(path=_TARGET_BYTES, query=_TARGET_BYTES)
def test_origin_form_splits_as_httptools_does_for_short_targets(path: bytes,
                                                                query: bytes) -> None:
    target = b"/" + path.replace(b"?", b"") + b"?" + query
    parsed = httptools.parse_url(target)
    assert split_target(target) == (unquote(parsed.path.decode("latin-1")),
                                    (parsed.query or b"").decode("latin-1"))


def test_the_path_is_percent_decoded_and_the_query_kept_raw() -> None:
    assert split_target(b"/api/v1/namespaces/a%2Fb?x=%20&y") == (
        "/api/v1/namespaces/a/b", "x=%20&y")
    assert split_target(b"/version") == ("/version", "")
    assert split_target(b"/a?") == ("/a", "")


def test_absolute_form_goes_to_httptools() -> None:
    assert split_target(b"http://host:6443/api/v1/pods?watch=1") == ("/api/v1/pods", "watch=1")
    with pytest.raises(InvalidTarget):
        split_target(b"http://[bad")


# --- queries: the same pairs as urllib's parse_qs, decoded with fewer Python steps ----------

_QUERY_PIECES = st.sampled_from([
    "a", "b", "=", "&", "+", "%", "%2C", "%2c", "%28", "%29", "%20", "%25", "%41", "%4", "%zz",
    "%%", "%E9", "%C3%A9", "%FF", "é", "\xff", "%3D", "%26", "%2B", "labelSelector=", "%0"])


def urllib_query(raw_query: str) -> dict[str, list[str]]:
    """What parse_query gave when urllib decoded every query (the reference)."""
    if raw_query.isascii() and "%" not in raw_query:
        return parse_qs(raw_query, keep_blank_values=True)
    pairs = parse_qs(raw_query, keep_blank_values=True, encoding="latin-1")
    return {go_utf8_of_latin1(key): [go_utf8_of_latin1(value) for value in values]
            for key, values in pairs.items()}


@given(st.lists(_QUERY_PIECES, max_size=40).map("".join))
def test_a_query_parses_as_urllib_parses_it(raw_query: str) -> None:
    assert parse_query(raw_query) == urllib_query(raw_query)


@pytest.mark.parametrize("raw_query", [
    "labelSelector=app+in+%28" + "%2C".join(f"v{i}" for i in range(20_000)) + "%29&limit=5",
    "x=" + "".join(f"%{i:02X}" for i in range(256)),  # past the distinct escapes replaced
    "x=" + "".join(f"%{i:02x}a%25" for i in range(0x20, 0x7f)),
    "x=%252C", "x=%2C%25%2C2C%%2C%2%2C",  # "%25" is "%": replaced, it would make an escape
    "x=%%341%25", "x=%2C%%341%2C%2541",  # "%34" is "4": replaced, it would make "%41"
])
def test_long_and_tricky_queries_parse_as_urllib_parses_them(raw_query: str) -> None:
    assert parse_query(raw_query) == urllib_query(raw_query)


def test_an_encoded_selector_decodes() -> None:
    assert parse_query("labelSelector=app+in+%28a%2Cb%29%2C%21x&limit=5") == {
        "labelSelector": ["app in (a,b),!x"], "limit": ["5"]}


def test_a_body_is_announced_by_a_positive_length_or_a_transfer_encoding() -> None:
    assert has_body({"content-length": "3"})
    assert has_body({"transfer-encoding": "chunked"})
    assert not has_body({"content-length": "0"})
    assert not has_body({})


def test_100_continue_is_a_case_insensitive_token() -> None:
    assert expects_continue("100-Continue")
    assert expects_continue("foo, 100-continue")
    assert not expects_continue("200-ok")


def test_reservations_that_do_not_fit_wait_in_arrival_order() -> None:
    budget = BodyBudget(100)
    granted: list[str] = []
    assert budget.reserve(60, lambda: granted.append("first"))
    assert not budget.reserve(50, lambda: granted.append("a"))  # 110 > 100: waits
    assert not budget.reserve(10, lambda: granted.append("b"))  # fits, but "a" came first
    assert budget.held == 60 and budget.waiting == 2
    budget.release(5)
    assert granted == []  # 55 + 50 > 100
    budget.release(55)
    assert granted == ["a", "b"] and budget.held == 60 and budget.waiting == 0


def test_a_withdrawn_reservation_is_never_granted() -> None:
    budget = BodyBudget(10)
    granted: list[str] = []
    assert budget.reserve(10, lambda: granted.append("first"))
    gone = lambda: granted.append("gone")  # noqa: E731
    assert not budget.reserve(5, gone)
    budget.cancel(gone)
    budget.release(10)
    assert granted == [] and budget.held == 0


def test_a_body_larger_than_the_budget_goes_alone() -> None:
    budget = BodyBudget(10)
    granted: list[str] = []
    assert budget.reserve(50, lambda: granted.append("big"))  # nothing held: granted
    assert not budget.reserve(1, lambda: granted.append("small"))
    budget.take(3)  # read without a reservation (whole in the slice that ended its head)
    budget.release(50)
    assert granted == ["small"] and budget.held == 4


def test_a_budget_of_zero_is_no_limit() -> None:
    budget = BodyBudget(0)
    assert budget.reserve(1 << 40, lambda: None)
    assert budget.reserve(1 << 40, lambda: None)
    assert budget.held == 2 << 40
