"""The elector's Events: ``<identity> became leader`` and ``<identity> stopped leading``, reason
``LeaderElection``, about the Lease (client-go ``LeaseLock.RecordEvent``), as
kube-controller-manager records them through its ``EventRecorder``.

``EventRecorder`` is what the lock calls (fire and forget, as client-go's broadcaster is);
``lease_event`` (pure) builds the core/v1 Event client-go's ``record`` package writes
(``makeEvent``: name ``<lease>.<unix nanoseconds in hex>``, ``count: 1``, ``source`` and
``reportingComponent`` the component); ``ClientEventRecorder`` creates it over HTTP.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from kubewire.client.api import Api
from kubewire.client.client import Client
from kubewire.times import format_time

log = logging.getLogger(__name__)

REASON = "LeaderElection"


class EventRecorder(Protocol):
    """client-go's ``EventRecorder.Eventf`` for the Lease ``lease`` (never raises)."""

    def eventf(self, lease: Mapping[str, Any], event_type: str, reason: str,
               message: str) -> None: ...


def lease_event(  # noqa: PLR0913 (the source's two as keywords)
        lease: Mapping[str, Any], event_type: str, reason: str, message: str, *,
        component: str, now: datetime) -> dict[str, Any]:
    """The core/v1 Event ``record.recorderImpl.makeEvent`` makes, in the Go struct's order."""
    meta = lease.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    nanos = int(now.timestamp()) * 1_000_000_000 + now.microsecond * 1_000
    reference = {"kind": "Lease", "namespace": meta.get("namespace", ""),
                 "name": meta.get("name", ""), "uid": meta.get("uid", ""),
                 "apiVersion": "coordination.k8s.io/v1",
                 "resourceVersion": meta.get("resourceVersion", "")}
    stamp = format_time(now)
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name', '')}.{nanos:x}", "namespace": namespace},
            "involvedObject": {k: v for k, v in reference.items() if v},
            "reason": reason, "message": message, "source": {"component": component},
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1, "type": event_type,
            "eventTime": None, "reportingComponent": component, "reportingInstance": ""}


class ClientEventRecorder:
    """Creates the Events through ``kubewire.client`` in tasks of their own (a failure is
    logged, never raised: events are best effort, as client-go's are)."""

    def __init__(self, client: Client, component: str) -> None:
        self._api = Api(dict, client=client, api_version="v1", kind="Event")
        self.component = component
        self._pending: set[asyncio.Task[None]] = set()

    def eventf(self, lease: Mapping[str, Any], event_type: str, reason: str,
               message: str) -> None:
        event = lease_event(lease, event_type, reason, message, component=self.component,
                            now=datetime.now(UTC))
        task = asyncio.get_running_loop().create_task(self._create(event))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _create(self, event: dict[str, Any]) -> None:
        try:
            await self._api.create(event, namespace=event["metadata"]["namespace"])
        except Exception as err:
            log.error("unable to record event %s: %s", event["message"], err)

    async def flush(self) -> None:
        """Wait for the Events asked for so far."""
        while self._pending:
            await asyncio.gather(*self._pending)


__all__ = ["REASON", "ClientEventRecorder", "EventRecorder", "lease_event"]
