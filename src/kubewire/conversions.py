"""Version conversions between served versions of one stored resource: data plus one function.

A registry entry with ``stored_as`` serves the objects of another entry (kube's cohabiting
resources, e.g. core/v1 and events.k8s.io/v1 Events). ``CONVERTERS`` holds one pure function per
(from, to) pair of (apiVersion, kind); ``convert_object`` is the single mechanism every layer
(storage writes, the watch cache, historical lists) uses to move an object between versions.

A custom resource's entries carry a ``SchemaConversion`` (``Resource.conversion``, built from its
CRD in ``server/apiextensions/crd/versions.py``): kube reads and writes custom resources through a
codec that prunes and defaults with the versions' schemas around the CRD's converter, so those
entries convert through it rather than through ``convert_object`` alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Protocol

from kubewire import event_conversion as events
from kubewire import hpa_conversion as hpas
from kubewire.json_types import JSON

Converter = Callable[[Mapping[str, JSON]], dict[str, JSON]]
VersionKind = tuple[str, str]  # (apiVersion, kind)

CONVERTERS: Mapping[tuple[VersionKind, VersionKind], Converter] = MappingProxyType({
    ((events.CORE_API_VERSION, events.KIND), (events.EVENTS_API_VERSION, events.KIND)):
        events.core_event_to_events_v1,
    ((events.EVENTS_API_VERSION, events.KIND), (events.CORE_API_VERSION, events.KIND)):
        events.events_v1_to_core_event,
    **hpas.CONVERTERS,  # autoscaling/v1 and v2 HorizontalPodAutoscalers
})


class SchemaConversion(Protocol):
    """A CRD's versions, as its storage codec converts between them (apiextensions-apiserver
    ``crdConversionRESTOptionsGetter``: ``schemaCoercingDecoder``, ``unstructuredDefaulter``,
    ``schemaCoercingConverter`` around the CRD's converter).

    ``webhook`` is True when a conversion between two versions is a call to the CRD's
    conversion webhook: then ``read`` and ``write`` never change an object's version (that
    takes I/O, done by the server's handlers), they only coerce it in its own version.
    """

    @property
    def webhook(self) -> bool: ...

    def read(self, obj: dict[str, JSON], api_version: str) -> dict[str, JSON]:
        """A stored object as a read in ``api_version`` sees it (without a webhook call)."""
        ...

    def write(self, obj: dict[str, JSON], api_version: str) -> dict[str, JSON]:
        """A written object in the storage version ``api_version`` (without a webhook call)."""
        ...

    def converted(self, obj: dict[str, JSON], api_version: str) -> dict[str, JSON]:
        """An object the webhook converted to ``api_version``, pruned with its schema."""
        ...


# Kinds whose written objects are re-encoded as Go would (struct order and zero fields), as
# kube's decode into the Go struct and encode back does. The others keep the writer's shape.
GO_ENCODINGS: Mapping[VersionKind, Converter] = MappingProxyType({
    (events.EVENTS_API_VERSION, events.KIND): events.events_v1_as_go,
    (hpas.V2, hpas.KIND): hpas.v2_as_go,
})


def as_go_encodes(obj: dict[str, JSON]) -> dict[str, JSON]:
    """``obj`` as kube's encoder writes its kind (``GO_ENCODINGS``), or ``obj`` itself."""
    version_kind = version_kind_of(obj)
    encode = None if version_kind is None else GO_ENCODINGS.get(version_kind)
    return obj if encode is None else encode(obj)


def version_kind_of(obj: Mapping[str, JSON]) -> VersionKind | None:
    """The object's (apiVersion, kind), or None when either is missing."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if isinstance(api_version, str) and api_version and isinstance(kind, str) and kind:
        return api_version, kind
    return None


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _same_kind_other_version(source: VersionKind, target: VersionKind) -> bool:
    return source[1] == target[1] and _group(source[0]) == _group(target[0]) != ""


def needs_conversion(obj: Mapping[str, JSON], target: VersionKind) -> bool:
    """True when ``obj`` names another version that can be turned into ``target``: a pair in
    ``CONVERTERS``, or another version of the same group and kind (``none_conversion``)."""
    source = version_kind_of(obj)
    return source is not None and source != target and (
        (source, target) in CONVERTERS or _same_kind_other_version(source, target))


def none_conversion(obj: Mapping[str, JSON], target: VersionKind) -> dict[str, JSON]:
    """A CRD's ``None`` conversion strategy (apiextensions-apiserver's nopConverter): the
    object unchanged but for its apiVersion; the reading version's schema prunes the rest."""
    out = dict(obj)
    out["apiVersion"] = target[0]
    return out


def convert_object(obj: Mapping[str, JSON], target: VersionKind) -> dict[str, JSON]:
    """``obj`` in ``target``'s version; an object already there (or unnamed) comes back as is.

    Raises ValueError for a pair without a converter: a registry entry without its data.
    """
    source = version_kind_of(obj)
    if source is None or source == target:
        return dict(obj)
    converter = CONVERTERS.get((source, target))
    if converter is None and _same_kind_other_version(source, target):
        return none_conversion(obj, target)
    if converter is None:
        raise ValueError(f"no conversion from {source} to {target}")
    return converter(obj)
