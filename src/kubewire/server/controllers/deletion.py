"""In-server controllers standing in for kube-controller-manager and kubelets.

- Both find marked objects in the commit feed (a delete whose request timed out is finished too).
- Namespace deletion: a namespace marked Terminating is left alone for
  ``namespace_deletion_delay_s`` (a cluster's controller-manager takes a moment too, and
  ``kubectl delete -f`` of a manifest listing the Namespace first deletes the rest meanwhile),
  then has its contents deleted (watchers see each DELETED, or MODIFIED for objects that wait on
  finalizers); each pass records kube's conditions in the namespace's status when they change
  (``namespace_conditions``), and once nothing is left the ``kubernetes`` finalizer is removed
  through ``/finalize``, which removes the namespace (objects-and-clients.md §1.9) — so
  ``kubectl delete ns x`` returns.
- Graceful pods: with no kubelet to finish them, a pod marked for graceful deletion is removed
  when its grace period ends (``pod_grace_cap_s`` shortens it), as kubelet's final grace-0
  delete would (§1.11). A pod bound to a simulated node (``spec.providerID`` ``kubewire://...``,
  registered by ``kubewire.cluster.nodes``) is left to that node's kubelet, which terminates it
  as a kubelet does.

Both resume after a restart from what the store holds (marked objects are found on start).
Their waits (the namespace deletion delay, a pod's grace period) run on ``ctx.clock``: with a
manual clock, ``advance`` ends them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import msgspec

from kubewire.clock import Timer
from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.controllers.namespace_conditions import ContentTotals, updated_conditions
from kubewire.server.request.options import DeleteOptions, WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import guaranteed_update
from kubewire.server.writes.deletes import delete_object, remove_if_finished
from kubewire.status import StatusError
from kubewire.storage.base import Change, ChangeType
from kubewire.times import format_time, parse_time_or_none

log = logging.getLogger(__name__)

SIMULATED_PROVIDER = "kubewire://"  # kubewire.cluster.nodes' nodes' spec.providerID

_decode = msgspec.json.Decoder(dict[str, Any]).decode
NAMESPACE_RETRY_S = 1.0  # re-check a namespace whose contents wait on finalizers
NAMESPACE_FINALIZER = "kubernetes"  # the namespace controller's token in spec.finalizers
CONTROLLER_MANAGER = WriteOptions(field_manager="kube-controller-manager")


class Controllers:
    """Owns the namespace and pod-termination tasks; ``stop()`` cancels them all."""

    def __init__(self, ctx: ServerContext, *, namespaces: bool = True, pods: bool = True,
                 ) -> None:
        self.ctx = ctx
        # which halves run (``--controllers``: namespace-controller, pod-termination-controller)
        self.namespaces, self.pods = namespaces, pods
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: dict[str, Timer] = {}  # on ``ctx.clock``: a manual clock fires them
        self._namespaces: dict[str, asyncio.Event] = {}
        found = (ctx.registry.lookup("", "v1", plural) for plural in ("namespaces", "pods"))
        self._watched = tuple(resource for resource in found if resource is not None)
        # between ``start()`` and ``stop()`` (a server that is not the elected controller
        # manager stops them, and starts them again when it is): the feed is heard meanwhile
        self.running = False
        self._subscribed = False

    def start(self) -> None:
        if not self._subscribed:  # stores keep their listeners: subscribe once
            self.ctx.store.subscribe(self._on_changes)
            self._subscribed = True
        self.running = True
        self.find_marked()

    def find_marked(self) -> None:
        """Take on every marked namespace and pod the caches hold (on start, and after a
        reset)."""
        for resource in self._watched:  # the kinds ``on_marked`` finishes
            cache = self.ctx.caches.for_resource(resource)
            for obj in cache.scan(resource.storage_prefix()):
                if b'"deletionTimestamp"' not in obj.value:
                    continue  # not marked: no need to decode it
                decoded = _decode(obj.value)
                if (decoded.get("metadata") or {}).get("deletionTimestamp"):
                    self.on_marked(resource, decoded)

    async def stop(self) -> None:
        """Stop: no more work from the feed, and none pending."""
        self.running = False
        await self.drop_pending()

    async def drop_pending(self) -> None:
        """Cancel every pending namespace emptying and graceful pod timer (also what a reset
        does before it changes the store: their objects go, or come back unmarked, and a later
        object of the same name must not be emptied or removed by them)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def on_marked(self, resource: Resource, obj: dict[str, Any]) -> None:
        """A delete marked ``obj``; make sure someone finishes it."""
        meta = obj.get("metadata") or {}
        if resource.id == "core/namespaces":
            if self.namespaces:
                self._watch_namespace(meta.get("name", ""))
        elif resource.id == "core/pods" and not meta.get("finalizers") and self.pods:
            self._schedule_pod(resource, obj)

    def _find_marked(self, changes: Sequence[Change]) -> None:
        """Marked namespaces and pods, from the committed feed: a write whose request timed out
        or whose client went away is finished all the same (no handler has to report it)."""
        for change in changes:
            if change.type == ChangeType.DELETED or b'"deletionTimestamp"' not in change.value:
                continue
            for resource in self._watched:
                if change.key.startswith(resource.storage_prefix()):
                    self.on_marked(resource, _decode(change.value))

    # -- namespaces --------------------------------------------------------------------------
    def _watch_namespace(self, name: str) -> None:
        if name in self._namespaces:
            return
        self._namespaces[name] = asyncio.Event()
        self._spawn(self._empty_namespace(name))

    def _on_changes(self, changes: Sequence[Change]) -> None:
        if not self.running:
            return
        self._find_marked(changes)
        if not self._namespaces:
            return
        for change in changes:
            parts = change.key.split("/", 3)
            event = self._namespaces.get(parts[2]) if len(parts) == 4 else None
            if event is not None:
                event.set()

    async def _empty_namespace(self, name: str) -> None:
        event = self._namespaces[name]
        try:
            delay = self.ctx.config.namespace_deletion_delay_s
            if delay > 0:
                await self.ctx.clock.sleep(delay)
            while True:
                totals = await self._delete_contents(name)
                if not await self._record_conditions(name, totals):
                    return  # gone, or no longer being deleted
                if totals.empty:
                    break
                event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), NAMESPACE_RETRY_S)
            await self._finalize_namespace(name)
        finally:
            self._namespaces.pop(name, None)

    async def _delete_contents(self, namespace: str) -> ContentTotals:
        """Delete what is left in ``namespace`` and count what stays (``deleteAllContent``)."""
        totals = ContentTotals()
        for resource in self.ctx.registry.stored():
            if not resource.namespaced:
                continue
            cache = self.ctx.caches.for_resource(resource)
            prefix = resource.storage_prefix(namespace)
            for obj in cache.scan(prefix):
                if b'"deletionTimestamp"' in obj.value:
                    continue  # already marked; its finalizers or grace period decide
                try:
                    # as kube's namespace controller: Background, whatever the kind's default
                    await delete_object(self.ctx, resource, namespace, obj.name,
                                        DeleteOptions(propagation_policy="Background"))
                except StatusError as err:
                    if err.code != 404:
                        totals.errors.append(err.message)
            left = [_decode(obj.value) for obj in cache.scan(prefix)]
            if left:
                totals.remaining[(resource.plural, resource.group)] = len(left)
            for item in left:
                for finalizer in (item.get("metadata") or {}).get("finalizers") or ():
                    totals.finalizers[finalizer] = totals.finalizers.get(finalizer, 0) + 1
        return totals

    def _namespace_route(self, name: str, subresource: str) -> Route:
        resource = self.ctx.registry.lookup("", "v1", "namespaces")
        assert resource is not None
        return Route(resource, "", name, subresource, False)

    async def _record_conditions(self, name: str, totals: ContentTotals) -> bool:
        """Write the pass's conditions through ``/status`` when they changed; False when the
        namespace is gone or no longer being deleted."""
        route = self._namespace_route(name, "status")
        current = self.ctx.caches.for_resource(route.resource).get(
            route.resource.storage_key("", name))
        if current is None:
            return False
        namespace = _decode(current.value)
        if not (namespace.get("metadata") or {}).get("deletionTimestamp"):
            return False
        now = format_time(self.ctx.now())

        def with_conditions(ns: dict[str, Any]) -> dict[str, Any]:
            status = ns.setdefault("status", {})
            conditions = updated_conditions(status.get("conditions") or [], totals, now)
            if conditions is not None:
                status["conditions"] = conditions
            return ns

        if updated_conditions((namespace.get("status") or {}).get("conditions") or [], totals,
                              now) is None:
            return True
        try:
            await guaranteed_update(self.ctx, route, with_conditions, CONTROLLER_MANAGER)
        except StatusError as err:
            if err.code == 404:
                return False
            log.warning("could not record namespace %s conditions: %s", name, err.message)
        return True

    async def _finalize_namespace(self, name: str) -> None:
        """``PUT /finalize`` without the ``kubernetes`` token (``finalizeNamespace``): with no
        other finalizers left, that update removes the namespace (watchers see DELETED)."""
        route = self._namespace_route(name, "finalize")

        def finalized(ns: dict[str, Any]) -> dict[str, Any]:
            spec = ns.setdefault("spec", {})
            spec["finalizers"] = sorted({f for f in spec.get("finalizers") or []
                                         if f != NAMESPACE_FINALIZER})
            return ns

        try:
            await guaranteed_update(self.ctx, route, finalized, CONTROLLER_MANAGER)
        except StatusError as err:
            if err.code != 404:  # removed already: life is good
                log.warning("could not finalize namespace %s: %s", name, err.message)

    # -- graceful pods -----------------------------------------------------------------------
    def _schedule_pod(self, resource: Resource, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = resource.storage_key(meta.get("namespace", ""), meta.get("name", ""))
        deadline = parse_time_or_none(meta.get("deletionTimestamp"))
        delay = 0.0 if deadline is None else (deadline - self.ctx.now()).total_seconds()
        cap = self.ctx.config.pod_grace_cap_s
        if cap is not None:
            delay = min(delay, cap)
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        uid = meta.get("uid")
        self._timers[key] = self.ctx.clock.call_later(
            max(delay, 0.0), lambda: self._spawn(self._finish_pod(resource, key, uid)))

    async def _finish_pod(self, resource: Resource, key: str, uid: str | None) -> None:
        self._timers.pop(key, None)
        current = self.ctx.caches.for_resource(resource).get(key)
        if current is None:
            return
        pod = _decode(current.value)
        meta = pod.get("metadata") or {}
        if self._kubelet_runs((pod.get("spec") or {}).get("nodeName")):
            return
        if meta.get("uid") == uid and meta.get("deletionTimestamp") and not meta.get("finalizers"):
            await remove_if_finished(self.ctx, resource, key, current.revision)

    def _kubelet_runs(self, node_name: object) -> bool:
        """Whether ``node_name`` is a simulated node, whose kubelet finishes its pods."""
        nodes = self.ctx.registry.lookup("", "v1", "nodes")
        if not isinstance(node_name, str) or not node_name or nodes is None:
            return False
        found = self.ctx.caches.for_resource(nodes).get(nodes.storage_key("", node_name))
        if found is None:
            return False
        provider = (_decode(found.value).get("spec") or {}).get("providerID")
        return isinstance(provider, str) and provider.startswith(SIMULATED_PROVIDER)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("controller task failed", exc_info=task.exception())

