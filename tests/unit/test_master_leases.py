"""The replicas' endpoint reconcile decisions (server/controllers/master_leases.py)."""

from __future__ import annotations

from kubewire.server.controllers import master_leases as ml


def lease(ip: str, port: int, at: float, revision: int = 1) -> ml.Lease:
    return ml.Lease(ml.lease_key(ip, port), revision, ip, port, at)


def test_records_round_trip_and_foreign_ones_are_left_alone() -> None:
    obj = ml.lease_object("10.0.0.2", 6443, 100.5, 3)
    assert obj["kind"] == "Endpoints" and obj["metadata"]["generation"] == 3
    assert ml.parse("core/masterleases/10.0.0.2:6443", 7, obj) == ml.Lease(
        "core/masterleases/10.0.0.2:6443", 7, "10.0.0.2", 6443, 100.5)
    assert ml.parse("core/masterleases/x", 7, {"kind": "Endpoints"}) is None


def test_a_lease_not_renewed_for_the_ttl_is_expired() -> None:
    fresh, stale = lease("10.0.0.1", 6443, 100.0), lease("10.0.0.2", 6443, 84.0)
    assert ml.split([fresh, stale], 100.0 + 0.5) == ([fresh], [stale])
    assert ml.split([fresh], 100.0 + ml.TTL_S) == ([fresh], [])


def test_every_replica_agrees_on_the_endpoints() -> None:
    live = [lease("10.0.0.2", 6443, 1.0), lease("10.0.0.1", 6443, 1.0)]
    for own in (("10.0.0.1", 6443), ("10.0.0.2", 6443), ("10.0.0.3", 6443)):
        addresses, port = ml.endpoints(live, own)
        assert port == 6443
        assert set(addresses) >= {"10.0.0.1", "10.0.0.2"}
    # replicas on one machine differ by port: all agree on the lowest (ip, port)'s port
    local = [lease("127.0.0.1", 16444, 1.0), lease("127.0.0.1", 16443, 1.0)]
    assert ml.endpoints(local, ("127.0.0.1", 16444)) == (["127.0.0.1"], 16443)
    assert ml.endpoints(local, ("127.0.0.1", 16443)) == (["127.0.0.1"], 16443)
    assert ml.endpoints([], ("127.0.0.1", 9)) == (["127.0.0.1"], 9)
