"""Which owner a child's change wakes: one answer for the ReplicaSet (pods), Deployment
(ReplicaSets), StatefulSet and DaemonSet (pods) controllers.

kube's controllers each carry a copy of this (``resolveControllerRef`` and
``getPodReplicaSets``/``getReplicaSetsForDeployment``/``getPodStatefulSets``/
``getPodDaemonSets``): a child with a controller reference wakes that owner when the reference
is of the controller's kind and names an owner in the cache with the same UID; an orphan (no
controller reference) wakes every owner of its namespace whose valid, non-empty selector
matches its labels, so that owner can adopt it; a child another kind controls wakes none.
Reads only the owners' informer cache (no I/O).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubewire.client import WorkQueue
from kubewire.client.informers.informer import NAMESPACE_INDEX
from kubewire.cluster.controllers.adoption import selects
from kubewire.cluster.controllers.replica_rules import controller_ref, meta

Obj = dict[str, Any]


class Owners(Protocol):
    """The owners' lister (an ``Informer`` of dicts)."""

    def get(self, name: str, namespace: str | None = None) -> Obj | None: ...

    def by_index(self, name: str, value: str) -> list[Obj]: ...


def key_of(obj: Mapping[str, Any]) -> str:
    """The work-queue key ``namespace/name``."""
    return f"{meta(obj).get('namespace', '')}/{meta(obj).get('name', '')}"


Selects = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]
"""Whether an owner's selector picks a child (``adoption.selects``: a LabelSelector)."""


@dataclass(frozen=True, slots=True)
class OwnerKeys:
    """The work-queue keys of ``kind`` owners (cached in ``owners``) a child wakes;
    ``selects`` reads an owner's selector (a ReplicationController's is a label map)."""

    owners: Owners
    kind: str
    selects: Selects = selects

    def controller(self, child: Mapping[str, Any]) -> str | None:
        """``resolveControllerRef``: the key of the child's controller, if that is a ``kind``
        the cache holds with the reference's UID."""
        ref = controller_ref(child)
        if ref is None or ref.get("kind") != self.kind:
            return None
        owner = self.owners.get(str(ref.get("name", "")), str(meta(child).get("namespace", "")))
        if owner is None or meta(owner).get("uid") != ref.get("uid"):
            return None
        return key_of(owner)

    def selecting(self, child: Mapping[str, Any]) -> list[str]:
        """The keys of the owners in the child's namespace that select it (candidates to adopt
        an orphan, or to notice one they released)."""
        namespace = str(meta(child).get("namespace", ""))
        return [key_of(owner) for owner in self.owners.by_index(NAMESPACE_INDEX, namespace)
                if self.selects(owner, child)]

    def wake(self, child: Mapping[str, Any]) -> list[str]:
        """The owners a new, changed or deleted child wakes: its controller if that is a
        cached ``kind``; if it has no controller, every owner that selects it."""
        if controller_ref(child) is not None:
            key = self.controller(child)
            return [key] if key is not None else []
        return self.selecting(child)


async def add_all(queue: WorkQueue[str], keys: Iterable[str]) -> None:
    """Queue every key (the owners a child woke)."""
    for key in keys:
        await queue.add(key)
