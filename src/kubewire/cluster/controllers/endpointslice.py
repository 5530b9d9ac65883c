"""``endpointslice-controller``: EndpointSlices for every Service with a selector (kube's
``pkg/controller/endpointslice/endpointslice_controller.go`` running the
``k8s.io/endpointslice`` reconciler).

It watches Services, Pods, Nodes and the slices it manages (label
``endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io``), and syncs one
Service at a time per key from a work queue: a Service's change, a change of a pod its
selector matches (before or after), or a change to one of its slices queues it. A sync lists
from the caches and applies ``endpointslice_rules.plan``: creates (``generateName
<svc>-``, so the server names them ``<svc>-<5 random>``), updates (PUT with the read
resourceVersion) and deletes. Deleted Services are left to the garbage collector (their
slices carry a controller ownerReference), as in kube.

Its cache may lag its own writes: like kube's ``EndpointSliceTracker`` it remembers the
generation of each slice it wrote, and a sync that finds the cache older waits for it (the
key is queued again shortly) rather than writing from stale state. Failures back off per
Service from 1 s (kube's ``DefaultSyncBackOff``); a pod on a node the cache does not know is
left out and the Service synced again later, as kube does.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from kubewire.client import ItemBackoff, WorkQueue
from kubewire.client.errors import NotFound, StatusError
from kubewire.cluster.controllers import endpointslice_rules as rules
from kubewire.cluster.runtime import ClusterContext, Retry, run_workers

log = logging.getLogger(__name__)

NAME = "endpointslice-controller"
EVENT_COMPONENT = "endpoint-slice-controller"
WORKERS = 5  # --concurrent-service-endpoint-syncs
STALE_RETRY_S = 0.05
Obj = dict[str, Any]
Key = tuple[str, str]
NODE_INDEX = f"{NAME}:nodeName"  # pods by spec.nodeName, for node (zone) changes


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return rules.meta(obj)


def _key(obj: Mapping[str, Any]) -> Key:
    return str(_meta(obj).get("namespace", "")), str(_meta(obj).get("name", ""))


def pod_projection(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a pod the slices show: a pod update that changes none of it queues nothing
    (kube's ``podEndpointsChanged`` and label checks)."""
    meta, spec, status = _meta(pod), rules.spec(pod), rules.status(pod)
    return (repr(meta.get("labels")), bool(meta.get("deletionTimestamp")), status.get("phase"),
            tuple(rules.pod_ips(pod)), rules.is_pod_ready(pod), rules.pod_trigger_time(pod),
            spec.get("nodeName"), spec.get("hostname"), spec.get("subdomain"),
            repr(spec.get("containers")), repr(spec.get("initContainers")))


