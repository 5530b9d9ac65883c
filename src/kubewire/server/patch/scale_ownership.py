"""Who owns a parent's replicas, seen from its ``/scale`` subresource and back.

A write of a Scale runs the field manager on the Scale (the Scale's own managedFields), so the
parent's ``managedFields`` are converted for it first and the Scale's converted back after.
After apimachinery ``pkg/util/managedfields/scalehandler.go`` (``ScaleHandler``), wired per kind
by ``pkg/registry/apps/{deployment,replicaset,statefulset}/storage`` and
``pkg/registry/core/replicationcontroller/storage`` (``replicasPathIn<Kind>``: the parent's
replicas path per apiVersion) and, for a custom resource, apiextensions-apiserver's
``customresource_handler.go`` (``replicasPathInCustomResource``: each CRD version's
``specReplicasPath``, None for a version without a scale subresource).

- ``to_subresource``: only the entries owning the parent's replicas path for their apiVersion,
  each owning just the Scale's ``.spec.replicas`` at ``autoscaling/v1`` (their time kept);
- ``to_parent``: the parent's entries as they were, except that an entry owning the replicas
  path loses it (is dropped when that was all it owned) unless the same manager identity still
  has an entry on the Scale, which keeps the parent's entry whole; each remaining Scale entry
  owning ``.spec.replicas`` becomes an entry owning the parent's replicas path at the request's
  apiVersion, with the time the parent had under that identity (none for a new one, as kube
  writes it); parent entries of an apiVersion the mapping does not know are dropped.

Identities are kube's (``BuildManagerIdentifier``): an updater's includes its apiVersion, so an
Update entry that went through the Scale view comes back as ``autoscaling/v1``'s identity, a new
one, with no time. Pure: entries in, entries out.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.server.patch.field_paths import Path
from kubewire.server.patch.managed_fields import (
    Managed,
    ManagedSet,
    decode_managed,
    encode_managed,
)

SCALE_REPLICAS: Path = ("f:spec", "f:replicas")
SCALE_GROUP_VERSION = "autoscaling/v1"

ReplicasPaths = Mapping[str, Path | None]
"""The parent's replicas path by apiVersion (None: that version has no scale subresource)."""

__all__ = ["SCALE_REPLICAS", "ReplicasPaths", "ScaleOwnershipError", "builtin_replicas_paths",
           "custom_replicas_paths", "field_path", "to_parent", "to_subresource"]

_SPEC_REPLICAS: Path = ("f:spec", "f:replicas")
# replicasPathIn<Kind>: every version kube knows of the kind, all at .spec.replicas
_BUILTIN_VERSIONS: dict[str, tuple[str, ...]] = {
    "apps/deployments": ("apps/v1beta1", "apps/v1beta2", "apps/v1"),
    "apps/replicasets": ("apps/v1beta2", "apps/v1"),
    "apps/statefulsets": ("apps/v1beta1", "apps/v1beta2", "apps/v1"),
    "core/replicationcontrollers": ("v1",),
}


class ScaleOwnershipError(ValueError):
    """managedFields that do not decode (kube's ``DecodeManagedFields`` error)."""


def builtin_replicas_paths(group: str, plural: str) -> ReplicasPaths:
    """A built-in kind's mapping (empty for a kind without a scale subresource)."""
    versions = _BUILTIN_VERSIONS.get(f"{group or 'core'}/{plural}", ())
    return {version: _SPEC_REPLICAS for version in versions}


def field_path(json_path: str) -> Path:
    """A CRD's ``specReplicasPath`` (``.spec.replicas``) as a field path."""
    return tuple("f:" + part for part in json_path.removeprefix(".").split("."))


def custom_replicas_paths(group: str, versions: Mapping[str, str | None]) -> ReplicasPaths:
    """A custom resource's mapping: each CRD version's ``specReplicasPath`` (None: the version
    has no scale subresource)."""
    return {f"{group}/{name}": None if path is None else field_path(path)
            for name, path in versions.items()}


def _decoded(entries: JSON) -> Managed:
    if entries is None:
        return {}
    managed = decode_managed(entries)
    if managed is None:
        raise ScaleOwnershipError("the managedFields could not be decoded")
    return managed


def to_subresource(parent_entries: JSON, mappings: ReplicasPaths) -> list[dict[str, JSON]]:
    """``ScaleHandler.ToSubresource``: the Scale's managedFields."""
    out: Managed = {}
    for key, owned in _decoded(parent_entries).items():
        path = mappings.get(owned.api_version)
        if path is not None and path in owned.fields:
            out[key] = ManagedSet(frozenset({SCALE_REPLICAS}), SCALE_GROUP_VERSION, owned.time)
    return encode_managed(out)


def to_parent(parent_entries: JSON, scale_entries: JSON, group_version: str,
              mappings: ReplicasPaths) -> list[dict[str, JSON]]:
    """``ScaleHandler.ToParent``: the parent's managedFields after a write of its Scale at
    ``group_version`` (the request's)."""
    parent = _decoded(parent_entries)
    scale = dict(_decoded(scale_entries))
    out: Managed = {}
    for key, owned in parent.items():
        if owned.api_version not in mappings:
            continue
        path = mappings[owned.api_version]
        if path is None or path not in owned.fields:
            out[key] = owned
        elif key not in scale:
            rest = owned.fields - {path}
            if rest:
                out[key] = ManagedSet(rest, owned.api_version, owned.time)
        else:
            out[key] = owned
            del scale[key]
    target = mappings.get(group_version)
    for key, owned in scale.items():
        if target is None or SCALE_REPLICAS not in owned.fields:
            continue  # (no target: a version without /scale, which serves no Scale to write)
        previous = parent.get(key)
        out[key] = ManagedSet(frozenset({target}), group_version,
                              previous.time if previous else None)
    return encode_managed(out)
