"""The CronJob controller (``kubewire.cluster.controllers.cronjob``) against a real server, on a
clock the test moves forward (the context's clock), with the Job controller, the scheduler and
a simulated node in the loop: kubectl create cronjob, a Job named by its scheduled minute that
runs to completion, status and events as kube's; Forbid, Replace, a missed deadline, history
limits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubewire.client.client import Client, create_client
from kubewire.cluster.controllers.cronjob import make_cronjob_controller
from kubewire.cluster.controllers.job import make_job_controller
from kubewire.cluster.nodes import FleetOptions, make_fleet
from kubewire.cluster.runtime import ClusterContext
from kubewire.cluster.scheduler.scheduler import make_scheduler
from tests.integration import kubectl
from tests.integration.controller_helpers import components_running, run_components
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl
from tests.integration.wire import call, create, ok

Obj = dict[str, Any]
CRONJOBS = "/apis/batch/v1/namespaces/default/cronjobs"
JOBS = "/apis/batch/v1/namespaces/default/jobs"


class Clock:
    """Real time plus an offset the test moves."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def to_minute_after(self, stamp: float, minutes: int = 1) -> float:
        """Jump so that now is 1 s past the ``minutes``-th minute boundary after ``stamp``;
        returns that boundary."""
        boundary = (int(stamp) // 60 + minutes) * 60
        self.offset = boundary + 1 - time.time()
        return float(boundary)


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


@pytest.fixture
async def cluster(client: Client) -> AsyncIterator[tuple[ClusterContext, Clock]]:
    clock = Clock()
    ctx = ClusterContext(client, clock=clock)
    fleet = make_fleet(ctx, FleetOptions(count=1))
    async with run_components(ctx, [fleet], ready=fleet.registered.wait), components_running(
            [make(ctx, None) for make in (
                make_scheduler, make_job_controller, make_cronjob_controller)]):
        yield ctx, clock


async def until(server: ServerThread, path: str, check: Callable[[Obj], bool],
                timeout: float = 30.0) -> Obj:
    deadline = time.monotonic() + timeout
    while True:
        response = await asyncio.to_thread(call, server, "GET", path)
        body = response.json if response.status == 200 else {}
        if response.status == 200 and check(body):
            return body
        assert time.monotonic() < deadline, (path, response.status, body)
        await asyncio.sleep(0.1)


def cronjob(name: str, schedule: str = "* * * * *", run: str | None = None,
            **spec: Any) -> Obj:
    template: Obj = {"spec": {"containers": [{"name": "c", "image": "busybox"}],
                              "restartPolicy": "OnFailure"}}
    if run:
        template["metadata"] = {"annotations": {"kubewire.io/run-duration": run}}
    return {"metadata": {"name": name},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": template}},
                     **spec}}


def poke(server: ServerThread, name: str, value: str) -> None:
    """An update wakes the controller after the clock moved (its timer runs on real time)."""
    ok(call(server, "PATCH", f"{CRONJOBS}/{name}",
            {"metadata": {"annotations": {"test/poke": value}}}), 200)


def events_of(server: ServerThread, name: str) -> list[tuple[str, str, str]]:
    body = ok(call(server, "GET", "/api/v1/namespaces/default/events"), 200)
    return [(e["type"], e["reason"], e["message"]) for e in body["items"]
            if e["involvedObject"].get("kind") == "CronJob"
            and e["involvedObject"].get("name") == name]


