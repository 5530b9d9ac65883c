"""ControllerRevisions as kube's StatefulSet and DaemonSet controllers keep them (pure).

kube's ``pkg/controller/history/controller_history.go`` and ``stateful_set_utils.go``
``getPatch``: a revision's ``data`` is the patch ``{"spec":{"template":{…,"$patch":"replace"}}}``
that Go's ``json.Marshal`` of a ``map[string]interface{}`` writes (keys sorted at every level,
compact, ``<``/``>``/``&`` and U+2028/U+2029 escaped); its name is ``<owner>-<hash>`` where the
hash is ``rand.SafeEncodeString(fmt.Sprint(fnv32(data [+ collisionCount as decimal])))``
(``HashControllerRevision``: ``fnv.New32``, FNV-1, not FNV-1a). Written by hand because the
bytes must be Go's, which no Python JSON library emits as is.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from kubewire.go_print import go_json as go_json_text

Obj = dict[str, Any]
ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand
FNV32_OFFSET = 0x811C9DC5
FNV32_PRIME = 0x01000193
REVISION_HASH_LABEL = "controller-revision-hash"


def safe_encode(text: str) -> str:
    """``rand.SafeEncodeString``: every byte mapped into the alphabet without vowels."""
    return "".join(ALPHANUMS[b % len(ALPHANUMS)] for b in text.encode())


def fnv32(data: bytes, start: int = FNV32_OFFSET) -> int:
    """FNV-1 32-bit (Go's ``hash/fnv.New32``): multiply, then xor."""
    value = start
    for byte in data:
        value = (value * FNV32_PRIME) & 0xFFFFFFFF
        value ^= byte
    return value


def go_json(value: Any) -> bytes:
    """Go's ``json.Marshal`` of the ``map[string]interface{}`` ``getPatch`` builds
    (``go_print.go_json``): keys sorted, compact, HTML-safe escapes, and every number a
    float64, as ``json.Unmarshal`` into ``interface{}`` made it."""
    return go_json_text(value, float64_numbers=True).encode()


def template_patch(owner: Mapping[str, Any]) -> Obj:
    """``getPatch``: the owner's pod template as a replacing strategic-merge patch."""
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    meta = template.setdefault("metadata", {})
    meta.setdefault("creationTimestamp", None)  # Go encodes the zero metav1.Time as null
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def revision_hash(data: Mapping[str, Any], collision_count: int | None) -> str:
    """``HashControllerRevision``: the hash of the data's bytes and the collision count."""
    return _hash_of_bytes(go_json(data), collision_count)


def _hash_of_bytes(data: bytes, collision_count: int | None) -> str:
    value = fnv32(data)
    if collision_count is not None:
        value = fnv32(str(collision_count).encode(), value)
    return safe_encode(str(value))


def new_revision(owner: Mapping[str, Any], data: Obj, revision: int,
                 collision_count: int | None, template_labels: Mapping[str, str]) -> Obj:
    """``NewControllerRevision``: labels of the template plus the hash, the owner's
    annotations, a controller reference, ``revision`` and ``data``."""
    meta = owner.get("metadata") or {}
    data_bytes = go_json(data)  # what kube hashes, and stores as the RawExtension
    hash_ = _hash_of_bytes(data_bytes, collision_count)
    labels = dict(template_labels)
    labels[REVISION_HASH_LABEL] = hash_
    out_meta: Obj = {
        "name": revision_name(str(meta.get("name", "")), hash_), "namespace": meta.get("namespace"),
        "labels": labels,
        "ownerReferences": [controller_ref(owner)],
    }
    if meta.get("annotations"):
        out_meta["annotations"] = dict(meta["annotations"])
    # kube stores the patch's bytes as the RawExtension and serves them as they are: keys sorted
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": out_meta,
            "data": json.loads(data_bytes), "revision": revision}


def revision_name(prefix: str, hash_: str) -> str:
    """``ControllerRevisionName``: ``<prefix>-<hash>``, the prefix cut to 223 bytes."""
    return f"{prefix[:223]}-{hash_}"


def controller_ref(owner: Mapping[str, Any]) -> Obj:
    """The controller reference a child of ``owner`` carries."""
    meta = owner.get("metadata") or {}
    return {"apiVersion": owner.get("apiVersion", "apps/v1"), "kind": owner.get("kind", ""),
            "name": meta.get("name", ""), "uid": meta.get("uid", ""), "controller": True,
            "blockOwnerDeletion": True}


def revision_number(rev: Mapping[str, Any]) -> int:
    return int(rev.get("revision") or 0)


def next_revision(revisions: Sequence[Mapping[str, Any]]) -> int:
    """``nextRevision``: one past the highest revision number (1 for none)."""
    return max((revision_number(r) for r in revisions), default=0) + 1


def sorted_revisions(revisions: Sequence[Obj]) -> list[Obj]:
    """``history.SortControllerRevisions``: by revision, then creation, then name."""
    return sorted(revisions, key=lambda r: (revision_number(r),
                                            (r.get("metadata") or {}).get("creationTimestamp")
                                            or "",
                                            (r.get("metadata") or {}).get("name", "")))


def equal_revision(rev: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
    """``history.EqualRevision``: same data (kube compares the hash label, then the bytes)."""
    return go_json(rev.get("data")) == go_json(data)


def find_equal(revisions: Sequence[Obj], data: Mapping[str, Any]) -> list[Obj]:
    """``history.FindEqualRevisions``."""
    return [r for r in revisions if equal_revision(r, data)]


def revisions_to_prune(revisions: Sequence[Obj], live: set[str], limit: int) -> list[Obj]:
    """``truncateHistory``: the oldest revisions beyond ``limit`` that no live pod, nor the
    current or update revision (names in ``live``), uses."""
    idle = [r for r in sorted_revisions(list(revisions))
            if (r.get("metadata") or {}).get("name") not in live]
    excess = len(idle) - max(0, limit)
    return idle[:excess] if excess > 0 else []


def fnv32a(data: bytes, start: int = FNV32_OFFSET) -> int:
    """FNV-1a 32-bit (Go's ``hash/fnv.New32a``): xor, then multiply."""
    value = start
    for byte in data:
        value ^= byte
        value = (value * FNV32_PRIME) & 0xFFFFFFFF
    return value


def template_hash(template: Mapping[str, Any], collision_count: int | None) -> str:
    """``controller.ComputeHash`` as the DaemonSet controller names revisions: FNV-1a of the
    template, then the collision count as 8 little-endian bytes, safe-encoded. kube hashes
    the Go struct as ``spew`` prints it; kubewire hashes its Go JSON instead (the same
    template gives the same name here, but not the name kube would give)."""
    value = fnv32a(go_json(template))
    if collision_count is not None:
        value = fnv32a((collision_count & 0xFFFFFFFF).to_bytes(8, "little"), value)
    return safe_encode(str(value))
