"""The ReplicaSet controller against a real server: pods from the template with kube's names,
labels and controller reference; orphans adopted; scale-down deletes the pods kube would
(not Ready before Ready); status counters; kube's events."""

from __future__ import annotations

from typing import Any

from kubewire.client import Api
from kubewire.client.client import Client, create_client
from tests.integration.controller_helpers import eventually, mark_ready, owned_pods, running
from tests.integration.harness import ServerThread

Obj = dict[str, Any]


def replicaset(name: str, replicas: int) -> Obj:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def apis(client: Client) -> tuple[Api[Obj], Api[Obj], Api[Obj]]:
    return (Api(dict, client=client, api_version="apps/v1", kind="ReplicaSet"),
            Api(dict, client=client, api_version="v1", kind="Pod"),
            Api(dict, client=client, api_version="v1", kind="Event"))


async def test_replicaset_creates_adopts_scales_down_by_rank(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        rss, pods, events = apis(client)
        orphan = await pods.create({"metadata": {"name": "stray", "labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "c", "image": "x"}]}},
                                   namespace="default")
        async with running(server, deployments=False):
            rs = await rss.create(replicaset("web", 3), namespace="default")
            uid = rs["metadata"]["uid"]

            async def three() -> list[Obj] | None:
                found = await owned_pods(pods, "default", uid)
                return found if len(found) == 3 else None

            found = await eventually(three, what="three pods")
            names = {p["metadata"]["name"] for p in found}
            assert "stray" in names  # adopted, so only two were created
            created = [p for p in found if p["metadata"]["name"] != "stray"]
            for pod in created:
                assert pod["metadata"]["name"].startswith("web-")
                assert pod["metadata"]["generateName"] == "web-"
                assert pod["metadata"]["labels"] == {"app": "web"}
            for pod in found:
                assert pod["metadata"]["ownerReferences"] == [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": uid,
                    "controller": True, "blockOwnerDeletion": True}]
            assert orphan["metadata"]["uid"] in {p["metadata"]["uid"] for p in found}
            # two Ready, one not: the status counts them; a scale to 2 deletes the unready one
            keep = [created[0], orphan]
            for pod in keep:
                await mark_ready(pods, pod)

            async def ready_two() -> Obj | None:
                got = await rss.get("web", namespace="default")
                status = got.get("status") or {}
                return got if status.get("readyReplicas") == 2 \
                    and status.get("availableReplicas") == 2 else None

            got = await eventually(ready_two, what="ready counters")
            assert got["status"]["replicas"] == 3
            assert got["status"]["fullyLabeledReplicas"] == 3
            assert got["status"]["observedGeneration"] == got["metadata"]["generation"]
            await rss.patch("web", {"spec": {"replicas": 2}}, namespace="default")

            async def two() -> list[Obj] | None:
                left = await owned_pods(pods, "default", uid)
                return left if len(left) == 2 else None

            left = await eventually(two, what="scale down to two")
            assert {p["metadata"]["uid"] for p in left} == {p["metadata"]["uid"] for p in keep}
        listed = await events.list(namespace="default")
        mine = [(e["reason"], e["message"]) for e in listed.items
                if e["involvedObject"].get("uid") == uid]
        reasons = sorted(r for r, _ in mine)
        assert reasons.count("SuccessfulCreate") == 2, mine
        assert reasons.count("SuccessfulDelete") == 1, mine
        assert ("SuccessfulDelete", f"Deleted pod: {created[1]['metadata']['name']}") in mine
        assert all(e["source"] == {"component": "replicaset-controller"}
                   for e in listed.items if e["involvedObject"].get("uid") == uid)



async def test_failed_creates_report_replica_failure_then_recover(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        rss, pods, events = apis(client)
        accounts = Api(dict, client=client, api_version="v1", kind="ServiceAccount")
        async with running(server, deployments=False):
            body = replicaset("nosa", 2)
            body["spec"]["template"]["spec"]["serviceAccountName"] = "missing"
            rs = await rss.create(body, namespace="default")

            async def failing() -> Obj | None:
                got = await rss.get("nosa", namespace="default")
                conds = (got.get("status") or {}).get("conditions") or []
                return got if conds else None

            got = await eventually(failing, what="ReplicaFailure")
            [cond] = got["status"]["conditions"]
            assert (cond["type"], cond["status"], cond["reason"]) == \
                ("ReplicaFailure", "True", "FailedCreate")
            assert "error looking up service account default/missing" in cond["message"]
            assert got["status"]["replicas"] == 0
            await accounts.create({"metadata": {"name": "missing"}}, namespace="default")

            async def recovered() -> Obj | None:
                got = await rss.get("nosa", namespace="default")
                status = got.get("status") or {}
                return got if status.get("replicas") == 2 and not status.get("conditions") \
                    else None

            await eventually(recovered, what="pods once the account exists")
        listed = await events.list(namespace="default")
        failed = [e for e in listed.items if e["involvedObject"].get("uid") ==
                  rs["metadata"]["uid"] and e["reason"] == "FailedCreate"]
        assert failed and failed[0]["type"] == "Warning"
        assert failed[0]["message"].startswith("Error creating: ")
        assert len(await owned_pods(pods, "default", rs["metadata"]["uid"])) == 2


async def test_claim_reads_its_own_pods_and_orphans_not_the_whole_namespace(
        server: ServerThread, monkeypatch: Any) -> None:
    """A sync's candidates come from the ``controllerUID`` index (kube's
    ``FilterPodsByOwner``): with many pods of another controller in the namespace (labelled
    so that web's selector matches them), a sync of ``web`` looks at its own pods and the orphans
    only, never claims the other's pods, adopts a matching orphan and releases a pod that
    stops matching."""
    from kubewire.cluster.controllers import replicaset as rs_module

    looked_at: list[str] = []
    real_is_active = rs_module.is_active

    def counting_is_active(pod: Any) -> bool:
        looked_at.append(pod["metadata"]["name"])
        return real_is_active(pod)

    monkeypatch.setattr(rs_module, "is_active", counting_is_active)
    async with await create_client(server.kubeconfig) as client:
        rss, pods, _ = apis(client)
        # another controller's pods (a StatefulSet's: the ReplicaSet controller syncs nothing
        # of its own for them, so every pod the spy sees is one a sync of web looked at)
        other_uid = "7d1c0c8e-0000-4000-8000-000000000001"
        other_ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "other",
                     "uid": other_uid, "controller": True}
        for i in range(40):  # labelled as web's would be, but another controller's
            await pods.create({"metadata": {"name": f"theirs-{i}",
                                            "labels": {"app": "web"},
                                            "ownerReferences": [other_ref]},
                               "spec": {"containers": [{"name": "c", "image": "x"}]}},
                              namespace="default")
        await pods.create({"metadata": {"name": "stray", "labels": {"app": "web"}},
                           "spec": {"containers": [{"name": "c", "image": "x"}]}},
                          namespace="default")
        async with running(server, deployments=False):
            rs = await rss.create(replicaset("web", 2), namespace="default")
            uid = rs["metadata"]["uid"]

            async def two() -> list[Obj] | None:
                found = await owned_pods(pods, "default", uid)
                return found if len(found) == 2 else None

            found = await eventually(two, what="two pods of web")
            assert "stray" in {p["metadata"]["name"] for p in found}
            mine = next(p for p in found if p["metadata"]["name"] != "stray")
            await pods.patch(mine["metadata"]["name"], {"metadata": {"labels": {"app": "gone"}}},
                             namespace="default")

            async def released() -> Obj | None:
                got = await pods.get(mine["metadata"]["name"], namespace="default")
                return got if not got["metadata"].get("ownerReferences") else None

            await eventually(released, what="the relabelled pod released")
            await eventually(two, what="a replacement for the released pod")
        theirs = [p for p in (await pods.list(namespace="default")).items
                  if p["metadata"]["name"].startswith("theirs-")]
        assert len(theirs) == 40
        assert all(p["metadata"]["ownerReferences"] == [other_ref] for p in theirs)
    assert looked_at, "the ReplicaSet was never synced"
    assert not [n for n in looked_at if n.startswith("theirs-")]
