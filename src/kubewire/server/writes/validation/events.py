"""Event validation by request version: kube's ``ValidateEventCreate``/``ValidateEventUpdate``.

kube validates the internal Event (the core/v1 shape, so field paths use core names even for
events.k8s.io requests) with rules that depend on the version of the request
(kubernetes pkg/apis/core/validation/events.go):

- every request passes ``legacyValidateEvent``: without ``eventTime`` only the namespaces must
  agree; with it the reporting fields, action and reason are required and bounded (the
  reporter's path is ``reportingComponent`` for core/v1 requests, kubernetes PR #111506);
- core/v1 requests stop there (backward compatibility);
- events.k8s.io/v1 creates also need ``eventTime``, a Normal/Warning ``type``, a valid series,
  and the legacy fields unset; its updates may change only metadata and the series.

Pure: objects in, ``FieldError``s out. Object-meta rules stay in
``kubewire.server.writes.validation.meta``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from kubewire.conversions import convert_object
from kubewire.event_conversion import CORE_API_VERSION, KIND
from kubewire.go_text import GoLiteral, go_byte_len, go_quote
from kubewire.json_types import JSON
from kubewire.names import is_dns1123_subdomain, is_qualified_name
from kubewire.resources import Resource
from kubewire.schema.go_time_encoding import go_time_instant
from kubewire.server.writes.validation.meta import dict_at, text_at
from kubewire.status import FieldError, invalid, required

REPORTING_INSTANCE_MAX_BYTES = 128  # events.go ReportingInstanceLengthLimit
ACTION_MAX_BYTES = 128  # ActionLengthLimit
REASON_MAX_BYTES = 128  # ReasonLengthLimit
NOTE_MAX_BYTES = 1024  # NoteLengthLimit
IMMUTABLE = "field is immutable"  # apimachinery validation FieldImmutableErrorMsg

# Fields an events.k8s.io update may not change, in kube's order, as (path, Go rendering).
_IMMUTABLE_FIELDS = (("involvedObject", "ref"), ("reason", "str"), ("message", "str"),
                     ("source", "source"), ("firstTimestamp", "time"),
                     ("lastTimestamp", "time"), ("count", "int"), ("reason", "str"),
                     ("type", "str"), ("eventTime", "time"), ("action", "str"),
                     ("related", "ptr_ref"), ("reportingController", "str"),
                     ("reportingInstance", "str"))
_REFERENCE_GO_FIELDS = (("Kind", "kind"), ("Namespace", "namespace"), ("Name", "name"),
                        ("UID", "uid"), ("APIVersion", "apiVersion"),
                        ("ResourceVersion", "resourceVersion"), ("FieldPath", "fieldPath"))
_SOURCE_GO_FIELDS = (("Component", "component"), ("Host", "host"))
# Internal names where the core/v1 JSON spells them differently.
_INTERNAL_NAMES = {"reportingController": "reportingComponent"}
_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)  # time.Time{}: IsZero


def validate_event(resource: Resource, obj: Mapping[str, JSON],
                   old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """Errors for creating (``old`` None) or updating an Event through ``resource``'s version."""
    event = _internal(obj)
    is_legacy_request = resource.api_version == CORE_API_VERSION
    errors = _legacy_errors(event, is_legacy_request)
    if is_legacy_request:
        return errors
    if old is None:
        return errors + _strict_create_errors(event)
    return errors + _strict_update_errors(event, _internal(old))


def _internal(obj: Mapping[str, JSON]) -> dict[str, JSON]:
    """The object as kube's internal Event holds it (the core/v1 shape)."""
    return convert_object(obj, (CORE_API_VERSION, KIND))


def _is_zero_time(value: JSON) -> bool:
    return _instant(value) is None


def _instant(value: JSON) -> datetime | None:
    """A metav1.Time/MicroTime value as Go's ``time.Parse`` reads RFC3339 (in UTC); None for
    unset, Go's zero time, or text Go does not read (decoding rejected it before validation)."""
    if not isinstance(value, str) or not value:
        return None
    moment = go_time_instant(value)
    return None if moment == _GO_ZERO_TIME else moment


def _legacy_errors(event: Mapping[str, JSON], is_legacy_request: bool) -> list[FieldError]:
    """``legacyValidateEvent``: every version's requests pass these."""
    errors: list[FieldError] = []
    namespace = text_at(dict_at(event, "metadata"), "namespace")
    involved_ns = text_at(dict_at(event, "involvedObject"), "namespace")
    mismatch = invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    if _is_zero_time(event.get("eventTime")):
        if (not involved_ns and namespace not in ("", "default")) \
                or (involved_ns and namespace != involved_ns):
            errors.append(mismatch)
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            errors.append(mismatch)
        errors.extend(_reporting_errors(event, is_legacy_request))
    errors.extend(invalid("namespace", namespace, m) for m in is_dns1123_subdomain(namespace))
    return errors