def rfc3339(stamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


@needs_kubectl
async def test_kubectl_create_cronjob_runs_a_job(
        server: ServerThread, cluster: tuple[ClusterContext, Clock]) -> None:
    ctx, clock = cluster
    done = await asyncio.to_thread(kubectl.run, server, "create", "cronjob", "tick",
                                   "--image=busybox", "--schedule=* * * * *")
    assert done.returncode == 0, done.stderr
    made = ok(call(server, "GET", f"{CRONJOBS}/tick"), 200)
    created = time.mktime(time.strptime(made["metadata"]["creationTimestamp"],
                                        "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    await asyncio.sleep(0.5)
    assert ok(call(server, "GET", JOBS), 200)["items"] == []  # not yet time
    boundary = clock.to_minute_after(created)
    await asyncio.to_thread(poke, server, "tick", "1")
    name = f"tick-{int(boundary) // 60}"
    job = await until(server, f"{JOBS}/{name}", lambda b: True)
    assert job["metadata"]["ownerReferences"] == [{
        "apiVersion": "batch/v1", "kind": "CronJob", "name": "tick",
        "uid": made["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    assert job["metadata"]["annotations"][
        "batch.kubernetes.io/cronjob-scheduled-timestamp"] == rfc3339(boundary)
    cj = await until(server, f"{CRONJOBS}/tick",
                     lambda b: bool(b.get("status", {}).get("active")))
    assert cj["status"]["lastScheduleTime"] == rfc3339(boundary)
    assert cj["status"]["active"][0]["name"] == name
    assert cj["status"]["active"][0]["kind"] == "Job"
    done = await asyncio.to_thread(kubectl.run, server, "wait", "--for=condition=complete",
                                   f"job/{name}", "--timeout=60s")
    assert done.returncode == 0, done.stderr
    cj = await until(server, f"{CRONJOBS}/tick",
                     lambda b: not b["status"].get("active")
                     and "lastSuccessfulTime" in b["status"])
    await ctx.events.drain()
    seen = events_of(server, "tick")
    assert ("Normal", "SuccessfulCreate", f"Created job {name}") in seen
    assert ("Normal", "SawCompletedJob", f"Saw completed job: {name}, status: Complete") in seen
    done = await asyncio.to_thread(kubectl.run, server, "get", "cronjob", "tick")
    assert "* * * * *" in done.stdout and "False" in done.stdout, done.stdout


async def test_forbid_replace_and_history(server: ServerThread,
                                          cluster: tuple[ClusterContext, Clock]) -> None:
    ctx, clock = cluster
    forbid = create(server, CRONJOBS, cronjob("forbid", run="1h", concurrencyPolicy="Forbid"))
    create(server, CRONJOBS, cronjob("replace", run="1h", concurrencyPolicy="Replace"))
    created = time.mktime(time.strptime(forbid["metadata"]["creationTimestamp"],
                                        "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    first = clock.to_minute_after(created)
    for name in ("forbid", "replace"):
        await asyncio.to_thread(poke, server, name, "1")
    for name in ("forbid", "replace"):
        await until(server, f"{JOBS}/{name}-{int(first) // 60}", lambda b: True)
        await until(server, f"{CRONJOBS}/{name}",
                    lambda b: len(b.get("status", {}).get("active", ())) == 1)
    second = clock.to_minute_after(created, 2)
    for name in ("forbid", "replace"):
        await asyncio.to_thread(poke, server, name, "2")
    await until(server, f"{JOBS}/replace-{int(second) // 60}", lambda b: True)
    replaced = await until(server, f"{CRONJOBS}/replace",
                           lambda b: [r["name"] for r in b["status"].get("active", ())]
                           == [f"replace-{int(second) // 60}"])
    assert replaced["status"]["lastScheduleTime"] == rfc3339(second)
    await asyncio.sleep(1.0)
    assert call(server, "GET", f"{JOBS}/forbid-{int(second) // 60}").status == 404
    await ctx.events.drain()
    assert ("Normal", "JobAlreadyActive", "Not starting job because prior execution is "
            "running and concurrency policy is Forbid") in events_of(server, "forbid")
    assert ("Normal", "SuccessfulDelete", f"Deleted job replace-{int(first) // 60}") \
        in events_of(server, "replace")


async def test_missed_deadline_and_suspend(server: ServerThread,
                                           cluster: tuple[ClusterContext, Clock]) -> None:
    ctx, clock = cluster
    late = create(server, CRONJOBS, cronjob("late", startingDeadlineSeconds=10))
    create(server, CRONJOBS, cronjob("paused", suspend=True))
    created = time.mktime(time.strptime(late["metadata"]["creationTimestamp"],
                                        "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    boundary = clock.to_minute_after(created, 2)
    clock.offset += 30  # 31 s past the start time: beyond startingDeadlineSeconds
    # with the deadline, the earliest time considered is now - 10 s: nothing due
    for name in ("late", "paused"):
        await asyncio.to_thread(poke, server, name, "1")
    await asyncio.sleep(1.5)
    assert ok(call(server, "GET", JOBS), 200)["items"] == []
    # a start time 5 s ago is within the deadline: it runs
    clock.offset = boundary + 60 + 5 - time.time()
    for name in ("late", "paused"):
        await asyncio.to_thread(poke, server, name, "2")
    await until(server, f"{JOBS}/late-{int(boundary) // 60 + 1}", lambda b: True)
    await asyncio.sleep(1.0)
    names = [j["metadata"]["name"] for j in ok(call(server, "GET", JOBS), 200)["items"]]
    assert names == [f"late-{int(boundary) // 60 + 1}"]
    await ctx.events.drain()
    assert events_of(server, "paused") == []


async def test_history_limits(server: ServerThread,
                              cluster: tuple[ClusterContext, Clock]) -> None:
    ctx, clock = cluster
    made = create(server, CRONJOBS, cronjob("kept", successfulJobsHistoryLimit=1))
    created = time.mktime(time.strptime(made["metadata"]["creationTimestamp"],
                                        "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    names = []
    for minute in (1, 2):
        boundary = clock.to_minute_after(created, minute)
        await asyncio.to_thread(poke, server, "kept", str(minute))
        names.append(f"kept-{int(boundary) // 60}")
        await until(server, f"{JOBS}/{names[-1]}",
                    lambda b: any(c["type"] == "Complete" and c["status"] == "True"
                                  for c in b.get("status", {}).get("conditions", ())),
                    timeout=60)
    await until(server, CRONJOBS + "/kept",
                lambda b: not b["status"].get("active")
                and b["status"].get("lastScheduleTime") == rfc3339(boundary))
    deadline = time.monotonic() + 30
    while call(server, "GET", f"{JOBS}/{names[0]}").status != 404:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    assert call(server, "GET", f"{JOBS}/{names[1]}").status == 200
    await ctx.events.drain()
    assert ("Normal", "SuccessfulDelete", f"Deleted job {names[0]}") in events_of(server, "kept")
