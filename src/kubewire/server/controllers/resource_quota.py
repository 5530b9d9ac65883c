"""The resourcequota controller (``pkg/controller/resourcequota/resource_quota_controller.go``).

Keeps every ResourceQuota's ``status``: ``hard`` is ``spec.hard`` and ``used`` what the
quota's namespace holds of each hard resource (``quota.calculate_used``: pods' requests and
limits, services, claims' storage, ``count/<resource>.<group>`` of every served namespaced
kind). A namespace is recalculated when one of its quotas is made or changed and when anything
in it is deleted or updated in a way that changes its usage (kube's replenishment), at start
and every 5 minutes (kube's full resync) every namespace that has quotas. Its
writes go through the ``/status`` update path as ``kube-controller-manager``, and only when
the status differs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.controllers.work_queue import FeedController, WorkQueue
from kubewire.server.request.options import WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes import quota
from kubewire.server.writes.create_update import guaranteed_update
from kubewire.status import StatusError
from kubewire.storage.base import Change, ChangeType

CONTROLLER_MANAGER = WriteOptions(field_manager="kube-controller-manager")
RESYNC_S = 300.0  # kube-controller-manager --resource-quota-sync-period (5m)
# the kinds whose usage an update can change (evaluators' UpdateFilter in kube's controller)
_USAGE = frozenset(("core/pods", "core/services", "core/persistentvolumeclaims"))

_decode = msgspec.json.Decoder(dict[str, Any]).decode


class ResourceQuotaController(FeedController):
    """``start()`` and ``stop()`` as the other controller-manager loops."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        quotas = ctx.registry.lookup("", "v1", "resourcequotas")
        assert quotas is not None
        self.quotas = quotas
        self.queue = WorkQueue("resourcequota", self._sync)
        self._resync: asyncio.Task[None] | None = None

    def mark_initial(self) -> None:
        self._mark_all()

    def start(self) -> None:
        super().start()
        self._resync = asyncio.get_running_loop().create_task(self._resync_every(),
                                                              name="resourcequota-resync")

    async def stop(self) -> None:
        if self._resync is not None:
            self._resync.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._resync
            self._resync = None
        await super().stop()

    def _mark_all(self) -> None:
        for found in self.ctx.caches.for_resource(self.quotas).scan(
                self.quotas.storage_prefix()):
            self.queue.mark(found.namespace)

    async def _resync_every(self) -> None:
        """kube's full resync (``--resource-quota-sync-period``): sets right a charge whose
        object was then not stored."""
        while True:
            await asyncio.sleep(RESYNC_S)
            self._mark_all()

    def _namespaced(self) -> list[Resource]:
        return [res for res in self.ctx.registry.stored()
                if res.namespaced and res.is_stored_version]

    def changed(self, changes: Sequence[Change]) -> None:
        """What kube's controller reacts to: a quota made, or its spec changed (not its status:
        admission moves ``used``), and the replenishment events: deletions, and updates of the
        kinds whose usage an update changes (a pod ending, a service's type, a claim's size).
        Creates are charged by admission."""
        cache = self.ctx.caches.for_resource(self.quotas)
        quota_prefix = self.quotas.storage_prefix()
        for change in changes:
            parts = change.key.split("/")
            if len(parts) != 4:  # <group>/<plural>/<namespace>/<name>: namespaced objects
                continue
            namespace = parts[2]
            if change.key.startswith(quota_prefix):
                if change.type == ChangeType.ADDED or _spec_changed(change):
                    self.queue.mark(namespace)
                continue
            if change.type == ChangeType.ADDED or (
                    change.type == ChangeType.MODIFIED and f"{parts[0]}/{parts[1]}" not in _USAGE):
                continue
            if any(True for _ in cache.scan(self.quotas.storage_prefix(namespace))):
                self.queue.mark(namespace)

    def _objects(self, namespace: str) -> Any:
        """The namespace's objects of an evaluator's kind, decoded once for one sync however
        many quotas the namespace has (each quota decoded and summed them all again: 20 quotas
        over 1,000 objects held the server's loop a quarter of a second each sync)."""
        decoded: dict[tuple[str, str], list[dict[str, Any]]] = {}

        def objects_of(evaluator: quota.Evaluator) -> list[dict[str, Any]]:
            found = decoded.get((evaluator.group, evaluator.plural))
            if found is not None:
                return found
            resource = self.ctx.registry.lookup(evaluator.group, _version(self.ctx, evaluator),
                                                evaluator.plural)
            if resource is None:
                return []
            cache = self.ctx.caches.for_resource(resource)
            found = decoded[(evaluator.group, evaluator.plural)] = [
                _decode(item.value) for item in cache.scan(resource.storage_prefix(namespace))]
            return found
        return objects_of

    async def _sync(self, namespace: str) -> None:
        evaluators = [quota.evaluator_for(res.group, res.plural) for res in self._namespaced()]
        cache = self.ctx.caches.for_resource(self.quotas)
        objects_of = self._objects(namespace)
        totals: dict[tuple[str, str, str], quota.Usage] = {}
        for found in list(cache.scan(self.quotas.storage_prefix(namespace))):
            current = _decode(found.value)
            status = quota.calculate_used(current, evaluators, objects_of, self.ctx.now(),
                                          totals)
            if current.get("status") == status:
                continue
            name = str(current["metadata"]["name"])
            await self._write(namespace, name, status)

    async def _write(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        route = Route(self.quotas, namespace, name, "status", False)

        def mutate(live: dict[str, Any]) -> dict[str, Any]:
            live["status"] = status
            return live

        try:
            await guaranteed_update(self.ctx, route, mutate, CONTROLLER_MANAGER)
        except StatusError:  # deleted meanwhile, or refused: the next change tries again
            return


def _spec_changed(change: Change) -> bool:
    if change.type != ChangeType.MODIFIED or change.prev_value is None:
        return False
    return bool(_decode(change.prev_value).get("spec") != _decode(change.value).get("spec"))


def _version(ctx: ServerContext, evaluator: quota.Evaluator) -> str:
    for res in ctx.registry.stored():
        if res.group == evaluator.group and res.plural == evaluator.plural \
                and res.is_stored_version:
            return res.version
    return ""


__all__ = ["ResourceQuotaController"]
