"""The request record's ring and filters (observe/request_record), without a server."""

from __future__ import annotations

import hashlib

import msgspec
import pytest

from kubewire.server.observe.request_record import (
    RequestEntry,
    RequestRecord,
    answer,
    body_digest,
    filters_from_query,
)
from kubewire.status import BadRequest, MethodNotAllowed


def entry(verb: str = "get", resource: str = "pods", name: str = "a", code: int = 200,
          namespace: str = "ns") -> RequestEntry:
    return RequestEntry(0.0, "alice", verb, "", "v1", resource, "", namespace, name,
                        f"/api/v1/namespaces/{namespace}/{resource}/{name}", "", code)


def test_the_ring_keeps_the_newest_entries_oldest_first() -> None:
    record = RequestRecord(3)
    for name in "abcde":
        record.add(entry(name=name))
    assert [e.name for e in record] == ["c", "d", "e"]
    assert len(record) == 3


def test_a_zero_capacity_records_nothing() -> None:
    record = RequestRecord(0)
    record.add(entry())
    assert list(record) == []
    with pytest.raises(ValueError):
        RequestRecord(-1)


def test_select_matches_every_filter_given() -> None:
    record = RequestRecord()
    record.add(entry("patch", "pods", "a"))
    record.add(entry("patch", "configmaps", "a"))
    record.add(entry("delete", "pods", "a", code=404))
    assert [e.resource for e in record.select(verb="patch")] == ["pods", "configmaps"]
    assert [e.verb for e in record.select(resource="pods", name="a")] == ["patch", "delete"]
    assert [e.verb for e in record.select(code=404)] == ["delete"]
    assert record.select(verb="patch", resource="pods", namespace="other") == []
    assert len(record.select(verb=None)) == 3
    with pytest.raises(TypeError, match="verbs"):
        record.select(verbs="patch")
    record.clear()
    assert list(record) == []


def test_the_body_digest_is_sha256_hex_and_empty_without_a_body() -> None:
    assert body_digest(b"") == ""
    assert body_digest(b"{}") == hashlib.sha256(b"{}").hexdigest()


def test_query_filters() -> None:
    assert filters_from_query({"verb": ["patch"], "code": ["201"]}) == {"verb": "patch",
                                                                         "code": 201}
    with pytest.raises(BadRequest):
        filters_from_query({"code": ["x"]})
    with pytest.raises(BadRequest):
        filters_from_query({"colour": ["red"]})


def test_the_admin_answer_lists_filters_and_clears() -> None:
    record = RequestRecord()
    record.add(entry("patch"))
    record.add(entry("get"))
    body = msgspec.json.decode(answer(record, "GET", {"verb": ["patch"]}).body)
    assert [item["verb"] for item in body["items"]] == ["patch"]
    assert body["items"][0]["fault"] is None
    answer(record, "DELETE", {})
    assert list(record) == []
    with pytest.raises(MethodNotAllowed):
        answer(record, "POST", {})
