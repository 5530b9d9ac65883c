"""A simulated external provisioner (``local-path-provisioner``) and the cluster's default
StorageClass, as kind ships them.

kind installs rancher's local-path-provisioner and a default StorageClass ``standard``
(``WaitForFirstConsumer``, reclaim ``Delete``). kubewire runs no containers, so this component
stands in for that Deployment. At start it creates the StorageClass ``standard`` (default,
provisioner ``kubewire.io/local-path``, ``WaitForFirstConsumer``, ``Delete``) unless a class of
that name or another default class exists. Then, as ``sig-storage-lib-external-provisioner``
does, each unbound claim the binder handed to ``kubewire.io/local-path``
(``volume.kubernetes.io/storage-provisioner``) gets a PersistentVolume ``pvc-<claim uid>``
pre-bound to it (``claimRef`` with the uid): once the scheduler chose a node for a
``WaitForFirstConsumer`` class (``volume.kubernetes.io/selected-node``; the volume's node
affinity is that node's hostname, as local-path's), at once for ``Immediate``; with the events
``Provisioning`` and ``ProvisioningSucceeded`` on the claim. A Released volume it provisioned
whose policy is ``Delete`` is deleted. The provisioner name is kubewire's own (nothing here is
rancher's code); the class name is kind's, so that manifests written for kind work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from kubewire.client import WorkQueue
from kubewire.client.errors import AlreadyExists, Conflict, NotFound
from kubewire.cluster.controllers.replica_rules import meta
from kubewire.cluster.controllers.volume_rules import (
    BETA_STORAGE_PROVISIONER,
    PROVISIONED_BY,
    SELECTED_NODE,
    STORAGE_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    claim_class,
    claim_ref,
    notes_of,
)
from kubewire.cluster.runtime import ClusterContext, run_workers

log = logging.getLogger(__name__)
Obj = dict[str, Any]
NAME = "local-path-provisioner"
PROVISIONER = "kubewire.io/local-path"
DEFAULT_CLASS = "standard"
IS_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
BASE_PATH = "/var/local-path-provisioner"
HOSTNAME = "kubernetes.io/hostname"


def default_storage_class() -> Obj:
    """kind's ``standard`` class, with kubewire's provisioner."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": DEFAULT_CLASS, "annotations": {IS_DEFAULT_CLASS: "true"}},
            "provisioner": PROVISIONER, "reclaimPolicy": "Delete",
            "volumeBindingMode": WAIT_FOR_FIRST_CONSUMER}


def volume_name(claim: Mapping[str, Any]) -> str:
    """The lib's ``getProvisionedVolumeNameForClaim``: ``pvc-<uid>``."""
    return f"pvc-{meta(claim).get('uid', '')}"


def wants_volume(claim: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]],
                 provisioner: str = PROVISIONER) -> bool:
    """``shouldProvision``: handed to this provisioner, not bound, not being deleted, and for
    a ``WaitForFirstConsumer`` class, a node chosen."""
    notes = notes_of(claim)
    if (claim.get("spec") or {}).get("volumeName") or meta(claim).get("deletionTimestamp"):
        return False
    if notes.get(STORAGE_PROVISIONER, notes.get(BETA_STORAGE_PROVISIONER)) != provisioner:
        return False
    found = classes.get(claim_class(claim))
    if found is None or found.get("provisioner") != provisioner:
        return False
    return found.get("volumeBindingMode") != WAIT_FOR_FIRST_CONSUMER or SELECTED_NODE in notes


def provisioned_volume(claim: Mapping[str, Any], storage_class: Mapping[str, Any],
                       provisioner: str = PROVISIONER) -> Obj:
    """The PersistentVolume for ``claim``: its request, modes and class, pre-bound to it."""
    spec = claim.get("spec") or {}
    name = volume_name(claim)
    node = notes_of(claim).get(SELECTED_NODE)
    path = f"{BASE_PATH}/{name}_{meta(claim).get('namespace', '')}_{meta(claim).get('name', '')}"
    volume: Obj = {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {PROVISIONED_BY: provisioner}},
        "spec": {"capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {})
                              .get("storage", "0")},
                 "accessModes": list(spec.get("accessModes") or []),
                 "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
                 "storageClassName": claim_class(claim),
                 "volumeMode": spec.get("volumeMode") or "Filesystem",
                 "claimRef": claim_ref(claim),
                 "hostPath": {"path": path, "type": "DirectoryOrCreate"}}}
    if storage_class.get("mountOptions"):
        volume["spec"]["mountOptions"] = list(storage_class["mountOptions"])
    if node:
        volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}
    return volume


