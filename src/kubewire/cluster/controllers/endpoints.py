"""``endpoints-controller``: the core/v1 Endpoints of every Service with a selector (kube's
``pkg/controller/endpoint/endpoints_controller.go``).

It watches Services, Pods and Endpoints and syncs one Service per key from a work queue (a
Service's change, a change of a pod its selector matches before or after, the deletion of its
Endpoints). A sync applies ``endpoints_rules.desired``: create the Endpoints named like the
Service, or update it (PUT with the read resourceVersion) when subsets, labels or the
capacity annotation differ. A deleted Service's Endpoints are deleted; at start every existing
Endpoints is looked at once, so those left behind by a Service deleted meanwhile go too
(``checkLeftoverEndpoints``; leader-election records are left alone). Services without a
selector, and ExternalName ones, get nothing from it.

Like kube's ``staleEndpointsTracker``, after an update it remembers the resourceVersion it
replaced, and a sync that still reads that one from its cache waits for the cache. Failures
back off per Service from 5 ms (client-go's default rate limiter, as kube's controller uses)
and record kube's ``FailedToCreateEndpoint``/``FailedToUpdateEndpoint`` events.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from kubewire.client import WorkQueue
from kubewire.client.errors import Forbidden, NotFound, StatusError
from kubewire.cluster.controllers import endpoints_rules as rules
from kubewire.cluster.controllers.endpointslice import pod_projection
from kubewire.cluster.controllers.endpointslice_rules import (
    TriggerTimes,
    meta,
    selector_of,
    selects,
    spec,
)
from kubewire.cluster.runtime import ClusterContext, Retry, run_workers

log = logging.getLogger(__name__)

NAME = "endpoints-controller"
EVENT_COMPONENT = "endpoint-controller"
WORKERS = 5  # --concurrent-endpoint-syncs
STALE_RETRY_S = 0.05
LEADER_ELECTION_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
Obj = dict[str, Any]
Key = tuple[str, str]


def _key(obj: Mapping[str, Any]) -> Key:
    return str(meta(obj).get("namespace", "")), str(meta(obj).get("name", ""))


class EndpointsController:
    """Keeps every selector Service's Endpoints in step with its pods."""

    name = NAME

    def __init__(self, ctx: ClusterContext, *, workers: int = WORKERS) -> None:
        self.ctx = ctx
        self.workers = workers
        self.api = ctx.api("v1", "Endpoints")
        self.queue: WorkQueue[Key] = WorkQueue()
        self.triggers = TriggerTimes()
        self.stale: dict[Key, str] = {}  # resourceVersions this controller replaced
        self.recorder = ctx.recorder(EVENT_COMPONENT)

    async def run(self) -> None:
        ctx = self.ctx
        self.services = ctx.informer("v1", "Service")
        self.pods = ctx.informer("v1", "Pod")
        self.endpoints = ctx.informer("v1", "Endpoints")
        self.services.add_handlers(on_add=self._queue_obj,
                                   on_update=lambda _old, new: self._queue_obj(new),
                                   on_delete=self._queue_obj)
        self.pods.add_handlers(on_add=self._pod_added, on_update=self._pod_updated,
                               on_delete=self._pod_added)
        self.endpoints.add_handlers(on_delete=self._queue_obj)
        for informer in (self.services, self.pods, self.endpoints):
            await informer.wait_for_sync()
        for endpoints in self.endpoints.cache.list():  # checkLeftoverEndpoints
            if LEADER_ELECTION_ANNOTATION not in (meta(endpoints).get("annotations") or {}):
                await self.queue.add(_key(endpoints))
        await run_workers(self.queue, self.sync, workers=self.workers, what=NAME,
                          then=self._then, on_error=self._failed)

    async def _queue_obj(self, obj: Obj) -> None:
        await self.queue.add(_key(obj))

    def _services_of(self, pod: Mapping[str, Any]) -> list[Key]:
        namespace = str(meta(pod).get("namespace", ""))
        return [_key(s) for s in self.services.by_index("namespace", namespace)
                if (sel := selector_of(s)) is not None and selects(sel, pod)]

    async def _pod_added(self, pod: Obj) -> None:
        for key in self._services_of(pod):
            await self.queue.add(key)

    async def _pod_updated(self, old: Obj, new: Obj) -> None:
        if pod_projection(old) == pod_projection(new):
            return
        for key in dict.fromkeys(self._services_of(old) + self._services_of(new)):
            await self.queue.add(key)

    @staticmethod
    def _then(_key: Key, stale: bool) -> Retry | None:
        """A cache behind this controller's own writes: look again shortly."""
        return Retry(STALE_RETRY_S) if stale else None

    @staticmethod
    def _failed(key: Key, err: Exception) -> None:
        log.info("%s: syncing Service %s/%s failed: %s", NAME, *key, err)

    async def sync(self, key: Key) -> bool:
        """One Service's Endpoints; True when the cache is behind this controller's writes."""
        namespace, name = key
        service = self.services.get(name, namespace)
        if service is None:
            with contextlib.suppress(NotFound):
                await self.api.delete(name, namespace=namespace)
            self.triggers.forget(namespace, name)
            self.stale.pop(key, None)
            return False
        if spec(service).get("type") == "ExternalName":
            return False
        selector = selector_of(service)
        if selector is None:
            return False
        pods = [p for p in self.pods.by_index("namespace", namespace) if selects(selector, p)]
        trigger = self.triggers.compute(service, pods)
        current = self.endpoints.get(name, namespace)
        if current is not None and \
                self.stale.get(key) == meta(current).get("resourceVersion"):
            return True
        wanted = rules.desired(service, pods, current, trigger)
        if wanted is None:
            return False
        await self._write(key, current, wanted)
        return False

    async def _write(self, key: Key, current: Obj | None, wanted: Obj) -> None:
        namespace, name = key
        try:
            if current is None:
                await self.api.create(wanted, namespace=namespace)
            else:
                updated = await self.api.replace(wanted, namespace=namespace)
                if meta(updated).get("resourceVersion") != meta(current).get("resourceVersion"):
                    self.stale[key] = str(meta(current).get("resourceVersion"))
        except StatusError as err:
            if current is None and isinstance(err, Forbidden) and _namespace_terminating(err):
                return  # creates keep failing in a terminating namespace: drop the key
            if current is None:
                self.recorder.event(wanted, "Warning", "FailedToCreateEndpoint",
                                    f"Failed to create endpoint for service {namespace}/{name}: "
                                    f"{err}")
            else:
                self.recorder.event(wanted, "Warning", "FailedToUpdateEndpoint",
                                    f"Failed to update endpoint {namespace}/{name}: {err}")
            raise


def _namespace_terminating(err: StatusError) -> bool:
    causes = (err.details or {}).get("causes")
    return isinstance(causes, list) and any(
        isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)


def make_endpoints_controller(ctx: ClusterContext, options: object = None
                              ) -> EndpointsController:
    """The component factory (``--controllers`` name ``endpoints-controller``)."""
    return EndpointsController(ctx)
