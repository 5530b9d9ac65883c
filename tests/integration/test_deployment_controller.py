"""The Deployment controller (with the ReplicaSet controller) against a real server, driven by
kubectl as a user would: create → ReplicaSet → pods with kube's names and labels; rollout
status; rolling updates within maxSurge/maxUnavailable (seen as the sequence of ReplicaSet
sizes); Recreate; pause/resume; history, undo, set image, restart; scale; history cleanup;
a 100-replica deployment (measured)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest

from kubewire.client import Api
from kubewire.client.client import Client, create_client
from kubewire.cluster.runtime import ClusterContext
from tests.integration import kubectl as cli
from tests.integration.controller_helpers import eventually, kubectl, kubelet, running
from tests.integration.harness import ServerThread

Obj = dict[str, Any]
pytestmark = cli.needs_kubectl
HASH = re.compile(r"^[bcdfghjklmnpqrstvwxz2456789]{1,10}$")


def api(client: Client, api_version: str, kind: str) -> Api[Obj]:
    return Api(dict, client=client, api_version=api_version, kind=kind)


def sizes_recorder(ctx: ClusterContext) -> list[dict[str, int]]:
    """Every change of any ReplicaSet's spec.replicas, as the whole picture after it."""
    seen: list[dict[str, int]] = []
    current: dict[str, int] = {}

    def record(obj: Obj, gone: bool = False) -> None:
        name = obj["metadata"]["name"]
        size = 0 if gone else int(obj["spec"].get("replicas") or 0)
        if current.get(name) != size:
            current[name] = size
            seen.append(dict(current))

    ctx.informer("apps/v1", "ReplicaSet").add_handlers(
        on_add=record, on_update=lambda old, new: record(new),
        on_delete=lambda obj: record(obj, True))
    return seen


async def rs_of(client: Client, name: str) -> list[Obj]:
    listed = await api(client, "apps/v1", "ReplicaSet").list(namespace="default")
    return sorted((rs for rs in listed.items
                   if any(r["name"] == name for r in rs["metadata"].get("ownerReferences") or [])),
                  key=created_order)


def created_order(rs: Obj) -> tuple[str, int]:
    """Oldest first: creationTimestamp has seconds only, so the original revision (the
    first in revision-history, else the revision) breaks ties."""
    notes = rs["metadata"].get("annotations") or {}
    first = (notes.get("deployment.kubernetes.io/revision-history") or
             notes.get("deployment.kubernetes.io/revision") or "0").split(",")[0]
    return rs["metadata"]["creationTimestamp"], int(first)


async def rolled_out(server: ServerThread, name: str) -> str:
    return await kubectl(server, "rollout", "status", f"deploy/{name}", "--timeout=60s")


async def test_create_rollout_status_names_labels_events(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client, running(server), \
            kubelet(api(client, "v1", "Pod")):
        await kubectl(server, "create", "deployment", "web", "--image=nginx", "--replicas=3")
        out = await rolled_out(server, "web")
        assert out.strip().endswith('deployment "web" successfully rolled out'), out
        [rs] = await rs_of(client, "web")
        rs_name = rs["metadata"]["name"]
        pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
        assert HASH.match(pod_hash) and rs_name == f"web-{pod_hash}"
        assert rs["metadata"]["labels"] == {"app": "web", "pod-template-hash": pod_hash}
        assert rs["spec"]["selector"]["matchLabels"] == rs["metadata"]["labels"]
        notes = rs["metadata"]["annotations"]
        assert notes["deployment.kubernetes.io/revision"] == "1"
        assert notes["deployment.kubernetes.io/desired-replicas"] == "3"
        assert notes["deployment.kubernetes.io/max-replicas"] == "4"
        pods = json.loads(await kubectl(server, "get", "pods", "-l", "app=web", "-o", "json"))
        assert len(pods["items"]) == 3
        for pod in pods["items"]:
            assert re.match(rf"^{rs_name}-[a-z0-9]{{5}}$", pod["metadata"]["name"])
            assert pod["metadata"]["labels"] == {"app": "web", "pod-template-hash": pod_hash}
        d = json.loads(await kubectl(server, "get", "deploy/web", "-o", "json"))
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
        status = d["status"]
        assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"],
                status["availableReplicas"]) == (3, 3, 3, 3)
        assert status["observedGeneration"] == d["metadata"]["generation"]
        conds = [(c["type"], c["status"], c["reason"], c["message"])
                 for c in status["conditions"]]
        assert conds == [
            ("Available", "True", "MinimumReplicasAvailable",
             "Deployment has minimum availability."),
            ("Progressing", "True", "NewReplicaSetAvailable",
             f'ReplicaSet "{rs_name}" has successfully progressed.')]
        described = await kubectl(server, "describe", "deploy/web")
        assert re.search(rf"NewReplicaSet:\s+{rs_name} \(3/3 replicas created\)", described), \
            described
        assert "OldReplicaSets:  <none>" in described
        table = await kubectl(server, "get", "deploy/web")
        assert table.split("\n")[1].split()[:4] == ["web", "3/3", "3", "3"]
    events = json.loads(await asyncio.to_thread(cli.ok, server, "get", "events", "-o", "json"))
    scaling = [e["message"] for e in events["items"] if e["reason"] == "ScalingReplicaSet"]
    assert scaling == [f"Scaled up replica set {rs_name} from 0 to 3"]


