"""metav1.Time / MicroTime encodings of decoded times (apimachinery meta/v1 time.go)."""

from __future__ import annotations

import pytest

from kubewire.schema.go_time_encoding import encode_go_time, encode_times


@pytest.mark.parametrize(("text", "micro", "expected"), [
    ("2026-11-22T02:05:47.5+01:00", False, "2026-11-22T01:05:47Z"),
    ("2026-11-22T02:05:47.999999999Z", False, "2026-11-22T02:05:47Z"),  # truncated, not rounded
    ("2026-01-01T00:30:00-00:45", False, "2026-01-01T01:15:00Z"),
    ("2026-12-31T23:59:59,25-01:00", False, "2027-01-01T00:59:59Z"),
    ("2026-11-22T2:05:47Z", False, "2026-11-22T02:05:47Z"),  # Go's "15" takes one digit
    ("2026-01-01T00:00:00.123456+00:30", True, "2025-12-31T23:30:00.123456Z"),
    ("2026-01-01T00:00:00.000000Z", True, "2026-01-01T00:00:00.000000Z"),
    ("0001-01-01T00:00:00Z", False, None),
    ("0001-01-01T01:00:00+01:00", True, None),
    ("not a time", False, "not a time"),
])
def test_encode_go_time(text: str, micro: bool, expected: str | None) -> None:
    assert encode_go_time(text, micro) == expected


def test_encode_times_follows_the_schema() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "creationTimestamp": "2026-01-01T01:00:00+01:00",
                        "annotations": {"at": "2026-01-01T01:00:00+01:00"}},
           "spec": {"containers": [{"name": "c", "image": "i"}]},
           "status": {"startTime": "2026-01-01T01:00:00.5+01:00",
                      "containerStatuses": [{"name": "c", "state": {"running": {
                          "startedAt": "2026-01-01T01:00:00+01:00"}}}]}}
    encoded = encode_times("v1", "Pod", pod)
    assert encoded["metadata"] == {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z",
                                   "annotations": {"at": "2026-01-01T01:00:00+01:00"}}
    assert encoded["status"]["startTime"] == "2026-01-01T00:00:00Z"
    assert encoded["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] == \
        "2026-01-01T00:00:00Z"
    assert pod["status"]["startTime"] == "2026-01-01T01:00:00.5+01:00"  # input unchanged


def test_encode_times_leaves_unknown_kinds() -> None:
    obj = {"spec": {"at": "2026-01-01T01:00:00+01:00"}}
    assert encode_times("example.com/v1", "Widget", obj) is obj
