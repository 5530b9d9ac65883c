"""Which servers the ``default/kubernetes`` endpoints list when several share one store (pure).

kube-apiserver's lease endpoint reconciler (``pkg/controlplane/reconcilers/lease.go``, the
default ``--endpoint-reconciler-type``): every replica keeps ``/registry/masterleases/<ip>``, a
``v1 Endpoints`` holding its address under a 15 s etcd lease, renewed every 10 s (the write
bumps ``generation`` so it is never a no-op), and writes the ``kubernetes`` endpoints from the
live ones; a replica stopping deletes its own. kubewire keeps the same records under
``core/masterleases/<ip>:<port>`` (the etcd store puts them at ``/registry/masterleases/...``):
replicas on one machine differ by port, where kube's share ``--secure-port``. The store has no
TTL, so each record says when it was renewed (``kubewire.io/renewed-at``, Unix seconds) and a
record not renewed for ``TTL_S`` is expired; any replica deletes expired ones.

One EndpointSlice has one port list, so when live replicas listen on different ports the
endpoints name those on the port of the lowest (ip, port): every replica computes the same
answer from the same records, so they agree instead of rewriting each other's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

PREFIX = "core/masterleases/"
TTL_S = 15.0  # kube's DefaultEndpointReconcilerTTL
RENEW_S = 10.0  # kube's DefaultEndpointReconcilerInterval
RENEWED_AT = "kubewire.io/renewed-at"


def lease_key(ip: str, port: int) -> str:
    return f"{PREFIX}{ip}:{port}"


def lease_object(ip: str, port: int, now_s: float, generation: int) -> dict[str, Any]:
    """The record a replica renews: kube's masterlease Endpoints, with its port and time."""
    return {"kind": "Endpoints", "apiVersion": "v1",
            "metadata": {"name": f"{ip}:{port}", "generation": generation,
                         "annotations": {RENEWED_AT: f"{now_s:.3f}"}},
            "subsets": [{"addresses": [{"ip": ip}],
                         "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}


@dataclass(frozen=True, slots=True)
class Lease:
    key: str
    revision: int
    ip: str
    port: int
    renewed_at: float


def parse(key: str, revision: int, obj: dict[str, Any]) -> Lease | None:
    """A stored record, or None when it is not one kubewire wrote (it is then left alone)."""
    try:
        meta = obj["metadata"]
        subset = obj["subsets"][0]
        return Lease(key, revision, str(subset["addresses"][0]["ip"]),
                     int(subset["ports"][0]["port"]), float(meta["annotations"][RENEWED_AT]))
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def split(leases: Iterable[Lease], now_s: float) -> tuple[list[Lease], list[Lease]]:
    """(live, expired) records at ``now_s``."""
    live: list[Lease] = []
    expired: list[Lease] = []
    for lease in leases:
        (expired if now_s - lease.renewed_at > TTL_S else live).append(lease)
    return live, expired


def endpoints(live: Iterable[Lease], own: tuple[str, int]) -> tuple[list[str], int]:
    """(addresses, port) the ``kubernetes`` endpoints should list: the live replicas on the
    port of the lowest (ip, port); this server alone when none is live (its own record not
    written yet)."""
    addresses = sorted({(lease.ip, lease.port) for lease in live} | {own})
    port = addresses[0][1]
    return sorted({ip for ip, p in addresses if p == port}), port