async def test_rolling_update_within_surge_and_unavailable(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client, running(server) as ctx, \
            kubelet(api(client, "v1", "Pod")):
        seen = sizes_recorder(ctx)
        await kubectl(server, "create", "deployment", "roll", "--image=nginx:1", "--replicas=4")
        await kubectl(server, "patch", "deploy/roll", "-p", json.dumps({"spec": {"strategy": {
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}}}))
        await rolled_out(server, "roll")
        before = len(seen)
        await kubectl(server, "set", "image", "deploy/roll", "nginx=nginx:2")
        out = await rolled_out(server, "roll")
        assert 'deployment "roll" successfully rolled out' in out
        old, new = await rs_of(client, "roll")
        steps = [s for s in seen[before:] if new["metadata"]["name"] in s]
        old_name, new_name = old["metadata"]["name"], new["metadata"]["name"]
        assert steps[0].get(new_name) == 1  # the first step: one surge pod
        for step in steps:
            assert step.get(old_name, 0) + step[new_name] <= 5  # replicas + maxSurge
        assert steps[-1] == {**steps[-1], old_name: 0, new_name: 4}
        assert len(steps) >= 4  # several steps, not one jump
        assert new["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
        assert new["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
        await ctx.events.drain()
        listed = await api(client, "v1", "Event").list(namespace="default")
        scaling = [e["message"] for e in listed.items if e["reason"] == "ScalingReplicaSet"
                   and e["involvedObject"]["name"] == "roll"]
        assert f"Scaled up replica set {new_name} from 0 to 1" in scaling
        downs = [m for m in scaling if m.startswith(f"Scaled down replica set {old_name} ")]
        assert downs and downs[-1].endswith(" to 0")
        await kubectl(server, "annotate", "deploy/roll", "kubernetes.io/change-cause=to v2")

        async def history() -> list[list[str]] | None:
            text = await kubectl(server, "rollout", "history", "deploy/roll")
            rows = [line.split(None, 1) for line in text.strip().splitlines()[2:]]
            return rows if rows[-1][1:] == ["to v2"] else None

        rows = await eventually(history, what="change-cause copied to the new ReplicaSet")
        assert rows == [["1", "<none>"], ["2", "to v2"]]
        # undo: the old ReplicaSet comes back as revision 3; no third ReplicaSet
        await kubectl(server, "rollout", "undo", "deploy/roll")
        await rolled_out(server, "roll")
        again = await rs_of(client, "roll")
        assert [rs["metadata"]["name"] for rs in again] == [old_name, new_name]
        back = again[0]
        assert back["spec"]["replicas"] == 4 and again[1]["spec"]["replicas"] == 0
        notes = back["metadata"]["annotations"]
        assert notes["deployment.kubernetes.io/revision"] == "3"
        assert notes["deployment.kubernetes.io/revision-history"] == "1"
        d = await api(client, "apps/v1", "Deployment").get("roll", namespace="default")
        assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"


async def test_recreate_scales_old_to_zero_first(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client, running(server) as ctx, \
            kubelet(api(client, "v1", "Pod")):
        seen = sizes_recorder(ctx)
        await kubectl(server, "create", "deployment", "rec", "--image=nginx:1", "--replicas=3")
        await kubectl(server, "patch", "deploy/rec", "--type=json", "-p", json.dumps([
            {"op": "replace", "path": "/spec/strategy",
             "value": {"type": "Recreate"}}]))
        await rolled_out(server, "rec")
        before = len(seen)
        await kubectl(server, "set", "image", "deploy/rec", "nginx=nginx:2")
        await rolled_out(server, "rec")
        old, new = await rs_of(client, "rec")
        steps = seen[before:]
        old_name, new_name = old["metadata"]["name"], new["metadata"]["name"]
        assert steps[0] == {**steps[0], old_name: 0}  # first the old one goes to zero
        assert all(not (s.get(old_name, 0) and s.get(new_name, 0)) for s in steps)
        assert steps[-1][new_name] == 3
        assert new["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "3"


async def test_pause_resume_scale_restart_and_history_limit(server: ServerThread) -> None:
    deployments = None
    async with await create_client(server.kubeconfig) as client, running(server), \
            kubelet(api(client, "v1", "Pod")):
        deployments = api(client, "apps/v1", "Deployment")
        await kubectl(server, "create", "deployment", "p", "--image=nginx:1", "--replicas=2")
        await rolled_out(server, "p")
        await kubectl(server, "rollout", "pause", "deploy/p")

        async def paused() -> Obj | None:
            d = await deployments.get("p", namespace="default")
            conds = {c["type"]: c for c in d["status"].get("conditions") or []}
            return d if conds.get("Progressing", {}).get("reason") == "DeploymentPaused" \
                else None

        d = await eventually(paused, what="paused condition")
        assert d["status"]["conditions"][-1]["status"] == "Unknown"
        assert d["status"]["conditions"][-1]["message"] == "Deployment is paused"
        await kubectl(server, "set", "image", "deploy/p", "nginx=nginx:2")
        await kubectl(server, "scale", "deploy/p", "--replicas=3")

        async def scaled() -> list[Obj] | None:
            rss = await rs_of(client, "p")
            return rss if [rs["spec"]["replicas"] for rs in rss] == [3] else None

        await eventually(scaled, what="paused deployment scaled, not rolled")
        await kubectl(server, "rollout", "resume", "deploy/p")
        await rolled_out(server, "p")
        rss = await rs_of(client, "p")
        assert [rs["spec"]["replicas"] for rs in rss] == [0, 3]
        await kubectl(server, "rollout", "restart", "deploy/p")
        await rolled_out(server, "p")
        rss = await rs_of(client, "p")
        assert len(rss) == 3
        assert "kubectl.kubernetes.io/restartedAt" in \
            rss[-1]["spec"]["template"]["metadata"]["annotations"]
        # history cleanup: revisionHistoryLimit 1 keeps one old ReplicaSet
        await kubectl(server, "patch", "deploy/p", "-p", '{"spec":{"revisionHistoryLimit":1}}')

        async def trimmed() -> list[Obj] | None:
            found = await rs_of(client, "p")
            return found if len(found) == 2 else None

        kept = await eventually(trimmed, what="history trimmed to one old ReplicaSet")
        assert [rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                for rs in kept] == ["2", "3"]


@pytest.mark.parametrize("replicas", [100])
async def test_hundred_replicas(server: ServerThread, replicas: int) -> None:
    async with await create_client(server.kubeconfig) as client, running(server), \
            kubelet(api(client, "v1", "Pod")):
        start = time.monotonic()
        await kubectl(server, "create", "deployment", "big", "--image=nginx",
                      f"--replicas={replicas}")
        await rolled_out(server, "big")
        took = time.monotonic() - start
        pods = await api(client, "v1", "Pod").list(namespace="default")
        assert len([p for p in pods.items if p["metadata"]["name"].startswith("big-")]) \
            == replicas
        print(f"\n{replicas} replicas created and rolled out in {took:.2f}s")


async def test_progress_deadline_exceeded(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client, running(server):
        await kubectl(server, "create", "deployment", "slow", "--image=nginx", "--replicas=2")
        await kubectl(server, "patch", "deploy/slow", "-p",
                      '{"spec":{"progressDeadlineSeconds":1}}')
        deployments = api(client, "apps/v1", "Deployment")

        async def exceeded() -> Obj | None:
            d = await deployments.get("slow", namespace="default")
            conds = {c["type"]: c for c in d["status"].get("conditions") or []}
            return d if conds.get("Progressing", {}).get("reason") == \
                "ProgressDeadlineExceeded" else None

        d = await eventually(exceeded, timeout=20, what="ProgressDeadlineExceeded")
        conds = {c["type"]: c for c in d["status"]["conditions"]}
        rs_name = (await rs_of(client, "slow"))[0]["metadata"]["name"]
        assert conds["Progressing"]["status"] == "False"
        assert conds["Progressing"]["message"] == \
            f'ReplicaSet "{rs_name}" has timed out progressing.'
        assert conds["Available"]["reason"] == "MinimumReplicasUnavailable"
        done = await asyncio.to_thread(cli.run, server, "rollout", "status", "deploy/slow",
                                       "--timeout=20s")
        assert done.returncode != 0
        assert 'deployment "slow" exceeded its progress deadline' in done.stderr


async def test_min_ready_seconds_delays_availability_then_settles(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client, running(server), \
            kubelet(api(client, "v1", "Pod")):
        deployments = api(client, "apps/v1", "Deployment")
        labels = {"app": "mrs"}
        start = time.monotonic()
        await deployments.create({"metadata": {"name": "mrs"}, "spec": {
            "replicas": 2, "minReadySeconds": 3, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
            namespace="default")

        async def ready_not_available() -> Obj | None:
            d = await deployments.get("mrs", namespace="default")
            s = d.get("status") or {}
            return d if s.get("readyReplicas") == 2 else None

        d = await eventually(ready_not_available, what="ready pods")
        assert not d["status"].get("availableReplicas")  # Ready for less than 3 s
        assert d["status"]["unavailableReplicas"] == 2
        await rolled_out(server, "mrs")
        assert time.monotonic() - start >= 3.0
        settled = await deployments.get("mrs", namespace="default")
        await asyncio.sleep(1.5)
        later = await deployments.get("mrs", namespace="default")
        # nothing more to write once rolled out: no status loop
        assert later["metadata"]["resourceVersion"] == settled["metadata"]["resourceVersion"]


async def test_name_collision_bumps_collision_count(server: ServerThread) -> None:
    from kubewire.cluster.controllers.rollout import template_hash

    async with await create_client(server.kubeconfig) as client:
        deployments = api(client, "apps/v1", "Deployment")
        rss = api(client, "apps/v1", "ReplicaSet")
        labels = {"app": "col"}
        d = await deployments.create({"metadata": {"name": "col"}, "spec": {
            "replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
            namespace="default")
        taken = f"col-{template_hash(d['spec']['template'], None)}"
        other = {"app": "someone-else"}
        await rss.create({"metadata": {"name": taken}, "spec": {
            "replicas": 0, "selector": {"matchLabels": other},
            "template": {"metadata": {"labels": other},
                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}},
            namespace="default")
        async with running(server):
            async def mine() -> list[Obj] | None:
                found = await rs_of(client, "col")
                return found or None

            [rs] = await eventually(mine, what="a ReplicaSet under another name")
        d = await deployments.get("col", namespace="default")
        assert d["status"]["collisionCount"] == 1
        assert rs["metadata"]["name"] == f"col-{template_hash(d['spec']['template'], 1)}"
        assert rs["metadata"]["name"] != taken
        untouched = await rss.get(taken, namespace="default")
        assert not untouched["metadata"].get("ownerReferences")


async def test_kubectl_scale_up_and_down_keeps_the_ready_pod(server: ServerThread) -> None:
    from tests.integration.controller_helpers import mark_ready

    async with await create_client(server.kubeconfig) as client, running(server):
        pods = api(client, "v1", "Pod")
        await kubectl(server, "create", "deployment", "sc", "--image=nginx", "--replicas=2")

        async def count(n: int) -> list[Obj] | None:
            listed = await pods.list(namespace="default", label_selector="app=sc")
            live = [p for p in listed.items if not p["metadata"].get("deletionTimestamp")]
            return live if len(live) == n else None

        first = await eventually(lambda: count(2), what="two pods")
        kept = await mark_ready(pods, first[1])
        await kubectl(server, "scale", "deploy/sc", "--replicas=4")
        await eventually(lambda: count(4), what="scaled up to four")
        await kubectl(server, "scale", "deploy/sc", "--replicas=1")
        [left] = await eventually(lambda: count(1), what="scaled down to one")
        assert left["metadata"]["uid"] == kept["metadata"]["uid"]  # not Ready goes first
        [rs] = await rs_of(client, "sc")
        assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "1"
        assert rs["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "2"
    events = json.loads(await asyncio.to_thread(cli.ok, server, "get", "events", "-o", "json"))
    scaling = [e["message"] for e in events["items"] if e["reason"] == "ScalingReplicaSet"]
    name = rs["metadata"]["name"]
    assert scaling == [f"Scaled up replica set {name} from 0 to 2",
                       f"Scaled up replica set {name} from 2 to 4",
                       f"Scaled down replica set {name} from 4 to 1"]
