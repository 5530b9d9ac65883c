"""``endpointslice-mirroring-controller``: EndpointSlices mirrored from Endpoints of Services
without a selector (kube's ``pkg/controller/endpointslicemirroring``), so that clients reading
slices (kube-proxy, DNS) see endpoints written by hand.

It watches Endpoints, Services and the slices it manages (label
``endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io``) and
syncs one Endpoints name per key: an Endpoints' change, its Service's change (gaining or
losing a selector), or a change to one of its mirrored slices. A sync applies
``endpointslice_mirroring_rules.plan`` or, when the Endpoints should not be mirrored (gone,
``skip-mirror``, no Service, a Service with a selector), deletes its mirrored slices. Like the
EndpointSlice controller, it waits for its cache to show the slices it wrote, and backs off
per key from 1 s on failures; kube's ``InvalidIPAddress`` and ``TooManyAddressesToMirror``
warnings are recorded on the Endpoints.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from kubewire.client import ItemBackoff, WorkQueue
from kubewire.client.errors import NotFound
from kubewire.cluster.controllers import endpointslice_mirroring_rules as rules
from kubewire.cluster.controllers.endpointslice_rules import (
    MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
    meta,
)
from kubewire.cluster.runtime import ClusterContext, Retry, run_workers

log = logging.getLogger(__name__)

NAME = "endpointslice-mirroring-controller"
EVENT_COMPONENT = "endpointslice-mirroring-controller.k8s.io"
WORKERS = 5  # --mirroring-concurrent-service-endpoint-syncs
STALE_RETRY_S = 0.05
Obj = dict[str, Any]
Key = tuple[str, str]


def _key(obj: Mapping[str, Any]) -> Key:
    return str(meta(obj).get("namespace", "")), str(meta(obj).get("name", ""))


class EndpointSliceMirroringController:
    """Keeps the mirrored slices of selector-less Services' Endpoints in step."""

    name = NAME

    def __init__(self, ctx: ClusterContext, *, workers: int = WORKERS,
                 max_endpoints_per_subset: int = rules.MAX_ENDPOINTS_PER_SUBSET) -> None:
        self.ctx = ctx
        self.workers = workers
        self.max_per_subset = max_endpoints_per_subset
        self.api = ctx.api("discovery.k8s.io/v1", "EndpointSlice")
        self.queue: WorkQueue[Key] = WorkQueue(ItemBackoff(base_s=1.0, max_s=1000.0))
        self.written: dict[Key, dict[str, int | None]] = {}
        self.recorder = ctx.recorder(EVENT_COMPONENT)

    async def run(self) -> None:
        ctx = self.ctx
        self.endpoints = ctx.informer("v1", "Endpoints")
        self.services = ctx.informer("v1", "Service")
        self.slices = ctx.informer("discovery.k8s.io/v1", "EndpointSlice",
                                   label_selector=f"{MANAGED_BY_LABEL}={rules.CONTROLLER_NAME}")
        for informer in (self.endpoints, self.services):
            informer.add_handlers(on_add=self._queue_obj,
                                  on_update=lambda _old, new: self._queue_obj(new),
                                  on_delete=self._queue_obj)
        self.slices.add_handlers(on_add=self._queue_slice,
                                 on_update=lambda _old, new: self._queue_slice(new),
                                 on_delete=self._queue_slice)
        for informer in (self.endpoints, self.services, self.slices):
            await informer.wait_for_sync()
        await run_workers(self.queue, self.sync, workers=self.workers, what=NAME,
                          then=self._then, on_error=self._failed)

    async def _queue_obj(self, obj: Obj) -> None:
        await self.queue.add(_key(obj))

    async def _queue_slice(self, slice_: Obj) -> None:
        name = (meta(slice_).get("labels") or {}).get(SERVICE_NAME_LABEL)
        if name:
            await self.queue.add((str(meta(slice_).get("namespace", "")), str(name)))

    @staticmethod
    def _then(_key: Key, stale: bool) -> Retry | None:
        """A cache behind this controller's own writes: look again shortly."""
        return Retry(STALE_RETRY_S) if stale else None

    @staticmethod
    def _failed(key: Key, err: Exception) -> None:
        log.info("%s: syncing Endpoints %s/%s failed: %s", NAME, *key, err)

    def _mirrored(self, key: Key) -> list[Obj]:
        return [s for s in self.slices.by_index("namespace", key[0])
                if (meta(s).get("labels") or {}).get(SERVICE_NAME_LABEL) == key[1]]

    def _cache_is_stale(self, key: Key, slices: list[Obj]) -> bool:
        written = self.written.get(key)
        if not written:
            return False
        seen = {str(meta(s).get("name")): int(meta(s).get("generation") or 0) for s in slices}
        for name, generation in list(written.items()):
            if (generation is None and name in seen) or \
                    (generation is not None and seen.get(name, -1) < generation):
                return True
            del written[name]
        return False

    async def sync(self, key: Key) -> bool:
        """One Endpoints' mirrored slices; True when the cache is behind this controller."""
        namespace, name = key
        slices = self._mirrored(key)
        if self._cache_is_stale(key, slices):
            return True
        endpoints = self.endpoints.get(name, namespace)
        service = self.services.get(name, namespace)
        if endpoints is None or not rules.should_mirror(endpoints, service):
            written = self.written.setdefault(key, {})
            for slice_ in slices:
                with contextlib.suppress(NotFound):
                    await self.api.delete(str(meta(slice_).get("name")), namespace=namespace)
                written[str(meta(slice_).get("name"))] = None
            return False
        result, calc = rules.plan(endpoints, slices, self.max_per_subset)
        self._warn(endpoints, calc)
        written = self.written.setdefault(key, {})
        if not meta(endpoints).get("deletionTimestamp"):
            for slice_ in result.create:
                made = await self.api.create(slice_, namespace=namespace)
                written[str(meta(made).get("name"))] = int(meta(made).get("generation") or 0)
        for slice_ in result.update:
            updated = await self.api.replace(slice_, namespace=namespace)
            written[str(meta(updated).get("name"))] = int(meta(updated).get("generation") or 0)
        for slice_ in result.delete:
            with contextlib.suppress(NotFound):
                await self.api.delete(str(meta(slice_).get("name")), namespace=namespace)
            written[str(meta(slice_).get("name"))] = None
        return False

    def _warn(self, endpoints: Obj, calc: rules.Desired) -> None:
        obj = {"apiVersion": "v1", "kind": "Endpoints", **endpoints}
        if calc.invalid:
            self.recorder.event(obj, "Warning", "InvalidIPAddress",
                                f"Skipped {calc.invalid} invalid IP addresses when mirroring "
                                f"to EndpointSlices")
        if calc.skipped > calc.invalid:
            self.recorder.event(obj, "Warning", "TooManyAddressesToMirror",
                                f"A max of {self.max_per_subset} addresses can be mirrored to "
                                f"EndpointSlices per Endpoints subset. {calc.skipped} addresses "
                                f"were skipped")


def make_endpointslice_mirroring_controller(ctx: ClusterContext, options: object = None
                                            ) -> EndpointSliceMirroringController:
    """The component factory (``--controllers`` name ``endpointslice-mirroring-controller``)."""
    return EndpointSliceMirroringController(ctx)
