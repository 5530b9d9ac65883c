"""The garbage collector's decisions, pure (kube ``pkg/controller/garbagecollector``).

Identities and owner references as kube compares them (``objectReference``: apiVersion, kind,
namespace, name, uid), the classification of a dependent's owners (``classifyReferences``:
solid, dangling, waiting for its dependents' deletion), the propagation policy the GC deletes a
dependent with, the patch that drops owner references, and the ``OwnerRefInvalidNamespace``
text. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


@dataclass(frozen=True, slots=True)
class Identity:
    """kube's ``objectReference``: an owner reference's coordinates plus a namespace."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:  # objectReference.String()
        return (f"[{self.api_version}/{self.kind}, namespace: {self.namespace}, "
                f"name: {self.name}, uid: {self.uid}]")


def identity_of(obj: Mapping[str, Any]) -> Identity:
    meta = obj.get("metadata") or {}
    return Identity(str(obj.get("apiVersion", "")), str(obj.get("kind", "")),
                    str(meta.get("namespace") or ""), str(meta.get("name", "")),
                    str(meta.get("uid", "")))


def owner_refs(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [ref for ref in refs if isinstance(ref, dict) and ref.get("uid")]


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def ref_matches(ref: Mapping[str, Any], identity: Identity) -> bool:
    """``ownerReferenceMatchesCoordinates``: uid, name, kind and group (any version)."""
    return (ref.get("uid") == identity.uid and ref.get("name") == identity.name
            and ref.get("kind") == identity.kind
            and group_of(str(ref.get("apiVersion", ""))) == group_of(identity.api_version))


def owner_identity(ref: Mapping[str, Any], namespace: str) -> Identity:
    return Identity(str(ref.get("apiVersion", "")), str(ref.get("kind", "")), namespace,
                    str(ref.get("name", "")), str(ref.get("uid", "")))


def being_deleted(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def has_finalizer(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or ())


def deleting_dependents(obj: Mapping[str, Any]) -> bool:
    """Being deleted in the foreground: its dependents go first."""
    return being_deleted(obj) and has_finalizer(obj, FOREGROUND)


def orphaning(obj: Mapping[str, Any]) -> bool:
    """Being deleted with the orphan finalizer: its dependents lose their references first."""
    return being_deleted(obj) and has_finalizer(obj, ORPHAN)


@dataclass(frozen=True, slots=True)
class Classified:
    """A dependent's owner references, as ``classifyReferences`` sorts them."""

    solid: tuple[dict[str, Any], ...]
    dangling: tuple[dict[str, Any], ...]
    waiting: tuple[dict[str, Any], ...]  # owners deleting their dependents in the foreground


def classify(refs: Sequence[dict[str, Any]],
             owners: Mapping[str, Mapping[str, Any] | None]) -> Classified:
    """``owners`` maps each reference's uid to the live owner with that uid (None: absent, or
    a different uid under that name)."""
    solid, dangling, waiting = [], [], []
    for ref in refs:
        owner = owners.get(str(ref.get("uid")))
        if owner is None:
            dangling.append(ref)
        elif deleting_dependents(owner):
            waiting.append(ref)
        else:
            solid.append(ref)
    return Classified(tuple(solid), tuple(dangling), tuple(waiting))


def deletion_policy(obj: Mapping[str, Any], has_dependents: bool,
                    classified: Classified) -> str:
    """How the GC deletes a dependent with no solid owner (``attemptToDeleteItem``): in the
    foreground when an owner waits for it and it has dependents of its own; else as its own
    finalizers ask (orphan, foreground), else in the background."""
    if classified.waiting and has_dependents:
        return "Foreground"
    if has_finalizer(obj, ORPHAN):
        return "Orphan"
    if has_finalizer(obj, FOREGROUND):
        return "Foreground"
    return "Background"


def blocks(ref: Mapping[str, Any]) -> bool:
    return ref.get("blockOwnerDeletion") is True


def refs_to(obj: Mapping[str, Any], uid: str) -> list[dict[str, Any]]:
    return [ref for ref in owner_refs(obj) if ref.get("uid") == uid]


def strategic_delete_refs(dependent_uid: str, uids: Iterable[str]) -> dict[str, Any]:
    """``GenerateDeleteOwnerRefStrategicMergeBytes``: drop the references by uid, with the
    dependent's uid as a precondition."""
    return {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": uid} for uid in uids],
                         "uid": dependent_uid}}


def unblock_refs(refs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The references with ``blockOwnerDeletion`` turned off (all of them, as kube's
    ``unblockOwnerReferences`` does, to break a possible foreground-deletion cycle)."""
    return [dict(ref, blockOwnerDeletion=False) for ref in refs if blocks(ref)]


def strategic_unblock(dependent_uid: str, refs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"ownerReferences": unblock_refs(refs), "uid": dependent_uid}}


def json_patch_unblock(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = obj.get("metadata") or {}
    refs = [dict(ref, blockOwnerDeletion=False) if blocks(ref) else ref
            for ref in meta.get("ownerReferences") or []]
    return [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
            {"op": "test", "path": "/metadata/resourceVersion",
             "value": meta.get("resourceVersion")},
            {"op": "replace", "path": "/metadata/ownerReferences", "value": refs}]


def json_patch_delete_refs(obj: Mapping[str, Any], uids: Iterable[str]) -> list[dict[str, Any]]:
    """For kinds without strategic merge (custom resources): a JSON patch that tests the uid
    and resourceVersion, then replaces the references (kube's ``jsonMergePatch`` fallback
    with the same preconditions)."""
    drop = set(uids)
    meta = obj.get("metadata") or {}
    kept = [ref for ref in meta.get("ownerReferences") or [] if ref.get("uid") not in drop]
    return [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
            {"op": "test", "path": "/metadata/resourceVersion",
             "value": meta.get("resourceVersion")},
            {"op": "replace", "path": "/metadata/ownerReferences", "value": kept}]


def without_finalizer(obj: Mapping[str, Any], finalizer: str) -> list[dict[str, Any]]:
    """A JSON patch removing ``finalizer``, conditional on the resourceVersion (kube's
    ``removeFinalizer`` retries on conflict)."""
    meta = obj.get("metadata") or {}
    kept = [f for f in meta.get("finalizers") or [] if f != finalizer]
    return [{"op": "test", "path": "/metadata/resourceVersion",
             "value": meta.get("resourceVersion")},
            {"op": "replace", "path": "/metadata/finalizers", "value": kept}]


def invalid_namespace_message(ref: Mapping[str, Any], dependent_namespace: str) -> str:
    """The ``OwnerRefInvalidNamespace`` event's message (``reportInvalidNamespaceOwnerRef``)."""
    return (f"ownerRef {owner_identity(ref, dependent_namespace)} does not exist in namespace "
            f'"{dependent_namespace}"')
