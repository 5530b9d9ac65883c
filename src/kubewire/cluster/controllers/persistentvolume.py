"""The PersistentVolume binder (``persistentvolume-binder-controller``, kube's
``pkg/controller/volume/persistentvolume/pv_controller.go``), a client of the API.

Claims and volumes each have a queue (woken by their informers, and every 15 seconds for all,
kube's ``--pvclaimbinder-sync-period``). ``sync_claim``: a claim without
``pv.kubernetes.io/bind-completed`` is bound to the volume ``volume_rules.find_best_match``
picks (or the one ``spec.volumeName`` asks for, if it fits: else ``VolumeMismatch``); with no
volume it waits for its first consumer (``WaitForFirstConsumer`` event), or is handed to its
class's external provisioner (``volume.kubernetes.io/storage-provisioner`` and the beta
annotation, ``ExternalProvisioning`` event), or stays Pending (``FailedBinding``). A bound
claim whose volume went is ``Lost`` (``ClaimLost``, ``ClaimMisbound``). ``sync_volume``: phases
Available / Bound / Released; a Released volume's reclaim policy runs: ``Retain`` keeps it,
``Delete`` leaves a dynamically provisioned volume to its provisioner (which deletes it) and
fails a static one as kube does without a deleter plugin (``VolumeFailedDelete``). ``bind``
writes in kube's order: the volume's claimRef, its phase, the claim's ``volumeName`` and
annotations, its status. Events come from ``persistentvolume-controller``, kube's source.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from kubewire.client import WorkQueue
from kubewire.cluster.controllers.replica_rules import meta
from kubewire.cluster.controllers.volume_rules import (
    BETA_STORAGE_PROVISIONER,
    BIND_COMPLETED,
    BOUND_BY_CONTROLLER,
    NOT_SUPPORTED_PROVISIONER,
    PROVISIONED_BY,
    STORAGE_PROVISIONER,
    bind_claim,
    bind_volume,
    bound_to_claim,
    claim_class,
    claim_status,
    find_best_match,
    notes_of,
    satisfies,
    should_delay,
    unbound_volume,
    volume_phase,
)
from kubewire.cluster.runtime import ClusterContext, now_rfc3339, run_workers

log = logging.getLogger(__name__)
Obj = dict[str, Any]
NAME = "persistentvolume-binder-controller"
EVENT_SOURCE = "persistentvolume-controller"
RESYNC_S = 15.0  # --pvclaimbinder-sync-period


def _claim_key(obj: Mapping[str, Any]) -> str:
    return f"{meta(obj).get('namespace', '')}/{meta(obj).get('name', '')}"


class PersistentVolumeController:
    """kube's PersistentVolumeController (binding and reclaiming; no in-tree plugins)."""

    name = NAME

    def __init__(self, ctx: ClusterContext) -> None:
        self.ctx = ctx
        self.clock = ctx.clock
        self.pv_api = ctx.api("v1", "PersistentVolume")
        self.pvc_api = ctx.api("v1", "PersistentVolumeClaim")
        self.recorder = ctx.recorder(EVENT_SOURCE)
        self.claim_queue: WorkQueue[str] = WorkQueue()
        self.volume_queue: WorkQueue[str] = WorkQueue()
        self.claims = ctx.informer("v1", "PersistentVolumeClaim")
        self.volumes = ctx.informer("v1", "PersistentVolume")
        self.classes = ctx.informer("storage.k8s.io/v1", "StorageClass")
        self.claims.add_handlers(on_add=self._claim_changed, on_update=self._claim_updated,
                                 on_delete=self._claim_deleted)
        self.volumes.add_handlers(on_add=self._volume_changed, on_update=self._volume_updated,
                                  on_delete=self._volume_deleted)

    # --- event handlers -----------------------------------------------------------------

    async def _claim_changed(self, claim: Obj) -> None:
        await self.claim_queue.add(_claim_key(claim))

    async def _claim_updated(self, old: Obj, new: Obj) -> None:
        await self.claim_queue.add(_claim_key(new))

    async def _claim_deleted(self, claim: Obj) -> None:
        """``deleteClaim``: its volume is looked at at once (it may be Released)."""
        name = (claim.get("spec") or {}).get("volumeName")
        if name:
            await self.volume_queue.add(str(name))

    async def _volume_changed(self, volume: Obj) -> None:
        await self.volume_queue.add(str(meta(volume).get("name", "")))
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if ref.get("name"):
            await self.claim_queue.add(f"{ref.get('namespace', '')}/{ref['name']}")
        elif not meta(volume).get("deletionTimestamp"):
            await self._pending_claims()  # a volume to bind: the waiting claims try it

    async def _volume_updated(self, old: Obj, new: Obj) -> None:
        await self._volume_changed(new)

    async def _volume_deleted(self, volume: Obj) -> None:
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if ref.get("name"):
            await self.claim_queue.add(f"{ref.get('namespace', '')}/{ref['name']}")

    async def _pending_claims(self) -> None:
        for claim in self.claims.cache.list():
            if BIND_COMPLETED not in notes_of(claim):
                await self.claim_queue.add(_claim_key(claim))

    # --- the loops ----------------------------------------------------------------------

    async def run(self) -> None:
        for informer in (self.claims, self.volumes, self.classes):
            await informer.wait_for_sync()
        async with asyncio.TaskGroup() as group:
            group.create_task(run_workers(self.claim_queue, self.sync_claim_key, workers=1,
                                          what="persistentvolumeclaim"))
            group.create_task(run_workers(self.volume_queue, self.sync_volume_key, workers=1,
                                          what="persistentvolume"))
            group.create_task(self._resync())

    async def _resync(self) -> None:
        while True:
            for volume in self.volumes.cache.list():
                await self.volume_queue.add(str(meta(volume).get("name", "")))
            for claim in self.claims.cache.list():
                await self.claim_queue.add(_claim_key(claim))
            await asyncio.sleep(RESYNC_S)

    def _class_map(self) -> dict[str, Obj]:
        return {str(meta(c).get("name", "")): c for c in self.classes.cache.list()}

    async def sync_claim_key(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        claim = self.claims.get(name, namespace)
        if claim is None or (meta(claim).get("deletionTimestamp") and \
                not (claim.get("spec") or {}).get("volumeName")):
            return
        if BIND_COMPLETED not in notes_of(claim):
            await self._sync_unbound(claim)
        else:
            await self._sync_bound(claim)

    async def sync_volume_key(self, name: str) -> None:
        volume = self.volumes.get(name)
        if volume is not None:
            await self._sync_volume(volume)

    # --- claims -------------------------------------------------------------------------

    async def _sync_unbound(self, claim: Obj) -> None:
        """``syncUnboundClaim``."""
        wanted = (claim.get("spec") or {}).get("volumeName")
        if not wanted:
            classes = self._class_map()
            delay = should_delay(claim, classes)
            volume = find_best_match(claim, self.volumes.cache.list(), delay)
            if volume is not None:
                await self._bind(volume, claim)
                return
            if delay:
                self.recorder.event(claim, "Normal", "WaitForFirstConsumer",
                                    "waiting for first consumer to be created before binding")
            elif claim_class(claim):
                claim = await self._provision(claim, classes)
            else:
                self.recorder.event(claim, "Normal", "FailedBinding",
                                    "no persistent volumes available for this claim and no "
                                    "storage class is set")
            await self._claim_status(claim, "Pending", None)
            return
        volume = self.volumes.get(str(wanted))
        if volume is None:
            await self._claim_status(claim, "Pending", None)
            return
        if not (volume.get("spec") or {}).get("claimRef"):
            why = satisfies(volume, claim)
            if why is not None:
                self.recorder.event(claim, "Warning", "VolumeMismatch",
                                    f'Cannot bind to requested volume "{wanted}": {why}')
                await self._claim_status(claim, "Pending", None)
                return
            await self._bind(volume, claim)
        elif bound_to_claim(volume, claim):
            await self._bind(volume, claim)
        elif BOUND_BY_CONTROLLER not in notes_of(claim):
            self.recorder.event(claim, "Warning", "FailedBinding",
                                f'volume "{wanted}" already bound to a different claim.')
            await self._claim_status(claim, "Pending", None)

    async def _provision(self, claim: Obj, classes: Mapping[str, Obj]) -> Obj:
        """``provisionClaim`` for an external provisioner: the claim is annotated with it."""
        found = classes.get(claim_class(claim))
        if found is None:
            self.recorder.event(claim, "Warning", "ProvisioningFailed",
                                f'storageclass.storage.k8s.io "{claim_class(claim)}" not found')
            return claim
        provisioner = str(found.get("provisioner") or "")
        if provisioner == NOT_SUPPORTED_PROVISIONER:
            return claim
        notes = notes_of(claim)
        if notes.get(STORAGE_PROVISIONER) != provisioner \
                or notes.get(BETA_STORAGE_PROVISIONER) != provisioner:
            notes[STORAGE_PROVISIONER] = provisioner
            notes[BETA_STORAGE_PROVISIONER] = provisioner
            claim = await self.pvc_api.replace(
                {**claim, "metadata": {**meta(claim), "annotations": notes}},
                namespace=meta(claim).get("namespace", ""))
        self.recorder.event(claim, "Normal", "ExternalProvisioning",
                            f"Waiting for a volume to be created either by the external "
                            f"provisioner '{provisioner}' or manually by the system "
                            "administrator. If volume creation is delayed, please verify that "
                            "the provisioner is running and correctly registered.")
        return claim

    async def _sync_bound(self, claim: Obj) -> None:
        """``syncBoundClaim``."""
        wanted = (claim.get("spec") or {}).get("volumeName")
        if not wanted:
            await self._claim_status(claim, "Lost", None, (
                "ClaimLost", "Bound claim has lost reference to PersistentVolume. Data on the "
                "volume is lost!"))
            return
        volume = self.volumes.get(str(wanted))
        if volume is None:
            await self._claim_status(claim, "Lost", None, (
                "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume "
                "is lost!"))
            return
        ref = (volume.get("spec") or {}).get("claimRef")
        if not ref or ref.get("uid") == meta(claim).get("uid"):
            await self._bind(volume, claim)
            return
        await self._claim_status(claim, "Lost", None, (
            "ClaimMisbound", "Two claims are bound to the same volume, this one is bound "
            "incorrectly"))

    async def _claim_status(self, claim: Obj, phase: str, volume: Obj | None,
                            event: tuple[str, str] | None = None) -> Obj:
        """``updateClaimStatus`` (``WithEvent``: the Warning only when the phase changes)."""
        status = claim_status(claim, phase, volume)
        if status is None:
            return claim
        changed = (claim.get("status") or {}).get("phase") != phase
        updated = await self.pvc_api.replace_status(
            {**claim, "status": status}, namespace=meta(claim).get("namespace", ""))
        if event is not None and changed:
            self.recorder.event(updated, "Warning", event[0], event[1])
        return updated

    async def _bind(self, volume: Obj, claim: Obj) -> None:
        """``bind``: volume to claim, the volume's phase, claim to volume, the claim's
        status."""
        updated = bind_volume(volume, claim)
        if updated is not None:
            volume = await self.pv_api.replace(updated)
        volume = await self._volume_phase(volume, "Bound")
        new_claim = bind_claim(claim, volume)
        if new_claim is not None:
            claim = await self.pvc_api.replace(new_claim,
                                               namespace=meta(claim).get("namespace", ""))
        await self._claim_status(claim, "Bound", volume)

    # --- volumes ------------------------------------------------------------------------

    async def _volume_phase(self, volume: Obj, phase: str, message: str = "") -> Obj:
        status = volume_phase(volume, phase, message, now_rfc3339(self.clock))
        if status is None:
            return volume
        return await self.pv_api.replace_status({**volume, "status": status})

    async def _sync_volume(self, volume: Obj) -> None:
        """``syncVolume``."""
        ref = (volume.get("spec") or {}).get("claimRef")
        if not ref or not ref.get("uid"):
            await self._volume_phase(volume, "Available")
            return
        claim = self.claims.get(str(ref.get("name", "")), str(ref.get("namespace", "")))
        if claim is not None and meta(claim).get("uid") != ref.get("uid"):
            claim = None
        if claim is None:
            phase = (volume.get("status") or {}).get("phase")
            if phase not in ("Released", "Failed"):
                volume = await self._volume_phase(volume, "Released")
            await self._reclaim(volume)
            return
        claimed = (claim.get("spec") or {}).get("volumeName")
        if not claimed:
            await self.claim_queue.add(_claim_key(claim))
            return
        if claimed == meta(volume).get("name"):
            await self._volume_phase(volume, "Bound")
            return
        spec = volume.get("spec") or {}
        if PROVISIONED_BY in notes_of(volume) \
                and spec.get("persistentVolumeReclaimPolicy") == "Delete":
            if (volume.get("status") or {}).get("phase") not in ("Released", "Failed"):
                volume = await self._volume_phase(volume, "Released")
            await self._reclaim(volume)
            return
        unbound = unbound_volume(volume)
        volume = await self.pv_api.replace(unbound)
        await self._volume_phase(volume, "Available")

    async def _reclaim(self, volume: Obj) -> None:
        """``reclaimVolume``: Retain keeps it; Delete: a provisioned volume is its external
        provisioner's to delete, a static one fails (no deleter plugin); Recycle fails."""
        policy = (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy")
        if policy == "Retain" or meta(volume).get("deletionTimestamp"):
            return
        if policy == "Delete" and PROVISIONED_BY in notes_of(volume):
            return  # the external provisioner deletes it
        name = meta(volume).get("name", "")
        if policy == "Delete":
            message = (f'error getting deleter volume plugin for volume "{name}": no deletable '
                       "volume plugin matched")
            reason = "VolumeFailedDelete"
        else:
            message = f'No recycler plugin found for the volume "{name}"'  # Recycle
            reason = "VolumeFailedRecycle"
        if (volume.get("status") or {}).get("phase") != "Failed":
            await self._volume_phase(volume, "Failed", message)
            self.recorder.event(volume, "Warning", reason, message)


def make_persistentvolume_binder(ctx: ClusterContext,
                                 options: object = None) -> PersistentVolumeController:
    """The component factory."""
    return PersistentVolumeController(ctx)

