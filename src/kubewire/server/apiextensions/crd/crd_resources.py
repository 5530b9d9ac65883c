"""The registry entries a CustomResourceDefinition serves, and the entry of the CRD kind itself.

One ``kubewire.resources.Resource`` per served version of a CRD whose names are accepted, named
by ``status.acceptedNames`` (kube's storage uses them, crds.md §3.1), with the custom-resource
strategy's facts (``apiextensions-apiserver:pkg/registry/customresource/strategy.go`` and
``etcd.go``): no create on update, no unconditional update, generation bumped by any change
outside metadata, status/scale per version, selectable fields as field labels (label = the
``jsonPath`` without its leading dot, §3.5), deletes answered with a Status. Every version shares
the storage version's objects: the entry of the storage version is the stored one, the others
name it in ``stored_as``. All of them share one ``CRDConversion`` (``versions.py``): how objects
are read and written in each version.

Objects read from storage are defaulted with the storage version's schema (the
``CRDConversion``'s read; kube's ``schemaCoercingDecoder``, crds.md §4.3 (b)), so a default
added to the CRD later shows on reads of old objects, whose stored bytes stay as they are until
their next write.

The deprecation warning text is ``customresource_handler.go`` ``defaultDeprecationWarning``
(§6.4), with apimachinery's ``CompareKubeAwareVersionStrings`` (``pkg/version/helpers.go``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.apiextensions.crd.crd_internal import (
    as_dict,
    as_list,
    as_str,
    storage_version,
    strings,
)
from kubewire.server.apiextensions.crd.versions import CRDConversion

CRD_GROUP = "apiextensions.k8s.io"

CRD_RESOURCE = Resource(
    CRD_GROUP, "v1", "CustomResourceDefinition", "customresourcedefinitions",
    "customresourcedefinition", namespaced=False, short_names=("crd", "crds"),
    categories=("api-extensions",), subresources=("status",), field_label_style="default",
    generation="spec", allow_unconditional_update=False)
"""``apiextensions.k8s.io/v1`` CustomResourceDefinitions (customresourcedefinition/etcd.go,
strategy.go): cluster-scoped, generation on spec changes, only ``metadata.name`` selectable
through the default field-label converter. Its first DELETE answers the object (§2.5)."""

_KUBE_VERSION = re.compile(r"v([0-9]+)(?:(alpha|beta)([0-9]+))?")  # Go's \d is ASCII
_VERSION_TYPES = {"alpha": 0, "beta": 1, None: 2}


def _parse_kube_version(version: str) -> tuple[int, int, int] | None:
    """(type, major, minor) of a kube-like version (``v1``, ``v2beta1``), else None."""
    found = _KUBE_VERSION.fullmatch(version)
    if found is None:
        return None
    major = int(found.group(1))
    minor = int(found.group(3)) if found.group(2) else 0
    return _VERSION_TYPES[found.group(2)], major, minor


def compare_kube_aware_versions(a: str, b: str) -> int:
    """``CompareKubeAwareVersionStrings``: >0 when ``a`` sorts as the newer (GA > beta > alpha,
    then major, then minor; kube-like names above others; others in reverse string order)."""
    if a == b:
        return 0
    pa, pb = _parse_kube_version(a), _parse_kube_version(b)
    if pa is None and pb is None:
        return (b > a) - (b < a)
    if pa is None:
        return -1
    if pb is None:
        return 1
    for x, y in zip(pa, pb, strict=True):
        if x != y:
            return x - y
    return 0


def default_deprecation_warning(version: str, crd: Mapping[str, JSON]) -> str:
    """``defaultDeprecationWarning``: ``<group>/<v> <Kind> is deprecated`` and, when a served,
    non-deprecated version sorts newer, ``; use <group>/<newest such> <Kind>`` (the kind is
    ``spec.names.kind``)."""
    spec = as_dict(crd.get("spec"))
    group, kind = as_str(spec.get("group")), as_str(as_dict(spec.get("names")).get("kind"))
    message = f"{group}/{version} {kind} is deprecated"
    newer = [as_str(v.get("name")) for v in map(as_dict, as_list(spec.get("versions")))
             if v.get("served") is True and v.get("deprecated") is not True
             and compare_kube_aware_versions(version, as_str(v.get("name"))) < 0]
    if not newer:
        return message
    best = newer[0]
    for name in newer[1:]:
        if compare_kube_aware_versions(name, best) > 0:
            best = name
    return f"{message}; use {group}/{best} {kind}"


def deprecation_warning(version: Mapping[str, JSON], crd: Mapping[str, JSON]) -> str | None:
    """The warning for requests to ``version`` of ``crd``: its own text, the default text when
    it has none, None when it is not deprecated."""
    if version.get("deprecated") is not True:
        return None
    own = version.get("deprecationWarning")
    return own if isinstance(own, str) else default_deprecation_warning(
        as_str(version.get("name")), crd)


def selectable_field_labels(version: Mapping[str, JSON]) -> Mapping[str, str]:
    """``Resource.field_labels`` for one version's ``selectableFields`` (label -> source)."""
    labels: dict[str, str] = {}
    for entry in as_list(version.get("selectableFields")):
        path = as_str(as_dict(entry).get("jsonPath"))
        label = path[1:] if path.startswith(".") else path
        if label:
            labels[label] = label
    return MappingProxyType(labels)


def _subresources(version: Mapping[str, JSON]) -> tuple[str, ...]:
    declared = as_dict(version.get("subresources"))
    return tuple(name for name in ("status", "scale") if isinstance(declared.get(name), dict))


def resources_for(crd: Mapping[str, JSON]) -> tuple[Resource, ...]:
    """One entry per served version of ``crd``, named by ``status.acceptedNames``; () while no
    plural or kind is accepted. The storage version's entry is the stored one (``stored_as``
    ""), every other entry has ``stored_as`` = its id; if the storage version is not served,
    every entry has ``stored_as`` set (the objects are stored in a version nobody serves)."""
    spec = as_dict(crd.get("spec"))
    accepted = as_dict(as_dict(crd.get("status")).get("acceptedNames"))
    group = as_str(spec.get("group"))
    plural, kind = as_str(accepted.get("plural")), as_str(accepted.get("kind"))
    if not (group and plural and kind):
        return ()
    storage = storage_version(crd)
    stored_id = f"{group}/{plural}"
    frozen_crd = MappingProxyType(dict(crd))
    conversion = CRDConversion(crd)
    entries: list[Resource] = []
    for version in map(as_dict, as_list(spec.get("versions"))):
        name = as_str(version.get("name"))
        if version.get("served") is not True or not name:
            continue
        entries.append(Resource(
            group, name, kind, plural,
            as_str(accepted.get("singular")) or kind.lower(),
            namespaced=spec.get("scope") == "Namespaced",
            short_names=tuple(strings(accepted.get("shortNames"))),
            categories=tuple(strings(accepted.get("categories"))),
            subresources=_subresources(version),
            field_labels=selectable_field_labels(version),
            field_label_style="crd",
            generation="non_metadata",
            is_custom=True,
            allow_unconditional_update=False,
            stored_as="" if name == storage else stored_id,
            crd=frozen_crd,
            deprecation_warning=deprecation_warning(version, crd),
            conversion=conversion))
    return tuple(entries)

