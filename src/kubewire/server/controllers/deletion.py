"""In-server controllers standing in for kube-controller-manager and kubelets.

- Both find marked objects in the commit feed (a delete whose request timed out is finished too).
- Namespace deletion: a namespace marked Terminating has its contents deleted (watchers see
  each DELETED, or MODIFIED for objects that wait on finalizers), and is removed once empty
  (objects-and-clients.md §1.9) — so ``kubectl delete ns x`` returns.
- Graceful pods: with no kubelet to finish them, a pod marked for graceful deletion is removed
  when its grace period ends (``pod_grace_cap_s`` shortens it), as kubelet's final grace-0
  delete would (§1.11).

Both resume after a restart from what the store holds (marked objects are found on start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.request.options import DeleteOptions
from kubewire.server.writes.deletes import delete_object, remove_if_finished
from kubewire.status import StatusError
from kubewire.storage.base import Change, ChangeType
from kubewire.times import parse_time_or_none

log = logging.getLogger(__name__)

_decode = msgspec.json.Decoder(dict[str, Any]).decode
NAMESPACE_RETRY_S = 1.0  # re-check a namespace whose contents wait on finalizers


class Controllers:
    """Owns the namespace and pod-termination tasks; ``stop()`` cancels them all."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._namespaces: dict[str, asyncio.Event] = {}
        found = (ctx.registry.lookup("", "v1", plural) for plural in ("namespaces", "pods"))
        self._watched = tuple(resource for resource in found if resource is not None)

    def start(self) -> None:
        self.ctx.store.subscribe(self._on_changes)
        for resource in self.ctx.registry.stored():
            cache = self.ctx.caches.for_resource(resource)
            for obj in cache.scan(resource.storage_prefix()):
                decoded = _decode(obj.value)
                if (decoded.get("metadata") or {}).get("deletionTimestamp"):
                    self.on_marked(resource, decoded)

    async def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def on_marked(self, resource: Resource, obj: dict[str, Any]) -> None:
        """A delete marked ``obj``; make sure someone finishes it."""
        meta = obj.get("metadata") or {}
        if resource.id == "core/namespaces":
            self._watch_namespace(meta.get("name", ""))
        elif resource.id == "core/pods" and not meta.get("finalizers"):
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
            while not await self._delete_contents(name):
                event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), NAMESPACE_RETRY_S)
            await self._remove_namespace(name)
        finally:
            self._namespaces.pop(name, None)

    async def _delete_contents(self, namespace: str) -> bool:
        """Delete what is left in ``namespace``; True when nothing remains."""
        empty = True
        for resource in self.ctx.registry.stored():
            if not resource.namespaced:
                continue
            cache = self.ctx.caches.for_resource(resource)
            for obj in cache.scan(resource.storage_prefix(namespace)):
                empty = False
                if b'"deletionTimestamp"' in obj.value:
                    continue  # already marked; its finalizers or grace period decide
                with contextlib.suppress(StatusError):
                    await delete_object(self.ctx, resource, namespace, obj.name,
                                        DeleteOptions())
        return empty

    async def _remove_namespace(self, name: str) -> None:
        resource = self.ctx.registry.lookup("", "v1", "namespaces")
        assert resource is not None
        key = resource.storage_key("", name)
        current = self.ctx.caches.for_resource(resource).get(key)
        if current is not None:
            await remove_if_finished(self.ctx, resource, key, current.revision)

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
        loop = asyncio.get_running_loop()
        uid = meta.get("uid")
        self._timers[key] = loop.call_later(
            max(delay, 0.0), lambda: self._spawn(self._finish_pod(resource, key, uid)))

    async def _finish_pod(self, resource: Resource, key: str, uid: str | None) -> None:
        self._timers.pop(key, None)
        current = self.ctx.caches.for_resource(resource).get(key)
        if current is None:
            return
        meta = _decode(current.value).get("metadata") or {}
        if meta.get("uid") == uid and meta.get("deletionTimestamp") and not meta.get("finalizers"):
            await remove_if_finished(self.ctx, resource, key, current.revision)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("controller task failed", exc_info=task.exception())

