"""core/v1 Event <-> events.k8s.io/v1 Event: one stored resource, two served versions.

kube keeps one Event in storage and serves it at both group/versions through its internal
``core.Event`` (the core/v1 shape): ``Convert_v1_Event_To_core_Event`` and
``Convert_core_Event_To_v1_Event`` (kubernetes pkg/apis/events/v1/conversion.go) rename
``regarding``/``involvedObject``, ``note``/``message``, ``deprecatedSource``/``source``,
``deprecated{First,Last}Timestamp``/``{first,last}Timestamp``, ``deprecatedCount``/``count`` and
``reportingController``/``reportingComponent``; every other field is copied.

The output is what kube's encoder writes for the target version's Go struct: fields in struct
order, ``omitempty`` ones left out when empty, the others always present (a zero time is
``null``, a zero struct ``{}``, a zero string ``""``), from k8s.io/api core/v1 and events/v1
``types.go``. Values are copied as they are; metadata passes through untouched. Pure functions,
no I/O; fields unknown to both shapes are dropped, as a Go struct would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kubewire.json_types import JSON

CORE_API_VERSION = "v1"
EVENTS_API_VERSION = "events.k8s.io/v1"
KIND = "Event"

# ObjectReference and EventSource: every field is ``omitempty`` (core/v1 types.go).
_REFERENCE_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                     "fieldPath")
_SOURCE_FIELDS = ("component", "host")

# Struct order of each version's Event after TypeMeta and metadata, as (field, rule, internal
# name). Rules: "omit" (an omitempty scalar: left out when empty), "time" (a struct time: null
# when unset), "ref"/"source" (a struct: always an object), "string" (always, "" when unset),
# "related"/"series" (pointers: left out when absent). The internal name is core.Event's field
# (spelled as core/v1 does), which both conversions go through.
_Layout = tuple[tuple[str, str, str], ...]
_CORE_LAYOUT: _Layout = (
    ("involvedObject", "ref", "involvedObject"),
    ("reason", "omit", "reason"),
    ("message", "omit", "message"),
    ("source", "source", "source"),
    ("firstTimestamp", "time", "firstTimestamp"),
    ("lastTimestamp", "time", "lastTimestamp"),
    ("count", "omit", "count"),
    ("type", "omit", "type"),
    ("eventTime", "time", "eventTime"),
    ("series", "series", "series"),
    ("action", "omit", "action"),
    ("related", "related", "related"),
    ("reportingComponent", "string", "reportingComponent"),
    ("reportingInstance", "string", "reportingInstance"),
)
_EVENTS_LAYOUT: _Layout = (
    ("eventTime", "time", "eventTime"),
    ("series", "series", "series"),
    ("reportingController", "omit", "reportingComponent"),
    ("reportingInstance", "omit", "reportingInstance"),
    ("action", "omit", "action"),
    ("reason", "omit", "reason"),
    ("regarding", "ref", "involvedObject"),
    ("related", "related", "related"),
    ("note", "omit", "message"),
    ("type", "omit", "type"),
    ("deprecatedSource", "source", "source"),
    ("deprecatedFirstTimestamp", "time", "firstTimestamp"),
    ("deprecatedLastTimestamp", "time", "lastTimestamp"),
    ("deprecatedCount", "omit", "count"),
)


def core_event_to_events_v1(obj: Mapping[str, JSON]) -> dict[str, JSON]:
    """A core/v1 Event as events.k8s.io/v1 writes it (``Convert_core_Event_To_v1_Event``)."""
    internal = {internal_name: obj.get(name) for name, _, internal_name in _CORE_LAYOUT}
    return _encode(obj, internal, EVENTS_API_VERSION, _EVENTS_LAYOUT, series_omits_empty=False)


def events_v1_to_core_event(obj: Mapping[str, JSON]) -> dict[str, JSON]:
    """An events.k8s.io/v1 Event as core/v1 writes it (``Convert_v1_Event_To_core_Event``)."""
    internal = {internal_name: obj.get(name) for name, _, internal_name in _EVENTS_LAYOUT}
    return _encode(obj, internal, CORE_API_VERSION, _CORE_LAYOUT, series_omits_empty=True)


def events_v1_as_go(obj: Mapping[str, JSON]) -> dict[str, JSON]:
    """An events.k8s.io/v1 Event as kube's encoder writes it: struct order, ``omitempty``
    fields left out when empty, the others present (``deprecatedSource: {}``, null times)."""
    internal = {internal_name: obj.get(name) for name, _, internal_name in _EVENTS_LAYOUT}
    return _encode(obj, internal, EVENTS_API_VERSION, _EVENTS_LAYOUT, series_omits_empty=False)


def _encode(obj: Mapping[str, JSON], internal: Mapping[str, JSON], api_version: str,
            layout: _Layout, *, series_omits_empty: bool) -> dict[str, JSON]:
    out: dict[str, JSON] = {"kind": KIND, "apiVersion": api_version}
    if "metadata" in obj:
        out["metadata"] = obj["metadata"]
    for name, rule, internal_name in layout:
        value = internal.get(internal_name)
        if rule == "series":
            if isinstance(value, dict):
                out[name] = _series(value, omit_empty=series_omits_empty)
            continue
        encoded = _RULES[rule](value)
        if encoded is not _OMIT:
            out[name] = encoded
    return out


_OMIT = object()  # a field Go's encoder leaves out


def _omit_empty(value: JSON) -> JSON:
    return _OMIT if _is_empty(value) else value


def _time(value: JSON) -> JSON:
    return value if value else None


def _string(value: JSON) -> JSON:
    return value if isinstance(value, str) else ""


def _pointer_to_reference(value: JSON) -> JSON:
    return _struct(value, _REFERENCE_FIELDS) if isinstance(value, dict) else _OMIT


_RULES: Mapping[str, Callable[[JSON], JSON]] = {
    "omit": _omit_empty,
    "time": _time,
    "string": _string,
    "ref": lambda value: _struct(value, _REFERENCE_FIELDS),
    "source": lambda value: _struct(value, _SOURCE_FIELDS),
    "related": _pointer_to_reference,
}


def _is_empty(value: JSON) -> bool:
    """Go's ``omitempty``: false, 0, "", nil, and empty maps and slices are left out."""
    return value is None or value is False or value == 0 or value == "" or value == {} \
        or value == []


def _struct(value: JSON, fields: tuple[str, ...]) -> dict[str, JSON]:
    """A struct whose fields are all ``omitempty``: always an object, empty fields left out."""
    source = value if isinstance(value, dict) else {}
    return {f: source[f] for f in fields if not _is_empty(source.get(f))}


def _series(value: Mapping[str, JSON], *, omit_empty: bool) -> dict[str, JSON]:
    """EventSeries: core/v1 tags ``count,omitempty``; events/v1 always writes both fields."""
    count = value.get("count")
    out: dict[str, JSON] = {}
    if not (omit_empty and _is_empty(count)):
        out["count"] = count if count is not None else 0
    observed = value.get("lastObservedTime")
    out["lastObservedTime"] = observed if observed else None
    return out
