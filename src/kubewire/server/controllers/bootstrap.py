"""The ``default/kubernetes`` Service, its Endpoints and EndpointSlice, as kube-apiserver's
bootstrap controller keeps them (``pkg/controlplane/controller/kubernetesservice/controller.go``,
``pkg/controlplane/reconcilers``).

- Service ``kubernetes`` in ``default``: labels ``component: apiserver``, ``provider:
  kubernetes``; ClusterIP the first address of the service range (``10.96.0.1``, which the
  allocator never hands out); one port ``https`` 443/TCP to the server's port. An existing one
  whose ports or type differ gets them back (``getMasterServiceUpdateIfNeeded``).
- EndpointSlice ``kubernetes`` (``kubernetes.io/service-name: kubernetes``), written by the
  endpoint reconciler through its EndpointsAdapter (``endpointSliceFromEndpoints``): one ready
  endpoint, the server's address, and the port ``https``. kube advertises its
  ``--advertise-address``; kubewire advertises the address it listens on, or ``127.0.0.1`` when
  that is a loopback or wildcard address or a host name (the endpoint must be an IP and a
  wildcard is none).

- Endpoints ``kubernetes`` (label ``endpointslice.kubernetes.io/skip-mirror: "true"``, so the
  mirroring controller leaves it alone), written by the same reconciler (``reconcilers``
  ``createEndpoints``): one subset, the same addresses, the port ``https``/TCP.

All are made at start (once the server listens, so the port is known) and again whenever they
are deleted or changed, through the create and update paths as ``kube-apiserver``.

On a store other servers share (etcd, SQLite workers), every replica renews a master lease and
the endpoints list the live replicas, as kube's lease endpoint reconciler does
(``master_leases``); alone on its store, a server lists itself and writes no lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import ServerContext, shares_store
from kubewire.server.controllers import master_leases
from kubewire.server.controllers.work_queue import WorkQueue
from kubewire.server.request.options import WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import create_object, guaranteed_update
from kubewire.status import StatusError
from kubewire.storage.base import (
    Change,
    ChangeType,
    Create,
    Delete,
    KeyNotFoundError,
    StorageError,
    Update,
)

log = logging.getLogger(__name__)

SERVICE_NAME = "kubernetes"
NAMESPACE = "default"
SERVICE_PORT = 443
SERVICE_LABELS = {"provider": "kubernetes", "component": "apiserver"}
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror"
API_SERVER = WriteOptions(field_manager="kube-apiserver")

_decode = msgspec.json.Decoder(dict[str, Any]).decode


def advertised_ip(host: str) -> str:
    """The endpoint address for a listening host: itself, unless loopback, wildcard or a name."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return "127.0.0.1"
    if ip.is_loopback or ip.is_unspecified:
        return "127.0.0.1"
    return str(ip)


def service_ports(port: int) -> list[dict[str, Any]]:
    return [{"name": "https", "protocol": "TCP", "port": SERVICE_PORT, "targetPort": port}]


def desired_service(cluster_ip: str, family: str, port: int) -> dict[str, Any]:
    """The Service as the bootstrap controller creates it (with the fields allocation would
    add: its address is reserved, so it is given, not allocated)."""
    return {"metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE,
                         "labels": dict(SERVICE_LABELS)},
            "spec": {"ports": service_ports(port), "clusterIP": cluster_ip,
                     "clusterIPs": [cluster_ip], "type": "ClusterIP",
                     "sessionAffinity": "None", "ipFamilies": [family],
                     "ipFamilyPolicy": "SingleStack"}}


def desired_slice(ips: Sequence[str], port: int) -> dict[str, Any]:
    family = "IPv6" if ipaddress.ip_address(ips[0]).version == 6 else "IPv4"
    return {"metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE,
                         "labels": {SERVICE_NAME_LABEL: SERVICE_NAME}},
            "addressType": family,
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}


