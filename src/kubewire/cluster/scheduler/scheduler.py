"""kube-scheduler as a client of the API: the loop that applies the pure plugins.

``Scheduler`` (component ``kube-scheduler``, ``schedulerName: default-scheduler``) keeps, as
kube's scheduler cache does, a ``NodeInfo`` per node holding the sums of the requests of the
pods assigned to it, fed by one Node informer and one Pod informer (field selector
``status.phase!=Succeeded,status.phase!=Failed``, kube's ``newPodInformer``: terminal pods
leave the cache and free their node) and a Namespace informer (the labels
``namespaceSelector`` in pod affinity terms selects). Unassigned pods of
``default-scheduler`` without scheduling gates enter the ``SchedulingQueue``; each is
scheduled in turn:

- PreFilter (inter-pod affinity and spread counts, only when the pod or an existing pod uses
  them), then the filters on nodes taken round-robin from where the last pod stopped, until
  ``numFeasibleNodesToFind`` fit (kube's adaptive ``percentageOfNodesToScore``: every node up
  to 100, then 50% - nodes/125, at least 5% and 100 nodes), so a pod does not visit all 1,000
  nodes of a large cluster;
- scores on the feasible nodes, the best wins (ties at random, as ``selectHost``);
- the pod is assumed onto the node at once (the next pod sees its requests) and bound in the
  background: ``POST pods/<n>/binding`` (kube's DefaultBinder), then the ``Scheduled`` event
  (events.k8s.io, ``Successfully assigned <ns>/<pod> to <node>``, action ``Binding``). A
  failed binding forgets the assumption and retries after backoff, with ``PodScheduled``
  False ``SchedulerError``.
- no node fits: ``PodScheduled`` False ``Unschedulable`` with ``FitError``'s text (PATCHed
  only when it changed, as ``updatePod``) and the Warning ``FailedScheduling`` event (action
  ``Scheduling``); the pod waits among the unschedulable until a node is added or changes
  (labels, taints, allocatable, ``unschedulable``) or an assigned pod goes away or arrives
  (for the plugins those events can help).

- PostFilter, DefaultPreemption (``plugins.preemption`` decides): where evicting
  lower-priority pods makes room (PodDisruptionBudgets from a PDB informer), the victims get
  the ``DisruptionTarget`` condition, are deleted and get the ``Preempted`` event; the
  preemptor gets ``status.nominatedNodeName`` and is reserved there in memory (kube's
  nominator: lower-priority pods filter that node as if the nominated pod were on it), and its
  nominated node is tried first when it comes back.

What kube does that this does not: the second filter pass without nominated pods (it matters
only for inter-pod affinity); asynchronous preemption (alpha in 1.32); QueueingHints per plugin
(a coarser event table instead); the volume plugins but VolumeBinding's PreBind
(``volume_binding``: the node chosen for a WaitForFirstConsumer claim, binding after the
claims are), the DRA plugins, NodePorts' exact IP families,
ImageLocality, the system-default topology spread for pods of Services/ReplicaSets, existing
pods' preferred terms in InterPodAffinity's score (only the incoming pod's terms count);
extenders, profiles and scheduler configuration files;
parallel filtering (one core, one pod at a time; only bindings run concurrently).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import random
from collections.abc import Mapping
from typing import Any

from kubewire.client.errors import ClientError, NotFound, StatusError
from kubewire.client.resource import PatchType
from kubewire.client.transport import Request
from kubewire.cluster.runtime import ClusterContext, Obj, now_rfc3339
from kubewire.cluster.scheduler.plugins.filters import (
    REASON_PREFILTER_AFFINITY,
    UNRESOLVABLE,
    CycleState,
    Status,
    filter_node,
    prefilter,
)
from kubewire.cluster.scheduler.plugins.fit_error import (
    NO_NODES,
    NO_VICTIMS,
    NOT_HELPFUL,
    fit_error,
    truncate,
    unschedulable_message,
)
from kubewire.cluster.scheduler.plugins.infos import (
    NodeInfo,
    PodInfo,
    node_info,
    pod_info,
    pod_key,
)
from kubewire.cluster.scheduler.plugins.preemption import (
    Candidate,
    budget,
    disruption_condition,
    eligible,
    num_candidates,
    pick_node,
    select_victims,
    trial_node,
)
from kubewire.cluster.scheduler.plugins.scores import score_nodes
from kubewire.cluster.scheduler.queue import (
    NAMESPACE_CHANGE,
    NODE_ADD,
    NODE_UPDATE,
    POD_ASSIGNED,
    POD_DELETED,
    QueuedPod,
    SchedulingQueue,
)
from kubewire.cluster.scheduler.volume_binding import VolumeBinder, VolumeBindingError

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER = "default-scheduler"
NOT_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"
MIN_FEASIBLE_NODES = 100  # minFeasibleNodesToFind
MIN_FEASIBLE_PERCENTAGE = 5  # minFeasibleNodesPercentageToFind
MAX_BINDINGS_IN_FLIGHT = 64
IDLE_WAKEUP_S = 30.0


def num_feasible_nodes_to_find(num_all: int) -> int:
    """``numFeasibleNodesToFind`` with the adaptive ``percentageOfNodesToScore``."""
    if num_all < MIN_FEASIBLE_NODES:
        return num_all
    percentage = max(50 - num_all // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(num_all * percentage // 100, MIN_FEASIBLE_NODES)


def scheduled_condition(pod: Mapping[str, Any], reason: str, message: str,
                        now: str) -> dict[str, Any] | None:
    """``podutil.UpdatePodCondition`` for ``PodScheduled`` False: the condition to write, or
    None when the pod already carries it (lastTransitionTime kept while the status holds)."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") != "PodScheduled":
            continue
        if cond.get("status") == "False" and cond.get("reason") == reason \
                and cond.get("message") == message:
            return None
        since = cond.get("lastTransitionTime") if cond.get("status") == "False" else None
        return {"type": "PodScheduled", "status": "False", "reason": reason,
                "message": message, "lastProbeTime": None, "lastTransitionTime": since or now}
    return {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
            "lastProbeTime": None, "lastTransitionTime": now}


