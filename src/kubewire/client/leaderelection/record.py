"""The leader election record and its two forms (client-go ``resourcelock/interface.go`` and
``leaselock.go``).

- ``LeaderElectionRecord``: what an elector reads and writes, times kept to the microsecond;
- ``spec_of_record`` / ``record_of_spec``: to and from a ``coordination.k8s.io/v1`` Lease's
  spec (``LeaderElectionRecordToLeaseSpec``: ``holderIdentity``, ``leaseDurationSeconds``,
  ``acquireTime``, ``renewTime`` as MicroTime with six fraction digits, ``leaseTransitions``,
  and ``preferredHolder``/``strategy`` only when set);
- ``raw_record``: the bytes client-go compares to notice a change (``json.Marshal`` of the
  record, whose ``metav1.Time`` fields marshal to the *second*): a holder's renewals within one
  second look alike to a contender, which is client-go's behaviour and why a lease shorter than
  two seconds is not safe with it.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from kubewire.times import format_micro_time, format_time, parse_time_or_none


@dataclass(frozen=True, slots=True)
class LeaderElectionRecord:
    """client-go's ``LeaderElectionRecord``; ``holder_identity`` "" means nobody holds it."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    leader_transitions: int = 0
    strategy: str = ""
    preferred_holder: str = ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def record_of_spec(spec: Mapping[str, Any]) -> LeaderElectionRecord:
    """``LeaseSpecToLeaderElectionRecord``: absent fields are the zero values."""
    return LeaderElectionRecord(
        holder_identity=_str(spec.get("holderIdentity")),
        lease_duration_seconds=_int(spec.get("leaseDurationSeconds")),
        acquire_time=parse_time_or_none(spec.get("acquireTime")),
        renew_time=parse_time_or_none(spec.get("renewTime")),
        leader_transitions=_int(spec.get("leaseTransitions")),
        strategy=_str(spec.get("strategy")),
        preferred_holder=_str(spec.get("preferredHolder")))


def spec_of_record(record: LeaderElectionRecord) -> dict[str, Any]:
    """``LeaderElectionRecordToLeaseSpec``, in the Go struct's field order. ``holderIdentity``
    is always written (``""`` when released); a time the record lacks is left out, as Go's
    null MicroTime is."""
    spec: dict[str, Any] = {"holderIdentity": record.holder_identity,
                            "leaseDurationSeconds": record.lease_duration_seconds}
    if record.acquire_time is not None:
        spec["acquireTime"] = format_micro_time(record.acquire_time)
    if record.renew_time is not None:
        spec["renewTime"] = format_micro_time(record.renew_time)
    spec["leaseTransitions"] = record.leader_transitions
    if record.strategy:
        spec["strategy"] = record.strategy
    if record.preferred_holder:
        spec["preferredHolder"] = record.preferred_holder
    return spec


def raw_record(record: LeaderElectionRecord) -> bytes:
    """The record as Go's ``json.Marshal`` writes it (times to the second, zero times null):
    the elector's ``observedRawRecord``, compared to tell whether the lease changed."""
    return msgspec.json.encode({
        "holderIdentity": record.holder_identity,
        "leaseDurationSeconds": record.lease_duration_seconds,
        "acquireTime": _second(record.acquire_time),
        "renewTime": _second(record.renew_time),
        "leaderTransitions": record.leader_transitions,
        "strategy": record.strategy,
        "preferredHolder": record.preferred_holder,
    })


def _second(moment: datetime | None) -> str | None:
    return None if moment is None else format_time(moment)


__all__ = ["LeaderElectionRecord", "raw_record", "record_of_spec", "spec_of_record"]
