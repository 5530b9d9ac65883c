"""The disruption controller (``disruption-controller``, kube's
``pkg/controller/disruption/disruption.go``), a client of the API.

Per PodDisruptionBudget key (woken by the budget, and by any pod the first budget selecting it
selects — kube's ``getPdbForPod``, with its ``MultiplePodDisruptionBudgets`` warning): the
selected pods of the namespace, the expected count from their controllers (a ReplicaSet, the
Deployment owning it, a StatefulSet, from the informers; any other kind through its ``/scale``,
as kube's ``getScaleController``), and the status ``disruption_rules`` computes, written with
``PUT .../status`` from the cached budget (a conflict retries). A failure other than a conflict
writes kube's fail-safe status (no disruption allowed, ``SyncFailed``). Entries of
``disruptedPods`` (written by the eviction subresource) are dropped when their pod goes or
after two minutes; the key comes back when the first expires. Events are kube's
(``NoPods``, ``UnmanagedPods``, ``CalculateExpectedPodCountFailed``, ``NotDeleted``), from
kube's source ``controllermanager``. A second queue resets a live pod's stale
``DisruptionTarget=True`` condition (written by an eviction whose delete never came) to False
after two minutes, as kube's ``syncStalePodDisruption``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from kubewire.client import WorkQueue
from kubewire.client.errors import ClientError, Conflict, NotFound, StatusError
from kubewire.client.informers.informer import NAMESPACE_INDEX
from kubewire.cluster.controllers.disruption_rules import (
    Counts,
    ScaleError,
    budget_status,
    cleared_disruption,
    current_healthy,
    disrupted_pods,
    expected_and_desired,
    fail_safe,
    stale_disruption_wait,
    uses_scale,
)
from kubewire.cluster.controllers.replica_rules import controller_ref, meta
from kubewire.cluster.runtime import ClusterContext, run_workers
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import LabelSelector, label_selector_from_match

log = logging.getLogger(__name__)
Obj = dict[str, Any]
NAME = "disruption-controller"
EVENT_SOURCE = "controllermanager"  # kube's recorder: EventSource{Component: "controllermanager"}
WORKERS = 1  # kube runs one worker


def _key(obj: Mapping[str, Any]) -> str:
    return f"{meta(obj).get('namespace', '')}/{meta(obj).get('name', '')}"


def _selector(budget: Mapping[str, Any]) -> LabelSelector | None:
    """``LabelSelectorAsSelector``: a nil selector selects nothing (None), ``{}`` everything."""
    raw = (budget.get("spec") or {}).get("selector")
    if raw is None:
        return None
    return label_selector_from_match(raw)


def _group(api_version: object) -> str:
    text = str(api_version or "")
    return text.rpartition("/")[0] if "/" in text else ""


def _replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


class DisruptionController:
    """kube's DisruptionController on shared informers."""

    name = NAME

    def __init__(self, ctx: ClusterContext, *, workers: int = WORKERS) -> None:
        self.ctx = ctx
        self.workers = workers
        self.clock = ctx.clock
        self.pdb_api = ctx.api("policy/v1", "PodDisruptionBudget")
        self.pod_api = ctx.api("v1", "Pod")
        self.recorder = ctx.recorder(EVENT_SOURCE)
        self.queue: WorkQueue[str] = WorkQueue()
        self.stale_queue: WorkQueue[str] = WorkQueue()
        self.pdbs = ctx.informer("policy/v1", "PodDisruptionBudget")
        self.pods = ctx.informer("v1", "Pod")
        self.replicasets = ctx.informer("apps/v1", "ReplicaSet")
        self.deployments = ctx.informer("apps/v1", "Deployment")
        self.statefulsets = ctx.informer("apps/v1", "StatefulSet")
        self.pdbs.add_handlers(on_add=self._pdb_changed, on_update=self._pdb_updated,
                               on_delete=self._pdb_changed)
        self.pods.add_handlers(on_add=self._pod_changed, on_update=self._pod_updated,
                               on_delete=self._pod_deleted)

    # --- event handlers -----------------------------------------------------------------

    async def _pdb_changed(self, pdb: Obj) -> None:
        await self.queue.add(_key(pdb))

    async def _pdb_updated(self, old: Obj, new: Obj) -> None:
        await self.queue.add(_key(new))

    def _pdb_for_pod(self, pod: Mapping[str, Any]) -> Obj | None:
        """``getPdbForPod``: the first budget whose valid, non-empty selector matches."""
        labels = meta(pod).get("labels") or {}
        found: list[Obj] = []
        for pdb in self.pdbs.by_index(NAMESPACE_INDEX, meta(pod).get("namespace", "")):
            try:
                selector = _selector(pdb)
            except SelectorError:
                continue
            if selector is not None and not selector.is_empty and selector.matches(labels):
                found.append(pdb)
        if not found:
            return None
        found.sort(key=lambda p: meta(p).get("name", ""))
        if len(found) > 1:
            message = (f'Pod "{meta(pod).get("namespace", "")}"/"{meta(pod).get("name", "")}" '
                       f'matches multiple PodDisruptionBudgets.  Chose '
                       f'"{meta(found[0]).get("name", "")}" arbitrarily.')
            self.recorder.event(pod, "Warning", "MultiplePodDisruptionBudgets", message)
        return found[0]

    async def _pod_changed(self, pod: Obj) -> None:
        pdb = self._pdb_for_pod(pod)
        if pdb is not None:
            await self.queue.add(_key(pdb))
        wait = stale_disruption_wait(pod, self.clock())
        if wait is not None:
            self.stale_queue.add_after(_key(pod), wait)

    async def _pod_updated(self, old: Obj, new: Obj) -> None:
        await self._pod_changed(new)

    async def _pod_deleted(self, pod: Obj) -> None:
        pdb = self._pdb_for_pod(pod)
        if pdb is not None:
            await self.queue.add(_key(pdb))

    # --- the loops ----------------------------------------------------------------------

    async def run(self) -> None:
        for informer in (self.pdbs, self.pods, self.replicasets, self.deployments,
                         self.statefulsets):
            await informer.wait_for_sync()
        for pdb in self.pdbs.cache.list():
            await self.queue.add(_key(pdb))
        async with asyncio.TaskGroup() as group:
            group.create_task(run_workers(self.queue, self.sync, workers=self.workers,
                                          what="disruption"))
            group.create_task(run_workers(self.stale_queue, self.sync_stale, workers=1,
                                          what="stale pod disruption"))

    def _pods_for(self, pdb: Mapping[str, Any]) -> list[Obj]:
        selector = _selector(pdb)
        if selector is None:
            return []
        return [pod for pod in self.pods.by_index(NAMESPACE_INDEX, meta(pdb).get("namespace", ""))
                if selector.matches(meta(pod).get("labels") or {})]

    async def sync(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        pdb = self.pdbs.get(name, namespace)
        if pdb is None:
            return
        try:
            await self._try_sync(pdb, key)
        except Conflict:
            raise
        except (ScaleError, SelectorError, StatusError, ClientError) as err:
            log.info("disruption %s: %s", key, err)
            await self._write(pdb, fail_safe(pdb, str(getattr(err, "message", "") or err),
                                             self.clock()))

    async def _try_sync(self, pdb: Obj, key: str) -> None:
        """``trySync``."""
        try:
            pods = self._pods_for(pdb)
        except SelectorError as err:
            self.recorder.event(pdb, "Warning", "NoPods", f"Failed to get pods: {err}")
            raise
        if not pods:
            self.recorder.event(pdb, "Normal", "NoPods", "No matching pods found")
        scale: int | None = None
        unmanaged: list[str] = []
        try:
            if uses_scale(pdb):
                scale, unmanaged = await self._expected_scale(pods)
            expected, desired = expected_and_desired(pdb, len(pods), scale)
        except (ScaleError, StatusError, ClientError) as err:
            self.recorder.event(pdb, "Warning", "CalculateExpectedPodCountFailed",
                                "Failed to calculate the number of expected pods: "
                                f"{getattr(err, 'message', '') or err}")
            raise
        if unmanaged:
            self.recorder.event(
                pdb, "Warning", "UnmanagedPods",
                f"Pods selected by this PodDisruptionBudget (selector: "
                f"{_go_selector((pdb.get('spec') or {}).get('selector'))}) were found to be "
                "unmanaged. As a result, the status of the PDB cannot be calculated correctly, "
                "which may result in undefined behavior. To account for these pods please set "
                '".spec.minAvailable" field of the PDB to an integer value.')
        now = self.clock()
        disrupted, recheck, overdue = disrupted_pods(pdb, pods, now)
        for pod in overdue:
            # kube's message names the budget's namespace twice (pdb.Namespace, pdb.Namespace)
            self.recorder.event(pod, "Warning", "NotDeleted",
                                f"Pod was expected by PDB {namespace_of(pdb)}/"
                                f"{namespace_of(pdb)} to be deleted but it wasn't")
        healthy = current_healthy(pods, disrupted, now)
        status = budget_status(pdb, Counts(healthy, desired, expected), disrupted, now)
        if status is not None:
            await self._write(pdb, status)
        if recheck is not None:
            self.queue.add_after(key, max(recheck - now, 0.0) + 0.5)

    async def _write(self, pdb: Obj, status: Obj) -> None:
        """``writePdbStatus``: an UpdateStatus of the cached object (its resourceVersion a
        precondition: a conflict is retried by the queue)."""
        body = {**pdb, "status": status}
        body.setdefault("apiVersion", "policy/v1")
        body.setdefault("kind", "PodDisruptionBudget")
        try:
            await self.pdb_api.replace_status(body, namespace=namespace_of(pdb))
        except NotFound:
            return

    async def _expected_scale(self, pods: list[Obj]) -> tuple[int, list[str]]:
        """``getExpectedScale``: the summed scale of the pods' controllers, and the names of
        pods without one."""
        scales: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None:
                unmanaged.append(meta(pod).get("name", ""))
                continue
            if ref.get("uid") in scales:
                continue
            found = await self._find_controller(ref, meta(pod).get("namespace", ""))
            if found is None:
                raise ScaleError(f'found no controllers for pod "{meta(pod).get("name", "")}"')
            scales[found[0]] = found[1]
        return sum(scales.values()), unmanaged

    async def _find_controller(self, ref: Mapping[str, Any], namespace: str,
                               ) -> tuple[str, int] | None:
        """kube's finders in order: ReplicationController (here through /scale), Deployment
        (through its ReplicaSet), ReplicaSet without a Deployment, StatefulSet, /scale."""
        kind, group = ref.get("kind"), _group(ref.get("apiVersion"))
        if kind == "ReplicaSet" and group in ("apps", "extensions"):
            rs = self.replicasets.get(str(ref.get("name", "")), namespace)
            if rs is not None and meta(rs).get("uid") == ref.get("uid"):
                owner = controller_ref(rs)
                if owner is None or owner.get("kind") != "Deployment":
                    return str(meta(rs).get("uid")), _replicas(rs)
                if _group(owner.get("apiVersion")) in ("apps", "extensions"):
                    deployment = self.deployments.get(str(owner.get("name", "")), namespace)
                    if deployment is not None and meta(deployment).get("uid") == owner.get("uid"):
                        return str(meta(deployment).get("uid")), _replicas(deployment)
        if kind == "StatefulSet" and group == "apps":
            sts = self.statefulsets.get(str(ref.get("name", "")), namespace)
            if sts is not None and meta(sts).get("uid") == ref.get("uid"):
                return str(meta(sts).get("uid")), _replicas(sts)
        return await self._scale_of(ref, namespace)

    async def _scale_of(self, ref: Mapping[str, Any], namespace: str) -> tuple[str, int] | None:
        """``getScaleController``: the owner's ``/scale``."""
        api = self.ctx.api(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        try:
            scale = await api.get_scale(str(ref.get("name", "")), namespace=namespace)
        except NotFound:
            return None
        uid = scale.metadata.uid if scale.metadata is not None else None
        if uid != ref.get("uid"):
            return None
        return str(uid), int((scale.spec.replicas if scale.spec else None) or 0)

    async def sync_stale(self, key: str) -> None:
        """``syncStalePodDisruption``."""
        namespace, name = key.split("/", 1)
        pod = self.pods.get(name, namespace)
        if pod is None:
            return
        now = self.clock()
        wait = stale_disruption_wait(pod, now)
        if wait is None:
            return
        if wait > 0:
            self.stale_queue.add_after(key, wait)
            return
        conditions = cleared_disruption(pod, now)
        if conditions is None:
            return
        body = {**pod, "status": {**(pod.get("status") or {}), "conditions": conditions}}
        with contextlib.suppress(NotFound):
            await self.pod_api.replace_status(body, namespace=namespace)


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace", ""))


def _go_selector(selector: object) -> str:
    """A ``*metav1.LabelSelector`` as Go's ``%v`` prints it (its generated ``String()``)."""
    if not isinstance(selector, dict):
        return "nil"
    labels = selector.get("matchLabels") or {}
    inner = "".join(f"{k}: {v}," for k, v in sorted(labels.items()))
    exprs = "".join(
        f"LabelSelectorRequirement{{Key:{e.get('key', '')},Operator:{e.get('operator', '')},"
        f"Values:[{' '.join(e.get('values') or [])}],}},"
        for e in selector.get("matchExpressions") or [] if isinstance(e, dict))
    return (f"&LabelSelector{{MatchLabels:map[string]string{{{inner}}},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")


def make_disruption_controller(ctx: ClusterContext, options: object = None,
                               ) -> DisruptionController:
    """The component factory."""
    return DisruptionController(ctx)
