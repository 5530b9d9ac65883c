"""batch/v1 Jobs and CronJobs as kubectl and the kubernetes package see them: kube's defaults,
the generated selector and labels, Tables, the status.successful field selector, validation
texts (immutable template and completions, bad cron schedules, TZ in a schedule, time zones)
and the status subresource."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.wire import call, ok

pytestmark = kubectl.needs_kubectl

JOBS = "/apis/batch/v1/namespaces/default/jobs"
CRON_JOBS = "/apis/batch/v1/namespaces/default/cronjobs"
_CONTAINER = {"name": "c", "image": "busybox:1.36"}


def _job(name: str, **spec: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [_CONTAINER], "restartPolicy": "Never"}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": template, **spec}}


def _cron_job(name: str, schedule: str, **spec: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [_CONTAINER], "restartPolicy": "OnFailure"}}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": template}},
                     **spec}}


def _causes(reply: Any) -> list[tuple[str, str, str]]:
    status = reply.status_object()
    return [(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]]


def test_kubectl_create_job_gets_kubes_defaults_selector_and_labels(server: ServerThread) -> None:
    kubectl.ok(server, "create", "job", "pi", "--image=perl:5.34")
    job = json.loads(kubectl.ok(server, "get", "job", "pi", "-o", "json"))
    uid = job["metadata"]["uid"]
    spec = job["spec"]
    # batch/v1 SetDefaults_Job
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed"
    assert spec["suspend"] is False
    assert spec["manualSelector"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    # job/strategy.go generateSelector
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    expected = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "pi",
                "controller-uid": uid, "job-name": "pi"}
    assert spec["template"]["metadata"]["labels"] == expected
    assert job["metadata"]["labels"] == expected  # the Job shows its template's labels
    assert job["metadata"]["generation"] == 1
    assert job["status"] == {}
    # the pod template got the pod defaults
    container = spec["template"]["spec"]["containers"][0]
    assert container["terminationMessagePolicy"] == "File"
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_job_table_wide_and_status_successful_selector(server: ServerThread) -> None:
    kubectl.ok(server, "create", "job", "pi", "--image=perl:5.34")
    lines = kubectl.ok(server, "get", "jobs", "-o", "wide").splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE",
                                "CONTAINERS", "IMAGES", "SELECTOR"]
    cells = lines[1].split()
    assert cells[:3] == ["pi", "Running", "0/1"]
    assert cells[-3:-1] == ["pi", "perl:5.34"]
    assert cells[-1].startswith("batch.kubernetes.io/controller-uid=")
    assert kubectl.ok(server, "get", "jobs", "--field-selector", "status.successful=0",
                      "-o", "name") == "job.batch/pi\n"
    assert kubectl.ok(server, "get", "jobs", "--field-selector", "status.successful=1",
                      "-o", "name") == ""
    reply = call(server, "GET", JOBS + "?fieldSelector=status.succeeded%3D1")
    assert reply.status == 400
    assert reply.status_object()["message"] == (
        'field label "status.succeeded" not supported for batchv1.Job')


def test_job_status_subresource_and_completed_table(server: ServerThread) -> None:
    created = ok(call(server, "POST", JOBS, _job("done")), 201)
    status = {"startTime": "2024-01-01T00:00:00Z", "completionTime": "2024-01-01T00:01:05Z",
              "succeeded": 1, "conditions": [
                  {"type": "SuccessCriteriaMet", "status": "True"},
                  {"type": "Complete", "status": "True"}]}
    body = {**created, "status": status}
    updated = ok(call(server, "PUT", JOBS + "/done/status", body), 200)
    assert updated["status"]["succeeded"] == 1
    assert updated["metadata"]["generation"] == 1
    lines = kubectl.ok(server, "get", "job", "done").splitlines()
    assert lines[1].split()[:4] == ["done", "Complete", "1/1", "65s"]
    # the status strategy refuses to take back a terminal condition or a count
    body = {**updated, "status": {**status, "succeeded": 0, "conditions": []}}
    reply = call(server, "PUT", JOBS + "/done/status", body)
    assert reply.status == 422
    causes = _causes(reply)
    # field.OmitValueType: no value in the message
    assert ("FieldValueInvalid", "status.conditions",
            "Invalid value: cannot disable the terminal Complete=True condition") in causes
    assert ("FieldValueInvalid", "status.succeeded",
            "Invalid value: 0: cannot decrease the succeeded counter") in causes


def test_job_template_and_completions_are_immutable(server: ServerThread) -> None:
    created = ok(call(server, "POST", JOBS, _job("imm")), 201)
    patch = {"spec": {"completions": 3}}
    reply = call(server, "PATCH", JOBS + "/imm", patch)
    assert reply.status == 422
    assert ("FieldValueInvalid", "spec.completions", "Invalid value: 3: field is immutable") \
        in _causes(reply)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x:2"}]}}}}
    reply = call(server, "PATCH", JOBS + "/imm", patch,
                 {"Content-Type": "application/strategic-merge-patch+json"})
    assert reply.status == 422
    assert [c[1] for c in _causes(reply)] == ["spec.template"]
    assert _causes(reply)[0][2].endswith(": field is immutable")
    # parallelism may change, and bumps the generation
    reply = call(server, "PATCH", JOBS + "/imm", {"spec": {"parallelism": 2}})
    changed = ok(reply, 200)
    assert changed["metadata"]["generation"] == created["metadata"]["generation"] + 1


def test_job_validation_texts(server: ServerThread) -> None:
    body = _job("bad")
    body["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    reply = call(server, "POST", JOBS, body)
    assert reply.status == 422
    assert reply.status_object()["message"] == (
        'Job.batch "bad" is invalid: spec.template.spec.restartPolicy: Required value: valid '
        'values: "OnFailure", "Never"')
    body = _job("bad", completionMode="Indexed", parallelism=1, backoffLimit=-1)
    reply = call(server, "POST", JOBS, body)
    assert _causes(reply) == [
        ("FieldValueInvalid", "spec.backoffLimit",
         "Invalid value: -1: must be greater than or equal to 0"),
        ("FieldValueRequired", "spec.completions",
         "Required value: when completion mode is Indexed"),
    ]
    # a selector that is not the generated one
    body = _job("bad", selector={"matchLabels": {"app": "x"}})
    reply = call(server, "POST", JOBS, body)
    assert reply.status == 422
    messages = [c[2] for c in _causes(reply)]
    assert any("`selector` not auto-generated" in m for m in messages)
    assert any("`selector` does not match template `labels`" in m for m in messages)


def test_kubectl_create_cronjob_defaults_and_table(server: ServerThread) -> None:
    kubectl.ok(server, "create", "cronjob", "tick", "--image=busybox:1.36",
               "--schedule=*/5 * * * *")
    cron = json.loads(kubectl.ok(server, "get", "cj", "tick", "-o", "json"))
    spec = cron["spec"]
    assert spec["concurrencyPolicy"] == "Allow"
    assert spec["suspend"] is False
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    assert "selector" not in spec["jobTemplate"]["spec"]
    assert "completions" not in spec["jobTemplate"]["spec"]  # SetDefaults_Job is the Job's
    lines = kubectl.ok(server, "get", "cronjobs", "-o", "wide").splitlines()
    assert lines[0].split() == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE",
                                "LAST", "SCHEDULE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    cells = lines[1].split()
    assert cells[:9] == ["tick", "*/5", "*", "*", "*", "*", "<none>", "False", "0"]
    assert cells[9] == "<none>"
    assert cells[-3:] == ["tick", "busybox:1.36", "<none>"]


@pytest.mark.parametrize(("schedule", "message"), [
    ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
    ("61 * * * *", "end of range (61) above maximum (59): 61"),
    ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
    ("@fortnightly", "unrecognized descriptor: @fortnightly"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
])
def test_cronjob_schedule_errors_are_robfig_crons(server: ServerThread, schedule: str,
                                                  message: str) -> None:
    reply = call(server, "POST", CRON_JOBS, _cron_job("c", schedule))
    assert reply.status == 422
    assert reply.status_object()["message"] == (
        f'CronJob.batch "c" is invalid: spec.schedule: Invalid value: "{schedule}": {message}')


def test_cronjob_tz_in_schedule_and_time_zones(server: ServerThread) -> None:
    reply = call(server, "POST", CRON_JOBS, _cron_job("c", "TZ=UTC 0 * * * *"))
    assert _causes(reply) == [("FieldValueInvalid", "spec.schedule",
                               'Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in '
                               "schedule, use timeZone field instead")]
    reply = call(server, "POST", CRON_JOBS, _cron_job("c", "0 * * * *", timeZone="Mars/Base"))
    assert _causes(reply) == [("FieldValueInvalid", "spec.timeZone",
                               'Invalid value: "Mars/Base": unknown time zone Mars/Base')]
    reply = call(server, "POST", CRON_JOBS, _cron_job("c", "0 * * * *", timeZone=""))
    assert _causes(reply) == [("FieldValueInvalid", "spec.timeZone",
                               'Invalid value: "": timeZone must be nil or non-empty string')]
    created = ok(call(server, "POST", CRON_JOBS,
                      _cron_job("c", "0 * * * *", timeZone="Europe/Berlin")), 201)
    assert created["spec"]["timeZone"] == "Europe/Berlin"
    lines = kubectl.ok(server, "get", "cronjob", "c").splitlines()
    assert lines[1].split()[6] == "Europe/Berlin"
    body = _cron_job("long-" + "x" * 50, "0 * * * *")
    reply = call(server, "POST", CRON_JOBS, body)
    assert _causes(reply) == [("FieldValueInvalid", "metadata.name",
                               f'Invalid value: "{body["metadata"]["name"]}": must be no more '
                               "than 52 characters")]


def test_create_warnings(server: ServerThread) -> None:
    reply = call(server, "POST", JOBS, _job("dotted.name"))
    assert reply.status == 201
    assert reply.headers["warning"] == (
        '299 - "metadata.name: this is used in Pod names and hostnames, which can result in '
        "surprising behavior; a DNS label is recommended: [must not contain dots]\"")
    assert "warning" not in call(server, "POST", JOBS, _job("plain")).headers
    reply = call(server, "POST", CRON_JOBS, _cron_job("c.d", "TZ=UTC @hourly"))
    assert reply.status == 422  # a TZ in a new CronJob's schedule is refused outright
    reply = call(server, "POST", CRON_JOBS, _cron_job("c.d", "@hourly"))
    assert reply.status == 201
    assert reply.headers["warning"].startswith('299 - "metadata.name: this is used in Pod names')
    cron = reply.json
    # the status subresource writes the status (cronJobStatusStrategy keeps the spec)
    cron["status"] = {"lastScheduleTime": "2024-01-01T00:00:00Z"}
    updated = ok(call(server, "PUT", CRON_JOBS + "/c.d/status", cron), 200)
    assert updated["status"] == {"lastScheduleTime": "2024-01-01T00:00:00Z"}


def test_a_suspended_job_that_never_ran_may_change_its_scheduling(server: ServerThread) -> None:
    ok(call(server, "POST", JOBS, _job("held", suspend=True)), 201)
    patch = {"spec": {"template": {"spec": {"nodeSelector": {"zone": "a"}},
                                   "metadata": {"annotations": {"note": "moved"}}}}}
    changed = ok(call(server, "PATCH", JOBS + "/held", patch), 200)
    assert changed["spec"]["template"]["spec"]["nodeSelector"] == {"zone": "a"}
    # not so for the containers, nor once it runs
    ok(call(server, "PATCH", JOBS + "/held", {"spec": {"suspend": False}}), 200)
    reply = call(server, "PATCH", JOBS + "/held",
                 {"spec": {"template": {"spec": {"nodeSelector": {"zone": "b"}}}}})
    assert reply.status == 422
    assert [c[1] for c in _causes(reply)] == ["spec.template"]


def test_generated_selector_and_labels_belong_to_no_manager(server: ServerThread) -> None:
    created = ok(call(server, "POST", JOBS + "?fieldManager=maker", _job("owned")), 201)
    (entry,) = created["metadata"]["managedFields"]
    assert entry["manager"] == "maker"
    fields = entry["fieldsV1"]
    assert "f:metadata" not in fields
    assert "f:selector" not in fields["f:spec"]
    assert "f:metadata" not in fields["f:spec"]["f:template"]
    assert "f:backoffLimit" in fields["f:spec"]  # defaults are the writer's, as in kube
