"""Event validation per request version (kube pkg/apis/core/validation/events.go)."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.resources import REGISTRY, Resource
from kubewire.server.writes.validation.events import validate_event
from kubewire.server.writes.validation.kinds import validate_kind


def served(group: str) -> Resource:
    found = REGISTRY.lookup(group, "v1", "events")
    assert found is not None
    return found


CORE = served("")
EVENTS = served("events.k8s.io")


def legacy(**extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-0"},
            "reason": "Pulled", "message": "m", "source": {"component": "kubelet"},
            "count": 1, "type": "Normal", **extra}


def recorded(**extra: Any) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2024-12-11T09:15:02.123456Z", "reportingController": "k8s.io/c",
            "reportingInstance": "c-1", "action": "Act", "reason": "Why", "type": "Normal",
            "note": "n", "regarding": {"kind": "Pod", "namespace": "default", "name": "web-0"},
            **extra}


def texts(resource: Resource, obj: dict[str, Any], old: dict[str, Any] | None = None,
          ) -> list[str]:
    return [str(e) for e in validate_event(resource, obj, old)]


def test_valid_events_pass_through_both_versions() -> None:
    assert texts(CORE, legacy()) == []
    assert texts(EVENTS, recorded()) == []
    assert texts(CORE, legacy(message="other"), legacy()) == []  # legacy updates are free
    assert validate_kind(CORE, legacy()) == []


def test_without_event_time_only_the_namespaces_must_agree() -> None:
    other = legacy(involvedObject={"kind": "Pod", "namespace": "other", "name": "p"})
    assert texts(CORE, other) == [
        'involvedObject.namespace: Invalid value: "other": does not match event.namespace']
    elsewhere = legacy(metadata={"name": "e", "namespace": "team"},
                       involvedObject={"kind": "Node", "name": "n"})
    assert texts(CORE, elsewhere) == [
        'involvedObject.namespace: Invalid value: "": does not match event.namespace']
    cluster_scoped = legacy(involvedObject={"kind": "Node", "name": "n"})
    assert texts(CORE, cluster_scoped) == []  # "default" is allowed for old clients


def test_with_event_time_the_reporter_is_named_per_request_version() -> None:
    event = legacy(eventTime="2024-12-11T09:15:02.000001Z", reason="")
    assert texts(CORE, event) == [
        "reportingComponent: Required value",
        'reportingComponent: Invalid value: "": name part must be non-empty',
        "reportingComponent: Invalid value: \"\": name part must consist of alphanumeric "
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        "reportingInstance: Required value", "action: Required value",
        "reason: Required value"]
    strict = texts(EVENTS, recorded(reportingController=""))
    assert strict[0] == "reportingController: Required value"


def test_lengths_are_bounded_in_bytes() -> None:
    event = recorded(action="a" * 129, note="é" * 513)
    assert texts(EVENTS, event) == [
        'action: Invalid value: "": can have at most 128 characters',
        'message: Invalid value: "": can have at most 1024 characters']


def test_strict_creates_need_the_new_fields_and_refuse_the_legacy_ones() -> None:
    event = recorded(type="Info", deprecatedFirstTimestamp="2024-12-11T09:15:02Z",
                     deprecatedCount=2, deprecatedSource={"host": "h"},
                     series={"count": 1})
    assert texts(EVENTS, event) == [
        'series.count: Invalid value: "": should be at least 2',
        "series.lastObservedTime: Required value",
        'type: Invalid value: "": has invalid value: Info',
        'firstTimestamp: Invalid value: "": needs to be unset',
        'count: Invalid value: "": needs to be unset',
        'source: Invalid value: "": needs to be unset']
    no_time = recorded()
    del no_time["eventTime"]
    assert "eventTime: Required value" in texts(EVENTS, no_time)
    # the same legacy fields are fine through core/v1
    assert texts(CORE, legacy()) == []


def test_strict_updates_keep_everything_but_metadata_and_series() -> None:
    old = recorded()
    changed = recorded(note="new", regarding={"kind": "Pod", "namespace": "default",
                                              "name": "web-1"},
                       eventTime="2024-12-11T09:16:02.5Z", deprecatedCount=3)
    assert texts(EVENTS, changed, old) == [
        'involvedObject: Invalid value: core.ObjectReference{Kind:"Pod", '
        'Namespace:"default", Name:"web-1", UID:"", APIVersion:"", ResourceVersion:"", '
        'FieldPath:""}: field is immutable',
        'message: Invalid value: "new": field is immutable',
        "count: Invalid value: 3: field is immutable",
        "eventTime: Invalid value: 2024-12-11 09:16:02.5 +0000 UTC: field is immutable"]
    moved_series = recorded(series={"count": 2,
                                    "lastObservedTime": "2024-12-11T09:20:00.000000Z"})
    assert texts(EVENTS, moved_series, old) == []
    same_instant = recorded(eventTime="2024-12-11T10:15:02.123456+01:00")
    assert texts(EVENTS, same_instant, old) == []


# Times are read as Go's time.Parse reads RFC3339 (metav1.Time) and RFC3339Micro (MicroTime),
# not as Python's datetime.fromisoformat: the two disagree on the texts below.

@pytest.mark.parametrize("text", [
    "2024-12-11 09:15:02.123456Z",  # a space for the T
    "2024-12-11T09:15:02.123456",  # no zone
    "2024-12-11t09:15:02.123456Z",  # lowercase t
    "2024-12-11T09:15:02.123456z",  # lowercase z (fromisoformat refuses it too)
    "2024-12-11T09:15:02.123456+0000",  # offset without its colon
    "2024-12-11",  # a date alone
    "2024-12-11T09:15Z",  # no seconds
])
def test_event_times_go_cannot_parse_are_no_time(text: str) -> None:
    """fromisoformat reads these; time.Parse does not (kube's decoder answers 400 before
    validation), so validation never sees an eventTime in them."""
    assert "eventTime: Required value" in texts(EVENTS, recorded(eventTime=text))


@pytest.mark.parametrize("text", [
    "2024-12-11T9:15:02.123456Z",  # Go's "15" takes a one-digit hour
    "2024-12-12T09:15:02.123456+24:00",  # and offsets up to 24 hours
    "2024-12-11T10:15:02.123456+01:00",  # same instant, another zone (both agree)
])
def test_event_times_go_parses_name_their_instant(text: str) -> None:
    """fromisoformat refuses the first two; Go reads the same instant as the stored one, so
    the update changes nothing immutable."""
    assert texts(EVENTS, recorded(eventTime=text), recorded()) == []


def test_nine_fraction_digits_are_a_metav1_time() -> None:
    """metav1.Time (RFC3339) takes any fraction: nine zero digits are the stored instant."""
    old = recorded(deprecatedFirstTimestamp="2024-12-11T09:15:02Z")
    new = recorded(deprecatedFirstTimestamp="2024-12-11T09:15:02.000000000Z")
    assert texts(EVENTS, new, old) == []
    moved = recorded(deprecatedFirstTimestamp="2024-12-11T09:15:03.5Z")
    assert texts(EVENTS, moved, old) == [
        "firstTimestamp: Invalid value: 2024-12-11 09:15:03.5 +0000 UTC: field is immutable"]
