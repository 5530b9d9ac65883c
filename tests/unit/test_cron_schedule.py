"""CronJob schedules as robfig/cron v3 reads them (``cron_schedule``), kube's
``mostRecentScheduleTime``, and the Job controller's pure rules (``job_rules``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kubewire.cluster.controllers import job_rules as rules
from kubewire.cluster.controllers.cron_schedule import (
    ScheduleError,
    most_recent_schedule_time,
    parse_schedule,
)


def t(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def iso(stamp: float | None) -> str:
    assert stamp is not None
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M")


@pytest.mark.parametrize(("schedule", "zone", "after", "expected"), [
    ("*/5 * * * *", None, "2024-01-01T00:03:10", "2024-01-01T00:05"),
    ("* * * * *", None, "2024-01-01T00:05:00", "2024-01-01T00:06"),  # strictly after
    ("0 9 * * 1-5", None, "2024-01-05T10:00:00", "2024-01-08T09:00"),  # Friday -> Monday
    ("0 9 * * MON-FRI", None, "2024-01-05T10:00:00", "2024-01-08T09:00"),
    ("@hourly", None, "2024-01-05T10:00:00", "2024-01-05T11:00"),
    ("@daily", None, "2024-01-05T10:00:00", "2024-01-06T00:00"),
    ("@weekly", None, "2024-01-05T10:00:00", "2024-01-07T00:00"),  # Sunday
    ("@monthly", None, "2024-01-05T10:00:00", "2024-02-01T00:00"),
    ("@yearly", None, "2024-01-05T10:00:00", "2025-01-01T00:00"),
    # both day fields restricted: either matches (Friday the 5th before the 13th)
    ("0 0 13 * 5", None, "2024-01-01T00:00:00", "2024-01-05T00:00"),
    # a star day-of-week: only the day of month counts
    ("0 0 13 * *", None, "2024-01-01T00:00:00", "2024-01-13T00:00"),
    ("0 0 13 * ?", None, "2024-01-01T00:00:00", "2024-01-13T00:00"),
    ("5/20 * * * *", None, "2024-01-01T00:06:00", "2024-01-01T00:25"),  # N/step = N-max/step
    ("0 9 * * *", "America/New_York", "2024-01-05T10:00:00", "2024-01-05T14:00"),
    ("CRON_TZ=Asia/Tokyo 30 8 * * *", None, "2024-01-05T10:00:00", "2024-01-05T23:30"),
    ("TZ=UTC 0 0 1 JAN *", None, "2024-01-05T10:00:00", "2025-01-01T00:00"),
])
def test_next(schedule: str, zone: str | None, after: str, expected: str) -> None:
    assert iso(parse_schedule(schedule, zone).next(t(after))) == expected


def test_every_and_never() -> None:
    assert parse_schedule("@every 1h30m").next(100.5) == 5500.0
    assert parse_schedule("0 0 31 2 *").next(t("2024-01-01T00:00:00")) is None


@pytest.mark.parametrize(("schedule", "message"), [
    ("", "empty spec string"),
    ("* * * *", "expected exactly 5 fields, found 4: ['*', '*', '*', '*']"),
    ("61 * * * *", "end of range (61) above maximum (59): 61"),
    ("* * * * 7", "end of range (7) above maximum (6): 7"),
    ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
    ("@fortnightly", "unrecognized descriptor: @fortnightly"),
    ("TZ=Nowhere/City * * * * *", "provided bad location Nowhere/City: unknown time zone "
                                  "Nowhere/City"),
])
def test_refused(schedule: str, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(schedule)
    assert str(info.value) == message


def test_most_recent_schedule_time() -> None:
    every = parse_schedule("* * * * *")
    start = t("2024-01-01T00:00:00")
    none_yet = most_recent_schedule_time(every, start, t("2024-01-01T00:00:30"), None)
    assert none_yet.time is None
    few = most_recent_schedule_time(every, start, t("2024-01-01T00:10:30"), None)
    assert (iso(few.time), few.too_many) == ("2024-01-01T00:10", False)
    many = most_recent_schedule_time(every, start, t("2024-01-01T05:10:30"), None)
    assert (iso(many.time), many.too_many) == ("2024-01-01T05:10", True)
    # startingDeadlineSeconds moves the earliest time considered: not too many
    bounded = most_recent_schedule_time(every, start, t("2024-01-01T05:10:30"), 200)
    assert (iso(bounded.time), bounded.too_many) == ("2024-01-01T05:10", False)
    weekdays = parse_schedule("0 9 * * 1-5")
    late = most_recent_schedule_time(weekdays, start, t("2024-12-01T05:10:30"), None)
    assert (iso(late.time), late.too_many) == ("2024-11-29T09:00", True)  # a Friday


def test_indexes_round_trip() -> None:
    assert rules.format_indexes([5, 0, 1, 2, 7, 8]) == "0-2,5,7,8"
    assert rules.parse_indexes("0-2,5,7-8", 8) == {0, 1, 2, 5, 7}
    assert rules.parse_indexes(rules.format_indexes([3, 4]), 8) == {3, 4}
    assert rules.format_indexes([]) == ""


def test_backoff_delay_doubles_to_the_cap() -> None:
    assert [rules.backoff_delay(n) for n in range(5)] == [0.0, 10.0, 20.0, 40.0, 80.0]
    assert rules.backoff_delay(12) == rules.MAX_BACKOFF_S


def test_wanted_active() -> None:
    job = {"spec": {"completions": 5, "parallelism": 2}}
    assert rules.wanted_active(job, 0, 0) == 2
    assert rules.wanted_active(job, 4, 0) == 1
    assert rules.wanted_active({"spec": {"parallelism": 3}}, 0, 0) == 3
    assert rules.wanted_active({"spec": {"parallelism": 3}}, 1, 0) == 0


def test_pod_failure_policy() -> None:
    job = {"spec": {"podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}}}
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "status": {
        "phase": "Failed", "containerStatuses": [
            {"name": "main", "state": {"terminated": {"exitCode": 42}}}]}}
    match = rules.match_pod_failure_policy(job, pod)
    assert match == rules.PolicyMatch(
        "FailJob", "Container main for pod ns/p failed with exit code 42 matching FailJob "
                   "rule at index 1")
    pod["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True"}]
    assert rules.match_pod_failure_policy(job, pod) == rules.PolicyMatch("Ignore")
    pod["status"] = {"phase": "Failed", "containerStatuses": [
        {"name": "main", "state": {"terminated": {"exitCode": 1}}}]}
    assert rules.match_pod_failure_policy(job, pod) is None
