"""The ``default/kubernetes`` Service and its EndpointSlice, as kube-apiserver's bootstrap
controller keeps them (``pkg/controlplane/controller/kubernetesservice/controller.go``,
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

Both are made at start (once the server listens, so the port is known) and again whenever they
are deleted or changed, through the create and update paths as ``kube-apiserver``. kube also
writes an Endpoints object; kubewire serves no Endpoints kind.

Replicas (several servers on one etcd) each keep them. At start a replica points them at
itself; afterwards it puts back only what is not another replica's doing: a deleted object, one
whose shape no replica writes, or one whose advertised fields a manager other than
``kube-apiserver`` owns (``managedFields``: a user's edit). An advertisement another replica
wrote stands, so replicas with different addresses or ports do not rewrite it at each other
without end (kube's lease reconciler lists every live replica instead; kubewire's replicas may
listen on different ports of one host, which one EndpointSlice cannot say).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.controllers.work_queue import WorkQueue
from kubewire.server.request.options import WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import create_object, guaranteed_update
from kubewire.status import StatusError
from kubewire.storage.base import Change, ChangeType

SERVICE_NAME = "kubernetes"
NAMESPACE = "default"
SERVICE_PORT = 443
SERVICE_LABELS = {"provider": "kubernetes", "component": "apiserver"}
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGER = "kube-apiserver"
API_SERVER = WriteOptions(field_manager=MANAGER)
# the fields a replica advertises itself in (fieldsV1 paths)
SERVICE_FIELDS = (("f:spec", "f:ports"), ("f:spec", "f:type"))
SLICE_FIELDS = (("f:addressType",), ("f:endpoints",), ("f:ports",))
START = "start"  # queue keys "start:service", "start:slice": point them at this replica

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


def desired_slice(ip: str, port: int) -> dict[str, Any]:
    family = "IPv6" if ipaddress.ip_address(ip).version == 6 else "IPv4"
    return {"metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE,
                         "labels": {SERVICE_NAME_LABEL: SERVICE_NAME}},
            "addressType": family,
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}


def owned_by_others(obj: dict[str, Any], paths: Sequence[tuple[str, ...]]) -> bool:
    """Whether a field manager other than kube-apiserver owns a field on one of ``paths``
    (or below it): someone else's edit of what the replicas advertise."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, dict) or entry.get("manager") == MANAGER:
            continue
        fields = entry.get("fieldsV1")
        for path in paths:
            node = fields
            for step in path:
                node = node.get(step) if isinstance(node, dict) else None
            if node is not None:
                return True
    return False


def replica_service(svc: dict[str, Any]) -> bool:
    """A Service as a replica writes it (its own port aside), not changed by anyone else."""
    spec = svc.get("spec") or {}
    ports = spec.get("ports") or []
    return (spec.get("type") == "ClusterIP" and len(ports) == 1
            and all(ports[0].get(k) == v for k, v in
                    (("name", "https"), ("protocol", "TCP"), ("port", SERVICE_PORT)))
            and not ports[0].get("nodePort") and not owned_by_others(svc, SERVICE_FIELDS))


def replica_slice(eps: dict[str, Any]) -> bool:
    """An EndpointSlice as a replica writes it (its own address and port aside), not changed by
    anyone else."""
    labels = (eps.get("metadata") or {}).get("labels") or {}
    ports = eps.get("ports") or []
    endpoints = eps.get("endpoints") or []
    return (labels.get(SERVICE_NAME_LABEL) == SERVICE_NAME and len(ports) == 1
            and ports[0].get("name") == "https" and ports[0].get("protocol") == "TCP"
            and len(endpoints) == 1 and len(endpoints[0].get("addresses") or []) == 1
            and (endpoints[0].get("conditions") or {}).get("ready") is True
            and not owned_by_others(eps, SLICE_FIELDS))


def _ports_match(current: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> bool:
    if len(current) != len(wanted):
        return False
    return all(all(c.get(k) == w[k] for k in w) and not c.get("nodePort")
               for c, w in zip(current, wanted, strict=True))


class KubernetesService:
    """Keeps ``default/kubernetes`` (Service and EndpointSlice) pointing at this server."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        services = ctx.registry.lookup("", "v1", "services")
        slices = ctx.registry.lookup("discovery.k8s.io", "v1", "endpointslices")
        assert services is not None and slices is not None
        self.services, self.slices = services, slices
        self.queue = WorkQueue("kubernetes-service", self._sync)
        self._keys = {services.storage_key(NAMESPACE, SERVICE_NAME): "service",
                      slices.storage_key(NAMESPACE, SERVICE_NAME): "slice"}
        self.ip = "127.0.0.1"
        self.port = 0

    def start(self, host: str, port: int) -> None:
        """Begin once the server listens on ``host:port``."""
        self.ip, self.port = advertised_ip(host), port
        self.ctx.store.subscribe(self._on_changes)
        self.queue.start()
        self.queue.mark(f"{START}:service")
        self.queue.mark(f"{START}:slice")

    async def stop(self) -> None:
        await self.queue.stop()

    def _on_changes(self, changes: Sequence[Change]) -> None:
        for change in changes:
            which = self._keys.get(change.key)
            if which is not None and change.type != ChangeType.ADDED:
                self.queue.mark(which)

    async def _sync(self, key: str) -> None:
        """``slice``/``service``: put back what is not a replica's doing; ``start:...``: point
        it at this replica."""
        start, _, which = key.rpartition(":")
        if which == "service":
            await self._ensure_service(take_over=bool(start))
        else:
            await self._ensure_slice(take_over=bool(start))

    async def _ensure_service(self, *, take_over: bool) -> None:
        resource = self.services
        current = self.ctx.caches.for_resource(resource).get(
            resource.storage_key(NAMESPACE, SERVICE_NAME))
        allocator = self.ctx.allocations.allocator
        wanted = desired_service(allocator.first_ip, allocator.family, self.port)
        if current is None:
            obj = _typed(resource, wanted)
            route = Route(resource, NAMESPACE, "", "", False)
            await _create_quietly(self.ctx, route, obj, allocate=False)
            return
        existing = _decode(current.value)
        spec = existing.get("spec") or {}
        if _ports_match(spec.get("ports") or [], wanted["spec"]["ports"]) and \
                spec.get("type") == "ClusterIP":
            return
        if not take_over and replica_service(existing):
            return  # another replica's: it stands

        def reconciled(svc: dict[str, Any]) -> dict[str, Any]:
            svc.setdefault("spec", {}).update(ports=wanted["spec"]["ports"], type="ClusterIP")
            return svc

        await _update_quietly(self.ctx, Route(resource, NAMESPACE, SERVICE_NAME, "", False),
                              reconciled)

    async def _ensure_slice(self, *, take_over: bool) -> None:
        resource = self.slices
        current = self.ctx.caches.for_resource(resource).get(
            resource.storage_key(NAMESPACE, SERVICE_NAME))
        wanted = desired_slice(self.ip, self.port)
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
        if not take_over and replica_slice(existing):
            return  # another replica's: it stands

        def reconciled(eps: dict[str, Any]) -> dict[str, Any]:
            eps.update({k: wanted[k] for k in fields})
            meta = eps.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), SERVICE_NAME_LABEL: SERVICE_NAME}
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
