"""What a leader elector decides, apart from the reads and writes (client-go
``tools/leaderelection/leaderelection.go``, v0.32).

An elector remembers what it last saw of the lease (``Observed``: the record, its raw bytes and
*when it saw them on its own monotonic clock*). It never trusts the remote ``renewTime``: a
lease held by another is valid while ``observed.time + leaseDurationSeconds > now``, and
``observed.time`` moves only when the raw record changes. Each ``tryAcquireOrRenew`` is:

1. ``fast_path``: I hold it and it is still valid → write my renewal straight away (keeping
   ``acquireTime`` and ``leaseTransitions``); on failure fall through;
2. Get; not found → ``initial_record`` is created;
3. ``after_get``: notice a change, then either refuse (held by another, still valid) or give
   the record to write: mine kept as it was, or taken over with ``leaseTransitions + 1`` and a
   new ``acquireTime``; every write has ``renewTime`` now and my ``leaseDurationSeconds``;
4. ``written``: after a successful write the record is mine as written, seen now (client-go
   keeps the raw bytes of the last Get).

``release_record`` is what ``ReleaseOnCancel`` writes (nobody holds it, one second left).
Pure: the caller brings the clock readings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from kubewire.client.leaderelection.record import LeaderElectionRecord

JITTER_FACTOR = 1.2  # client-go's JitterFactor
DEFAULT_LEASE_DURATION_S = 15.0  # component-base's RecommendedDefaultLeaderElectionConfiguration
DEFAULT_RENEW_DEADLINE_S = 10.0
DEFAULT_RETRY_PERIOD_S = 2.0


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """One candidate in the election for one Lease. Durations are in seconds.

    - ``lease_duration``: how long a contender waits, from the last change it saw, before it
      takes the lease (written as whole ``leaseDurationSeconds``);
    - ``renew_deadline``: how long the leader keeps trying to renew before it stops leading;
    - ``retry_period``: the wait between tries (jittered by up to ``JITTER_FACTOR`` while
      acquiring);
    - ``release_on_cancel``: when the elector is cancelled (or stops leading), give the lease
      up (``holderIdentity: ""``, ``leaseDurationSeconds: 1``) so another takes it at once.
      Only safe once the work the lease guards has stopped, which ``LeaderElector.run`` makes
      sure of.
    """

    name: str
    namespace: str
    identity: str
    lease_duration: float = DEFAULT_LEASE_DURATION_S
    renew_deadline: float = DEFAULT_RENEW_DEADLINE_S
    retry_period: float = DEFAULT_RETRY_PERIOD_S
    release_on_cancel: bool = False

    @property
    def lease_duration_seconds(self) -> int:
        """``int(LeaseDuration / time.Second)``: what each write puts in the lease."""
        return int(self.lease_duration)

    def describe(self) -> str:
        """``namespace/name``, as the lock describes itself in logs."""
        return f"{self.namespace}/{self.name}"


def config_errors(config: LeaderElectionConfig) -> list[str]:
    """``NewLeaderElector``'s checks, in its order and with its texts (the first is the one
    it returns)."""
    errors = []
    if config.lease_duration <= config.renew_deadline:
        errors.append("leaseDuration must be greater than renewDeadline")
    if config.renew_deadline <= JITTER_FACTOR * config.retry_period:
        errors.append("renewDeadline must be greater than retryPeriod*JitterFactor")
    if config.lease_duration <= 0:
        errors.append("leaseDuration must be greater than zero")
    if config.renew_deadline <= 0:
        errors.append("renewDeadline must be greater than zero")
    if config.retry_period <= 0:
        errors.append("retryPeriod must be greater than zero")
    if not config.identity:
        errors.append("Lock identity is empty")
    return errors


@dataclass(frozen=True, slots=True)
class Observed:
    """``observedRecord``, ``observedRawRecord`` and ``observedTime`` (monotonic seconds; None:
    nothing seen yet, which is never valid)."""

    record: LeaderElectionRecord = field(default_factory=LeaderElectionRecord)
    raw: bytes | None = None
    time: float | None = None


@dataclass(frozen=True, slots=True)
class Attempt:
    """One ``tryAcquireOrRenew``: who I am, my lease length, and the clock when it began
    (``now`` monotonic, for validity; ``wall`` for the times written)."""

    identity: str
    lease_duration_seconds: int
    now: float
    wall: datetime


def is_leader(observed: Observed, identity: str) -> bool:
    """``IsLeader``: the last record seen names me."""
    return observed.record.holder_identity == identity


def is_lease_valid(observed: Observed, now: float) -> bool:
    """``isLeaseValid``: seen less than its ``leaseDurationSeconds`` ago, on my clock."""
    return (observed.time is not None
            and observed.time + observed.record.lease_duration_seconds > now)


def initial_record(attempt: Attempt) -> LeaderElectionRecord:
    """The record an attempt writes before corrections: mine, acquired and renewed now."""
    return LeaderElectionRecord(holder_identity=attempt.identity,
                                lease_duration_seconds=attempt.lease_duration_seconds,
                                acquire_time=attempt.wall, renew_time=attempt.wall)


def fast_path(observed: Observed, attempt: Attempt) -> LeaderElectionRecord | None:
    """Step 1: the renewal to write optimistically, or None when I do not hold a valid lease."""
    if not (is_leader(observed, attempt.identity) and is_lease_valid(observed, attempt.now)):
        return None
    return replace(initial_record(attempt), acquire_time=observed.record.acquire_time,
                   leader_transitions=observed.record.leader_transitions)


def after_get(observed: Observed, got: LeaderElectionRecord, raw: bytes, attempt: Attempt,
              seen_at: float) -> tuple[Observed, LeaderElectionRecord | None]:
    """Step 3: the lease as read (``raw`` its bytes, read at ``seen_at``) → what I now know,
    and the record to write (None: held by another and still valid)."""
    if observed.raw != raw:
        observed = Observed(record=got, raw=raw, time=seen_at)
    leader = is_leader(observed, attempt.identity)
    if got.holder_identity and is_lease_valid(observed, attempt.now) and not leader:
        return observed, None
    record = initial_record(attempt)
    if leader:
        record = replace(record, acquire_time=got.acquire_time,
                         leader_transitions=got.leader_transitions)
    else:
        record = replace(record, leader_transitions=got.leader_transitions + 1)
    return observed, record


def written(observed: Observed, record: LeaderElectionRecord, at: float) -> Observed:
    """``setObservedRecord`` after a successful write (the raw bytes stay the last Get's)."""
    return replace(observed, record=record, time=at)


def release_record(current: LeaderElectionRecord, wall: datetime) -> LeaderElectionRecord:
    """``tryRelease``: nobody holds it, for one second, transitions kept."""
    return LeaderElectionRecord(holder_identity="", lease_duration_seconds=1,
                                acquire_time=wall, renew_time=wall,
                                leader_transitions=current.leader_transitions)


def jittered(period: float, chance: float, factor: float = JITTER_FACTOR) -> float:
    """``wait.Jitter``: ``period`` plus up to ``factor`` times more (``chance`` in [0, 1))."""
    return period + chance * factor * period


def check_error(observed: Observed, identity: str, config: LeaderElectionConfig,
                max_tolerable_expired: float, now: float) -> str | None:
    """``Check`` (the healthz watchdog): a leader that has not renewed for the lease duration
    plus ``max_tolerable_expired`` is unhealthy; a follower never is."""
    if not is_leader(observed, identity) or observed.time is None:
        return None
    if now - observed.time > config.lease_duration + max_tolerable_expired:
        return f"failed election to renew leadership on lease {config.name}"
    return None


__all__ = [
    "DEFAULT_LEASE_DURATION_S", "DEFAULT_RENEW_DEADLINE_S", "DEFAULT_RETRY_PERIOD_S",
    "JITTER_FACTOR", "Attempt", "LeaderElectionConfig", "Observed", "after_get", "check_error",
    "config_errors", "fast_path", "initial_record", "is_leader", "is_lease_valid", "jittered",
    "release_record", "written",
]
