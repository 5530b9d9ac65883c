"""The StatefulSet controller against a real server: ordinal pods with identity and claims,
OrderedReady one at a time, Parallel at once, rolling update from the highest ordinal down to
the partition, scale-down from the highest, ControllerRevisions and the status
``kubectl rollout status`` reads. The test plays the kubelet (pods Running and Ready)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from kubewire.client.client import Client, create_client
from kubewire.cluster.controllers import history
from kubewire.cluster.controllers.statefulset import make_statefulset_controller
from kubewire.cluster.runtime import ClusterContext
from tests.integration import kubectl
from tests.integration.controller_helpers import run_components
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, ok

Obj = dict[str, Any]
NS = "default"
STS = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
PODS = f"/api/v1/namespaces/{NS}/pods"


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


@pytest.fixture
async def controller(client: Client) -> AsyncIterator[ClusterContext]:
    ctx = ClusterContext(client)
    async with run_components(ctx, [make_statefulset_controller(ctx, {})]):
        yield ctx


def web(replicas: int = 3, **spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "serviceName": "nginx",
                     "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {
                         "accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}}],
                     **spec}}


def pods(server: ServerThread) -> dict[str, Obj]:
    body = ok(call(server, "GET", PODS), 200)
    return {p["metadata"]["name"]: p for p in body["items"]}


def make_ready(server: ServerThread, name: str, gone_ok: bool = False) -> None:
    """Running and Ready since now, as a kubelet reports it (``gone_ok``: the pod may have
    been deleted since it was listed)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    reply = call(server, "PATCH", f"{PODS}/{name}/status",
                 {"status": {"phase": "Running", "conditions": [
                     {"type": "Ready", "status": "True", "lastTransitionTime": now}]}},
                 headers={"Content-Type": "application/merge-patch+json"})
    if not (gone_ok and reply.status == 404):
        ok(reply, 200)