class Scheduler:
    """The default scheduler, run as a cluster component until cancelled."""

    name = "kube-scheduler"

    def __init__(self, ctx: ClusterContext, scheduler_name: str = DEFAULT_SCHEDULER) -> None:
        self.ctx = ctx
        self.scheduler_name = scheduler_name
        self.queue = SchedulingQueue(ctx.clock)
        self.infos: dict[str, NodeInfo] = {}  # by node name; pods may arrive before nodes
        self.nodes: dict[str, NodeInfo] = {}  # the nodes that exist
        self.node_list: list[NodeInfo] = []
        self.assumed: dict[str, str] = {}  # pod key -> node, until the informer shows it bound
        self.assigned: dict[str, str] = {}  # pod key -> node, for every pod in the cache
        self.affinity_pods = 0
        self.namespace_labels: dict[str, dict[str, str]] = {}  # for namespaceSelector terms
        self.next_start = 0
        self.events = ctx.new_recorder(DEFAULT_SCHEDULER)
        self.pods_api = ctx.api("v1", "Pod")
        self.volumes = VolumeBinder(ctx)  # PreBind of pods with claims (volume_binding)
        self._wake = asyncio.Event()
        self._bindings = asyncio.Semaphore(MAX_BINDINGS_IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()
        self.scheduled = 0
        self.failed = 0
        self.preemptions = 0
        # kube's nominator: pods nominated to a node (status.nominatedNodeName, or set here by
        # preemption before the write comes back), by node then key; and node by key
        self.nominated: dict[str, dict[str, PodInfo]] = {}
        self.nominated_to: dict[str, str] = {}
        self._pdbs: Any = None  # the PodDisruptionBudget informer, once running

    # --- the cache, from the informers -------------------------------------------------------

    def _node_list_changed(self) -> None:
        self.node_list = list(self.nodes.values())

    def on_node_add(self, obj: Obj) -> None:
        parsed = node_info(obj)
        info = self.infos.get(parsed.name)
        if info is None:
            self.infos[parsed.name] = info = parsed
        else:
            _refresh(info, parsed)
        self.nodes[info.name] = info
        self._node_list_changed()
        self.queue.move_all(NODE_ADD)
        self._wake.set()

    def on_node_update(self, old: Obj, new: Obj) -> None:
        parsed = node_info(new)
        info = self.infos.get(parsed.name)
        if info is None or parsed.name not in self.nodes:
            self.on_node_add(new)
            return
        if (info.labels, info.hard_taints, info.soft_taints, info.allocatable,
                info.unschedulable) == (parsed.labels, parsed.hard_taints, parsed.soft_taints,
                                        parsed.allocatable, parsed.unschedulable):
            return  # a heartbeat: nothing a plugin reads changed
        _refresh(info, parsed)
        self.queue.move_all(NODE_UPDATE)
        self._wake.set()

    def on_node_delete(self, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        self.nodes.pop(name, None)
        info = self.infos.get(name)
        if info is not None and not info.pods:
            del self.infos[name]
        self._node_list_changed()

    def on_namespace(self, obj: Obj, new: Obj | None = None) -> None:
        """A namespace added or changed: its labels, for terms with a ``namespaceSelector``."""
        obj = new if new is not None else obj
        meta = obj.get("metadata") or {}
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        name = str(meta.get("name") or "")
        if self.namespace_labels.get(name) != labels:
            self.namespace_labels[name] = labels
            self.queue.move_all(NAMESPACE_CHANGE)
            self._wake.set()

    def on_namespace_delete(self, obj: Obj) -> None:
        self.namespace_labels.pop(str((obj.get("metadata") or {}).get("name") or ""), None)

    def _cache_add(self, info: PodInfo) -> None:
        previous = self.assigned.get(info.key)
        if previous is not None and previous != info.node_name:
            self._cache_remove(info.key)
        node = self.infos.get(info.node_name)
        if node is None:
            self.infos[info.node_name] = node = NodeInfo(info.node_name, {}, False, (), (), {})
        old = node.pods.get(info.key)
        if old is not None and (old.affinity or old.anti_affinity):
            self.affinity_pods -= 1
        node.add_pod(info)
        if info.affinity or info.anti_affinity:
            self.affinity_pods += 1
        self.assigned[info.key] = info.node_name

    def _cache_remove(self, key: str) -> None:
        name = self.assigned.pop(key, None)
        node = self.infos.get(name) if name is not None else None
        if node is None:
            return
        gone = node.remove_pod(key)
        if gone is not None and (gone.affinity or gone.anti_affinity):
            self.affinity_pods -= 1
        if not node.pods and name not in self.nodes:
            del self.infos[node.name]

    def _nominate(self, info: PodInfo, node: str) -> None:
        self._unnominate(info.key)
        if node:
            self.nominated.setdefault(node, {})[info.key] = info
            self.nominated_to[info.key] = node

    def _unnominate(self, key: str) -> None:
        node = self.nominated_to.pop(key, None)
        if node is None:
            return
        pods = self.nominated.get(node)
        if pods is not None:
            pods.pop(key, None)
            if not pods:
                del self.nominated[node]

    def _with_nominated(self, pod: PodInfo, node: NodeInfo) -> NodeInfo:
        """``addNominatedPods``: ``node`` with the pods nominated to it that are at least as
        important as ``pod`` (a copy; ``node`` itself when there are none)."""
        waiting = self.nominated.get(node.name)
        if not waiting:
            return node
        extra = [p for k, p in waiting.items() if k != pod.key and p.priority >= pod.priority]
        if not extra:
            return node
        copy = trial_node(node)
        for other in extra:
            copy.add_pod(other)
        return copy

    def _wants(self, info: PodInfo) -> bool:
        return info.scheduler_name == self.scheduler_name and not info.gated

    def on_pod_add(self, obj: Obj) -> None:
        info = pod_info(obj)
        if info.node_name:
            self._unnominate(info.key)
            self.assumed.pop(info.key, None)
            self._cache_add(info)
            self.queue.delete(info.key)
            self.queue.move_all(POD_ASSIGNED)
        elif self._wants(info) and info.key not in self.assumed:
            self._nominate(info, nominated_node_name(obj))
            self.queue.add(info)
        self._wake.set()

    def on_pod_update(self, old: Obj, new: Obj) -> None:
        info = pod_info(new)
        if info.node_name:
            self._unnominate(info.key)
            was_assigned = info.key in self.assigned and info.key not in self.assumed
            self.assumed.pop(info.key, None)
            self._cache_add(info)
            self.queue.delete(info.key)
            if not was_assigned:
                self.queue.move_all(POD_ASSIGNED)
        elif info.key in self.assumed:
            return
        elif self._wants(info):
            node = nominated_node_name(new)
            # updateNominatedPodUnlocked: a nomination made in memory survives an update
            # written before it (neither old nor new carries one)
            if node or nominated_node_name(old) or info.key not in self.nominated_to:
                self._nominate(info, node)
            else:
                self._nominate(info, self.nominated_to[info.key])
            self.queue.add(info, changed=pod_updated(old, new))
        else:
            self._unnominate(info.key)
            self.queue.delete(info.key)
        self._wake.set()

    def on_pod_delete(self, obj: Obj) -> None:
        key = pod_key(obj)
        self.queue.delete(key)
        self._unnominate(key)
        self.assumed.pop(key, None)
        if key in self.assigned:
            self._cache_remove(key)
            self.queue.move_all(POD_DELETED)
            self._wake.set()

    # --- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        nodes = self.ctx.informer("v1", "Node")
        pods = self.ctx.informer("v1", "Pod", field_selector=NOT_TERMINAL)
        nodes.add_handlers(on_add=self.on_node_add, on_update=self.on_node_update,
                           on_delete=self.on_node_delete)
        pods.add_handlers(on_add=self.on_pod_add, on_update=self.on_pod_update,
                          on_delete=self.on_pod_delete)
        self._pdbs = self.ctx.informer("policy/v1", "PodDisruptionBudget")
        namespaces = self.ctx.informer("v1", "Namespace")
        namespaces.add_handlers(on_add=self.on_namespace, on_update=self.on_namespace,
                                on_delete=self.on_namespace_delete)
        for namespace in namespaces.cache.list():
            self.on_namespace(namespace)
        # objects the shared informers already held before these handlers were added
        for node in nodes.cache.list():
            self.on_node_add(node)
        for pod in pods.cache.list():
            self.on_pod_add(pod)
        await nodes.wait_for_sync()
        await pods.wait_for_sync()
        await namespaces.wait_for_sync()
        await self._pdbs.wait_for_sync()
        self._pods_informer = pods
        try:
            await self._loop()
        finally:
            for task in list(self._tasks):
                task.cancel()

    async def _loop(self) -> None:
        while True:
            queued = self.queue.pop()
            if queued is None:
                self._wake.clear()
                wait = self.queue.next_wakeup()
                # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation
                # that arrives as the event is set, and the scheduler would never stop
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(IDLE_WAKEUP_S if wait is None else wait):
                        await self._wake.wait()
                continue
            try:
                self.schedule_one(queued)
            except Exception:  # a bug must not stop the scheduler: retry the pod later
                log.exception("scheduling %s failed", queued.info.key)
                self.queue.error(queued)
            await asyncio.sleep(0)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- one scheduling cycle -----------------------------------------------------------------

    def schedule_one(self, queued: QueuedPod) -> None:
        """Filter, score, assume and start binding; or record why no node fits."""
        pod = queued.info
        nodes = self.node_list
        if not nodes:
            self.queue.unschedulable(queued, frozenset({"NoNodes"}))
            self._spawn(self._record_failure(pod, "Unschedulable", NO_NODES))
            return
        state = (prefilter(pod, nodes, self.namespace_labels)
                 if self.affinity_pods or pod.spread or pod.affinity or pod.anti_affinity
                 else CycleState())
        total = len(nodes)
        candidates = nodes
        skipped = 0  # nodes NodeAffinity's PreFilterResult left out: not filtered at all
        if pod.node_names is not None:
            candidates = [self.nodes[n] for n in sorted(pod.node_names) if n in self.nodes]
            skipped = total - len(candidates)
        feasible: list[NodeInfo] = []
        failed: list[tuple[NodeInfo, Status]] = []
        # evaluateNominatedNode: a pod nominated by preemption tries that node first
        nominated = self.nodes.get(nominated_node_name(pod.obj))
        if nominated is not None and (pod.node_names is None
                                      or nominated.name in pod.node_names) \
                and filter_node(pod, self._with_nominated(pod, nominated), state) is None:
            feasible.append(nominated)
        else:
            want = num_feasible_nodes_to_find(len(candidates))
            start = self.next_start
            for i in range(len(candidates)):
                node = candidates[(start + i) % len(candidates)]
                status = filter_node(pod, self._with_nominated(pod, node), state)
                if status is None:
                    feasible.append(node)
                    if len(feasible) >= want:
                        break
                else:
                    failed.append((node, status))
            self.next_start = (start + len(feasible) + len(failed)) % total
        if not feasible:
            rejectors = {s.plugin for _, s in failed} | ({"NodeAffinity"} if skipped else set())
            self.queue.unschedulable(queued, frozenset(rejectors))
            reasons = [s.reasons for _, s in failed] + [(REASON_PREFILTER_AFFINITY,)] * skipped
            preemption, chosen_victims, nominate = self._post_filter(pod, failed, state, total)
            message = unschedulable_message(total, reasons, preemption)
            if nominate is not None:
                self._nominate(pod, nominate)  # AddNominatedPod, before any other pod
            if chosen_victims is not None:
                self._spawn(self._preempt_then_record(pod, chosen_victims, message))
            else:
                self._spawn(self._record_failure(pod, "Unschedulable", message, nominate))
            return
        chosen = feasible[0] if len(feasible) == 1 else self._select(pod, feasible)
        self.queue.done(pod.key)
        self._unnominate(pod.key)
        assumed = _assigned(pod, chosen.name)
        self.assumed[pod.key] = chosen.name
        self._cache_add(assumed)
        self._spawn(self._bind(queued, chosen.name))

    def _select(self, pod: PodInfo, feasible: list[NodeInfo]) -> NodeInfo:
        """``selectHost``: the highest total, ties broken uniformly at random."""
        scores = score_nodes(pod, feasible, self.node_list, self.namespace_labels)
        best = max(scores)
        top = [node for node, score in zip(feasible, scores, strict=True) if score == best]
        return top[0] if len(top) == 1 else random.choice(top)

    def _post_filter(self, pod: PodInfo, failed: list[tuple[NodeInfo, Status]],
                     state: CycleState, total: int
                     ) -> tuple[str, Candidate | None, str | None]:
        """DefaultPreemption's PostFilter (``Evaluator.Preempt``): the message's preemption
        part (empty when it nominates), the chosen candidate (None: nothing to preempt) and
        the nomination to write (None: leave it, "": clear it)."""
        statuses = {node.name: status for node, status in failed}
        nominated_name = nominated_node_name(pod.obj)
        nominated_status = statuses.get(nominated_name)
        why = eligible(pod, self.nodes.get(nominated_name) if nominated_name else None,
                       nominated_status is None or nominated_status.code == UNRESOLVABLE)
        if why is not None:
            return why, None, None
        # nodes left out by a PreFilterResult, and unresolvable ones, cannot be helped
        potential = [(node, s) for node, s in failed if s.code != UNRESOLVABLE]
        reasons: list[tuple[str, ...]] = [(NOT_HELPFUL,)] * (total - len(potential))
        if not potential:
            return fit_error(total, reasons), None, ""
        budgets = [budget(obj) for obj in self._pdbs.cache.list()] if self._pdbs else []
        now = self.ctx.clock()
        want = num_candidates(len(potential))
        offset = random.randrange(len(potential))
        found: list[Candidate] = []
        non_violating = 0

        def fits(trial: NodeInfo) -> tuple[str, ...] | None:
            status = self._refilter(pod, trial, state)
            return None if status is None else status.reasons

        for i in range(len(potential)):
            node, _ = potential[(offset + i) % len(potential)]
            outcome = select_victims(pod, node, fits, budgets, now)
            if isinstance(outcome, Candidate):
                if outcome.victims:
                    found.append(outcome)
                    non_violating += outcome.pdb_violations == 0
                    if non_violating and len(found) >= want:
                        break
                    continue
                outcome = None
            reasons.append((NO_VICTIMS,) if outcome is None else outcome)
        if not found:
            return fit_error(total, reasons), None, ""
        chosen = pick_node(found, now)
        assert chosen is not None
        return "", chosen, chosen.node

    def _refilter(self, pod: PodInfo, trial: NodeInfo, state: CycleState) -> Status | None:
        """The filters on ``trial`` (a node with pods removed or added back), with the
        PreFilter state recomputed when it counted pods (kube's PreFilter extensions
        AddPod/RemovePod; counts that were empty stay empty: only the victims move)."""
        if state.spread_counts or state.existing_anti or state.affinity_counts \
                or state.anti_counts:
            nodes = [trial if n.name == trial.name else n for n in self.node_list]
            state = prefilter(pod, nodes, self.namespace_labels)
        return filter_node(pod, self._with_nominated(pod, trial), state)

    # --- I/O: binding, status, events ---------------------------------------------------------

    async def _bind(self, queued: QueuedPod, node: str) -> None:
        pod = queued.info
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            await self.volumes.prebind(
                pod.obj, node, lambda: self._pods_informer.get(pod.name, pod.namespace) is not None)
        except (VolumeBindingError, StatusError, ClientError) as err:
            self._binding_failed(queued, node, err)
            return
        async with self._bindings:
            try:
                await self.pods_api.resolve()
                path = self.pods_api.info.item_path(pod.name, pod.namespace, "binding")
                await self.ctx.client.request(Request("POST", path, None,
                                                      json.dumps(body).encode()))
            except (StatusError, ClientError) as err:
                self._binding_failed(queued, node, err)
                return
        self.scheduled += 1
        self.events.event(pod.obj, "Normal", "Scheduled",
                          f"Successfully assigned {pod.namespace}/{pod.name} to {node}",
                          action="Binding")

    def _binding_failed(self, queued: QueuedPod, node: str, err: Exception) -> None:
        pod = queued.info
        if self.assumed.get(pod.key) == node:
            self.assumed.pop(pod.key)
            self._cache_remove(pod.key)
        current = self._pods_informer.get(pod.name, pod.namespace)
        if current is None or (current.get("spec") or {}).get("nodeName"):
            return  # deleted or bound meanwhile: nothing to retry
        log.info("binding %s to %s failed: %s", pod.key, node, err)
        self.queue.error(queued)
        self._wake.set()
        self._spawn(self._record_failure(pod, "SchedulerError", str(err)))

    async def _preempt_then_record(self, pod: PodInfo, chosen: Candidate,
                                   message: str) -> None:
        """``prepareCandidate``, then ``handleSchedulingFailure`` with the nomination."""
        self.preemptions += 1
        await asyncio.gather(*(self._preempt_victim(pod, victim, chosen.node)
                               for victim in chosen.victims if not victim.terminating))
        # lower-priority pods nominated to this node may no longer fit there
        for other in list((self.nominated.get(chosen.node) or {}).values()):
            if other.priority < pod.priority:
                self._unnominate(other.key)
                await self._clear_nomination(other)
        await self._record_failure(pod, "Unschedulable", message, chosen.node)

    async def _preempt_victim(self, pod: PodInfo, victim: PodInfo, node: str) -> None:
        """``PreemptPod``: the ``DisruptionTarget`` condition, the deletion, the event."""
        condition = disruption_condition(pod.scheduler_name, now_rfc3339(self.ctx.clock))
        patch = {"metadata": {"uid": victim.uid}, "status": {"conditions": [condition]}}
        try:
            await self.pods_api.patch_status(victim.name, patch, namespace=victim.namespace,
                                             type=PatchType.STRATEGIC)
            await self.pods_api.delete(victim.name, namespace=victim.namespace)
        except NotFound:
            return  # already gone: preemption of it is done
        except (StatusError, ClientError) as err:
            log.info("preempting %s for %s failed: %s", victim.key, pod.key, err)
            return
        self.events.event(victim.obj, "Normal", "Preempted",
                          f"Preempted by pod {pod.uid} on node {node}", action="Preempting",
                          related=pod.obj)

    async def _clear_nomination(self, pod: PodInfo) -> None:
        try:
            await self.pods_api.patch_status(
                pod.name, {"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": None}},
                namespace=pod.namespace, type=PatchType.STRATEGIC)
        except (StatusError, ClientError) as err:
            log.info("nominatedNodeName of %s not cleared: %s", pod.key, err)

    async def _record_failure(self, pod: PodInfo, reason: str, message: str,
                              nominate: str | None = None) -> None:
        """``handleSchedulingFailure``: the event and the ``PodScheduled`` condition."""
        self.failed += 1
        current = self._pods_informer.get(pod.name, pod.namespace)
        if current is None or (current.get("spec") or {}).get("nodeName") \
                or (current.get("metadata") or {}).get("uid") != pod.uid:
            return  # gone or bound meanwhile (kube checks the informer cache too)
        message = truncate(message)
        self.events.event(current, "Warning", "FailedScheduling", message, action="Scheduling")
        condition = scheduled_condition(current, reason, message, now_rfc3339(self.ctx.clock))
        # updatePod: the nominated node is written only when it changes
        nominate_changed = nominate is not None and nominate != nominated_node_name(current)
        if condition is None and not nominate_changed:
            return
        status: dict[str, Any] = {}
        if condition is not None:
            order = [{"type": c.get("type")} for c in
                     (current.get("status") or {}).get("conditions") or ()]
            if {"type": "PodScheduled"} not in order:
                order.append({"type": "PodScheduled"})
            status = {"$setElementOrder/conditions": order, "conditions": [condition]}
        if nominate_changed:
            status["nominatedNodeName"] = nominate or None
        patch = {"metadata": {"uid": pod.uid}, "status": status}
        try:
            await self.pods_api.patch_status(pod.name, patch, namespace=pod.namespace,
                                             type=PatchType.STRATEGIC)
        except NotFound:
            return
        except (StatusError, ClientError) as err:
            log.info("PodScheduled of %s not updated: %s", pod.key, err)


_NOT_COMPARED = frozenset({"resourceVersion", "generation", "managedFields", "finalizers"})


def pod_updated(old: Obj, new: Obj) -> bool:
    """``isPodUpdated``: did more change than status, resourceVersion, generation, managed
    fields and finalizers? (The scheduler's own status patch must not requeue the pod.)"""
    def stripped(pod: Obj) -> tuple[Any, ...]:
        meta = {k: v for k, v in (pod.get("metadata") or {}).items() if k not in _NOT_COMPARED}
        rest = {k: v for k, v in pod.items() if k not in ("metadata", "status")}
        return meta, rest

    return stripped(old) != stripped(new)


def nominated_node_name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("nominatedNodeName") or "")


def _refresh(info: NodeInfo, parsed: NodeInfo) -> None:
    info.labels, info.unschedulable = parsed.labels, parsed.unschedulable
    info.hard_taints, info.soft_taints = parsed.hard_taints, parsed.soft_taints
    info.set_allocatable(parsed.allocatable)


def _assigned(pod: PodInfo, node: str) -> PodInfo:
    """The pod as the cache assumes it once bound to ``node``."""
    return dataclasses.replace(pod, node_name=node)


def make_scheduler(ctx: ClusterContext, options: object = None) -> Scheduler:
    """The scheduler component for ``ctx`` (``options``: the runner's; none apply yet)."""
    return Scheduler(ctx)
