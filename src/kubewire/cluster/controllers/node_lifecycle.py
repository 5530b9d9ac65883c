"""kube-controller-manager's node-lifecycle controller (``node-lifecycle-controller``, kube 1.32
``pkg/controller/nodelifecycle/node_lifecycle_controller.go``), as a client of the API.

It watches Nodes, their Leases in ``kube-node-lease`` and Pods. Every ``--node-monitor-period``
(5 s) it checks each node's health as ``tryUpdateNodeHealth`` does: the node is alive while,
within ``--node-monitor-grace-period`` (50 s in 1.32; ``--node-startup-grace-period`` 60 s for
a node whose kubelet never posted Ready), it has seen the Ready condition's heartbeat or the
Lease's ``renewTime`` change (the controller's own clock measures when it saw them, as kube's
``probeTimestamp``). A silent node's conditions become Unknown (PUT of ``/status``); when Ready
leaves True the node gets the ``NodeNotReady`` event (``Node x status is now: NodeNotReady``)
and its pods' Ready condition is set False with a Warning ``NodeNotReady`` "Node is not ready"
(``MarkPodsNotReady``; pods later bound to a not-ready node get the same). Taints follow the
conditions and ``spec.unschedulable`` (``node_lifecycle_decisions``): both tainting passes run
on every node change and with the monitor (kube runs the NoExecute one only with the monitor);
a recovered node loses them. New nodes get ``RegisteredNode``, deleted ones ``RemovingNode``.
Kube's zone rate limiting of NoExecute tainting (and its full-disruption mode) is not
modelled: every node is tainted when its state says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from kubewire.client import WorkQueue
from kubewire.client.errors import ClientError, StatusError
from kubewire.client.informers.workqueue import QueueShutDown
from kubewire.client.resource import PatchType
from kubewire.cluster.controllers import node_lifecycle_decisions as decide
from kubewire.cluster.controllers.options import seconds
from kubewire.cluster.runtime import ClusterContext, now_rfc3339
from kubewire.times import parse_time_or_none

log = logging.getLogger(__name__)

NAME = "node-lifecycle-controller"
NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_NAME_INDEX = "node-lifecycle/spec.nodeName"  # ours: another index may differ
Obj = dict[str, Any]


@dataclass(slots=True)
class _Health:
    """What the controller last saw of a node (kube's ``nodeHealthData``)."""

    probe: float
    heartbeat: Any = None
    renew: Any = None
    ready: str | None = None


def pods_by_node(pod: Obj) -> list[str]:
    """Index function: the node a pod is bound to."""
    node = (pod.get("spec") or {}).get("nodeName")
    return [node] if node else []


@dataclass
class NodeLifecycleController:
    """Node health, condition taints, pods marked not ready."""

    ctx: ClusterContext
    grace_period_s: float = 50.0
    startup_grace_period_s: float = 60.0
    monitor_period_s: float = 5.0
    name: str = NAME
    _health: dict[str, _Health] = field(default_factory=dict)

    async def run(self) -> None:
        ctx = self.ctx
        self.nodes = ctx.informer("v1", "Node")
        self.leases = ctx.informer("coordination.k8s.io/v1", "Lease",
                                   namespace=NODE_LEASE_NAMESPACE)
        self.pods = ctx.informer("v1", "Pod")
        with contextlib.suppress(ValueError):  # the other node controller added it first
            self.pods.add_indexer(NODE_NAME_INDEX, pods_by_node)
        self.node_api = ctx.api("v1", "Node")
        self.pod_api = ctx.api("v1", "Pod")
        self.events = ctx.recorder(NAME)
        self.queue: WorkQueue[str] = WorkQueue()

        async def changed(*objs: Obj) -> None:
            await self.queue.add(objs[-1]["metadata"]["name"])

        def gone(obj: Obj) -> None:
            name = obj["metadata"]["name"]
            if self._health.pop(name, None) is not None:
                self.events.event(_node_ref(obj, obj["metadata"].get("uid", name)), "Normal",
                                  "RemovingNode",
                                  f"Node {name} event: Removing Node {name} from Controller")

        self.nodes.add_handlers(on_add=changed, on_update=changed, on_delete=gone)
        await asyncio.gather(self.nodes.wait_for_sync(), self.leases.wait_for_sync(),
                             self.pods.wait_for_sync())
        worker = asyncio.create_task(self._work())
        try:
            while True:
                await self.monitor()
                await asyncio.sleep(self.monitor_period_s)
        finally:
            await self.queue.shut_down()
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    async def _work(self) -> None:
        while True:
            try:
                name = await self.queue.get()
            except QueueShutDown:
                return
            try:
                node = self.nodes.get(name)
                if node is not None:
                    await self.sync_taints(node)
                self.queue.forget(name)
            except (StatusError, ClientError) as err:
                log.debug("node %s taints: %s", name, err)
                self.queue.add_rate_limited(name)
            finally:
                await self.queue.done(name)

    # --- health ---------------------------------------------------------------------------

    async def monitor(self) -> None:
        """One ``monitorNodeHealth`` pass over every node."""
        for node in list(self.nodes.cache.list()):
            try:
                await self.monitor_node(node)
            except (StatusError, ClientError) as err:
                log.debug("node %s health: %s", node["metadata"].get("name"), err)

    async def monitor_node(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        now = self.ctx.clock()
        ready = decide.condition(node, "Ready")
        lease = self.leases.get(name, NODE_LEASE_NAMESPACE)
        renew = (lease or {}).get("spec", {}).get("renewTime") if lease else None
        saved = self._health.get(name)
        if saved is None:
            self.events.event(_node_ref(node, node["metadata"].get("uid", name)), "Normal",
                              "RegisteredNode",
                              f"Node {name} event: Registered Node {name} in Controller")
            probe = now
            if ready is None:
                created = parse_time_or_none(node["metadata"].get("creationTimestamp"))
                probe = created.timestamp() if created is not None else now
            # a Lease seen for the first time counts as a probe (kube's savedLease == nil)
            saved = _Health(probe, None if ready is None else ready.get("lastHeartbeatTime"),
                            None, decide.ready_status(node))
            self._health[name] = saved
        heartbeat = None if ready is None else ready.get("lastHeartbeatTime")
        if ready is not None and heartbeat != saved.heartbeat:
            saved.heartbeat, saved.probe = heartbeat, now
        if renew is not None and renew != saved.renew:
            saved.renew, saved.probe = renew, now
        observed = decide.ready_status(node)
        grace = self.startup_grace_period_s if ready is None else self.grace_period_s
        if now > saved.probe + grace:
            conditions = decide.unknown_conditions(node, now_rfc3339(self.ctx.clock))
            if conditions is not None:
                body = dict(node)
                body["status"] = {**(node.get("status") or {}), "conditions": conditions}
                node = await self.node_api.replace_status(body)
        current = decide.ready_status(node)
        await self.sync_taints(node)
        if current != "True" and (observed == "True" or saved.ready == "True"):
            self.events.event(_node_ref(node, name), "Normal", "NodeNotReady",
                              f"Node {name} status is now: NodeNotReady")
        saved.ready = current
        if current != "True":
            await self.mark_pods_not_ready(name)

    async def mark_pods_not_ready(self, node_name: str) -> None:
        """``MarkPodsNotReady``: Ready False on every pod bound to the node."""
        stamp = now_rfc3339(self.ctx.clock)
        for pod in self.pods.by_index(NODE_NAME_INDEX, node_name):
            if decide.mark_pod_not_ready(pod, stamp) is None:
                continue
            meta = pod["metadata"]
            try:
                await self.pod_api.patch_status(
                    meta["name"], {"metadata": {"uid": meta.get("uid")}, "status": {
                        "conditions": [{"type": "Ready", "status": "False",
                                        "lastTransitionTime": stamp}]}},
                    namespace=meta["namespace"], type=PatchType.STRATEGIC)
            except (StatusError, ClientError) as err:
                log.debug("pod %s/%s not marked: %s", meta["namespace"], meta["name"], err)
                continue
            self.events.event(pod, "Warning", "NodeNotReady", "Node is not ready")

    # --- taints ---------------------------------------------------------------------------

    async def sync_taints(self, node: Obj) -> None:
        """Both tainting passes; one PATCH (resourceVersion-guarded) when the taints change."""
        spec = node.get("spec") or {}
        scheduled = {**node, "spec": {**spec, "taints": decide.no_schedule_taints(node)}}
        taints = decide.no_execute_taints(scheduled, now_rfc3339(self.ctx.clock))
        if not decide.taints_differ(spec.get("taints") or [], taints):
            return
        meta = node["metadata"]
        await self.node_api.patch(meta["name"], {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},
            "spec": {"taints": taints or None}}, type=PatchType.MERGE)


def _node_ref(node: Obj, uid: str) -> Obj:
    """kube's ``RecordNodeStatusChange`` reference: the node, its name as UID."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node["metadata"]["name"], "uid": uid}}


def make_node_lifecycle_controller(ctx: ClusterContext, options: object) -> NodeLifecycleController:
    """The component; ``options`` may set ``node_monitor_grace_period``,
    ``node_startup_grace_period`` and ``node_monitor_period`` (seconds)."""
    return NodeLifecycleController(
        ctx, grace_period_s=seconds(options, "node_monitor_grace_period", 50.0),
        startup_grace_period_s=seconds(options, "node_startup_grace_period", 60.0),
        monitor_period_s=seconds(options, "node_monitor_period", 5.0))
