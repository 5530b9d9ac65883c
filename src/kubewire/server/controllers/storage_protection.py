"""The pvc-protection and pv-protection controllers (kube v1.32
``pkg/controller/volume/pvcprotection``, ``pkg/controller/volume/pvprotection``).

A PersistentVolumeClaim being deleted keeps its ``kubernetes.io/pvc-protection`` finalizer
while a scheduled pod of its namespace names it in ``spec.volumes`` (``podUsesPVC``: a
``persistentVolumeClaim`` volume, or a generic ephemeral volume ``<pod>-<volume>`` of a pod
still running); a PersistentVolume being deleted keeps ``kubernetes.io/pv-protection`` while it
is Bound. Otherwise the finalizer is taken off through the update path as
``kube-controller-manager``, and the store removes the object (its finalizers emptied). Claims
are looked at again when they change and when a pod naming them (before or after its change)
changes or goes, as kube's ``podAddedDeletedUpdated`` enqueues the pod's claims: not every
claim of the namespace, which would make each pod write cost a decode of them all; volumes when
they change; all at start.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.controllers.work_queue import FeedController, WorkQueue
from kubewire.server.request.options import WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import guaranteed_update
from kubewire.server.writes.storage_admission import PV_PROTECTION, PVC_PROTECTION
from kubewire.status import StatusError
from kubewire.storage.base import Change

CONTROLLER_MANAGER = WriteOptions(field_manager="kube-controller-manager")

_decode = msgspec.json.Decoder(dict[str, Any]).decode


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _releasable(obj: dict[str, Any], finalizer: str) -> bool:
    meta = _meta(obj)
    return bool(meta.get("deletionTimestamp")) and finalizer in (meta.get("finalizers") or [])


def pod_uses_claim(pod: dict[str, Any], claim: str) -> bool:
    """``podUsesPVC``: only scheduled pods count (kubelet starts no pod with a claim being
    deleted)."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    if not spec.get("nodeName"):
        return False
    phase = (pod.get("status") or {}).get("phase") if isinstance(pod.get("status"), dict) \
        else None
    shut_down = phase in ("Succeeded", "Failed")
    pod_name = str(_meta(pod).get("name") or "")
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, dict) and source.get("claimName") == claim:
            return True
        if isinstance(volume.get("ephemeral"), dict) and not shut_down \
                and f"{pod_name}-{volume.get('name')}" == claim:
            return True
    return False


# The keys of the volume sources that name claims. Stored objects are the server's own JSON
# (msgspec, which escapes no ASCII letter), so a pod whose bytes hold neither has none: most
# pods, whose decode here was ~3% of the server's CPU under a load of pod creates.
_CLAIM_SOURCES = (b'"persistentVolumeClaim"', b'"ephemeral"')


def _may_name_claims(value: bytes) -> bool:
    return any(source in value for source in _CLAIM_SOURCES)


def claims_named(change: Change) -> set[str]:
    """The claims a changed pod names, before or after the change (``persistentVolumeClaim``
    volumes and generic ephemeral volumes' ``<pod>-<volume>``): the ones it may release."""
    names: set[str] = set()
    for value in (change.value, change.prev_value):
        if value is None or not _may_name_claims(value):
            continue
        pod = _decode(value)
        spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        volumes = spec.get("volumes")
        for volume in volumes if isinstance(volumes, list) else ():
            if not isinstance(volume, dict):
                continue
            source = volume.get("persistentVolumeClaim")
            if isinstance(source, dict) and isinstance(source.get("claimName"), str):
                names.add(source["claimName"])
            if isinstance(volume.get("ephemeral"), dict):
                names.add(f"{_meta(pod).get('name') or ''}-{volume.get('name')}")
    return names


class StorageProtection(FeedController):
    """``start()`` and ``stop()`` as the other controller-manager loops; ``claims`` and
    ``volumes`` say which of the two run."""

    def __init__(self, ctx: ServerContext, *, claims: bool, volumes: bool) -> None:
        self.ctx = ctx
        registry = ctx.registry
        pvcs = registry.lookup("", "v1", "persistentvolumeclaims")
        pvs = registry.lookup("", "v1", "persistentvolumes")
        pods = registry.lookup("", "v1", "pods")
        assert pvcs is not None and pvs is not None and pods is not None
        self.pvcs, self.pvs, self.pods = pvcs, pvs, pods
        self.claims, self.volumes = claims, volumes
        self.queue = WorkQueue("storage-protection", self._sync)

    def mark_initial(self) -> None:
        for resource in (self.pvcs, self.pvs):
            for found in self.ctx.caches.for_resource(resource).scan(resource.storage_prefix()):
                self.queue.mark(found.key)

    def changed(self, changes: Sequence[Change]) -> None:
        pod_prefix = self.pods.storage_prefix()
        for change in changes:
            key = change.key
            if (key.startswith(self.pvcs.storage_prefix()) and self.claims) \
                    or (key.startswith(self.pvs.storage_prefix()) and self.volumes):
                self.queue.mark(key)
            elif key.startswith(pod_prefix) and self.claims:
                namespace = key[len(pod_prefix):].partition("/")[0]
                for claim in claims_named(change):
                    self.queue.mark(self.pvcs.storage_key(namespace, claim))

    async def _sync(self, key: str) -> None:
        resource = self.pvcs if key.startswith(self.pvcs.storage_prefix()) else self.pvs
        found = self.ctx.caches.for_resource(resource).get(key)
        if found is None:
            return
        obj = _decode(found.value)
        name, namespace = found.name, found.namespace
        if resource is self.pvcs:
            if not _releasable(obj, PVC_PROTECTION) or self._claim_in_use(namespace, name):
                return
            await self._release(resource, namespace, name, PVC_PROTECTION)
        else:
            if not _releasable(obj, PV_PROTECTION):
                return
            if (obj.get("status") or {}).get("phase") == "Bound":
                return
            await self._release(resource, "", name, PV_PROTECTION)

    def _claim_in_use(self, namespace: str, name: str) -> bool:
        cache = self.ctx.caches.for_resource(self.pods)
        return any(pod_uses_claim(_decode(found.value), name)
                   for found in cache.scan(self.pods.storage_prefix(namespace)))

    async def _release(self, resource: Resource, namespace: str, name: str,
                       finalizer: str) -> None:
        def mutate(live: dict[str, Any]) -> dict[str, Any]:
            meta = _meta(live)
            meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != finalizer]
            return live

        try:
            await guaranteed_update(self.ctx, Route(resource, namespace, name, "", False),
                                    mutate, CONTROLLER_MANAGER)
        except StatusError:  # gone meanwhile: nothing to release
            return


__all__ = ["StorageProtection", "claims_named", "pod_uses_claim"]
