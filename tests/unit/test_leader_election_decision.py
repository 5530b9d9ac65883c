"""The leader elector's pure decisions (``kubewire.client.leaderelection.decision`` and
``record``) against client-go's ``leaderelection.go`` and ``leaselock.go``."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from kubewire.client.leaderelection.decision import (
    Attempt,
    LeaderElectionConfig,
    Observed,
    after_get,
    check_error,
    config_errors,
    fast_path,
    jittered,
    release_record,
    written,
)
from kubewire.client.leaderelection.record import (
    LeaderElectionRecord,
    raw_record,
    record_of_spec,
    spec_of_record,
)

WALL = datetime(2026, 11, 26, 7, 0, 0, 123456, tzinfo=UTC)


def cfg(**overrides: float) -> LeaderElectionConfig:
    return LeaderElectionConfig(name="lock", namespace="ns", identity="me", **overrides)


@pytest.mark.parametrize(("overrides", "error"), [
    ({"lease_duration": 10.0, "renew_deadline": 10.0},
     "leaseDuration must be greater than renewDeadline"),
    ({"renew_deadline": 2.4, "retry_period": 2.0},
     "renewDeadline must be greater than retryPeriod*JitterFactor"),
    ({"lease_duration": 0.0, "renew_deadline": -1.0, "retry_period": -1.0},
     "leaseDuration must be greater than zero"),
    ({"renew_deadline": -1.0, "retry_period": -1.0}, "renewDeadline must be greater than zero"),
    ({"retry_period": 0.0}, "retryPeriod must be greater than zero"),
])
def test_config_is_refused_with_client_gos_first_error(overrides: dict[str, float],
                                                       error: str) -> None:
    assert config_errors(cfg(**overrides))[0] == error


def test_defaults_are_component_bases_and_an_empty_identity_is_refused() -> None:
    config = cfg()
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15, 10, 2)
    assert config_errors(config) == []
    assert config_errors(replace(config, identity="")) == ["Lock identity is empty"]
    assert replace(config, lease_duration=15.9).lease_duration_seconds == 15


def attempt(now: float, identity: str = "me", wall: datetime = WALL) -> Attempt:
    return Attempt(identity, 15, now, wall)


def held(by: str, transitions: int = 3, renewed: datetime = WALL) -> LeaderElectionRecord:
    return LeaderElectionRecord(holder_identity=by, lease_duration_seconds=15,
                                acquire_time=WALL - timedelta(hours=1), renew_time=renewed,
                                leader_transitions=transitions)


def test_another_holders_lease_is_valid_for_its_duration_after_i_saw_it_change() -> None:
    other = held("other", renewed=WALL - timedelta(days=1))  # the remote time is not trusted
    observed, record = after_get(Observed(), other, raw_record(other), attempt(100.0), 100.0)
    assert record is None and observed.time == 100.0
    # the same bytes later: no change seen, so the lease expires 15 s after 100
    observed, record = after_get(observed, other, raw_record(other), attempt(114.9), 114.9)
    assert record is None and observed.time == 100.0
    observed, record = after_get(observed, other, raw_record(other), attempt(115.0), 115.0)
    assert record is not None
    assert record.holder_identity == "me" and record.leader_transitions == 4
    assert record.acquire_time == WALL and record.renew_time == WALL
    assert record.lease_duration_seconds == 15


def test_a_renewal_seen_restarts_the_wait() -> None:
    first = held("other")
    observed, _ = after_get(Observed(), first, raw_record(first), attempt(100.0), 100.0)
    renewed = replace(first, renew_time=WALL + timedelta(seconds=10))
    observed, record = after_get(observed, renewed, raw_record(renewed), attempt(110.0), 110.0)
    assert record is None and observed.time == 110.0
    _, record = after_get(observed, renewed, raw_record(renewed), attempt(124.0), 124.0)
    assert record is None


def test_renewals_within_one_second_look_alike_as_in_client_go() -> None:
    first = held("other")
    later = replace(first, renew_time=WALL + timedelta(microseconds=500_000))
    assert raw_record(first) == raw_record(later)
    assert raw_record(first) != raw_record(replace(first, renew_time=WALL + timedelta(seconds=1)))


def test_a_released_lease_is_taken_at_once() -> None:
    released = release_record(held("other"), WALL)
    assert (released.holder_identity, released.lease_duration_seconds) == ("", 1)
    _, record = after_get(Observed(), released, raw_record(released), attempt(5.0), 5.0)
    assert record is not None and record.leader_transitions == 4


def test_my_own_lease_is_renewed_keeping_acquire_time_and_transitions() -> None:
    mine = held("me")
    observed, record = after_get(Observed(), mine, raw_record(mine), attempt(1.0), 1.0)
    assert record is not None
    assert record.acquire_time == mine.acquire_time and record.leader_transitions == 3
    observed = written(observed, record, 1.5)
    assert observed.raw == raw_record(mine)  # the last Get's bytes, as client-go keeps them
    later = WALL + timedelta(seconds=2)
    renewal = fast_path(observed, attempt(3.0, wall=later))
    assert renewal is not None
    assert (renewal.acquire_time, renewal.renew_time, renewal.leader_transitions) == (
        mine.acquire_time, later, 3)
    # past its validity (on my clock) the fast path is not taken: read first
    assert fast_path(observed, attempt(16.5)) is None
    assert fast_path(observed, attempt(3.0, identity="other")) is None


def test_nothing_seen_is_never_valid() -> None:
    assert fast_path(Observed(record=held("me")), attempt(0.0)) is None


def test_lease_spec_uses_micro_time_and_keeps_field_order() -> None:
    record = held("me")
    spec = spec_of_record(record)
    assert list(spec) == ["holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
                          "leaseTransitions"]
    assert spec["renewTime"] == "2026-11-26T07:00:00.123456Z"
    assert record_of_spec(spec) == record
    assert spec_of_record(release_record(record, WALL))["holderIdentity"] == ""
    assert record_of_spec({}) == LeaderElectionRecord()


def test_jitter_and_the_watchdog() -> None:
    assert jittered(2.0, 0.0) == 2.0
    assert jittered(2.0, 0.999) == pytest.approx(2.0 + 0.999 * 2.4)
    observed = Observed(record=held("me"), time=10.0)
    config = cfg()
    assert check_error(observed, "me", config, 5.0, 30.0) is None
    assert check_error(observed, "me", config, 5.0, 30.1) == (
        "failed election to renew leadership on lease lock")
    assert check_error(observed, "other", config, 5.0, 99.0) is None
