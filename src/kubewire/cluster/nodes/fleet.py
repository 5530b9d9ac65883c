"""``NodeFleet`` (component ``kubelet``): N simulated nodes and their kubelets, in kwok's manner.

It registers each Node as a kubelet does (labels, addresses, capacity, conditions, nodeInfo,
``spec.podCIDR``), keeps a Lease per node in ``kube-node-lease`` renewed every 10 s as kube's
node lease controller renews it (a PUT of the Lease last written; after a Conflict, a GET and a
PUT of that), and re-reports node status when it differs from the kubelet's or every 5
minutes. Pods bound to its nodes move through ``Stage``s (kwok's format; the built-in ones
write a real kubelet's statuses): each pod event picks the matching stage, waits its delay,
checks it still matches and acts (``PATCH pods/<n>/status`` as a strategic merge with the
kubelet's body, events, finalizers, delete with grace 0 and a UID precondition).

One Pod informer and one Node informer serve every node; delays are loop timers feeding one
``WorkQueue`` drained by a few workers; lease renewals and status reports go out in batches spread
over the period, so a thousand nodes cost a hundred small writes a second, as a thousand kubelets
would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubewire.client import Informer, PatchType, WorkQueue
from kubewire.client.errors import AlreadyExists, ClientError, Conflict, NotFound, StatusError
from kubewire.cluster.nodes import gotemplate
from kubewire.cluster.nodes.node_status import (
    LEASE_NAMESPACE,
    FleetOptions,
    IPPool,
    NodeSpec,
    fleet,
    lease_object,
    node_conditions,
    node_object,
    renewed_lease,
)
from kubewire.cluster.nodes.pod_status import BUILDERS, Where
from kubewire.cluster.nodes.stages import Stage, choose, default_pod_stages, load_stages
from kubewire.cluster.runtime import ClusterContext, Recorder, now_micro, now_rfc3339, run_workers

log = logging.getLogger(__name__)
Obj = dict[str, Any]
WORKERS = 8
BATCH = 50  # leases / status reports / registrations sent together
MAX_UPDATE_RETRIES = 5  # component-helpers lease controller maxUpdateRetries
NODE_EVENTS = ("NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID")


@dataclass(slots=True)
class _Pending:
    stage: str
    timer: asyncio.TimerHandle
    fired: bool = False


class NodeFleet:
    """The simulated kubelets of ``options.count`` nodes."""

    name = "kubelet"

    def __init__(self, ctx: ClusterContext, options: FleetOptions,
                 stages: list[Stage] | None = None, rng: random.Random | None = None) -> None:
        self.ctx = ctx
        self.options = options
        self.nodes: dict[str, NodeSpec] = {n.name: n for n in fleet(options)}
        if stages is None:
            stages = (load_stages(Path(options.stages_file).read_text())
                      if options.stages_file else default_pod_stages())
        self.stages = [s for s in stages if s.kind == "Pod" and s.api_group in ("v1", "")]
        self.rng = rng or random.Random()
        self.pools = {name: IPPool(n.pod_cidr) for name, n in self.nodes.items()}
        self.node_uids: dict[str, str] = {}
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._applied: dict[tuple[str, str], tuple[str, str]] = {}
        self._retry: set[tuple[str, str]] = set()
        self._deleted: set[str] = set()  # UIDs of pods this kubelet deleted, still cached
        self._recorders: dict[str, Recorder] = {}
        self._last_report: dict[str, float] = {}
        self._since = now_rfc3339(ctx.clock)
        self.pods = ctx.api("v1", "Pod")
        self.node_api = ctx.api("v1", "Node")
        self.leases = ctx.api("coordination.k8s.io/v1", "Lease", LEASE_NAMESPACE)
        self._leases: dict[str, Obj] = {}  # each node's Lease as last written (latestLease)
        self.registered = asyncio.Event()
        self._node_informer: Informer[Obj] | None = None
        self._pod_informer: Informer[Obj] | None = None

    # --- running --------------------------------------------------------------------------

    async def run(self) -> None:
        await self.register()
        node_informer = self.ctx.informer("v1", "Node")
        pod_informer = self.ctx.informer("v1", "Pod")
        pod_informer.add_handlers(on_add=self._on_pod, on_update=self._on_pod_update,
                                  on_delete=self._on_pod_delete)
        self._pod_informer = pod_informer
        self._node_informer = node_informer
        await node_informer.wait_for_sync()
        await pod_informer.wait_for_sync()
        self.registered.set()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(run_workers(self.queue, self._sync, workers=WORKERS,
                                              what="kubelet", on_error=self._failed))
                group.create_task(self._lease_loop())
                group.create_task(self._status_loop())
        finally:
            for handle in self._pending.values():
                handle.timer.cancel()
            await self.queue.shut_down()

    async def register(self) -> None:
        """Register every node and create its Lease, ``BATCH`` at a time. Registration does
        not wait for its events: with a large fleet the shared recorder's bounded queue drops
        (and counts) what it cannot hold, as client-go's broadcaster does."""
        specs = list(self.nodes.values())
        for start in range(0, len(specs), BATCH):
            await asyncio.gather(*(self._register(n) for n in specs[start:start + BATCH]))
            await asyncio.gather(*(self._renew(n.name) for n in specs[start:start + BATCH]))

    async def _register(self, node: NodeSpec) -> None:
        now = now_rfc3339(self.ctx.clock)
        body = node_object(node, self.options, now)
        try:
            created = await self.node_api.create(body)
        except AlreadyExists:  # a restart: reconcile labels, report status (kubelet does)
            created = await self.node_api.patch(node.name, {"metadata": {
                "labels": body["metadata"]["labels"]}})
        self.node_uids[node.name] = created["metadata"]["uid"]
        if not (created.get("status") or {}).get("conditions") or \
                created["status"]["conditions"][-1].get("status") != "True":
            await self.node_api.patch_status(node.name, {"status": body["status"]},
                                             type=PatchType.STRATEGIC)
        self._last_report[node.name] = self.ctx.clock()
        events = self.recorder(node.name)
        ref = self._node_ref(node.name)
        events.event(ref, "Normal", "Starting", "Starting kubelet.")
        for reason in NODE_EVENTS:
            events.event(ref, "Normal", reason, f"Node {node.name} status is now: {reason}")
        events.event(ref, "Normal", "NodeAllocatableEnforced",
                     "Updated Node Allocatable limit across pods")
        events.event(ref, "Normal", "NodeReady", f"Node {node.name} status is now: NodeReady")

    @staticmethod
    def _node_ref(name: str) -> Obj:
        """The kubelet's ``nodeRef``: kind Node, the name as UID, no namespace."""
        return {"kind": "Node", "metadata": {"name": name, "uid": name}}

    def recorder(self, node: str) -> Recorder:
        found = self._recorders.get(node)
        if found is None:
            found = self._recorders[node] = self.ctx.recorder("kubelet", node)
        return found

    def _node_uid(self, name: str) -> str:
        seen = self._node_informer.get(name) if self._node_informer is not None else None
        if seen is not None:
            return str((seen.get("metadata") or {}).get("uid") or "")
        return self.node_uids.get(name, "")

    async def _renew(self, name: str) -> None:
        """One beat of the node's lease controller (component-helpers
        ``apimachinery/lease/controller.go`` ``sync``): PUT the Lease last written with a new
        ``renewTime``; when that fails, or there is none yet, GET it (create it when absent:
        the first beat after registration) and PUT that."""
        if self._node_informer is not None and self._node_informer.get(name) is None:
            return  # deleted: its Lease would be owned by nothing (and kube's kubelet stays down)
        try:
            latest = self._leases.get(name)
            if latest is not None and await self._update_lease(name, latest):
                return
            lease, created = await self._ensure_lease(name)
            if lease is not None and not created:
                await self._update_lease(name, lease)
        except (StatusError, ClientError) as err:
            log.warning("lease of node %s not renewed: %s", name, err)

    async def _ensure_lease(self, name: str) -> tuple[Obj | None, bool]:
        """``ensureLease``: the Lease as the server has it, or the one created now (then
        True). None (nothing sent) while the Node's UID for the owner reference is unknown,
        as the kubelet's ``SetNodeOwnerFunc`` blocks the create. Where kube retries a failed
        GET or create with a backoff up to 7 s, here the error ends this beat and the next
        beat (``lease_interval_s`` later) tries again, so one node cannot hold up a batch."""
        try:
            lease: Obj = await self.leases.get(name, namespace=LEASE_NAMESPACE)
            created = False
        except NotFound:
            uid = self._node_uid(name)
            if not uid:
                return None, False
            lease = await self.leases.create(
                lease_object(name, uid, now_micro(self.ctx.clock)), namespace=LEASE_NAMESPACE)
            created = True
        self._leases[name] = lease
        return lease, created

    async def _update_lease(self, name: str, base: Obj) -> bool:
        """``retryUpdateLease``: up to ``MAX_UPDATE_RETRIES`` PUTs of ``base`` with a new
        ``renewTime`` (its resourceVersion the precondition); after a Conflict the next try
        starts from the Lease as the server has it (``ensureLease``). False when every try
        failed."""
        for _ in range(MAX_UPDATE_RETRIES):
            body = renewed_lease(base, name, self._node_uid(name), now_micro(self.ctx.clock))
            try:
                self._leases[name] = await self.leases.replace(body, namespace=LEASE_NAMESPACE)
                return True
            except Conflict:
                ensured, _ = await self._ensure_lease(name)
                if ensured is None:
                    return False
                base = ensured
            except (StatusError, ClientError) as err:
                log.debug("lease of node %s: update failed: %s", name, err)
        return False

    async def _spread(self, names: list[str], period: float, action: Any) -> None:
        """Call ``action(name)`` for every name, ``BATCH`` at a time, spread over ``period``."""
        batches = [names[i:i + BATCH] for i in range(0, len(names), BATCH)] or [[]]
        pause = period / len(batches)
        for batch in batches:
            started = self.ctx.clock()
            await asyncio.gather(*(action(n) for n in batch), return_exceptions=True)
            await asyncio.sleep(max(0.0, pause - (self.ctx.clock() - started)))

    async def _lease_loop(self) -> None:
        while True:
            await self._spread(list(self.nodes), self.options.lease_interval_s, self._renew)

    async def _status_loop(self) -> None:
        while True:
            await self._spread(list(self.nodes), self.options.lease_interval_s, self._report)

    async def _report(self, name: str) -> None:
        """Re-report status when the server's differs from the kubelet's (another writer marked
        it Unknown, say) or ``status_report_s`` passed; the heartbeat times move each time."""
        seen = self._node_informer.get(name) if self._node_informer is not None else None
        if seen is None:  # deleted: a kubelet registers only when it starts
            return
        now = now_rfc3339(self.ctx.clock)
        wanted = node_conditions(now, self._since)
        have = {c.get("type"): c.get("status") for c in
                (seen.get("status") or {}).get("conditions") or ()}
        differs = any(have.get(c["type"]) != c["status"] for c in wanted)
        if not differs and self.ctx.clock() - self._last_report.get(name, 0.0) < \
                self.options.status_report_s:
            return
        old = {c.get("type"): c for c in (seen.get("status") or {}).get("conditions") or ()}
        for condition in wanted:
            before = old.get(condition["type"]) or {}
            if before.get("status") != condition["status"]:
                condition["lastTransitionTime"] = now
            else:
                condition["lastTransitionTime"] = before.get("lastTransitionTime", now)
        try:
            await self.node_api.patch_status(name, {"status": {"conditions": wanted}},
                                             type=PatchType.STRATEGIC)
            self._last_report[name] = self.ctx.clock()
        except (StatusError, ClientError) as err:
            log.warning("status of node %s not reported: %s", name, err)

    # --- pods -----------------------------------------------------------------------------

    @staticmethod
    def _key(pod: Mapping[str, Any]) -> tuple[str, str]:
        meta = pod.get("metadata") or {}
        return meta.get("namespace", ""), meta.get("name", "")

    def _mine(self, pod: Mapping[str, Any]) -> str | None:
        node = (pod.get("spec") or {}).get("nodeName")
        return node if node in self.nodes else None

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        self._on_pod(new)

    def _on_pod(self, pod: Obj) -> None:
        node = self._mine(pod)
        key = self._key(pod)
        if node is None:
            self._cancel(key)
            return
        ip = (pod.get("status") or {}).get("podIP")
        if ip and not (pod.get("spec") or {}).get("hostNetwork"):
            self.pools[node].mark(ip)
        stage = choose(self.stages, pod, self.rng)
        if stage is None:
            self._cancel(key)
            return
        version = (pod.get("metadata") or {}).get("resourceVersion", "")
        if self._applied.get(key) == (stage.name, version):
            return  # a stale event of a state this stage already moved on from
        pending = self._pending.get(key)
        if pending is not None and pending.stage == stage.name:
            return
        self._cancel(key)
        now = self.ctx.clock()
        delay = stage.delay.seconds(pod, now, self.rng)
        deadline = _deletion_deadline(pod)
        if deadline is not None:  # the kubelet kills at the end of the grace period
            delay = min(delay, max(0.0, deadline - now))
        loop = asyncio.get_running_loop()
        timer = loop.call_later(delay, self._fire, key)
        self._pending[key] = _Pending(stage.name, timer)

    def _fire(self, key: tuple[str, str]) -> None:
        pending = self._pending.get(key)
        if pending is not None:
            pending.fired = True
        task = asyncio.ensure_future(self.queue.add(key))
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    def _cancel(self, key: tuple[str, str]) -> None:
        pending = self._pending.pop(key, None)
        if pending is not None:
            pending.timer.cancel()

    def _on_pod_delete(self, pod: Obj) -> None:
        key = self._key(pod)
        self._deleted.discard((pod.get("metadata") or {}).get("uid", ""))
        self._cancel(key)
        self._applied.pop(key, None)
        node = self._mine(pod)
        ip = (pod.get("status") or {}).get("podIP")
        if node and ip and not (pod.get("spec") or {}).get("hostNetwork"):
            self.pools[node].put(ip)

    async def _sync(self, key: tuple[str, str]) -> None:
        with contextlib.suppress(NotFound):  # deleted meanwhile
            await self._act(key)

    def _failed(self, key: tuple[str, str], err: Exception) -> None:
        """A failed attempt is retried from the stage the pod is in by then."""
        log.debug("pod %s/%s: %s; retrying", *key, err)
        self._applied.pop(key, None)
        self._retry.add(key)

    async def _act(self, key: tuple[str, str]) -> None:
        """Apply the stage whose delay ended (or, for a failed attempt, the stage the pod is in
        now)."""
        pending = self._pending.get(key)
        retry = key in self._retry
        if pending is not None and pending.fired:
            del self._pending[key]
        elif not retry:
            return  # a timer cancelled after it queued the key
        self._retry.discard(key)
        namespace, name = key
        pod = self._pod_informer.get(name, namespace) if self._pod_informer else None
        node = self._mine(pod) if pod is not None else None
        if pod is None or node is None:
            return
        if pending is not None and pending.fired:
            stage = next((s for s in self.stages if s.name == pending.stage), None)
        else:
            stage = choose(self.stages, pod, self.rng)
        if stage is None or not stage.matches(pod):
            self._on_pod(pod)  # the pod moved on meanwhile: choose again
            return
        self._applied[key] = (stage.name, pod["metadata"].get("resourceVersion", ""))
        await self._apply(stage, pod, node)

    async def _apply(self, stage: Stage, pod: Obj, node: str) -> None:
        """Do what ``stage.next`` says to ``pod`` (on ``node``)."""
        meta = pod["metadata"]
        name, namespace = meta["name"], meta.get("namespace")
        action = stage.next
        events = self.recorder(node)
        body: Obj | None = None
        if action.status_builder:
            built = BUILDERS[action.status_builder](pod, self._where(pod, node,
                                                                     action.status_builder))
            body = built.status
            for event in built.events:
                events.event(pod, event.type, event.reason, event.message)
        elif action.status_template:
            body = {"status": self._render(action.status_template, pod, node)}
        removed = _removed(pod)
        if body is not None and not removed:
            await self.pods.patch_status(name, body, namespace=namespace,
                                         type=PatchType.STRATEGIC)
        if action.event is not None:
            events.event(pod, action.event.type, action.event.reason, action.event.message)
        if removed:
            return  # the containers are killed (the events above); there is no pod to write
        if action.finalizers is not None:
            await self._finalizers(pod, action.finalizers.add, action.finalizers.remove,
                                   action.finalizers.empty)
        if action.delete:
            await self._delete(pod)

    async def _delete(self, pod: Obj) -> None:
        """The status manager's final DELETE (grace 0, a UID precondition), once per pod: a
        grace-0 delete of a terminating pod is answered with a MODIFIED event
        (``deletionGracePeriodSeconds: 0``) before the DELETED one, or not followed by one
        while finalizers hold the pod, and the stage matching it again must not delete again
        (kube's kubelet forgets a pod's status once it deleted it: a second DELETE would
        answer 404 or change nothing)."""
        meta = pod["metadata"]
        name, namespace, uid = meta["name"], meta.get("namespace"), meta.get("uid", "")
        if uid in self._deleted:
            return
        await self.pods.delete(name, namespace=namespace, grace_period_seconds=0,
                               preconditions={"uid": uid})
        cached = self._pod_informer.get(name, namespace) if self._pod_informer else None
        if cached is not None and (cached.get("metadata") or {}).get("uid") == uid:
            self._deleted.add(uid)  # forgotten when the informer sees it go (bounded by it)

    def _pod_ip(self, pod: Obj, node: str) -> str:
        if (pod.get("spec") or {}).get("hostNetwork"):
            return self.nodes[node].ip
        return (pod.get("status") or {}).get("podIP") or self.pools[node].get()

    def _where(self, pod: Obj, node: str, builder: str) -> Where:
        ip = self._pod_ip(pod, node) if builder == "running" else \
            (pod.get("status") or {}).get("podIP", "")
        return Where(self.nodes[node].ip, ip, now_rfc3339(self.ctx.clock))

    def _render(self, template: str, pod: Obj, node: str) -> Obj:
        spec = self.nodes[node]
        funcs = gotemplate.kwok_funcs(
            now=lambda: now_rfc3339(self.ctx.clock),
            node_ip=lambda _name: spec.ip,
            pod_ip=lambda *_args: self._pod_ip(pod, node))
        rendered = yaml.safe_load(gotemplate.render(template, pod, funcs))
        return rendered if isinstance(rendered, dict) else {}

    async def _finalizers(self, pod: Obj, add: Iterable[str], remove: Iterable[str],
                          empty: bool) -> None:
        meta = pod["metadata"]
        have = list(meta.get("finalizers") or ())
        want = [] if empty else [f for f in have if f not in set(remove)]
        want += [f for f in add if f not in want]
        if want == have:
            return
        ops: list[Obj] = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")}]
        ops.append({"op": "replace" if "finalizers" in meta else "add",
                    "path": "/metadata/finalizers", "value": want})
        await self.pods.patch(meta["name"], ops, namespace=meta.get("namespace"),
                              type=PatchType.JSON)


def _removed(pod: Mapping[str, Any]) -> bool:
    """Whether the server removed ``pod`` in the request that wrote this state: deleted with
    grace 0 and no finalizers (a force delete, or the kubelet's own final one). The registry
    writes ``deletionGracePeriodSeconds: 0`` and deletes the object at once, so this MODIFIED
    event comes just before the DELETED one. kube's status manager GETs the pod before it
    writes (404: it writes nothing); the fleet, which reads its informer, writes nothing."""
    meta = pod.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and \
        meta.get("deletionGracePeriodSeconds") == 0 and not meta.get("finalizers")


def _deletion_deadline(pod: Mapping[str, Any]) -> float | None:
    stamp = (pod.get("metadata") or {}).get("deletionTimestamp")
    if not stamp:
        return None
    from datetime import datetime
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def make_fleet(ctx: ClusterContext, options: FleetOptions) -> NodeFleet:
    """The ``kubelet`` component for ``kubewire serve --nodes N`` (``ValueError`` for options
    that cannot make a fleet, ``StageError`` for an unreadable stage file)."""
    return NodeFleet(ctx, options)