def deletable(volume: Mapping[str, Any], provisioner: str = PROVISIONER) -> bool:
    """``shouldDelete``: Released, ``Delete``, provisioned here, not being deleted."""
    return ((volume.get("status") or {}).get("phase") == "Released"
            and (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") == "Delete"
            and notes_of(volume).get(PROVISIONED_BY) == provisioner
            and not meta(volume).get("deletionTimestamp"))


class LocalPathProvisioner:
    """Provisions and deletes volumes of ``kubewire.io/local-path`` classes."""

    name = NAME

    def __init__(self, ctx: ClusterContext, *, provisioner: str = PROVISIONER,
                 default_class: bool = True) -> None:
        self.ctx = ctx
        self.provisioner = provisioner
        self.default_class = default_class
        self.recorder = ctx.recorder(f"{provisioner}_{NAME}")
        self.pv_api = ctx.api("v1", "PersistentVolume")
        self.class_api = ctx.api("storage.k8s.io/v1", "StorageClass")
        self.claim_queue: WorkQueue[str] = WorkQueue()
        self.volume_queue: WorkQueue[str] = WorkQueue()
        self.claims = ctx.informer("v1", "PersistentVolumeClaim")
        self.volumes = ctx.informer("v1", "PersistentVolume")
        self.classes = ctx.informer("storage.k8s.io/v1", "StorageClass")
        self.claims.add_handlers(on_add=self._claim, on_update=self._claim_updated)
        self.volumes.add_handlers(on_add=self._volume, on_update=self._volume_updated)
        self.classes.add_handlers(on_add=self._class_changed, on_update=self._class_updated)

    async def _claim(self, claim: Obj) -> None:
        await self.claim_queue.add(f"{meta(claim).get('namespace', '')}/"
                                   f"{meta(claim).get('name', '')}")

    async def _claim_updated(self, old: Obj, new: Obj) -> None:
        await self._claim(new)

    async def _volume(self, volume: Obj) -> None:
        if deletable(volume, self.provisioner):
            await self.volume_queue.add(str(meta(volume).get("name", "")))

    async def _volume_updated(self, old: Obj, new: Obj) -> None:
        await self._volume(new)

    async def _class_changed(self, _storage_class: Obj) -> None:
        for claim in self.claims.cache.list():
            await self._claim(claim)

    async def _class_updated(self, old: Obj, new: Obj) -> None:
        await self._class_changed(new)

    async def run(self) -> None:
        for informer in (self.claims, self.volumes, self.classes):
            await informer.wait_for_sync()
        if self.default_class:
            await self.ensure_default_class()
        async with asyncio.TaskGroup() as group:
            group.create_task(run_workers(self.claim_queue, self.provision, workers=2,
                                          what="provision"))
            group.create_task(run_workers(self.volume_queue, self.delete, workers=1,
                                          what="delete volume"))

    async def ensure_default_class(self) -> None:
        """kind's default StorageClass, created when there is no default class (and none of
        its name): a cluster whose administrator chose another default keeps it."""
        for found in self.classes.cache.list():
            if meta(found).get("name") == DEFAULT_CLASS \
                    or notes_of(found).get(IS_DEFAULT_CLASS) == "true":
                return
        try:
            await self.class_api.create(default_storage_class())
        except (AlreadyExists, Conflict):
            return

    async def provision(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        claim = self.claims.get(name, namespace)
        classes = {str(meta(c).get("name", "")): c for c in self.classes.cache.list()}
        if claim is None or not wants_volume(claim, classes, self.provisioner):
            return
        if self.volumes.get(volume_name(claim)) is not None:
            return  # provisioned already; the binder binds it
        self.recorder.event(claim, "Normal", "Provisioning",
                            f'External provisioner is provisioning volume for claim '
                            f'"{namespace}/{name}"')
        volume = provisioned_volume(claim, classes[claim_class(claim)], self.provisioner)
        try:
            await self.pv_api.create(volume)
        except AlreadyExists:
            return
        self.recorder.event(claim, "Normal", "ProvisioningSucceeded",
                            f"Successfully provisioned volume {volume_name(claim)}")

    async def delete(self, name: str) -> None:
        volume = self.volumes.get(name)
        if volume is None or not deletable(volume, self.provisioner):
            return
        try:
            await self.pv_api.delete(name, preconditions={"uid": meta(volume).get("uid", "")})
        except (NotFound, Conflict):
            return


def make_local_path_provisioner(ctx: ClusterContext,
                                options: object = None) -> LocalPathProvisioner:
    """The component factory."""
    return LocalPathProvisioner(ctx)
