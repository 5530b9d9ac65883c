"""Leader election for the controller-manager part of the in-server controllers
(kube-controller-manager's ``--leader-elect``).

With ``ServerConfig.leader_elect`` the server campaigns for the Lease
``kube-system/kube-controller-manager`` (``--leader-elect-resource-namespace/-name``) with the
public client's ``LeaderElector`` (client-go's rules: ``kubewire.client.leaderelection``) and
identity ``<hostname>_<uuid>``, as kube-controller-manager does (recording its ``became
leader`` and ``stopped leading`` Events about the Lease); ``lead`` starts its controllers
when it acquires the lease and ``step_down`` stops them when it loses it. The elector's reads
and writes go through ``ServerLeases``: the same create and update paths a client's POST and
PUT take (validation, managedFields as ``kube-controller-manager``, the resourceVersion
precondition: 409 when another candidate wrote first), and reads of the store itself, not the
watch cache, as an unset-resourceVersion GET reads etcd.

Where kube-controller-manager exits when it loses the lease, the server stops those
controllers and campaigns again with the same identity. On ``stop()`` it releases the lease
(client-go's ``ReleaseOnCancel``) after its controllers have stopped, so another server takes
over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from kubewire.client.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
    new_identity,
)
from kubewire.client.leaderelection.events import lease_event
from kubewire.json_copy import copy_json
from kubewire.resources import Resource
from kubewire.server.context import ServerConfig, ServerContext
from kubewire.server.request.options import WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import create_object, guaranteed_update
from kubewire.status import conflict, not_found

log = logging.getLogger(__name__)

_decode = msgspec.json.Decoder(dict[str, Any]).decode
CONTROLLER_MANAGER_COMPONENT = "kube-controller-manager"
CONTROLLER_MANAGER = WriteOptions(field_manager=CONTROLLER_MANAGER_COMPONENT)


def election_config(config: ServerConfig, identity: str) -> LeaderElectionConfig:
    """The elector's configuration from the server's ``leader_elect_*`` fields."""
    return LeaderElectionConfig(
        name=config.leader_elect_resource_name,
        namespace=config.leader_elect_resource_namespace, identity=identity,
        lease_duration=config.leader_elect_lease_duration_s,
        renew_deadline=config.leader_elect_renew_deadline_s,
        retry_period=config.leader_elect_retry_period_s, release_on_cancel=True)


class ServerLeases:
    """``Leases`` (``kubewire.client.leaderelection.lock``) through the server's own paths."""

    def __init__(self, ctx: ServerContext) -> None:
        resource = ctx.registry.lookup("coordination.k8s.io", "v1", "leases")
        assert resource is not None
        self.ctx, self.resource = ctx, resource

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        found = await self.ctx.store.get(self.resource.storage_key(namespace, name))
        if found is None:
            raise not_found(self.resource.group, self.resource.plural, name)
        return _decode(found.value)

    async def create(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        stored, _ = await create_object(self.ctx, Route(self.resource, namespace, "", "", False),
                                        lease, CONTROLLER_MANAGER)
        return _decode(stored)

    async def update(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        """As a PUT carrying a resourceVersion: 409 unless it is the stored one."""
        resource: Resource = self.resource
        meta = lease.get("metadata") or {}
        name, expected = meta.get("name", ""), meta.get("resourceVersion")

        def replaced(old: dict[str, Any]) -> dict[str, Any]:
            if expected and expected != old["metadata"].get("resourceVersion"):
                raise conflict(resource.group, resource.plural, name)
            return copy_json(lease)

        stored, _ = await guaranteed_update(self.ctx, Route(resource, namespace, name, "", False),
                                            replaced, CONTROLLER_MANAGER)
        return stored


class ServerEventRecorder:
    """kube-controller-manager's Events about its Lease (``became leader``, ``stopped
    leading``), created through the create path in tasks of their own; ``flush()`` waits for
    them (a failure is logged: events are best effort)."""

    def __init__(self, ctx: ServerContext,
                 component: str = CONTROLLER_MANAGER_COMPONENT) -> None:
        resource = ctx.registry.lookup("", "v1", "events")
        assert resource is not None
        self.ctx, self.resource, self.component = ctx, resource, component
        self._pending: set[asyncio.Task[None]] = set()

    def eventf(self, lease: Mapping[str, Any], event_type: str, reason: str,
               message: str) -> None:
        event = lease_event(lease, event_type, reason, message,
                            component=self.component, now=self.ctx.now())
        task = asyncio.get_running_loop().create_task(self._create(event))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _create(self, event: dict[str, Any]) -> None:
        route = Route(self.resource, event["metadata"]["namespace"], "", "", False)
        try:
            await create_object(self.ctx, route, event, CONTROLLER_MANAGER)
        except Exception as err:
            log.error("unable to record event %r: %s", event["message"], err)

    @property
    def idle(self) -> bool:
        return not self._pending

    async def flush(self) -> None:
        while self._pending:
            await asyncio.gather(*self._pending)


class Leadership:
    """Campaigns while the server runs: ``start()``, ``await stop()``."""

    def __init__(self, ctx: ServerContext, lead: Callable[[], None],
                 step_down: Callable[[], Awaitable[None]], identity: str | None = None,
                 lease: str | None = None) -> None:
        self.ctx = ctx
        self.identity = identity if identity is not None else new_identity()
        config = ctx.config if lease is None else dataclasses.replace(
            ctx.config, leader_elect_resource_name=lease)  # kube-scheduler's own Lease
        self.config = election_config(config, self.identity)
        self._lead, self._step_down = lead, step_down
        self._leases = ServerLeases(ctx)
        # kube-scheduler records its own Lease's events
        self.events = ServerEventRecorder(ctx, lease or CONTROLLER_MANAGER_COMPONENT)
        self.elector = self._new_elector()  # ValueError: client-go's text for a bad config
        self._task: asyncio.Task[None] | None = None
        self._tried = False  # an earlier campaign's elector tried

    def _new_elector(self) -> LeaderElector:
        async def started() -> None:
            # the elector cancels and awaits this task before it releases the lease: the
            # controllers have stopped by then
            self._lead()
            try:
                await asyncio.get_running_loop().create_future()  # until cancelled
            finally:
                await self._step_down()

        return LeaderElector(self.config, LeaderCallbacks(
            on_started_leading=started, on_stopped_leading=self._step_down,
            on_new_leader=lambda holder: log.info("new leader of %s: %s",
                                                  self.config.describe(), holder or "none")),
            self._leases, events=self.events)

    @property
    def tried(self) -> bool:
        """The first try for the lease is over (won or not), and its Event written."""
        return (self._tried or self.elector.attempts > 0) and self.events.idle

    @property
    def leading(self) -> bool:
        return self.elector.leading

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._campaign(),
                                                            name="leader-election")

    async def _campaign(self) -> None:
        while True:
            try:
                await self.elector.run()
                log.warning("leaderelection lost: %s; campaigning again",
                            self.config.describe())
            except Exception:  # a failing step down, say: campaign on, a little later
                log.exception("leader election for %s failed; campaigning again",
                              self.config.describe())
                await asyncio.sleep(self.config.retry_period)
            self._tried = True
            self.elector = self._new_elector()

    async def stop(self) -> None:
        """Stop campaigning: the controllers stop, then the lease is released."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        await self.events.flush()  # ``stopped leading`` is written before the store closes
