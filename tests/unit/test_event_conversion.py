"""core/v1 <-> events.k8s.io/v1 Event conversion: kube's renames, Go's field order and zeros."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.conversions import convert_object, needs_conversion
from kubewire.event_conversion import core_event_to_events_v1, events_v1_to_core_event

META = {"name": "web-0.17f3", "namespace": "default", "uid": "u-1", "resourceVersion": "7",
        "creationTimestamp": "2024-12-11T09:15:02Z"}
REFERENCE = {"kind": "Pod", "namespace": "default", "name": "web-0", "uid": "p-1",
             "apiVersion": "v1", "resourceVersion": "5", "fieldPath": "spec.containers{c}"}
RELATED = {"kind": "Node", "name": "node-1"}
SERIES = {"count": 3, "lastObservedTime": "2024-12-11T09:16:00.000001Z"}

# Every field set: each version's name for it, in its Go struct order.
CORE_FULL: dict[str, Any] = {
    "kind": "Event", "apiVersion": "v1", "metadata": META, "involvedObject": REFERENCE,
    "reason": "Pulled", "message": "pulled the image", "source": {"component": "kubelet",
                                                                  "host": "node-1"},
    "firstTimestamp": "2024-12-11T09:15:02Z", "lastTimestamp": "2024-12-11T09:16:00Z",
    "count": 4, "type": "Normal", "eventTime": "2024-12-11T09:15:02.123456Z", "series": SERIES,
    "action": "Pulling", "related": RELATED, "reportingComponent": "kubelet",
    "reportingInstance": "node-1"}
EVENTS_FULL: dict[str, Any] = {
    "kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": META,
    "eventTime": "2024-12-11T09:15:02.123456Z", "series": SERIES,
    "reportingController": "kubelet", "reportingInstance": "node-1", "action": "Pulling",
    "reason": "Pulled", "regarding": REFERENCE, "related": RELATED, "note": "pulled the image",
    "type": "Normal", "deprecatedSource": {"component": "kubelet", "host": "node-1"},
    "deprecatedFirstTimestamp": "2024-12-11T09:15:02Z",
    "deprecatedLastTimestamp": "2024-12-11T09:16:00Z", "deprecatedCount": 4}


def ordered(obj: dict[str, Any]) -> list[tuple[str, Any]]:
    """Items in order: equal only when the keys come in the same order too."""
    return list(obj.items())


def test_core_to_events_renames_every_field_in_struct_order() -> None:
    assert ordered(core_event_to_events_v1(CORE_FULL)) == ordered(EVENTS_FULL)


def test_events_to_core_renames_every_field_in_struct_order() -> None:
    assert ordered(events_v1_to_core_event(EVENTS_FULL)) == ordered(CORE_FULL)


def test_a_minimal_core_event_gets_the_events_zero_values() -> None:
    # eventTime and the deprecated times are struct times (null), regarding and
    # deprecatedSource structs ({}); the reporting strings are omitempty in events/v1.
    core = {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "e"}, "reason": "R",
            "reportingComponent": "", "reportingInstance": ""}
    assert ordered(core_event_to_events_v1(core)) == ordered({
        "kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": {"name": "e"},
        "eventTime": None, "reason": "R", "regarding": {}, "deprecatedSource": {},
        "deprecatedFirstTimestamp": None, "deprecatedLastTimestamp": None})


def test_a_minimal_events_event_gets_the_core_zero_values() -> None:
    # core/v1 always writes reportingComponent and reportingInstance (no omitempty).
    events = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": {"name": "e"},
              "eventTime": "2024-12-11T09:15:02.000000Z", "note": "n"}
    assert ordered(events_v1_to_core_event(events)) == ordered({
        "kind": "Event", "apiVersion": "v1", "metadata": {"name": "e"}, "involvedObject": {},
        "message": "n", "source": {}, "firstTimestamp": None, "lastTimestamp": None,
        "eventTime": "2024-12-11T09:15:02.000000Z", "reportingComponent": "",
        "reportingInstance": ""})


def test_empty_values_follow_omitempty() -> None:
    core = {**CORE_FULL, "count": 0, "type": "", "action": "", "reason": "",
            "source": {"component": "", "host": "h"}, "involvedObject": {"kind": "Pod",
                                                                         "name": ""}}
    out = core_event_to_events_v1(core)
    assert "deprecatedCount" not in out and "type" not in out and "action" not in out
    assert "reason" not in out
    assert out["deprecatedSource"] == {"host": "h"}
    assert out["regarding"] == {"kind": "Pod"}


def test_series_count_is_omitempty_only_in_core() -> None:
    events = {**EVENTS_FULL, "series": {"count": 0, "lastObservedTime": ""}}
    assert events_v1_to_core_event(events)["series"] == {"lastObservedTime": None}
    core = {**CORE_FULL, "series": {}}
    assert core_event_to_events_v1(core)["series"] == {"count": 0, "lastObservedTime": None}


def test_an_empty_related_pointer_stays_an_object() -> None:
    assert core_event_to_events_v1({**CORE_FULL, "related": {}})["related"] == {}
    assert "related" not in core_event_to_events_v1({**CORE_FULL, "related": None})


def test_fields_of_neither_version_are_dropped_as_a_go_struct_would() -> None:
    out = events_v1_to_core_event({**EVENTS_FULL, "bogus": 1})
    assert "bogus" not in out


@pytest.mark.parametrize("obj", [CORE_FULL, EVENTS_FULL])
def test_round_trips_are_lossless(obj: dict[str, Any]) -> None:
    other = ("events.k8s.io/v1", "Event") if obj["apiVersion"] == "v1" else ("v1", "Event")
    back = (obj["apiVersion"], "Event")
    assert ordered(convert_object(convert_object(obj, other), back)) == ordered(obj)


def test_convert_object_leaves_its_own_version_alone() -> None:
    assert convert_object(CORE_FULL, ("v1", "Event")) == CORE_FULL
    assert not needs_conversion(CORE_FULL, ("v1", "Event"))
    assert needs_conversion(CORE_FULL, ("events.k8s.io/v1", "Event"))
    assert not needs_conversion({"metadata": {}}, ("events.k8s.io/v1", "Event"))


def test_convert_object_refuses_a_pair_without_a_converter() -> None:
    with pytest.raises(ValueError, match="no conversion"):
        convert_object({"apiVersion": "v1", "kind": "Pod"}, ("apps/v1", "Deployment"))
