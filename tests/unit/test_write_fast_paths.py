"""Shortcuts on the write path give exactly what the long way gives (property tests).

- ``encode_go_time`` returns text already in Go's form without parsing it;
- ``encode_times`` copies only what it re-encodes and never changes its input;
- ``check_object`` (one walk) finds what ``validate_types`` and ``unknown_fields`` find;
- a plain User-Agent names the field manager without a per-character loop.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubewire.go_text import go_utf8
from kubewire.schema import validate as schema_validate
from kubewire.schema.go_time_encoding import _ZERO, encode_go_time, encode_times, go_time_instant
from kubewire.schema.go_types import go_type_of
from kubewire.server.patch.field_ownership import default_field_manager
from kubewire.server.request.write_options import MAX_FIELD_MANAGER_BYTES, WriteOptions


def _long_way(text: str, micro: bool) -> str | None:
    """``encode_go_time`` without its shortcut for canonical text."""
    instant = go_time_instant(text)
    if instant is None:
        return text
    if instant == _ZERO:
        return None
    if micro:
        return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond:06d}Z"
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


_digit = st.sampled_from("0123456789\u0663")  # an Arabic-Indic digit matches \\d, not [0-9]
_times = st.builds(
    lambda y, mo, d, h, mi, s, frac, tail: f"{y}-{mo}-{d}T{h}:{mi}:{s}{frac}{tail}",
    st.text(_digit, min_size=4, max_size=4), st.text(_digit, min_size=2, max_size=2),
    st.text(_digit, min_size=2, max_size=2), st.text(_digit, min_size=1, max_size=2),
    st.text(_digit, min_size=2, max_size=2), st.text(_digit, min_size=2, max_size=2),
    st.sampled_from(["", ".5", ".123456", ".1234567"]), st.sampled_from(["Z", "+01:00", ""]))


@settings(max_examples=500, deadline=None)
@given(text=_times | st.sampled_from(["0001-01-01T00:00:00Z", "0999-01-01T00:00:00Z",
                                      "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z",
                                      "0001-01-01T00:00:00.000000Z"]),
       micro=st.booleans())
def test_canonical_times_come_back_as_the_long_way_gives_them(text: str, micro: bool) -> None:
    assert encode_go_time(text, micro) == _long_way(text, micro)


def test_encode_times_leaves_its_input_alone_and_shares_what_it_keeps() -> None:
    pod = {"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00.5+01:00",
                        "labels": {"a": "b"}},
           "spec": {"containers": [{"name": "c"}]},
           "status": {"conditions": [{"type": "Ready",
                                      "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    before = copy.deepcopy(pod)
    out = encode_times("v1", "Pod", pod)
    assert pod == before
    assert out["metadata"]["creationTimestamp"] == "2025-12-31T23:00:00Z"
    assert out["metadata"]["labels"] is pod["metadata"]["labels"]
    assert out["status"] is pod["status"]  # already in Go's form: not copied
    assert encode_times("v1", "Pod", out) is out


_keys = st.sampled_from(["metadata", "spec", "status", "name", "labels", "containers", "image",
                         "ports", "containerPort", "replicas", "x", "selector", "template"])
_scalars = st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats(
    allow_nan=False) | st.sampled_from(["a", "", "Always"])
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_keys, inner, max_size=4), max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from([("v1", "Pod"), ("apps/v1", "Deployment"), ("v1", "Service"),
                             ("v1", "ConfigMap")]),
       body=st.dictionaries(_keys, _json, max_size=5))
def test_check_object_finds_what_the_two_walks_find(kind: tuple[str, str],
                                                    body: dict[str, Any]) -> None:
    errors, unknown = schema_validate.check_object(*kind, body)
    assert errors == schema_validate.validate_types(*kind, body)
    if not errors:
        assert unknown == schema_validate.unknown_fields(*kind, body)


def _encode_reference(value: Any, go_type: Any) -> Any:
    """``encode_times``'s walk as it was: every field visited, every container rebuilt."""
    if go_type.kind in ("time", "microtime"):
        return _long_way(value, go_type.kind == "microtime") if isinstance(value, str) else value
    if go_type.kind == "struct" and isinstance(value, dict):
        return {k: (_encode_reference(v, go_type.fields[k]) if k in go_type.fields else v)
                for k, v in value.items()}
    if go_type.kind == "slice" and isinstance(value, list) and go_type.items is not None:
        return [_encode_reference(v, go_type.items) for v in value]
    if go_type.kind == "map" and isinstance(value, dict) and go_type.values is not None:
        return {k: _encode_reference(v, go_type.values) for k, v in value.items()}
    return value


_time_text = _times | st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123456Z"])
_pod = st.fixed_dictionaries({
    "metadata": st.fixed_dictionaries({}, optional={
        "name": st.just("p"), "creationTimestamp": _time_text | st.none(),
        "deletionTimestamp": _time_text, "labels": st.dictionaries(_keys, st.just("v")),
        "managedFields": st.lists(st.fixed_dictionaries({"manager": st.just("m")},
                                                        optional={"time": _time_text}))}),
    "spec": st.fixed_dictionaries({}, optional={"containers": st.lists(
        st.fixed_dictionaries({"name": st.just("c")}), max_size=2)}),
    "status": st.fixed_dictionaries({}, optional={
        "startTime": _time_text | st.integers(),
        "conditions": st.lists(st.fixed_dictionaries(
            {"type": st.just("Ready")}, optional={"lastTransitionTime": _time_text,
                                                  "lastProbeTime": _time_text}), max_size=2)}),
})


@settings(max_examples=300, deadline=None)
@given(pod=_pod)
def test_encode_times_gives_what_the_full_walk_gives(pod: dict[str, Any]) -> None:
    before = copy.deepcopy(pod)
    assert encode_times("v1", "Pod", pod) == _encode_reference(pod, go_type_of("v1", "Pod"))
    assert pod == before


def _manager_long_way(user_agent: str) -> str:
    """Go's ``prefixFromUserAgent`` over the header's bytes (``user_agent`` holds them as
    latin-1 text, as the HTTP layer reads headers): U+FFFD for each byte that is not UTF-8."""
    name = ""
    for ch in go_utf8(user_agent.encode("latin-1")).split("/", 1)[0]:
        if not ch.isprintable():
            continue
        if len((name + ch).encode("utf-8", "surrogatepass")) > MAX_FIELD_MANAGER_BYTES:
            break
        name += ch
    return name


@settings(max_examples=300, deadline=None)
@given(user_agent=st.binary(max_size=200).map(lambda raw: raw.decode("latin-1"))
       | st.text(st.characters(max_codepoint=127), max_size=200)
       | st.text(max_size=60).map(lambda text: text.encode("utf-8", "surrogatepass")
                                 .decode("latin-1")))
def test_the_field_manager_from_a_user_agent_is_what_the_long_way_gives(user_agent: str) -> None:
    options = default_field_manager(WriteOptions(), user_agent)
    assert options.field_manager == _manager_long_way(user_agent)