async def until(check: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    for _ in range(int(timeout / 0.05)):
        value = await asyncio.to_thread(check)
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def kubelet(server: ServerThread, stop: asyncio.Event) -> None:
    """Marks every live pod Running and Ready, as a kubelet would."""
    while not stop.is_set():
        for name, pod in (await asyncio.to_thread(pods, server)).items():
            if pod["metadata"].get("deletionTimestamp") or pod.get("status", {}).get(
                    "phase") == "Running":
                continue
            await asyncio.to_thread(make_ready, server, name, True)
        await asyncio.sleep(0.05)


def status(server: ServerThread) -> Obj:
    return dict(ok(call(server, "GET", f"{STS}/web"), 200).get("status") or {})


async def test_ordered_ready_creates_one_at_a_time_with_identity_and_claims(
        server: ServerThread, controller: ClusterContext) -> None:
    sts = create(server, STS, web())
    await until(lambda: "web-0" in pods(server), "web-0")
    await asyncio.sleep(0.3)
    assert set(pods(server)) == {"web-0"}  # web-1 waits for web-0 to be Running and Ready
    pod = pods(server)["web-0"]
    labels = pod["metadata"]["labels"]
    rev = status(server)["updateRevision"]
    assert labels["statefulset.kubernetes.io/pod-name"] == "web-0"
    assert labels["apps.kubernetes.io/pod-index"] == "0"
    assert labels["controller-revision-hash"] == rev and rev.startswith("web-")
    assert pod["spec"]["hostname"] == "web-0" and pod["spec"]["subdomain"] == "nginx"
    assert {"name": "www", "persistentVolumeClaim": {"claimName": "www-web-0"}} in \
        pod["spec"]["volumes"]
    ref = pod["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (
        "StatefulSet", sts["metadata"]["uid"], True, True)
    claim = ok(call(server, "GET", f"/api/v1/namespaces/{NS}/persistentvolumeclaims/www-web-0"),
               200)
    assert claim["metadata"]["labels"] == {"app": "web"}
    assert "ownerReferences" not in claim["metadata"]  # Retain/Retain
    revs = ok(call(server, "GET", f"/apis/apps/v1/namespaces/{NS}/controllerrevisions"),
              200)["items"]
    assert [r["metadata"]["name"] for r in revs] == [rev]
    assert revs[0]["revision"] == 1
    assert revs[0]["metadata"]["labels"]["controller-revision-hash"] == rev.removeprefix("web-")
    assert rev == "web-" + history.revision_hash(history.template_patch(sts), 0)

    make_ready(server, "web-0")
    await until(lambda: "web-1" in pods(server), "web-1")
    make_ready(server, "web-1")
    await until(lambda: "web-2" in pods(server), "web-2")
    make_ready(server, "web-2")
    await until(lambda: status(server).get("readyReplicas") == 3, "3 ready")
    st = status(server)
    assert st["replicas"] == 3 and st["currentReplicas"] == 3 and st["updatedReplicas"] == 3
    assert st["currentRevision"] == st["updateRevision"] == rev
    assert st["observedGeneration"] == 1 and st["collisionCount"] == 0
    done = await asyncio.to_thread(kubectl.run, server, "rollout", "status", "sts/web",
                                   "--timeout=10s")
    assert done.returncode == 0, done.stderr
    assert "partitioned roll out complete" in done.stdout or "rolling update complete" in \
        done.stdout, done.stdout
    await controller.events.drain()
    await asyncio.sleep(0.2)
    events = ok(call(server, "GET", f"/api/v1/namespaces/{NS}/events"), 200)["items"]
    messages = {e["message"] for e in events if e["involvedObject"].get("name") == "web"}
    assert "create Pod web-0 in StatefulSet web successful" in messages
    assert "create Claim www-web-0 Pod web-0 in StatefulSet web success" in messages
    assert all(e["source"] == {"component": "statefulset-controller"} for e in events
               if e["involvedObject"].get("name") == "web")


async def test_rolling_update_goes_down_from_the_highest_ordinal(
        server: ServerThread, controller: ClusterContext) -> None:
    stop = asyncio.Event()
    fake = asyncio.ensure_future(kubelet(server, stop))
    try:
        create(server, STS, web())
        await until(lambda: status(server).get("readyReplicas") == 3, "3 ready")
        old = status(server)["updateRevision"]
        order: list[str] = []  # pods created at a new revision, in the watch's order

        def added(pod: Obj) -> None:
            if pod["metadata"]["labels"].get("controller-revision-hash") != old:
                order.append(pod["metadata"]["name"])

        controller.informer("v1", "Pod").add_handlers(on_add=added)

        ok(call(server, "PATCH", f"{STS}/web", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "nginx:2"}]}}}},
                headers={"Content-Type": "application/strategic-merge-patch+json"}), 200)

        def updated() -> bool:
            st = status(server)
            return bool(st.get("updatedReplicas") == 3 and st.get("readyReplicas") == 3
                        and st.get("currentRevision") == st.get("updateRevision") != old)

        await until(updated, "rolled", timeout=20)
        assert order == ["web-2", "web-1", "web-0"]
        new = status(server)["updateRevision"]
        assert all(p["spec"]["containers"][0]["image"] == "nginx:2"
                   for p in pods(server).values())
        revs = ok(call(server, "GET", f"/apis/apps/v1/namespaces/{NS}/controllerrevisions"),
                  200)["items"]
        assert {r["metadata"]["name"]: r["revision"] for r in revs} == {old: 1, new: 2}
        done = await asyncio.to_thread(kubectl.run, server, "rollout", "status", "sts/web",
                                       "--timeout=10s")
        assert done.returncode == 0, done.stderr

        done = await asyncio.to_thread(kubectl.run, server, "rollout", "history", "sts/web")
        assert done.returncode == 0, done.stderr
        assert [line.split()[0] for line in done.stdout.splitlines()[2:] if line.strip()] == [
            "1", "2"]

        # a partition keeps the lower ordinals at the current revision
        ok(call(server, "PATCH", f"{STS}/web", {"spec": {
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx:3"}]}}}},
                headers={"Content-Type": "application/strategic-merge-patch+json"}), 200)

        def partitioned() -> bool:
            images = {n: p["spec"]["containers"][0]["image"] for n, p in pods(server).items()
                      if not p["metadata"].get("deletionTimestamp")}
            st = status(server)
            return bool(images == {"web-0": "nginx:2", "web-1": "nginx:2", "web-2": "nginx:3"}
                        and st.get("updatedReplicas") == 1 and st.get("readyReplicas") == 3)

        await until(partitioned, "partitioned", timeout=20)
        st = status(server)
        assert st["currentRevision"] == new and st["currentReplicas"] == 2
        done = await asyncio.to_thread(kubectl.run, server, "rollout", "status", "sts/web",
                                       "--timeout=10s")
        assert done.returncode == 0, done.stderr
        assert "partitioned roll out complete: 1 new pods have been updated" in done.stdout

        # scale down from the highest ordinal
        ok(call(server, "PATCH", f"{STS}/web", {"spec": {"replicas": 1}},
                headers={"Content-Type": "application/merge-patch+json"}), 200)
        await until(lambda: set(pods(server)) == {"web-0"}, "scaled down", timeout=20)
        assert ok(call(server, "GET", f"/api/v1/namespaces/{NS}/persistentvolumeclaims"),
                  200)["items"].__len__() == 3  # claims are retained
    finally:
        stop.set()
        await fake


async def test_parallel_creates_at_once_and_delete_policy_owns_claims(
        server: ServerThread, controller: ClusterContext) -> None:
    create(server, STS, web(4, podManagementPolicy="Parallel",
                            persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete",
                                                                  "whenScaled": "Delete"}))
    await until(lambda: len(pods(server)) == 4, "4 pods at once")
    sts = ok(call(server, "GET", f"{STS}/web"), 200)
    claim = ok(call(server, "GET", f"/api/v1/namespaces/{NS}/persistentvolumeclaims/www-web-3"),
               200)
    assert claim["metadata"]["ownerReferences"] == [{
        "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
        "uid": sts["metadata"]["uid"]}]
    ok(call(server, "PATCH", f"{STS}/web", {"spec": {"replicas": 2}},
            headers={"Content-Type": "application/merge-patch+json"}), 200)
    await until(lambda: set(pods(server)) == {"web-0", "web-1"}, "scaled down")
    claim = ok(call(server, "GET", f"/api/v1/namespaces/{NS}/persistentvolumeclaims/www-web-3"),
               200)
    assert [r["kind"] for r in claim["metadata"]["ownerReferences"]] == ["Pod"]

    # back to Retain: the live ordinals' claims lose the set's reference
    ok(call(server, "PATCH", f"{STS}/web", {"spec": {"persistentVolumeClaimRetentionPolicy": {
        "whenDeleted": "Retain", "whenScaled": "Retain"}}}, headers={
            "Content-Type": "application/merge-patch+json"}), 200)

    def unowned() -> bool:
        claim = ok(call(server, "GET",
                        f"/api/v1/namespaces/{NS}/persistentvolumeclaims/www-web-0"), 200)
        return not claim["metadata"].get("ownerReferences")

    await until(unowned, "www-web-0 without the set's reference")




async def test_orphan_pods_are_adopted_not_duplicated(
        server: ServerThread, controller: ClusterContext) -> None:
    orphan = create(server, PODS, {"metadata": {"name": "web-0", "labels": {"app": "web"}},
                                   "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}})
    stranger = create(server, PODS, {"metadata": {"name": "web-x", "labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "c", "image": "x"}]}})
    sts = create(server, STS, web(1))

    def adopted() -> Obj | None:
        pod = pods(server)["web-0"]
        refs = pod["metadata"].get("ownerReferences") or []
        return pod if refs else None

    pod = await until(adopted, "web-0 adopted")
    assert pod["metadata"]["uid"] == orphan["metadata"]["uid"]  # the same pod, not a new one
    assert pod["metadata"]["ownerReferences"] == [{
        "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
        "uid": sts["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    # once Running and Ready, the adopted pod gets the identity labels (kube's updateIdentity);
    # the same sync then deletes it for the rolling update (an adopted pod has no revision
    # label) and creates it again, labelled: between the two there is no web-0 to look at
    make_ready(server, "web-0")

    def identity() -> Obj | None:
        pod = pods(server).get("web-0")
        return pod if pod and pod["metadata"]["labels"].get("apps.kubernetes.io/pod-index") \
            else None
    labels = (await until(identity, "identity"))["metadata"]["labels"]
    assert labels["statefulset.kubernetes.io/pod-name"] == "web-0"
    await controller.events.drain()
    await asyncio.sleep(0.3)
    assert "ownerReferences" not in pods(server)["web-x"]["metadata"]  # not <set>-<ordinal>
    events = ok(call(server, "GET", f"/api/v1/namespaces/{NS}/events"), 200)["items"]
    assert "update Pod web-0 in StatefulSet web successful" in {e["message"] for e in events}
    assert stranger["metadata"]["uid"] == pods(server)["web-x"]["metadata"]["uid"]


async def test_on_delete_and_failed_pods(server: ServerThread,
                                         controller: ClusterContext) -> None:
    stop = asyncio.Event()
    fake = asyncio.ensure_future(kubelet(server, stop))
    try:
        create(server, STS, web(2, updateStrategy={"type": "OnDelete"}))
        await until(lambda: status(server).get("readyReplicas") == 2, "2 ready")
        old = status(server)["updateRevision"]
        ok(call(server, "PATCH", f"{STS}/web", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "nginx:2"}]}}}},
                headers={"Content-Type": "application/strategic-merge-patch+json"}), 200)
        await until(lambda: status(server).get("updateRevision") not in (None, old),
                    "new update revision")
        await asyncio.sleep(0.3)
        images = {n: p["spec"]["containers"][0]["image"] for n, p in pods(server).items()}
        assert images == {"web-0": "nginx:1", "web-1": "nginx:1"}  # OnDelete: left alone
        st = status(server)
        assert (st["currentRevision"], st["currentReplicas"], st["updatedReplicas"]) == (
            old, 2, 0)
        ok(call(server, "DELETE", f"{PODS}/web-1"), 200)
        await until(lambda: pods(server).get("web-1", {}).get("spec", {}).get(
            "containers", [{}])[0].get("image") == "nginx:2", "web-1 recreated at nginx:2")

        # a Failed pod is deleted and recreated, with kube's warning
        uid = pods(server)["web-0"]["metadata"]["uid"]
        ok(call(server, "PATCH", f"{PODS}/web-0/status", {"status": {"phase": "Failed"}},
                headers={"Content-Type": "application/merge-patch+json"}), 200)
        await until(lambda: pods(server).get("web-0", {}).get("metadata", {}).get("uid")
                    not in (None, uid), "web-0 recreated")
        await controller.events.drain()
        events = ok(call(server, "GET", f"/api/v1/namespaces/{NS}/events"), 200)["items"]
        warnings = [e for e in events if e["reason"] == "RecreatingFailedPod"]
        assert warnings and warnings[0]["type"] == "Warning"
        assert warnings[0]["message"] == \
            "StatefulSet default/web is recreating failed Pod web-0"
    finally:
        stop.set()
        await fake


async def test_min_ready_seconds_holds_the_next_ordinal(
        server: ServerThread, controller: ClusterContext) -> None:
    create(server, STS, web(2, minReadySeconds=2))
    await until(lambda: "web-0" in pods(server), "web-0")
    make_ready(server, "web-0")
    ready_at = time.time()
    await until(lambda: status(server).get("readyReplicas") == 1, "web-0 ready")
    assert not status(server).get("availableReplicas")
    assert "web-1" not in pods(server)  # web-0 is Ready but not yet available
    await until(lambda: "web-1" in pods(server), "web-1", timeout=10)
    # the Ready time has whole seconds: available at most a second before ready_at + 2
    assert time.time() - ready_at >= 1.0
    # web-1 is created in the sync that counts web-0 available; the status write follows it
    await until(lambda: status(server).get("availableReplicas") == 1, "web-0 available")


async def test_kubectl_rollout_undo(server: ServerThread, controller: ClusterContext) -> None:
    stop = asyncio.Event()
    fake = asyncio.ensure_future(kubelet(server, stop))
    try:
        create(server, STS, web(2))
        await until(lambda: status(server).get("readyReplicas") == 2, "2 ready")
        first = status(server)["updateRevision"]
        ok(call(server, "PATCH", f"{STS}/web", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "nginx:2"}]}}}},
                headers={"Content-Type": "application/strategic-merge-patch+json"}), 200)
        await until(lambda: status(server).get("currentRevision") not in (None, first)
                    and status(server).get("updatedReplicas") == 2, "rolled")
        second = status(server)["updateRevision"]
        done = await asyncio.to_thread(kubectl.run, server, "rollout", "undo", "sts/web")
        assert done.returncode == 0, done.stderr

        def undone() -> bool:
            images = {p["spec"]["containers"][0]["image"] for p in pods(server).values()}
            st = status(server)
            return bool(images == {"nginx:1"} and st.get("currentRevision") == first
                        and st.get("updatedReplicas") == 2 and st.get("readyReplicas") == 2)

        await until(undone, "undone", timeout=20)
        revs = ok(call(server, "GET", f"/apis/apps/v1/namespaces/{NS}/controllerrevisions"),
                  200)["items"]
        # the first revision is reused, renumbered past the second
        assert {r["metadata"]["name"]: r["revision"] for r in revs} == {first: 3, second: 2}
    finally:
        stop.set()
        await fake
