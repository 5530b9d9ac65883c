"""The Job controller (``kubewire.cluster.controllers.job``) against a real server, with
simulated nodes and the scheduler in the loop: kubectl create job and wait for Complete;
Indexed Jobs with their indexes, hostnames and completedIndexes; failed pods retried after the
back-off until backoffLimit fails the Job; activeDeadlineSeconds, suspend, podFailurePolicy;
pod tracking finalizers removed once counted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import pytest

from kubewire.client.client import Client, create_client
from kubewire.cluster.controllers.job import make_job_controller
from kubewire.cluster.controllers.ttl_after_finished import make_ttl_after_finished_controller
from kubewire.cluster.nodes import FleetOptions, make_fleet
from kubewire.cluster.runtime import ClusterContext
from kubewire.cluster.scheduler.scheduler import make_scheduler
from tests.integration import kubectl
from tests.integration.controller_helpers import components_running, run_components
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl
from tests.integration.wire import call, create, ok

Obj = dict[str, Any]
JOBS = "/apis/batch/v1/namespaces/default/jobs"


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


@pytest.fixture
async def cluster(client: Client) -> AsyncIterator[ClusterContext]:
    """One simulated node, the scheduler and the Job controller (back-off base 200 ms)."""
    ctx = ClusterContext(client)
    fleet = make_fleet(ctx, FleetOptions(count=1))
    async with run_components(ctx, [fleet], ready=fleet.registered.wait), components_running(
            [make_scheduler(ctx, None), make_job_controller(ctx, {"backoff_base_ms": 200})]):
        yield ctx


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


def conditions(job: Obj) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c.get("reason", ""))
            for c in job.get("status", {}).get("conditions", ())]


def job(name: str, **spec: Any) -> Obj:
    annotations = spec.pop("pod_annotations", None)
    template: Obj = {"spec": {"containers": [{"name": "c", "image": "busybox"}],
                              "restartPolicy": "Never"}}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return {"metadata": {"name": name}, "spec": {"template": template, **spec}}


def pods_of(server: ServerThread, name: str) -> list[Obj]:
    body = ok(call(server, "GET", "/api/v1/namespaces/default/pods?labelSelector="
                   f"batch.kubernetes.io/job-name={name}"), 200)
    items: list[Obj] = body["items"]
    return items


def events_of(server: ServerThread, name: str) -> list[tuple[str, str, str]]:
    body = ok(call(server, "GET", "/api/v1/namespaces/default/events"), 200)
    return [(e["type"], e["reason"], e["message"]) for e in body["items"]
            if e["involvedObject"].get("kind") == "Job"
            and e["involvedObject"].get("name") == name]


@needs_kubectl
async def test_kubectl_create_job_and_wait_complete(server: ServerThread,
                                                    cluster: ClusterContext) -> None:
    for args in (("create", "job", "once", "--image=busybox"),
                 ("wait", "--for=condition=complete", "job/once", "--timeout=60s")):
        done = await asyncio.to_thread(kubectl.run, server, *args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    body = ok(call(server, "GET", f"{JOBS}/once"), 200)
    st = body["status"]
    assert st["succeeded"] == 1 and "active" not in st and "failed" not in st
    assert st["ready"] == 0 and st["terminating"] == 0
    assert st["uncountedTerminatedPods"] == {}
    assert conditions(body) == [("SuccessCriteriaMet", "True", "CompletionsReached"),
                                ("Complete", "True", "CompletionsReached")]
    assert st["startTime"] <= st["completionTime"]
    pods = pods_of(server, "once")
    assert len(pods) == 1
    pod = pods[0]
    assert pod["metadata"]["name"].startswith("once-")
    assert pod["metadata"].get("finalizers", []) == []  # counted, then released
    assert pod["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == \
        body["metadata"]["uid"]
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Job"
    await cluster.events.drain()
    seen = events_of(server, "once")
    assert ("Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}") in seen
    assert ("Normal", "Completed", "Job completed") in seen
    done = await asyncio.to_thread(kubectl.run, server, "get", "job", "once")
    assert "Complete" in done.stdout and "1/1" in done.stdout, done.stdout


async def test_completions_and_parallelism(server: ServerThread,
                                           cluster: ClusterContext) -> None:
    create(server, JOBS, job("three", completions=3, parallelism=2))
    seen_active: set[int] = set()

    def check(body: Obj) -> bool:
        seen_active.add(body.get("status", {}).get("active", 0))
        return ("Complete", "True", "CompletionsReached") in conditions(body)

    body = await until(server, f"{JOBS}/three", check, timeout=60)
    assert body["status"]["succeeded"] == 3
    assert max(seen_active) <= 2
    assert len(pods_of(server, "three")) == 3


async def test_indexed_job(server: ServerThread, cluster: ClusterContext) -> None:
    create(server, JOBS, job("idx", completions=3, parallelism=3, completionMode="Indexed"))
    body = await until(server, f"{JOBS}/idx",
                       lambda b: ("Complete", "True", "CompletionsReached") in conditions(b),
                       timeout=60)
    assert body["status"]["completedIndexes"] == "0-2"
    assert body["status"]["succeeded"] == 3
    pods = sorted(pods_of(server, "idx"),
                  key=lambda p: p["metadata"]["annotations"][
                      "batch.kubernetes.io/job-completion-index"])
    assert [p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            for p in pods] == ["0", "1", "2"]
    assert [p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
            for p in pods] == ["0", "1", "2"]
    assert [p["spec"]["hostname"] for p in pods] == ["idx-0", "idx-1", "idx-2"]
    assert all(p["metadata"]["name"].startswith(f"idx-{i}-") for i, p in enumerate(pods))
    env = pods[0]["spec"]["containers"][0]["env"]
    assert {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
        "apiVersion": "v1",
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}} \
        in env


async def test_backoff_to_failure(server: ServerThread, cluster: ClusterContext) -> None:
    create(server, JOBS, job("doomed", backoffLimit=2,
                             pod_annotations={"kubewire.io/exit-code": "1",
                                              "kubewire.io/run-duration": "100ms"}))
    body = await until(server, f"{JOBS}/doomed",
                       lambda b: ("Failed", "True", "BackoffLimitExceeded") in conditions(b),
                       timeout=60)
    assert body["status"]["failed"] == 3
    assert "succeeded" not in body["status"]
    assert conditions(body) == [("FailureTarget", "True", "BackoffLimitExceeded"),
                                ("Failed", "True", "BackoffLimitExceeded")]
    failed = next(c for c in body["status"]["conditions"] if c["type"] == "Failed")
    assert failed["message"] == "Job has reached the specified backoff limit"
    pods = sorted(pods_of(server, "doomed"), key=lambda p: p["metadata"]["creationTimestamp"])
    assert len(pods) == 3
    assert all(p["status"]["phase"] == "Failed" for p in pods)
    assert all(not p["metadata"].get("finalizers") for p in pods)
    await cluster.events.drain()
    assert ("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit") \
        in events_of(server, "doomed")


async def test_ttl_after_finished_deletes_the_job(server: ServerThread, client: Client,
                                                  cluster: ClusterContext) -> None:
    """A finished Job with ttlSecondsAfterFinished goes that long after it finished, deleted
    as kube's controller deletes it (Foreground, uid precondition); one without a TTL
    stays."""
    async with components_running([make_ttl_after_finished_controller(cluster, None)]):
        create(server, JOBS, job("brief", ttlSecondsAfterFinished=2))
        create(server, JOBS, job("kept"))
        finished = await until(server, f"{JOBS}/brief",
                               lambda b: ("Complete", "True", "CompletionsReached")
                               in conditions(b), timeout=60)
        assert finished["metadata"].get("deletionTimestamp") is None

        def gone_or_deleting(response_path: str) -> bool:
            response = call(server, "GET", response_path)
            return response.status == 404 or bool(
                response.json["metadata"].get("deletionTimestamp"))

        deadline = time.monotonic() + 30
        while not await asyncio.to_thread(gone_or_deleting, f"{JOBS}/brief"):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        complete = next(c for c in finished["status"]["conditions"] if c["type"] == "Complete")
        finished_at = datetime.fromisoformat(complete["lastTransitionTime"].replace("Z",
                                                                                    "+00:00"))
        assert time.time() >= finished_at.timestamp() + 2
        response = call(server, "GET", f"{JOBS}/brief")
        if response.status == 200:  # no garbage collector here: Foreground's finalizer stays
            assert response.json["metadata"]["finalizers"] == ["foregroundDeletion"]
        await until(server, f"{JOBS}/kept",
                    lambda b: ("Complete", "True", "CompletionsReached") in conditions(b),
                    timeout=60)
        await asyncio.sleep(1.0)
        assert not call(server, "GET", f"{JOBS}/kept").json["metadata"].get(
            "deletionTimestamp")


async def test_active_deadline(server: ServerThread, cluster: ClusterContext) -> None:
    create(server, JOBS, job("slow", activeDeadlineSeconds=2,
                             pod_annotations={"kubewire.io/run-duration": "1h"}))
    body = await until(server, f"{JOBS}/slow",
                       lambda b: ("Failed", "True", "DeadlineExceeded") in conditions(b),
                       timeout=60)
    assert conditions(body) == [("FailureTarget", "True", "DeadlineExceeded"),
                                ("Failed", "True", "DeadlineExceeded")]
    failed = next(c for c in body["status"]["conditions"] if c["type"] == "Failed")
    assert failed["message"] == "Job was active longer than specified deadline"
    assert "active" not in body["status"]
    assert "completionTime" not in body["status"]
    await cluster.events.drain()
    assert ("Warning", "DeadlineExceeded", "Job was active longer than specified deadline") \
        in events_of(server, "slow")


async def test_suspend_and_resume(server: ServerThread, cluster: ClusterContext) -> None:
    create(server, JOBS, job("held", suspend=True))
    body = await until(server, f"{JOBS}/held",
                       lambda b: ("Suspended", "True", "JobSuspended") in conditions(b))
    assert "startTime" not in body["status"]
    await asyncio.sleep(0.5)
    assert pods_of(server, "held") == []
    ok(call(server, "PATCH", f"{JOBS}/held", {"spec": {"suspend": False}}), 200)
    body = await until(server, f"{JOBS}/held",
                       lambda b: ("Complete", "True", "CompletionsReached") in conditions(b),
                       timeout=60)
    assert conditions(body)[0] == ("Suspended", "False", "JobResumed")
    assert "startTime" in body["status"]
    await cluster.events.drain()
    seen = events_of(server, "held")
    assert ("Normal", "Suspended", "Job suspended") in seen
    assert ("Normal", "Resumed", "Job resumed") in seen


async def test_pod_failure_policy(server: ServerThread, cluster: ClusterContext) -> None:
    policy = {"rules": [{"action": "FailJob",
                         "onExitCodes": {"containerName": "c", "operator": "In",
                                         "values": [42]}}]}
    create(server, JOBS, job("fatal", backoffLimit=6, podFailurePolicy=policy,
                             pod_annotations={"kubewire.io/exit-code": "42",
                                              "kubewire.io/run-duration": "100ms"}))
    body = await until(server, f"{JOBS}/fatal",
                       lambda b: ("Failed", "True", "PodFailurePolicy") in conditions(b),
                       timeout=60)
    failed = next(c for c in body["status"]["conditions"] if c["type"] == "Failed")
    pod = pods_of(server, "fatal")[0]
    assert failed["message"] == (f"Container c for pod default/{pod['metadata']['name']} "
                                 "failed with exit code 42 matching FailJob rule at index 0")
    assert body["status"]["failed"] == 1  # no retry
    assert len(pods_of(server, "fatal")) == 1


async def test_orphaned_pods_lose_the_tracking_finalizer(server: ServerThread,
                                                         cluster: ClusterContext) -> None:
    create(server, JOBS, job("dropped", pod_annotations={"kubewire.io/run-duration": "1h"}))
    await until(server, f"{JOBS}/dropped", lambda b: b.get("status", {}).get("active") == 1)
    pod = pods_of(server, "dropped")[0]
    assert pod["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    ok(call(server, "DELETE", f"{JOBS}/dropped", {"propagationPolicy": "Orphan"}), 200)
    name = pod["metadata"]["name"]
    released = await until(server, f"/api/v1/namespaces/default/pods/{name}",
                           lambda b: not b["metadata"].get("finalizers"))
    assert released["status"]["phase"] in ("Pending", "Running")  # released, not finished


async def test_backoff_limit_per_index(server: ServerThread, cluster: ClusterContext) -> None:
    """Index 1 fails (exit 3) until its per-index limit; index 0 succeeds; index 2's pod exits
    42, which a FailIndex rule fails at once; the Job fails with FailedIndexes. No node fits
    these pods: the test reports their end as a kubelet would."""
    body = job("perindex", completions=3, parallelism=3, completionMode="Indexed",
               backoffLimitPerIndex=1,
               podFailurePolicy={"rules": [{"action": "FailIndex", "onExitCodes": {
                   "operator": "In", "values": [42]}}]})
    body["spec"]["template"]["spec"]["nodeSelector"] = {"kubewire.io/nowhere": "true"}
    create(server, JOBS, body)
    exit_codes = {"0": 0, "1": 3, "2": 42}

    def finish(pod: Obj) -> None:
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        code = exit_codes[index]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ok(call(server, "PATCH",
                f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}/status",
                {"status": {"phase": "Failed" if code else "Succeeded", "containerStatuses": [{
                    "name": "c", "image": "busybox", "imageID": "", "ready": False,
                    "restartCount": 0, "state": {"terminated": {
                        "exitCode": code, "reason": "Error" if code else "Completed",
                        "startedAt": now, "finishedAt": now}}}]}}), 200)

    async def kubelet() -> None:
        done: set[str] = set()
        while True:
            for pod in await asyncio.to_thread(pods_of, server, "perindex"):
                if pod["metadata"]["name"] not in done:
                    await asyncio.to_thread(finish, pod)
                    done.add(pod["metadata"]["name"])
            await asyncio.sleep(0.05)

    reporter = asyncio.create_task(kubelet())
    try:
        body = await until(server, f"{JOBS}/perindex",
                           lambda b: ("Failed", "True", "FailedIndexes") in conditions(b),
                           timeout=60)
    finally:
        reporter.cancel()
        await asyncio.gather(reporter, return_exceptions=True)
    st = body["status"]
    assert st["completedIndexes"] == "0"
    assert st["failedIndexes"] == "1,2"
    assert st["failed"] == 3  # index 1 twice (limit 1), index 2 once
    assert st["succeeded"] == 1
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert failed["message"] == "Job has failed indexes"
    counts = sorted((p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"],
                     p["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"])
                    for p in pods_of(server, "perindex"))
    assert counts == [("0", "0"), ("1", "0"), ("1", "1"), ("2", "0")]


async def test_a_job_managed_elsewhere_is_left_alone(server: ServerThread,
                                                     cluster: ClusterContext) -> None:
    create(server, JOBS, job("foreign", managedBy="example.com/other"))
    create(server, JOBS, job("ours"))
    await until(server, f"{JOBS}/ours",
                lambda b: ("Complete", "True", "CompletionsReached") in conditions(b),
                timeout=60)
    assert pods_of(server, "foreign") == []
    assert ok(call(server, "GET", f"{JOBS}/foreign"), 200).get("status", {}) == {}
