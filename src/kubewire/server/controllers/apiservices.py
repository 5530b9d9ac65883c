"""kube-apiserver's ``kube-apiserver-autoregistration`` controllers and the aggregator's
available controller, for local APIServices: the built-in group/versions (``onstart``) and the
CRDs' served versions (``true``) kept as ``apiregistration.k8s.io/v1`` APIServices, and every
APIService without ``spec.service`` marked ``Available=True`` (reason ``Local``).

Every server runs it (kube's are part of kube-apiserver). One key, worked by one task: a change
of a CRD or an APIService in the commit feed marks it, and a sync compares the whole (small)
set with what is wanted (``apiservice_rules``), so a restart that finds everything in place
writes nothing. Writes go through the ordinary create, update, ``/status`` and delete paths as
``kube-apiserver``; a conflict with another replica's write is retried by the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.apiextensions.crd import crd_strategy
from kubewire.server.context import ServerContext
from kubewire.server.controllers import apiservice_rules as rules
from kubewire.server.controllers.work_queue import FeedController, WorkQueue
from kubewire.server.request.options import DeleteOptions, WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import create_object, guaranteed_update
from kubewire.server.writes.deletes import delete_object
from kubewire.status import StatusError
from kubewire.storage.base import Change
from kubewire.times import format_time

log = logging.getLogger(__name__)

API_SERVER = WriteOptions(field_manager="kube-apiserver")
_SYNC_KEY = "apiservices"

Mutation = Callable[[dict[str, Any]], dict[str, Any]]
_decode = msgspec.json.Decoder(dict[str, Any]).decode


class LocalAPIServices(FeedController):
    """``start()`` once the caches are filled; ``queue.idle`` when in step; ``await stop()``."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        kind = ctx.registry.lookup(rules.GROUP, "v1", "apiservices")
        crd_kind = ctx.registry.by_id(crd_strategy.CRD_ID)
        assert kind is not None and crd_kind is not None
        self.kind: Resource = kind
        self.crd_kind: Resource = crd_kind
        self.queue = WorkQueue("apiservice-autoregistration", self._sync)
        # names this server has synced since it started (``onstart`` ones are synced once)
        self._synced: set[str] = set()

    def mark_initial(self) -> None:
        self.queue.mark(_SYNC_KEY)

    def changed(self, changes: Sequence[Change]) -> None:
        prefixes = (self.kind.storage_prefix(), self.crd_kind.storage_prefix())
        if any(change.key.startswith(prefixes) for change in changes):
            self.queue.mark(_SYNC_KEY)

    def _scan(self, kind: Resource) -> dict[str, dict[str, Any]]:
        cache = self.ctx.caches.for_resource(kind)
        return {obj.name: _decode(obj.value) for obj in cache.scan(kind.storage_prefix())}

    async def _sync(self, _key: str) -> None:
        built_in = [(r.group, r.version) for r in self.ctx.registry if r.crd is None]
        desired = rules.desired_apiservices(built_in, self._scan(self.crd_kind).values())
        await self._register(rules.plan(desired, self._scan(self.kind), self._synced))
        self._synced.update(desired)
        for name, obj in sorted(self._scan(self.kind).items()):
            if rules.needs_local_status(obj):
                now = format_time(self.ctx.now())

                def available(live: dict[str, Any], now: str = now) -> dict[str, Any]:
                    return rules.with_local_status(live, now)

                await self._update(Route(self.kind, "", name, "status", False), available)

    async def _register(self, todo: rules.Plan) -> None:
        """autoregister's writes: create the missing, put back specs, delete the unwanted."""
        for body in todo.create:
            try:
                await create_object(self.ctx, Route(self.kind, "", "", "", False), body,
                                    API_SERVER)
            except StatusError as err:
                if err.code != 409:  # another replica made it first: fine
                    raise
        for want in todo.update:
            def put_back(live: dict[str, Any], want: dict[str, Any] = want) -> dict[str, Any]:
                return rules.with_desired_spec(live, want)

            await self._update(Route(self.kind, "", want["metadata"]["name"], "", False),
                               put_back)
        for name in todo.delete:
            try:
                await delete_object(self.ctx, self.kind, "", name, DeleteOptions())
            except StatusError as err:
                if err.code != 404:
                    raise

    async def _update(self, route: Route, mutate: Mutation) -> None:
        try:
            await guaranteed_update(self.ctx, route, mutate, API_SERVER)
        except StatusError as err:
            if err.code != 404:  # deleted meanwhile: the next sync looks again
                raise