def desired_endpoints(ips: Sequence[str], port: int) -> dict[str, Any]:
    """The Endpoints as kube's endpoint reconcilers write them (one subset, addresses sorted)."""
    return {"metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE,
                         "labels": {SKIP_MIRROR_LABEL: "true"}},
            "subsets": [{"addresses": [{"ip": ip} for ip in sorted(ips)],
                         "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}


def _ports_match(current: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> bool:
    if len(current) != len(wanted):
        return False
    return all(all(c.get(k) == w[k] for k in w) and not c.get("nodePort")
               for c, w in zip(current, wanted, strict=True))


class KubernetesService:
    """Keeps ``default/kubernetes`` (Service, Endpoints, EndpointSlice) pointing at this
    server."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        services = ctx.registry.lookup("", "v1", "services")
        slices = ctx.registry.lookup("discovery.k8s.io", "v1", "endpointslices")
        endpoints = ctx.registry.lookup("", "v1", "endpoints")
        assert services is not None and slices is not None and endpoints is not None
        self.services, self.slices, self.endpoints = services, slices, endpoints
        self.queue = WorkQueue("kubernetes-service", self._sync)
        self._keys = {services.storage_key(NAMESPACE, SERVICE_NAME): "service",
                      slices.storage_key(NAMESPACE, SERVICE_NAME): "slice",
                      endpoints.storage_key(NAMESPACE, SERVICE_NAME): "endpoints"}
        self.ip = "127.0.0.1"
        self.port = 0
        # what the endpoints list: this server, or the live replicas (``master_leases``)
        self.addresses: list[str] = []
        self.endpoint_port = 0
        self.shared_store = shares_store(ctx.config)
        self._lease_generation = 0
        self._leasing: asyncio.Task[None] | None = None

    def start(self, host: str, port: int) -> None:
        """Begin once the server listens on ``host:port``."""
        self.ip, self.port = advertised_ip(host), port
        self.addresses, self.endpoint_port = [self.ip], port
        self.ctx.store.subscribe(self._on_changes)
        self.queue.start()
        if self.shared_store:
            self._leasing = asyncio.get_running_loop().create_task(
                self._renew_leases(), name="master-leases")
        self.queue.mark("service")
        self.queue.mark("slice")
        self.queue.mark("endpoints")

    async def stop(self) -> None:
        if self._leasing is not None:
            self._leasing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._leasing
            # kube's graceful stop: drop this replica's lease, then reconcile without it
            with contextlib.suppress(StorageError):
                await self.ctx.store.write(Delete(master_leases.lease_key(self.ip, self.port)))
            with contextlib.suppress(Exception):
                if await self._reconcile_leases(leaving=True):
                    await self._ensure_slice()
                    await self._ensure_endpoints()
        await self.queue.stop()

    async def _renew_leases(self) -> None:
        while True:
            try:
                if await self._reconcile_leases(renew=True):
                    self.queue.mark("service")
                    self.queue.mark("slice")
                    self.queue.mark("endpoints")
            except (StorageError, StatusError) as exc:
                log.warning("master lease reconcile failed: %s", exc)
            await asyncio.sleep(master_leases.RENEW_S)

    async def _reconcile_leases(self, *, renew: bool = False, leaving: bool = False) -> bool:
        """Renew this replica's lease (``renew``), delete expired ones, and work out the
        endpoints from the live ones (without this one when ``leaving``); True when they
        changed."""
        store = self.ctx.store
        now = time.time()
        own = master_leases.lease_key(self.ip, self.port)
        if renew:
            self._lease_generation += 1
            record = master_leases.lease_object(self.ip, self.port, now,
                                                self._lease_generation)
            try:
                await store.write(Update(own, record))
            except KeyNotFoundError:
                await store.write(Create(own, record))
        records, _ = await store.list(master_leases.PREFIX)
        found = [master_leases.parse(r.key, r.revision, _decode(r.value)) for r in records]
        live, expired = master_leases.split((f for f in found if f is not None), now)
        for lease in expired:
            with contextlib.suppress(StorageError):  # another replica deleted or renewed it
                await store.write(Delete(lease.key, lease.revision))
        if leaving:
            live = [lease for lease in live if lease.key != own]
            if not live:
                return False  # the last one out leaves the endpoints as they are
        addresses, port = master_leases.endpoints(
            live, (live[0].ip, live[0].port) if leaving else (self.ip, self.port))
        changed = (addresses, port) != (self.addresses, self.endpoint_port)
        self.addresses, self.endpoint_port = addresses, port
        return changed

    def _on_changes(self, changes: Sequence[Change]) -> None:
        for change in changes:
            which = self._keys.get(change.key)
            if which is not None and change.type != ChangeType.ADDED:
                self.queue.mark(which)

    async def _sync(self, which: str) -> None:
        if self.shared_store:  # the endpoints as the replicas' leases say now
            await self._reconcile_leases()
        if which == "service":
            await self._ensure_service()
        elif which == "endpoints":
            await self._ensure_endpoints()
        else:
            await self._ensure_slice()

    async def _ensure_service(self) -> None:
        resource = self.services
        current = self.ctx.caches.for_resource(resource).get(
            resource.storage_key(NAMESPACE, SERVICE_NAME))
        allocator = self.ctx.allocations.allocator
        wanted = desired_service(allocator.first_ip, allocator.family, self.endpoint_port)
        if current is None:
            obj = _typed(resource, wanted)
            route = Route(resource, NAMESPACE, "", "", False)
            await _create_quietly(self.ctx, route, obj, allocate=False)
            return
        spec = _decode(current.value).get("spec") or {}
        if _ports_match(spec.get("ports") or [], wanted["spec"]["ports"]) and \
                spec.get("type") == "ClusterIP":
            return

        def reconciled(svc: dict[str, Any]) -> dict[str, Any]:
            svc.setdefault("spec", {}).update(ports=wanted["spec"]["ports"], type="ClusterIP")
            return svc

        await _update_quietly(self.ctx, Route(resource, NAMESPACE, SERVICE_NAME, "", False),
                              reconciled)

    async def _ensure_slice(self) -> None:
        resource = self.slices
        current = self.ctx.caches.for_resource(resource).get(
            resource.storage_key(NAMESPACE, SERVICE_NAME))
        wanted = desired_slice(self.addresses, self.endpoint_port)
        if current is None:
            obj = _typed(resource, wanted)
            await _create_quietly(self.ctx, Route(resource, NAMESPACE, "", "", False), obj)
            return
        existing = _decode(current.value)
        fields = ("addressType", "endpoints", "ports")
        labels = (existing.get("metadata") or {}).get("labels") or {}
        if all(existing.get(k) == wanted[k] for k in fields) and \
                labels.get(SERVICE_NAME_LABEL) == SERVICE_NAME:
            return

        def reconciled(eps: dict[str, Any]) -> dict[str, Any]:
            eps.update({k: wanted[k] for k in fields})
            meta = eps.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), SERVICE_NAME_LABEL: SERVICE_NAME}
            return eps

        await _update_quietly(self.ctx, Route(resource, NAMESPACE, SERVICE_NAME, "", False),
                              reconciled)


    async def _ensure_endpoints(self) -> None:
        resource = self.endpoints
        current = self.ctx.caches.for_resource(resource).get(
            resource.storage_key(NAMESPACE, SERVICE_NAME))
        wanted = desired_endpoints(self.addresses, self.endpoint_port)
        if current is None:
            obj = _typed(resource, wanted)
            await _create_quietly(self.ctx, Route(resource, NAMESPACE, "", "", False), obj)
            return
        existing = _decode(current.value)
        labels = (existing.get("metadata") or {}).get("labels") or {}
        if existing.get("subsets") == wanted["subsets"] and \
                labels.get(SKIP_MIRROR_LABEL) == "true":
            return

        def reconciled(eps: dict[str, Any]) -> dict[str, Any]:
            eps["subsets"] = wanted["subsets"]
            meta = eps.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), SKIP_MIRROR_LABEL: "true"}
            return eps

        await _update_quietly(self.ctx, Route(resource, NAMESPACE, SERVICE_NAME, "", False),
                              reconciled)


async def _create_quietly(ctx: ServerContext, route: Route, obj: dict[str, Any], *,
                          allocate: bool = True) -> None:
    try:
        await create_object(ctx, route, obj, API_SERVER, allocate=allocate)
    except StatusError as err:
        if err.code != 409:  # made meanwhile: its own feed event brings us back
            raise


async def _update_quietly(ctx: ServerContext, route: Route, mutate: Any) -> None:
    try:
        await guaranteed_update(ctx, route, mutate, API_SERVER)
    except StatusError as err:
        if err.code != 404:  # deleted meanwhile: its DELETED brings us back
            raise


def _typed(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
