"""kube-controller-manager's taint-eviction controller (``taint-eviction-controller``, kube 1.32
``pkg/controller/tainteviction/taint_eviction.go``), as a client of the API.

Pods bound to a node with NoExecute taints are deleted once the shortest ``tolerationSeconds``
of their matching tolerations has passed since the controller first saw them under those taints
(at once when a taint is not tolerated; never when the matching tolerations have no
``tolerationSeconds``): a Normal ``TaintManagerEviction`` event "Marking for deletion Pod
ns/name", the ``DisruptionTarget`` condition (``DeletionByTaintManager``, "Taint manager:
deleting due to NoExecute taint") patched into the pod's status, then a DELETE with the pod's
own grace period. A scheduled deletion whose taints go away (or stop applying), or whose pod
is deleted meanwhile, is cancelled with "Cancelling deletion of Pod ns/name". No new deletion
is scheduled for a pod already being deleted (so one this controller deleted is not deleted
again while it terminates); one scheduled before stays until the pod is gone. Decisions are
in ``taint_eviction_decisions``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from kubewire.client import QueueShutDown, WorkQueue
from kubewire.client.errors import ClientError, NotFound, StatusError
from kubewire.client.resource import PatchType
from kubewire.cluster.controllers.node_lifecycle import NODE_NAME_INDEX, pods_by_node
from kubewire.cluster.controllers.taint_eviction_decisions import (
    DISRUPTION_TARGET,
    eviction_delay,
    no_execute_taints,
)
from kubewire.cluster.runtime import ClusterContext, now_rfc3339

log = logging.getLogger(__name__)

NAME = "taint-eviction-controller"
REASON = "TaintManagerEviction"
RETRIES = 5  # kube's retries of a deletion
Obj = dict[str, Any]


@dataclass(slots=True)
class _Scheduled:
    created: float
    trigger: float
    task: asyncio.Task[None]


@dataclass
class TaintEvictionController:
    """Deletes pods from NoExecute-tainted nodes after their tolerationSeconds."""

    ctx: ClusterContext
    name: str = NAME
    scheduled: dict[str, _Scheduled] = field(default_factory=dict)

    async def run(self) -> None:
        ctx = self.ctx
        self.nodes = ctx.informer("v1", "Node")
        self.pods = ctx.informer("v1", "Pod")
        with contextlib.suppress(ValueError):  # the other node controller added it first
            self.pods.add_indexer(NODE_NAME_INDEX, pods_by_node)
        self.pod_api = ctx.api("v1", "Pod")
        self.events = ctx.recorder(NAME)
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self._add_handlers()
        await asyncio.gather(self.nodes.wait_for_sync(), self.pods.wait_for_sync())
        try:
            while True:
                try:
                    kind, key = await self.queue.get()
                except QueueShutDown:
                    return
                try:
                    self.handle(kind, key)
                finally:
                    await self.queue.done((kind, key))
        finally:
            await self.queue.shut_down()
            for entry in list(self.scheduled.values()):
                entry.task.cancel()
            self.scheduled.clear()

    def _add_handlers(self) -> None:
        async def node_added(node: Obj) -> None:
            if no_execute_taints(node):
                await self.queue.add(("node", node["metadata"]["name"]))

        async def node_updated(old: Obj, new: Obj) -> None:
            if no_execute_taints(old) != no_execute_taints(new):
                await self.queue.add(("node", new["metadata"]["name"]))

        async def node_deleted(node: Obj) -> None:
            await self.queue.add(("node", node["metadata"]["name"]))

        async def pod_changed(*pods: Obj) -> None:
            meta = pods[-1]["metadata"]
            await self.queue.add(("pod", f"{meta['namespace']}/{meta['name']}"))

        self.nodes.add_handlers(on_add=node_added, on_update=node_updated,
                                on_delete=node_deleted)
        self.pods.add_handlers(on_add=pod_changed, on_update=pod_changed, on_delete=pod_changed)

    def handle(self, kind: str, key: str) -> None:
        if kind == "node":
            node = self.nodes.get(key)
            taints = no_execute_taints(node)
            for pod in self.pods.by_index(NODE_NAME_INDEX, key):
                self.process_pod(pod, taints)
            return
        namespace, _, name = key.partition("/")
        found = self.pods.get(name, namespace)
        if found is None:
            self.cancel(key, event=True)
            return
        node_name = (found.get("spec") or {}).get("nodeName")
        if not node_name:
            return
        self.process_pod(found, no_execute_taints(self.nodes.get(node_name)))

    def process_pod(self, pod: Obj, taints: list[Obj]) -> None:
        """``processPodOnNode``: schedule, keep or cancel the pod's deletion."""
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if meta.get("deletionTimestamp"):
            return  # going already: nothing new scheduled; its removal cancels what was
        delay = eviction_delay((pod.get("spec") or {}).get("tolerations") or [], taints)
        if delay is None:
            self.cancel(key, event=True)
            return
        now = self.ctx.clock()
        created = now
        earlier = self.scheduled.get(key)
        if earlier is not None:
            # kube keeps a deletion scheduled earlier (with its trigger) unless a taint is
            # no longer tolerated, which deletes at once
            if delay > 0 and earlier.created < now:
                return
            self.cancel(key, event=True)
            if delay > 0:
                created = earlier.created
        self._schedule(key, meta.get("uid", ""), created, created + delay)

    def _schedule(self, key: str, uid: str, created: float, trigger: float) -> None:
        task = asyncio.get_running_loop().create_task(self._evict_at(key, uid, trigger))
        self.scheduled[key] = _Scheduled(created, trigger, task)

    def cancel(self, key: str, *, event: bool) -> None:
        """``cancelWorkWithEvent`` (without the event for a pod that is gone or going)."""
        entry = self.scheduled.pop(key, None)
        if entry is None:
            return
        entry.task.cancel()
        if event:
            self.events.event(_pod_ref(key), "Normal", REASON, f"Cancelling deletion of Pod {key}")

    async def _evict_at(self, key: str, uid: str, trigger: float) -> None:
        await asyncio.sleep(max(0.0, trigger - self.ctx.clock()))
        entry = self.scheduled.get(key)
        if entry is not None and entry.task is asyncio.current_task():
            del self.scheduled[key]
        self.events.event(_pod_ref(key), "Normal", REASON, f"Marking for deletion Pod {key}")
        namespace, _, name = key.partition("/")
        for attempt in range(RETRIES):
            try:
                await self._delete(namespace, name, uid)
                return
            except NotFound:
                return
            except (StatusError, ClientError) as err:
                log.debug("pod %s not deleted (attempt %d): %s", key, attempt + 1, err)
                await asyncio.sleep(0.01 * 2 ** attempt)

    async def _delete(self, namespace: str, name: str, uid: str) -> None:
        """``addConditionAndDeletePod``: DisruptionTarget into the status, then DELETE."""
        pod = self.pods.get(name, namespace)
        conditions = ((pod or {}).get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
                   for c in conditions):
            condition = {**DISRUPTION_TARGET, "lastTransitionTime": now_rfc3339(self.ctx.clock)}
            await self.pod_api.patch_status(
                name, {"metadata": {"uid": uid}, "status": {"conditions": [condition]}},
                namespace=namespace, type=PatchType.STRATEGIC)
        await self.pod_api.delete(name, namespace=namespace)


def _pod_ref(key: str) -> Obj:
    """kube's reference for these events: the pod's kind, namespace and name (no UID)."""
    namespace, _, name = key.partition("/")
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace}}


def make_taint_eviction_controller(ctx: ClusterContext,
                                   options: object) -> TaintEvictionController:
    """The component (it has no settings of its own)."""
    del options
    return TaintEvictionController(ctx)
