"""The trace format's pure parts: lines, redaction, the global reorder, replay pacing, and the
import endpoint's body checks."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from kubewire.resources import REGISTRY
from kubewire.server.admin.imports import check, parse_body
from kubewire.status import BadRequest, RequestEntityTooLarge
from kubewire.testing.trace import (
    LAST_APPLIED,
    REDACTED,
    REDACTED_B64,
    Header,
    Redaction,
    Reorder,
    TraceError,
    TraceEvent,
    due_at,
    parse_annotation_keys,
    parse_speed,
    read_trace,
    redact,
)


def cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, **extra}


def event(name: str, rv: str, offset: float | None = None) -> TraceEvent:
    return TraceEvent("ADDED", cm(name), rv, offset=offset)


def test_a_trace_reads_back_what_was_written() -> None:
    lines = [Header("record", {"gitVersion": "v1.32.0"}, ["configmaps"], None, "t").line(),
             TraceEvent("ADDED", cm("a"), "5", initial=True).line(),
             b"\n",
             TraceEvent("DELETED", cm("a"), "7", time="t2", offset=1.5).line()]
    head, events = read_trace(io.BytesIO(b"".join(lines)))
    assert head["kinds"] == ["configmaps"] and head["kubewireTrace"] == 1
    got = list(events)
    assert [(e.type, e.initial, e.resource_version, e.offset) for e in got] == [
        ("ADDED", True, "5", None), ("DELETED", False, "7", 1.5)]
    assert got[1].key == ("v1", "ConfigMap", "default", "a")


@pytest.mark.parametrize(("text", "message"), [
    (b"", "empty"),
    (b'{"kubewireTrace": 2}\n', "format 1"),
    (b"nope\n", "not JSON"),
    (b'{"kubewireTrace": 1}\n{"type": "SYNC", "object": {}}\n', "line 2: type 'SYNC'"),
    (b'{"kubewireTrace": 1}\n{"type": "ADDED", "object": {"kind": "X"}}\n', "line 2: the obj"),
])
def test_bad_traces_say_which_line(text: bytes, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        _, events = read_trace(io.BytesIO(text))
        list(events)


def test_secrets_lose_their_values_not_their_keys() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "s", "annotations": {LAST_APPLIED: '{"data":{"k":"djE="}}',
                                                         "keep": "me"}},
              "data": {"k": "djE="}, "stringData": {"p": "plain"}}
    out = redact(secret, Redaction(secrets=True))
    assert out["data"] == {"k": REDACTED_B64} and out["stringData"] == {"p": REDACTED}
    assert out["metadata"]["annotations"] == {LAST_APPLIED: REDACTED, "keep": "me"}
    assert secret["data"] == {"k": "djE="}  # the original is left alone
    # a ConfigMap is not a Secret
    assert redact(cm("c", data={"k": "v"}), Redaction(secrets=True))["data"] == {"k": "v"}


def test_annotations_all_or_by_key() -> None:
    obj = cm("c")
    obj["metadata"]["annotations"] = {"a": "1", "b": "2"}
    every = redact(obj, Redaction(annotations=parse_annotation_keys("*")))
    assert every["metadata"]["annotations"] == {"a": REDACTED, "b": REDACTED}
    some = redact(obj, Redaction(annotations=parse_annotation_keys("b, x")))
    assert some["metadata"]["annotations"] == {"a": "1", "b": REDACTED}
    assert redact(obj, Redaction()) is obj


def test_reorder_puts_revisions_in_order_within_the_window() -> None:
    reorder = Reorder(window_s=1.0)
    reorder.push(event("b", "12"), now=0.0)
    reorder.push(event("a", "11"), now=0.5)  # arrived later on another watch, happened first
    assert reorder.ready(0.9) == []
    assert [e.resource_version for e in reorder.ready(1.0)] == ["11", "12"]
    reorder.push(event("c", "13"), now=2.0)
    assert reorder.ready(2.5) == [] and len(reorder) == 1
    assert [e.resource_version for e in reorder.drain()] == ["13"]


def test_reorder_keeps_arrival_order_for_opaque_revisions() -> None:
    reorder = Reorder(window_s=0.0)
    for name, rv in (("a", "9"), ("b", "x7"), ("c", "3")):
        reorder.push(event(name, rv), now=0.0)
    assert [e.object["metadata"]["name"] for e in reorder.ready(0.0)] == ["a", "b", "c"]


def test_speed_and_due_times() -> None:
    assert parse_speed("fast") is None and parse_speed("recorded") == 1.0
    assert parse_speed("2.0") == 2.0
    for bad in ("0", "-1", "inf", "nan", "slow"):
        with pytest.raises(ValueError):
            parse_speed(bad)
    assert due_at(event("a", "1", offset=4.0), 2.0) == 2.0
    assert due_at(event("a", "1", offset=4.0), None) is None
    assert due_at(TraceEvent("ADDED", cm("a"), "1", initial=True, offset=4.0), 1.0) is None


def test_import_bodies_json_lines_or_array() -> None:
    items = [{"type": "ADDED", "object": cm("a")}, {"type": "DELETED", "object": cm("b")}]
    lines = b"\n".join(json.dumps(i).encode() for i in items)
    assert [e.name for e in parse_body(lines)] == [e.name for e in parse_body(
        json.dumps(items).encode())] == ["a", "b"]
    with pytest.raises(RequestEntityTooLarge):
        parse_body(json.dumps(items * 501).encode())


def test_a_crd_earlier_in_the_body_makes_its_kind_importable() -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Cluster",
                    "names": {"kind": "Widget", "plural": "widgets"},
                    "versions": [{"name": "v1"}, {"name": "v2", "served": False}]}}
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    body = [{"type": "ADDED", "object": crd}, {"type": "ADDED", "object": widget}]
    check(parse_body(json.dumps(body).encode()), REGISTRY, [])
    with pytest.raises(BadRequest, match="event 0: this server does not serve Widget"):
        check(parse_body(json.dumps(body[::-1]).encode()), REGISTRY, [])
    check(parse_body(json.dumps(body[1:]).encode()), REGISTRY, [crd])  # stored already
    unserved = {**widget, "apiVersion": "example.com/v2"}
    with pytest.raises(BadRequest, match=r"does not serve Widget of example\.com/v2"):
        check(parse_body(json.dumps([{"type": "ADDED", "object": unserved}]).encode()),
              REGISTRY, [crd])
    namespaced = {**widget, "metadata": {"name": "w", "namespace": "default"}}
    with pytest.raises(BadRequest, match="cluster-scoped"):
        check(parse_body(json.dumps([{"type": "ADDED", "object": namespaced}]).encode()),
              REGISTRY, [crd])


def test_reorder_writes_each_event_once_however_windows_overlap() -> None:
    reorder = Reorder(window_s=1.0)
    out: list[str] = []
    arrivals = [("5", 0.0), ("3", 0.2), ("9", 0.4), ("4", 1.1), ("7", 1.3), ("8", 3.0)]
    for rv, at in arrivals:
        out += [e.resource_version for e in reorder.ready(at)]
        reorder.push(event(rv, rv), at)
    out += [e.resource_version for e in reorder.ready(2.5)]
    out += [e.resource_version for e in reorder.drain()]
    # 3 and 5 leave at 1.0; 4 came too late to go before 5, and still leaves, once
    assert out == ["3", "5", "4", "7", "9", "8"]
    assert len(reorder) == 0
