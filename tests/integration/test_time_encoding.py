"""Times come back as kube's Go structs encode them, whatever the client wrote.

metav1.Time marshals RFC 3339 in UTC with whole seconds; MicroTime with six decimals and ``Z``;
both marshal Go's zero time as null (apimachinery pkg/apis/meta/v1/time.go, micro_time.go).
Every write path decodes into the struct, so each one re-encodes.
"""

from __future__ import annotations

import json
from typing import Any

from tests.integration.harness import ServerThread
from tests.integration.kinds import EVENT, LEASE, NS, POD, SERVICE
from tests.integration.wire import call, create, get, ok

STATUS_PATCH = {"status": {
    "startTime": "2026-11-22T02:05:47.5+01:00",
    "conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2026-11-22T02:05:47.123+00:00"}]}}
MERGE = {"Content-Type": "application/merge-patch+json"}


def test_status_patch_times_read_back_in_utc_whole_seconds(server: ServerThread) -> None:
    create(server, POD.collection(), POD.obj("p"))
    patched = ok(call(server, "PATCH", POD.item("p") + "/status", STATUS_PATCH, MERGE), 200)
    stored = get(server, POD.item("p"))
    for obj in (patched, stored):
        assert obj["status"]["startTime"] == "2026-11-22T01:05:47Z"
        [condition] = obj["status"]["conditions"]
        assert condition["lastTransitionTime"] == "2026-11-22T02:05:47Z"


def test_create_update_and_apply_re_encode_times(server: ServerThread) -> None:
    lease = LEASE.obj("l")
    lease["spec"]["acquireTime"] = "2026-01-01T00:30:00.999999-02:30"  # MicroTime
    created = create(server, LEASE.collection(), lease)
    assert created["spec"]["acquireTime"] == "2026-01-01T03:00:00.999999Z"

    created["spec"]["renewTime"] = "2026-01-01T05:00:01.500000+02:00"
    updated = ok(call(server, "PUT", LEASE.item("l"), created), 200)
    assert updated["spec"]["renewTime"] == "2026-01-01T03:00:01.500000Z"

    applied = {"apiVersion": LEASE.api_version, "kind": LEASE.kind,
               "metadata": {"name": "l"},
               "spec": {"renewTime": "2026-01-01T04:00:00.000001+01:00"}}
    reply = call(server, "PATCH", LEASE.item("l"), json.dumps(applied).encode(),
                 {"Content-Type": "application/apply-patch+yaml"},
                 params={"fieldManager": "t", "force": "true"})
    assert ok(reply, 200)["spec"]["renewTime"] == "2026-01-01T03:00:00.000001Z"
    assert get(server, LEASE.item("l"))["spec"]["renewTime"] == "2026-01-01T03:00:00.000001Z"


def test_event_micro_time_and_strategic_patch(server: ServerThread) -> None:
    event = EVENT.obj("e")
    event["eventTime"] = "2024-12-11T10:15:02.123456+01:00"
    created = create(server, EVENT.collection(), event)
    assert created["eventTime"] == "2024-12-11T09:15:02.123456Z"
    core = get(server, f"/api/v1/namespaces/{NS}/events/e")
    assert core["eventTime"] == "2024-12-11T09:15:02.123456Z"

    create(server, SERVICE.collection(), SERVICE.obj("s"))
    body = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "R",
                                       "message": "", "lastTransitionTime":
                                           "2026-03-04T05:06:07.89-00:30"}]}}
    reply = call(server, "PATCH", SERVICE.item("s") + "/status", body,
                 {"Content-Type": "application/strategic-merge-patch+json"})
    [condition] = ok(reply, 200)["status"]["conditions"]
    assert condition["lastTransitionTime"] == "2026-03-04T05:36:07Z"


def test_zero_time_is_null(server: ServerThread) -> None:
    """Go's zero time marshals as null (``IsZero``); kube stores that null."""
    create(server, POD.collection(), POD.obj("p"))
    body: dict[str, Any] = {"status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "0001-01-01T00:00:00Z"}]}}
    ok(call(server, "PATCH", POD.item("p") + "/status", body, MERGE), 200)
    [condition] = get(server, POD.item("p"))["status"]["conditions"]
    assert condition["lastTransitionTime"] is None
