"""The DaemonSet controller (``daemonset-controller``, kube's ``pkg/controller/daemon``).

Per set: keep its ControllerRevisions (``constructHistory``: the revision matching the template
is current, renumbered past the others), run one pod on every eligible node (pods carry a
required node affinity for ``metadata.name`` and the scheduler binds them, as in kube 1.32),
delete pods from nodes that should no longer run them and failed ones, roll pods to the current
revision within ``maxUnavailable``/``maxSurge``, prune history and write status. Pods are made
with ``generateName``, so like kube it keeps expectations: until the pods it created appear in
the cache and the ones it deleted leave it (or five minutes pass), it does not create or delete
again for that set. The decisions are in ``daemonset_rules``.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from kubewire.client import WorkQueue
from kubewire.client.errors import AlreadyExists, NotFound, StatusError
from kubewire.client.informers.informer import NAMESPACE_INDEX
from kubewire.cluster.controllers import adoption, history, pod_state
from kubewire.cluster.controllers import daemonset_rules as rules
from kubewire.cluster.controllers.owner_keys import OwnerKeys, add_all
from kubewire.cluster.controllers.statefulset import controller_of, key_of, option
from kubewire.cluster.runtime import ClusterContext, run_workers

Obj = dict[str, Any]
NAME = "daemonset-controller"
WORKERS = 2  # kube-controller-manager --concurrent-daemonset-syncs
BURST = 250  # MaxPodCreateDeletePerSync... kube's BurstReplicas for DaemonSets
EXPECTATIONS_TIMEOUT_S = 300.0  # controller.ExpectationsTimeout


@dataclass
class Expectations:
    """Pods created (by name) not yet seen, pods deleted (by uid) not yet gone."""

    created: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    since: float = 0.0


class DaemonSetController:
    """kube's DaemonSet controller over shared informers."""

    name = NAME

    def __init__(self, ctx: ClusterContext, workers: int = WORKERS, burst: int = BURST) -> None:
        self.ctx = ctx
        self.workers = workers
        self.burst = burst
        self.queue: WorkQueue[str] = WorkQueue()
        self.events = ctx.recorder(NAME)
        self.sets = ctx.informer("apps/v1", "DaemonSet")
        self.owners = OwnerKeys(self.sets, "DaemonSet")
        self.nodes = ctx.informer("v1", "Node")
        self.pods = ctx.informer("v1", "Pod")
        self.revisions = ctx.informer("apps/v1", "ControllerRevision")
        for informer in (self.pods, self.revisions):  # shared: another may have indexed it
            with contextlib.suppress(ValueError):
                informer.add_owner_indexer()
        self.set_api = ctx.api("apps/v1", "DaemonSet")
        self.pod_api = ctx.api("v1", "Pod")
        self.rev_api = ctx.api("apps/v1", "ControllerRevision")
        self.expectations: dict[str, Expectations] = {}
        self.failed_backoff = rules.FailedPodBackoff()

    async def run(self) -> None:
        self.sets.add_handlers(on_add=self._enqueue, on_update=lambda _o, n: self._enqueue(n),
                               on_delete=self._enqueue)
        self.pods.add_handlers(on_add=self._pod_changed,
                               on_update=lambda _o, n: self._pod_changed(n),
                               on_delete=self._pod_changed)
        self.nodes.add_handlers(on_add=self._node_changed, on_update=self._node_updated,
                                on_delete=self._node_changed)
        for informer in (self.sets, self.nodes, self.pods, self.revisions):
            await informer.wait_for_sync()
        await self._node_changed({})
        await run_workers(self.queue, self.sync, workers=self.workers, what="daemonset")

    async def _enqueue(self, ds: Obj) -> None:
        await self.queue.add(key_of(ds))

    async def _pod_changed(self, pod: Obj) -> None:
        await add_all(self.queue, self.owners.wake(pod))

    async def _node_changed(self, _node: Obj) -> None:
        for ds in self.sets.cache.list():
            await self._enqueue(ds)

    async def _node_updated(self, old: Obj, new: Obj) -> None:
        """kube's ``updateNode``: heartbeats are ignored; otherwise only the sets whose
        decision for this node changed are synced."""
        if rules.node_update_ignorable(old, new):
            return
        for ds in self.sets.cache.list():
            if rules.should_run(ds, old) != rules.should_run(ds, new):
                await self._enqueue(ds)

    # --- one set --------------------------------------------------------------------------

    def _owned(self, informer_kind: str, ds: Obj) -> list[Obj]:
        uid = ds["metadata"].get("uid", "")
        informer = self.pods if informer_kind == "Pod" else self.revisions
        return [o for o in informer.by_index("owner", uid)
                if (controller_of(o, "DaemonSet") or {}).get("uid") == uid]

    def _satisfied(self, key: str, ds: Obj) -> bool:
        """``SatisfiedExpectations``: every expected create seen, every delete gone."""
        exp = self.expectations.get(key)
        if exp is None:
            return True
        namespace = key.partition("/")[0]
        exp.created = {n for n in exp.created if self.pods.get(n, namespace) is None}
        present = {p["metadata"].get("uid") for p in self._owned("Pod", ds)}
        exp.deleted &= present
        if (not exp.created and not exp.deleted) or \
                self.ctx.clock() - exp.since > EXPECTATIONS_TIMEOUT_S:
            del self.expectations[key]
            return True
        return False

    async def sync(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        ds = self.sets.get(name, namespace)
        if ds is None:
            self.expectations.pop(key, None)
            return
        if (ds.get("metadata") or {}).get("deletionTimestamp"):
            return
        hash_ = await self._history(ds)
        nodes = self.nodes.cache.list()
        if self._satisfied(key, ds):
            node_pods = group_by_node(await self._claim_pods(ds))
            await self._manage(key, ds, nodes, hash_, node_pods)
            if self._satisfied(key, ds) and ((ds.get("spec") or {}).get("updateStrategy") or {}
                                         ).get("type", "RollingUpdate") == "RollingUpdate":
                await self._roll(key, ds, nodes, hash_, node_pods)
            await self._cleanup_history(ds, hash_)
        node_pods = group_by_node(self._owned("Pod", ds))
        status = rules.status(ds, nodes, node_pods, hash_, self.ctx.clock())
        old = ds.get("status") or {}
        if any(old.get(k) != v for k, v in status.items()):
            with contextlib.suppress(NotFound):
                await self.set_api.patch_status(name, {"status": status}, namespace=namespace)
        min_ready = pod_state.min_ready_seconds(ds)
        if min_ready > 0:  # sync again when the next Ready pod becomes available
            now = self.ctx.clock()
            waits = [w for pods in node_pods.values() for p in pods
                     if (w := pod_state.wait_until_available(p, min_ready, now))]
            if waits:
                self.queue.add_after(key, min(waits) + 0.05)

    async def _claim_pods(self, ds: Obj) -> list[Obj]:
        """``getDaemonPods``: adopt matching orphans (after a live check that the set is not
        being deleted), release owned pods that no longer match."""
        namespace = ds["metadata"]["namespace"]
        decided = adoption.claims(ds, self.pods.by_index(NAMESPACE_INDEX, namespace))
        if not decided.adopt and not decided.release:
            return decided.owned
        deleting = False
        if decided.adopt:
            try:
                live = await self.set_api.get(rules.name_of(ds), namespace=namespace)
            except NotFound:
                return decided.owned
            deleting = bool(live["metadata"].get("deletionTimestamp")) or \
                live["metadata"].get("uid") != ds["metadata"].get("uid")
        return await adoption.apply_claims(self.pod_api, ds, decided, deleting)

    async def _history(self, ds: Obj) -> str:
        """``constructHistory``: the current revision's hash, creating or renumbering it."""
        namespace = ds["metadata"]["namespace"]
        data = history.template_patch(ds)
        owned = self._owned("ControllerRevision", ds)
        current = [r for r in owned if history.equal_revision(r, data)]
        others = [r for r in owned if not history.equal_revision(r, data)]
        number = history.next_revision(others)
        if current:
            cur = history.sorted_revisions(current)[-1]
            if history.revision_number(cur) < number:
                cur = await self.rev_api.patch(rules.name_of(cur), {"revision": number},
                                               namespace=namespace)
            labels = rules.labels_of(cur)
            return str(labels.get(history.REVISION_HASH_LABEL) or rules.name_of(cur))
        collisions = (ds.get("status") or {}).get("collisionCount")
        hash_ = history.template_hash((ds.get("spec") or {}).get("template") or {}, collisions)
        template_labels = ((ds.get("spec") or {}).get("template") or {}).get(
            "metadata", {}).get("labels") or {}
        rev = history.new_revision(ds, data, number, None, template_labels)
        rev["metadata"]["name"] = history.revision_name(rules.name_of(ds), hash_)
        # snapshot: the template's labels plus the hash (kubectl finds history by selector)
        rev["metadata"]["labels"][history.REVISION_HASH_LABEL] = hash_
        try:
            await self.rev_api.create(rev, namespace=namespace)
        except AlreadyExists:
            existing = await self.rev_api.get(rev["metadata"]["name"], namespace=namespace)
            if not history.equal_revision(existing, data):
                await self.set_api.patch_status(rules.name_of(ds), {"status": {
                    "collisionCount": int(collisions or 0) + 1}}, namespace=namespace)
                raise
        return hash_

    async def _manage(self, key: str, ds: Obj, nodes: list[Obj], hash_: str,
                      node_pods: dict[str, list[Obj]]) -> None:
        """``manage`` + ``podsShouldBeOnNode``: create where missing, delete where not wanted,
        failed, or duplicated."""
        create_on: list[str] = []
        delete: list[Obj] = []
        node_names = {rules.name_of(n) for n in nodes}
        rolling_surge = rules.surge_and_unavailable(ds, len(nodes))[0] > 0
        for node in nodes:
            node_name = rules.name_of(node)
            run, keep = rules.should_run(ds, node)
            existing = node_pods.get(node_name, [])  # terminating ones count: wait for them
            pods = [p for p in existing if not rules.terminating(p)]
            if run and not existing:
                create_on.append(node_name)
            elif keep:
                live = self._drop_finished(key, ds, node_name, pods, delete)
                if len(live) > 1 and not rolling_surge:
                    delete.extend(live[1:])  # keep the oldest
            else:
                delete.extend(pods)
        for node_name, pods in node_pods.items():
            if node_name not in node_names:  # getUnscheduledPodsWithoutNode
                delete.extend(p for p in pods if not rules.terminating(p)
                              and not (p.get("spec") or {}).get("nodeName"))
        await self._sync_nodes(key, ds, create_on[:self.burst], delete[:self.burst], hash_)

    def _drop_finished(self, key: str, ds: Obj, node_name: str, pods: list[Obj],
                       delete: list[Obj]) -> list[Obj]:
        """Failed daemon pods go (at most once per backoff period per node, as kube's
        ``failedPodsBackoff``: 1 s doubling to 15 min) and succeeded ones, with kube's events;
        returns the rest, oldest first."""
        live = []
        namespace = ds["metadata"]["namespace"]
        for pod in rules.oldest_first(pods):
            if rules.phase(pod) == "Failed":
                backoff_key = f"{ds['metadata'].get('uid', '')}/{node_name}"
                delay = self.failed_backoff.in_backoff(backoff_key, self.ctx.clock())
                if delay:
                    self.queue.add_after(key, delay)
                    continue
                self.failed_backoff.next(backoff_key, self.ctx.clock())
                self.events.event(ds, "Warning", "FailedDaemonPod",
                                  f"Found failed daemon pod {namespace}/{rules.name_of(pod)} on "
                                  f"node {node_name}, will try to kill it")
                delete.append(pod)
            elif rules.phase(pod) == "Succeeded":
                self.events.event(ds, "Normal", "SucceededDaemonPod",
                                  f"Found succeeded daemon pod {namespace}/{rules.name_of(pod)} "
                                  f"on node {node_name}, will try to delete it")
                delete.append(pod)
            else:
                live.append(pod)
        return live

    async def _sync_nodes(self, key: str, ds: Obj, create_on: list[str], delete: list[Obj],
                          hash_: str) -> None:
        """``syncNodes``: creates in slow-start batches (1, 2, 4, …; the first failing batch
        ends the round), then deletes; expectations record both."""
        exp = self.expectations.setdefault(key, Expectations(since=self.ctx.clock()))
        exp.since = self.ctx.clock()
        namespace = ds["metadata"]["namespace"]
        batch, start = 1, 0
        failed: StatusError | None = None
        while start < len(create_on) and failed is None:
            chunk = create_on[start:start + batch]
            results = await asyncio.gather(*(self._create(ds, node, hash_) for node in chunk),
                                           return_exceptions=True)
            for result in results:
                if isinstance(result, StatusError):
                    failed = result
                elif isinstance(result, BaseException):
                    raise result
                elif result:
                    exp.created.add(result)
            start += batch
            batch *= 2
        for pod in delete:
            uid = pod["metadata"].get("uid", "")
            try:
                await self.pod_api.delete(rules.name_of(pod), namespace=namespace,
                                          preconditions={"uid": uid})
            except NotFound:
                continue
            except StatusError as err:
                self.events.event(ds, "Warning", "FailedDelete", f"Error deleting: {err.message}")
                raise
            exp.deleted.add(uid)
            self.events.event(ds, "Normal", "SuccessfulDelete",
                              f"Deleted pod: {rules.name_of(pod)}")
        if failed is not None:
            raise failed

    async def _create(self, ds: Obj, node: str, hash_: str) -> str:
        pod = rules.new_pod(ds, node, hash_)
        try:
            made = await self.pod_api.create(pod, namespace=ds["metadata"]["namespace"])
        except StatusError as err:
            self.events.event(ds, "Warning", "FailedCreate", f"Error creating: {err.message}")
            raise
        name = rules.name_of(made)
        self.events.event(ds, "Normal", "SuccessfulCreate", f"Created pod: {name}")
        return name

    async def _roll(self, key: str, ds: Obj, nodes: list[Obj], hash_: str,
                    node_pods: dict[str, list[Obj]]) -> None:
        """``rollingUpdate`` over the nodes that should run the set."""
        wanted = [rules.name_of(n) for n in nodes if rules.should_run(ds, n)[0]]
        plan = rules.roll(ds, {n: node_pods.get(n, []) for n in wanted}, hash_,
                          self.ctx.clock())
        if plan.delete or plan.create_on:
            await self._sync_nodes(key, ds, plan.create_on, plan.delete, hash_)

    async def _cleanup_history(self, ds: Obj, hash_: str) -> None:
        """``cleanupHistory``: drop revisions no pod uses beyond ``revisionHistoryLimit``."""
        live_hashes = {rules.labels_of(p).get(history.REVISION_HASH_LABEL)
                       for p in self._owned("Pod", ds)} | {hash_}
        revisions = self._owned("ControllerRevision", ds)
        live = {rules.name_of(r) for r in revisions
                if rules.labels_of(r).get(history.REVISION_HASH_LABEL) in live_hashes}
        limit = (ds.get("spec") or {}).get("revisionHistoryLimit")
        for rev in history.revisions_to_prune(revisions, live, 10 if limit is None else
                                              int(limit)):
            with contextlib.suppress(NotFound):
                await self.rev_api.delete(rules.name_of(rev),
                                          namespace=ds["metadata"]["namespace"])


def group_by_node(pods: list[Obj]) -> dict[str, list[Obj]]:
    """``getNodesToDaemonPods``: pods by target node."""
    out: dict[str, list[Obj]] = {}
    for pod in pods:
        node = rules.target_node(pod)
        if node:
            out.setdefault(node, []).append(pod)
    return out


def make_daemonset_controller(ctx: ClusterContext,
                              options: object = None) -> DaemonSetController:
    """The component factory. Options (a mapping, or an options object's ``extra``):
    ``workers``, ``burst``."""
    return DaemonSetController(ctx, workers=option(options, "workers", WORKERS),
                               burst=option(options, "burst", BURST))

