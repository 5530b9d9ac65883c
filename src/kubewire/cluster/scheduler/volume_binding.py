"""The part of kube's VolumeBinding plugin the scheduler does before binding a pod (PreBind).

kube v1.32's ``pkg/scheduler/framework/plugins/volumebinding``: a pod whose claims are not
bound yet is bound to its node only once they are. For a claim whose class waits for the
first consumer (``WaitForFirstConsumer``), the scheduler annotates the claim with the node it
chose (``volume.kubernetes.io/selected-node``), so that the claim's provisioner creates a
volume there; then it waits (``bindTimeoutSeconds``, 600) until every claim of the pod is
Bound. A claim that does not exist fails the binding with kube's text.

What kube does that this does not: matching static volumes to the node in Filter (their node
affinity) and binding them from the scheduler (here the PV binder binds a static volume once
the node is chosen, without checking its node affinity); the ``unbound immediate
PersistentVolumeClaims`` PreFilter refusal (such a pod waits in PreBind instead).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from kubewire.cluster.runtime import ClusterContext

Obj = dict[str, Any]
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BIND_TIMEOUT_S = 600.0  # the default profile's VolumeBindingArgs.bindTimeoutSeconds
POLL_S = 0.1


class VolumeBindingError(Exception):
    """PreBind failed: the pod is not bound and goes back to the queue."""


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The claims a pod uses: ``persistentVolumeClaim`` volumes and generic ephemeral volumes
    (``<pod>-<volume>``)."""
    names: list[str] = []
    pod_name = str((pod.get("metadata") or {}).get("name") or "")
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict) and claim.get("claimName"):
            names.append(str(claim["claimName"]))
        elif isinstance(volume.get("ephemeral"), dict):
            names.append(f"{pod_name}-{volume.get('name', '')}")
    return names


def is_bound(claim: Mapping[str, Any]) -> bool:
    notes = (claim.get("metadata") or {}).get("annotations") or {}
    return bool((claim.get("spec") or {}).get("volumeName")) and BIND_COMPLETED in notes


def needs_node(claim: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> bool:
    """An unbound claim of a ``WaitForFirstConsumer`` class without a chosen node."""
    if is_bound(claim) or (claim.get("spec") or {}).get("volumeName"):
        return False
    notes = (claim.get("metadata") or {}).get("annotations") or {}
    if SELECTED_NODE in notes:
        return False
    found = classes.get(str((claim.get("spec") or {}).get("storageClassName") or ""))
    return bool(found and found.get("volumeBindingMode") == "WaitForFirstConsumer")


class VolumeBinder:
    """PreBind for the pods with claims, on shared claim and class informers."""

    def __init__(self, ctx: ClusterContext, timeout: float = BIND_TIMEOUT_S) -> None:
        self.ctx = ctx
        self.timeout = timeout
        self.claim_api = ctx.api("v1", "PersistentVolumeClaim")
        self.claims = ctx.informer("v1", "PersistentVolumeClaim")
        self.classes = ctx.informer("storage.k8s.io/v1", "StorageClass")

    async def prebind(self, pod: Mapping[str, Any], node: str,
                      alive: Callable[[], bool] = lambda: True) -> None:
        """Select ``node`` for the pod's waiting claims, then wait until all are Bound (or the
        pod is gone: ``alive()`` False)."""
        names = claim_names(pod)
        if not names:
            return
        await self.claims.wait_for_sync()
        await self.classes.wait_for_sync()
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        classes = {str((c.get("metadata") or {}).get("name") or ""): c
                   for c in self.classes.cache.list()}
        for name in names:
            claim = self.claims.get(name, namespace)
            if claim is None:
                raise VolumeBindingError(f'persistentvolumeclaim "{name}" not found')
            if needs_node(claim, classes):
                await self.claim_api.patch(name, {"metadata": {"annotations": {
                    SELECTED_NODE: node}}}, namespace=namespace)
        deadline = asyncio.get_running_loop().time() + self.timeout
        while True:
            waiting = [n for n in names
                       if not is_bound(self.claims.get(n, namespace) or {})]
            if not waiting:
                return
            if not alive():
                raise VolumeBindingError("pod deleted while its volumes were binding")
            if asyncio.get_running_loop().time() > deadline:
                raise VolumeBindingError("binding volumes: context deadline exceeded")
            await asyncio.sleep(POLL_S)