class EndpointSliceController:
    """Keeps every selector Service's EndpointSlices in step with its pods."""

    name = NAME

    def __init__(self, ctx: ClusterContext, *, workers: int = WORKERS,
                 max_endpoints_per_slice: int = rules.MAX_ENDPOINTS_PER_SLICE) -> None:
        self.ctx = ctx
        self.workers = workers
        self.max_per_slice = max_endpoints_per_slice
        self.api = ctx.api("discovery.k8s.io/v1", "EndpointSlice")
        self.queue: WorkQueue[Key] = WorkQueue(ItemBackoff(base_s=1.0, max_s=1000.0))
        self.triggers = rules.TriggerTimes()
        # what this controller last wrote: service -> slice name -> generation (None: deleted)
        self.written: dict[Key, dict[str, int | None]] = {}
        self.recorder = ctx.recorder(EVENT_COMPONENT)

    async def run(self) -> None:
        ctx = self.ctx
        self.services = ctx.informer("v1", "Service")
        self.pods = ctx.informer("v1", "Pod")
        with contextlib.suppress(ValueError):  # another run of this controller added it
            self.pods.add_indexer(NODE_INDEX, _node_name_of)
        self.nodes = ctx.informer("v1", "Node")
        self.slices = ctx.informer(
            "discovery.k8s.io/v1", "EndpointSlice",
            label_selector=f"{rules.MANAGED_BY_LABEL}={rules.CONTROLLER_NAME}")
        self.services.add_handlers(on_add=self._service_changed,
                                   on_update=lambda _old, new: self._service_changed(new),
                                   on_delete=self._service_deleted)
        self.pods.add_handlers(on_add=self._pod_added, on_update=self._pod_updated,
                               on_delete=self._pod_added)
        self.slices.add_handlers(on_add=self._slice_changed,
                                 on_update=lambda _old, new: self._slice_changed(new),
                                 on_delete=self._slice_changed)
        self.nodes.add_handlers(on_add=self._node_changed,
                                on_update=self._node_updated, on_delete=self._node_changed)
        for informer in (self.services, self.pods, self.nodes, self.slices):
            await informer.wait_for_sync()
        await run_workers(self.queue, self.sync, workers=self.workers, what=NAME,
                          then=self._then, on_error=self._failed)

    # --- event handlers ---------------------------------------------------------------------

    async def _service_changed(self, service: Obj) -> None:
        await self.queue.add(_key(service))

    async def _service_deleted(self, service: Obj) -> None:
        namespace, name = _key(service)
        self.triggers.forget(namespace, name)
        await self.queue.add((namespace, name))

    def _services_of(self, pod: Mapping[str, Any]) -> list[Key]:
        namespace = str(_meta(pod).get("namespace", ""))
        found: list[Key] = []
        for service in self.services.by_index("namespace", namespace):
            selector = rules.selector_of(service)
            if selector is not None and rules.selects(selector, pod):
                found.append(_key(service))
        return found

    async def _pod_added(self, pod: Obj) -> None:
        for key in self._services_of(pod):
            await self.queue.add(key)

    async def _pod_updated(self, old: Obj, new: Obj) -> None:
        if pod_projection(old) == pod_projection(new):
            return
        for key in dict.fromkeys(self._services_of(old) + self._services_of(new)):
            await self.queue.add(key)

    async def _slice_changed(self, slice_: Obj) -> None:
        service = (_meta(slice_).get("labels") or {}).get(rules.SERVICE_NAME_LABEL)
        if service:
            await self.queue.add((str(_meta(slice_).get("namespace", "")), str(service)))

    async def _node_changed(self, node: Obj) -> None:
        await self._pods_on(str(_meta(node).get("name", "")))

    async def _node_updated(self, old: Obj, new: Obj) -> None:
        zone_of = [(_meta(n).get("labels") or {}).get(rules.ZONE_LABEL) for n in (old, new)]
        if zone_of[0] != zone_of[1]:
            await self._pods_on(str(_meta(new).get("name", "")))

    async def _pods_on(self, node_name: str) -> None:
        keys: dict[Key, None] = {}
        for pod in self.pods.by_index(NODE_INDEX, node_name):
            keys.update(dict.fromkeys(self._services_of(pod)))
        for key in keys:
            await self.queue.add(key)

    # --- the sync ---------------------------------------------------------------------------

    def _then(self, key: Key, retry: str) -> Retry | None:
        """A stale cache waits briefly for this controller's own writes; a plan's errors back
        off as a failure does."""
        if retry == "stale":
            return Retry(STALE_RETRY_S)
        if retry:
            log.info("%s: Service %s/%s: %s", NAME, *key, retry)
            return Retry()
        return None

    def _failed(self, key: Key, err: Exception) -> None:
        log.info("%s: syncing Service %s/%s failed: %s", NAME, *key, err)
        service = self.services.get(key[1], key[0])
        if service is not None:  # kube's syncService error event
            self.recorder.event(service, "Warning", "FailedToUpdateEndpointSlices",
                                f"Error updating Endpoint Slices for Service "
                                f"{key[0]}/{key[1]}: {err}")

    def _cache_is_stale(self, key: Key, slices: list[Obj]) -> bool:
        """The tracker's check: a slice written is not yet in the cache at its generation, or
        one deleted still is."""
        written = self.written.get(key)
        if not written:
            return False
        seen = {str(_meta(s).get("name")): int(_meta(s).get("generation") or 0) for s in slices}
        for name, generation in list(written.items()):
            if generation is None:
                if name in seen:
                    return True
                del written[name]
            elif seen.get(name, -1) < generation:
                return True
            else:
                del written[name]
        return False

    async def sync(self, key: Key) -> str:
        """One Service's slices; returns "" when done, "stale" to look again when the cache has
        caught up, or a reason to retry later."""
        namespace, name = key
        service = self.services.get(name, namespace)
        if service is None:
            self.written.pop(key, None)
            return ""  # the garbage collector deletes its slices (ownerReference)
        if rules.spec(service).get("type") == "ExternalName":
            return ""
        selector = rules.selector_of(service)
        if selector is None:
            return ""  # services without a selector get no slices from this controller
        slices = [s for s in self.slices.by_index("namespace", namespace)
                  if (_meta(s).get("labels") or {}).get(rules.SERVICE_NAME_LABEL) == name]
        if self._cache_is_stale(key, slices):
            return "stale"
        pods = [p for p in self.pods.by_index("namespace", namespace)
                if rules.selects(selector, p)]
        nodes: dict[str, Obj] = {}
        for node_name in {str(rules.spec(p).get("nodeName") or "") for p in pods}:
            found = self.nodes.get(node_name) if node_name else None
            if found is not None:
                nodes[node_name] = found
        trigger = self.triggers.compute(service, pods)
        plan = rules.plan(service, pods, nodes, slices, max_per_slice=self.max_per_slice)
        await self._apply(key, service, plan, trigger)
        return "; ".join(plan.errors)

    async def _apply(self, key: Key, service: Obj, plan: rules.Plan, trigger: str) -> None:
        namespace = key[0]
        written = self.written.setdefault(key, {})
        if not _meta(service).get("deletionTimestamp"):
            for slice_ in plan.create:
                rules.with_trigger_time(slice_, trigger)
                try:
                    made = await self.api.create(slice_, namespace=namespace)
                except StatusError as err:
                    if _namespace_terminating(err):
                        return
                    raise
                written[str(_meta(made).get("name"))] = int(_meta(made).get("generation") or 0)
        for slice_ in plan.update:
            rules.with_trigger_time(slice_, trigger)
            updated = await self.api.replace(slice_, namespace=namespace)
            written[str(_meta(updated).get("name"))] = int(
                _meta(updated).get("generation") or 0)
        for slice_ in plan.delete:
            name = str(_meta(slice_).get("name"))
            with contextlib.suppress(NotFound):
                await self.api.delete(name, namespace=namespace)
            written[name] = None


def _node_name_of(pod: Obj) -> list[str]:
    node_name = rules.spec(pod).get("nodeName")
    return [str(node_name)] if node_name else []


def _namespace_terminating(err: StatusError) -> bool:
    """``errors.HasStatusCause(err, NamespaceTerminatingCause)``."""
    causes = (err.details or {}).get("causes")
    return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating"
               for c in causes or [] if isinstance(causes, list))


def make_endpointslice_controller(ctx: ClusterContext, options: object = None
                                  ) -> EndpointSliceController:
    """The component factory (``--controllers`` name ``endpointslice-controller``)."""
    return EndpointSliceController(ctx)
