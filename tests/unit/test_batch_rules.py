"""batch/v1 rules as pure functions: robfig/cron's schedule errors, SetDefaults_Job and
SetDefaults_CronJob, and the Job's generated selector."""

from __future__ import annotations

import pytest

from kubewire.resources import REGISTRY, Resource
from kubewire.server.writes.batch_strategy import generate_job_selector
from kubewire.server.writes.defaults import apply_kind_defaults
from kubewire.server.writes.validation.batch import indexes_total, time_zone_error
from kubewire.server.writes.validation.cron_schedule import cron_schedule_error


@pytest.mark.parametrize(("schedule", "error"), [
    ("*/5 * * * *", ""),
    ("0 0 1 jan-mar mon-fri", ""),
    ("@hourly", ""),
    ("@every 1h30m", ""),
    ("TZ=Europe/Berlin 0 * * * *", ""),
    ("", "empty spec string"),
    ("* * * * * *", "expected exactly 5 fields, found 6: [* * * * * *]"),
    ("0 24 * * *", "end of range (24) above maximum (23): 24"),
    ("0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
    ("0 0 * * 7", "end of range (7) above maximum (6): 7"),
    ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
    ("1/2/3 * * * *", "too many slashes: 1/2/3"),
    ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ("0 0 * foo *", 'failed to parse int from foo: strconv.Atoi: parsing "foo": invalid syntax'),
    ("@every x", 'failed to parse duration @every x: time: invalid duration "x"'),
    ("@reboot", "unrecognized descriptor: @reboot"),
    ("TZ=Nowhere/Land 0 * * * *",
     "provided bad location Nowhere/Land: unknown time zone Nowhere/Land"),
])
def test_cron_schedule_errors(schedule: str, error: str) -> None:
    assert cron_schedule_error(schedule, time_zone_error) == error


def test_time_zone_errors_are_gos() -> None:
    assert time_zone_error("America/New_York") == ""
    assert time_zone_error("UTC") == ""
    assert time_zone_error("Moon/Base") == "unknown time zone Moon/Base"
    assert time_zone_error("../etc") == "time: invalid location name"


def test_index_intervals() -> None:
    assert indexes_total("0-2,5", 10) == 4
    with pytest.raises(ValueError, match='too large index: "10"'):
        indexes_total("10", 10)
    with pytest.raises(ValueError, match="non-increasing order, previous: 3, current: 1"):
        indexes_total("3,1", 10)


def _resource(plural: str) -> Resource:
    found = REGISTRY.lookup("batch", "v1", plural)
    assert found is not None
    return found


def test_job_defaults() -> None:
    job = apply_kind_defaults(_resource("jobs"), {"metadata": {}, "spec": {
        "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": []}}}})
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert (spec["completionMode"], spec["suspend"], spec["manualSelector"]) == (
        "NonIndexed", False, False)
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert job["metadata"]["labels"] == {"app": "a"}
    parallel = apply_kind_defaults(_resource("jobs"), {"spec": {
        "parallelism": 3, "backoffLimitPerIndex": 1, "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}})
    spec = parallel["spec"]
    assert "completions" not in spec
    assert spec["backoffLimit"] == 2**31 - 1
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"] == "True"


def test_cron_job_defaults_leave_the_job_template_to_the_job() -> None:
    cron = apply_kind_defaults(_resource("cronjobs"), {"spec": {"schedule": "@daily",
                                                                "jobTemplate": {"spec": {}}}})
    spec = cron["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"]) == ("Allow", False)
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    assert spec["jobTemplate"] == {"spec": {}}


def test_generated_selector_keeps_user_labels_and_selector_keys() -> None:
    job = {"metadata": {"name": "j", "uid": "u-1"}, "spec": {
        "manualSelector": False,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "mine"}},
        "template": {"metadata": {"labels": {"job-name": "other"}}}}}
    generate_job_selector(job)
    assert job["spec"]["selector"] == {
        "matchLabels": {"batch.kubernetes.io/controller-uid": "mine"}}
    assert job["spec"]["template"]["metadata"]["labels"] == {
        "job-name": "other", "batch.kubernetes.io/job-name": "j", "controller-uid": "u-1",
        "batch.kubernetes.io/controller-uid": "u-1"}
    manual = {"metadata": {"name": "j", "uid": "u"}, "spec": {"manualSelector": True}}
    generate_job_selector(manual)
    assert manual == {"metadata": {"name": "j", "uid": "u"}, "spec": {"manualSelector": True}}