def _reporting_errors(event: Mapping[str, JSON], is_legacy_request: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    reporter_path = "reportingComponent" if is_legacy_request else "reportingController"
    reporter = text_at(event, "reportingComponent")
    if not reporter:
        errors.append(required(reporter_path))
    errors.extend(invalid(reporter_path, reporter, m) for m in is_qualified_name(reporter))
    for path, limit in (("reportingInstance", REPORTING_INSTANCE_MAX_BYTES),
                        ("action", ACTION_MAX_BYTES), ("reason", REASON_MAX_BYTES)):
        text = text_at(event, path)
        if not text:
            errors.append(required(path))
        if go_byte_len(text) > limit:
            errors.append(invalid(path, "", f"can have at most {limit} characters"))
    if go_byte_len(text_at(event, "message")) > NOTE_MAX_BYTES:
        errors.append(invalid("message", "", f"can have at most {NOTE_MAX_BYTES} characters"))
    return errors


def _series_errors(event: Mapping[str, JSON]) -> list[FieldError]:
    """``validateV1EventSeries``."""
    series = event.get("series")
    if not isinstance(series, dict):
        return []
    errors: list[FieldError] = []
    count = series.get("count")
    if not isinstance(count, int) or count < 2:
        errors.append(invalid("series.count", "", "should be at least 2"))
    if _is_zero_time(series.get("lastObservedTime")):
        errors.append(required("series.lastObservedTime"))
    return errors


def _strict_create_errors(event: Mapping[str, JSON]) -> list[FieldError]:
    errors = _series_errors(event)
    if _is_zero_time(event.get("eventTime")):
        errors.append(required("eventTime"))
    event_type = text_at(event, "type")
    if event_type not in ("Normal", "Warning"):
        errors.append(invalid("type", "", f"has invalid value: {event_type}"))
    for path in ("firstTimestamp", "lastTimestamp"):
        if not _is_zero_time(event.get(path)):
            errors.append(invalid(path, "", "needs to be unset"))
    if event.get("count"):
        errors.append(invalid("count", "", "needs to be unset"))
    source = dict_at(event, "source")
    if text_at(source, "component") or text_at(source, "host"):
        errors.append(invalid("source", "", "needs to be unset"))
    return errors


def _strict_update_errors(new: Mapping[str, JSON], old: Mapping[str, JSON]) -> list[FieldError]:
    errors: list[FieldError] = []
    if _go_series(new.get("series")) != _go_series(old.get("series")):
        errors.extend(_series_errors(new))
    for path, rendering in _IMMUTABLE_FIELDS:
        name = _INTERNAL_NAMES.get(path, path)
        before, after = _go_value(old.get(name), rendering), _go_value(new.get(name), rendering)
        if after != before:  # Semantic.DeepEqual: times compare as instants
            errors.append(invalid(path, GoLiteral(after) if rendering != "str" else after,
                                  IMMUTABLE))
    return errors


def _go_series(value: JSON) -> tuple[int, datetime | None] | None:
    if not isinstance(value, dict):
        return None
    count = value.get("count")
    return (count if isinstance(count, int) else 0), _instant(value.get("lastObservedTime"))


def _go_value(value: JSON, rendering: str) -> JSON:
    """The field as Go's field error prints it (``%q``, ``%v``, a Stringer, or ``%#v``)."""
    if rendering == "str":
        return value if isinstance(value, str) else ""
    if rendering == "int":
        return str(value) if isinstance(value, int) else "0"
    if rendering == "time":
        return _go_time(_instant(value))
    if rendering == "ptr_ref" and not isinstance(value, dict):
        return "null"
    fields = _SOURCE_GO_FIELDS if rendering == "source" else _REFERENCE_GO_FIELDS
    type_name = "core.EventSource" if rendering == "source" else "core.ObjectReference"
    source = value if isinstance(value, dict) else {}
    inner = ", ".join(f"{go}:{go_quote(text_at(source, js))}" for go, js in fields)
    return f"{type_name}{{{inner}}}"


def _go_time(moment: datetime | None) -> str:
    """Go's ``time.Time.String()`` of a time the API server decoded (in its UTC zone)."""
    if moment is None:
        return "0001-01-01 00:00:00 +0000 UTC"
    moment = moment.astimezone(UTC)
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + " +0000 UTC"
