"""The Lease lock (client-go ``resourcelock/leaselock.go``) over any way of reading and writing
Leases.

``Leases`` is the small protocol the lock needs: get, create and update one Lease as a JSON
object, raising ``kubewire.status`` errors (``NotFound``, ``Conflict``, ...) as the API would.
``ClientLeases`` does it over HTTP with ``kubewire.client``; the server drives the same lock
(and elector) through its own write path with an implementation of its own.

``LeaseLock`` keeps the Lease it last read or wrote and sends it back with the new spec, so an
update carries the resourceVersion it was based on: of two candidates racing from one read,
the second gets 409 Conflict.
"""

from __future__ import annotations

from typing import Any, Protocol

from kubewire.client.api import Api
from kubewire.client.client import Client
from kubewire.client.leaderelection.events import REASON, EventRecorder
from kubewire.client.leaderelection.record import (
    LeaderElectionRecord,
    raw_record,
    record_of_spec,
    spec_of_record,
)

LEASE_API_VERSION = "coordination.k8s.io/v1"


class Leases(Protocol):
    """Reads and writes of ``coordination.k8s.io/v1`` Leases, as JSON objects."""

    async def get(self, namespace: str, name: str) -> dict[str, Any]: ...

    async def create(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]: ...

    async def update(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        """PUT ``lease`` (its ``metadata.resourceVersion`` a precondition: 409 when stale)."""
        ...


class ClientLeases:
    """``Leases`` over HTTP: GET, POST and PUT through ``kubewire.client``."""

    def __init__(self, client: Client) -> None:
        self._api = Api(dict, client=client, api_version=LEASE_API_VERSION, kind="Lease")

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._api.get(name, namespace=namespace)

    async def create(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        return await self._api.create(lease, namespace=namespace)

    async def update(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        return await self._api.replace(lease, namespace=namespace)


class LeaseLock:
    """One named Lease as an election record (``Get``, ``Create``, ``Update``)."""

    def __init__(self, leases: Leases, namespace: str, name: str, identity: str,
                 events: EventRecorder | None = None) -> None:
        self.leases, self.namespace, self.name = leases, namespace, name
        self.identity, self.events = identity, events
        self._lease: dict[str, Any] | None = None  # the last one read or written

    async def get(self) -> tuple[LeaderElectionRecord, bytes]:
        """The record and its raw bytes; raises the API's error (``NotFound`` ...)."""
        lease = await self.leases.get(self.namespace, self.name)
        self._lease = lease
        spec = lease.get("spec")
        record = record_of_spec(spec if isinstance(spec, dict) else {})
        return record, raw_record(record)

    async def create(self, record: LeaderElectionRecord) -> None:
        self._lease = await self.leases.create(self.namespace, {
            "apiVersion": LEASE_API_VERSION, "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec_of_record(record)})

    async def update(self, record: LeaderElectionRecord) -> None:
        """The last Lease seen with ``record`` as its spec (its resourceVersion the
        precondition)."""
        if self._lease is None:
            raise RuntimeError("lease not initialized, call get or create first")
        self._lease = {**self._lease, "spec": spec_of_record(record)}
        self._lease = await self.leases.update(self.namespace, self._lease)

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    def record_event(self, what: str) -> None:
        """``RecordEvent``: ``<identity> <what>`` about the Lease, when events are recorded."""
        if self.events is not None and self._lease is not None:
            self.events.eventf(self._lease, "Normal", REASON, f"{self.identity} {what}")


__all__ = ["LEASE_API_VERSION", "ClientLeases", "LeaseLock", "Leases"]
