"""Kind-specific validation rules, keyed by ``Resource.id`` (every served version of a kind).

Object-meta and schema-type checks apply to every kind (``kubewire.validation``,
``kubewire.schema``); the rules here are a kind's own strategy ``Validate``/``ValidateUpdate``
in kube. A validator gets the request's resource (its version may change the rules), the
object as the request wrote it and, for updates, the current object in the same version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from kubewire.event_validation import validate_event
from kubewire.resources import Resource
from kubewire.status import FieldError

KindValidator = Callable[[Resource, Mapping[str, Any], Mapping[str, Any] | None],
                         list[FieldError]]

KIND_VALIDATORS: Mapping[str, KindValidator] = MappingProxyType({
    "events.k8s.io/events": validate_event,  # core/v1 and events.k8s.io/v1 Events
})


def validate_kind(resource: Resource, obj: Mapping[str, Any],
                  old: Mapping[str, Any] | None = None) -> list[FieldError]:
    """The kind's own errors for a create (``old`` None) or an update; [] for other kinds."""
    validator = KIND_VALIDATORS.get(resource.id)
    return [] if validator is None else validator(resource, obj, old)
