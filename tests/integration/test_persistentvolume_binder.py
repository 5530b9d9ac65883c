"""The PersistentVolume binder and the simulated provisioner against a real server.

Static volumes: the smallest fitting Available volume is bound, with kube's annotations,
claimRef, phases and the claim's status; ``spec.volumeName`` pre-binding; a mismatch and an
unsatisfiable claim get kube's events; a deleted claim leaves a Retain volume Released and
fails a static Delete one as kube without a deleter plugin does. Dynamic volumes: an Immediate
class is provisioned at once, a WaitForFirstConsumer one once the scheduler picks a node; the
provisioner deletes its Released volume. The story: a StatefulSet with volumeClaimTemplates on
a server run as ``kubewire serve`` runs it (every component), as on kind."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubewire.client import Api
from kubewire.client.client import Client, create_client
from kubewire.cluster.controllers.persistentvolume import make_persistentvolume_binder
from kubewire.cluster.controllers.provisioner import LocalPathProvisioner
from kubewire.cluster.runtime import ClusterContext, Component
from kubewire.cluster.scheduler.scheduler import make_scheduler
from tests.integration import kubectl
from tests.integration.controller_helpers import eventually, run_components
from tests.integration.harness import ServerThread
from tests.integration.test_scheduler import add_node, node

Obj = dict[str, Any]


@contextlib.asynccontextmanager
async def components(client: Client, *, provisioner: bool = False,
                     ) -> AsyncIterator[ClusterContext]:
    ctx = ClusterContext(client)
    parts: list[Component] = [make_persistentvolume_binder(ctx)]
    if provisioner:
        parts.append(LocalPathProvisioner(ctx))
    async with run_components(ctx, parts):
        yield ctx


def volume(name: str, size: str, *, policy: str = "Retain", cls: str = "",
           modes: tuple[str, ...] = ("ReadWriteOnce",), **spec: Any) -> Obj:
    return {"metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": list(modes),
                     "persistentVolumeReclaimPolicy": policy, "storageClassName": cls,
                     "hostPath": {"path": f"/tmp/{name}"}, **spec}}


def claim(name: str, size: str, cls: str | None = "", **spec: Any) -> Obj:
    body: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                 **spec}
    if cls is not None:
        body["storageClassName"] = cls
    return {"metadata": {"name": name}, "spec": body}


def apis(client: Client) -> tuple[Api[Obj], Api[Obj], Api[Obj]]:
    return (Api(dict, client=client, api_version="v1", kind="PersistentVolume"),
            Api(dict, client=client, api_version="v1", kind="PersistentVolumeClaim"),
            Api(dict, client=client, api_version="v1", kind="Event"))


def phase_of(api: Api[Obj], name: str, phase: str, namespace: str | None = None) -> Any:
    async def probe() -> Obj | None:
        try:
            got = await (api.get(name, namespace=namespace) if namespace
                         else api.get(name))
        except Exception:
            return None
        return got if (got.get("status") or {}).get("phase") == phase else None
    return probe


async def reasons(events: Api[Obj], name: str) -> list[tuple[str, str, str]]:
    listed = await events.list(namespace="default")
    return [(e["reason"], e["message"], e["source"].get("component", ""))
            for e in listed.items if e["involvedObject"].get("name") == name]


async def test_static_binding_release_and_events(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        pvs, pvcs, events = apis(client)
        await pvs.create(volume("big", "10Gi"))
        await pvs.create(volume("small", "2Gi"))
        await pvs.create(volume("tiny", "500Mi"))
        await pvs.create(volume("static-delete", "1Gi", policy="Delete", cls="manual"))
        async with components(client):
            await eventually(phase_of(pvs, "small", "Available"), what="Available")
            await pvcs.create(claim("data", "1Gi"), namespace="default")
            bound = await eventually(phase_of(pvcs, "data", "Bound", "default"), what="Bound")
            assert bound["spec"]["volumeName"] == "small"  # the smallest that fits
            assert bound["metadata"]["annotations"] == {
                "pv.kubernetes.io/bind-completed": "yes",
                "pv.kubernetes.io/bound-by-controller": "yes"}
            assert bound["status"]["capacity"] == {"storage": "2Gi"}
            assert bound["status"]["accessModes"] == ["ReadWriteOnce"]
            pv = await eventually(phase_of(pvs, "small", "Bound"), what="PV Bound")
            assert pv["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller":
                                                     "yes"}
            ref = pv["spec"]["claimRef"]
            assert (ref["kind"], ref["namespace"], ref["name"], ref["uid"]) == (
                "PersistentVolumeClaim", "default", "data", bound["metadata"]["uid"])
            assert pv["status"].get("lastPhaseTransitionTime")
            # pre-binding by name: the user's choice, no bound-by-controller on the claim
            await pvcs.create(claim("pinned", "1Gi", volumeName="big"), namespace="default")
            pinned = await eventually(phase_of(pvcs, "pinned", "Bound", "default"),
                                      what="pinned Bound")
            assert pinned["metadata"]["annotations"] == {"pv.kubernetes.io/bind-completed":
                                                         "yes"}
            # a requested volume too small; nothing fits a huge claim
            await pvcs.create(claim("mismatch", "1Gi", volumeName="tiny"), namespace="default")
            await pvcs.create(claim("huge", "1Ti"), namespace="default")

            async def warned() -> bool:
                got = await reasons(events, "mismatch") + await reasons(events, "huge")
                return ("VolumeMismatch", 'Cannot bind to requested volume "tiny": requested '
                        "PV is too small", "persistentvolume-controller") in got and (
                    "FailedBinding", "no persistent volumes available for this claim and no "
                    "storage class is set", "persistentvolume-controller") in got

            await eventually(warned, what="events")
            assert (await pvcs.get("huge", namespace="default"))["status"]["phase"] == \
                "Pending"
            # the claim goes: a Retain volume is Released and kept
            await pvcs.delete("data", namespace="default")
            released = await eventually(phase_of(pvs, "small", "Released"), what="Released")
            assert released["spec"]["claimRef"]["name"] == "data"
            # a static Delete volume: kube has no deleter plugin for it and fails it
            await pvcs.create(claim("gone", "1Gi", "manual"), namespace="default")
            await eventually(phase_of(pvcs, "gone", "Bound", "default"), what="manual Bound")
            await pvcs.delete("gone", namespace="default")
            failed = await eventually(phase_of(pvs, "static-delete", "Failed"), what="Failed")
            assert failed["status"]["message"] == (
                'error getting deleter volume plugin for volume "static-delete": no deletable '
                "volume plugin matched")


async def test_dynamic_provisioning_immediate_and_wait_for_first_consumer(
        server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        pvs, pvcs, events = apis(client)
        classes = Api(dict, client=client, api_version="storage.k8s.io/v1", kind="StorageClass")
        async with components(client, provisioner=True):
            async def standard() -> Obj | None:
                with contextlib.suppress(Exception):
                    return await classes.get("standard")
                return None

            made = await eventually(standard, what="the default class")
            assert made["provisioner"] == "kubewire.io/local-path"
            assert made["volumeBindingMode"] == "WaitForFirstConsumer"
            assert made["metadata"]["annotations"] == {
                "storageclass.kubernetes.io/is-default-class": "true"}
            await classes.create({"metadata": {"name": "fast"},
                                  "provisioner": "kubewire.io/local-path",
                                  "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
            now = await pvcs.create(claim("now", "3Gi", "fast"), namespace="default")
            bound = await eventually(phase_of(pvcs, "now", "Bound", "default"), what="Bound")
            name = f"pvc-{now['metadata']['uid']}"
            assert bound["spec"]["volumeName"] == name
            assert bound["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] \
                == "kubewire.io/local-path"
            pv = await pvs.get(name)
            assert pv["metadata"]["annotations"] == {"pv.kubernetes.io/provisioned-by":
                                                     "kubewire.io/local-path"}
            assert pv["spec"]["capacity"] == {"storage": "3Gi"}
            assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
            got = await reasons(events, "now")
            assert ("Provisioning", 'External provisioner is provisioning volume for claim '
                    '"default/now"', "kubewire.io/local-path_local-path-provisioner") in got
            assert ("ProvisioningSucceeded", f"Successfully provisioned volume {name}",
                    "kubewire.io/local-path_local-path-provisioner") in got
            assert any(r == "ExternalProvisioning" and "'kubewire.io/local-path'" in m
                       for r, m, _ in got), got
            # the default class (admission fills it in) waits for its first consumer
            await pvcs.create(claim("later", "1Gi", None), namespace="default")

            async def waiting() -> bool:
                return any(r == "WaitForFirstConsumer" for r, _, _ in
                           await reasons(events, "later"))

            await eventually(waiting, what="WaitForFirstConsumer")
            later = await pvcs.get("later", namespace="default")
            assert later["spec"]["storageClassName"] == "standard"
            assert later["status"]["phase"] == "Pending"
            # the scheduler's choice of node: provisioned there
            await pvcs.patch("later", {"metadata": {"annotations": {
                "volume.kubernetes.io/selected-node": "n1"}}}, namespace="default")
            later = await eventually(phase_of(pvcs, "later", "Bound", "default"),
                                     what="later Bound")
            pv = await pvs.get(later["spec"]["volumeName"])
            assert pv["spec"]["nodeAffinity"] == {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                       "values": ["n1"]}]}]}}
            # Delete: the claim goes, the provisioner deletes its volume
            await pvcs.delete("now", namespace="default")

            async def deleted() -> bool:
                try:
                    await pvs.get(name)
                except Exception:
                    return True
                return False

            await eventually(deleted, what="volume deleted")


def _until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx
        volumeMounts: [{name: www, mountPath: /usr/share/nginx/html}]
  volumeClaimTemplates:
  - metadata: {name: www}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"""


@pytest.mark.parametrize("mode", ["AlwaysAllow", "RBAC"])
def test_a_statefulset_with_claims_runs_as_on_kind(
        make_server: Callable[..., ServerThread], mode: str) -> None:
    server = make_server(cluster=True, insecure_http=False, authorization_mode=mode)
    kubectl.ok(server, "apply", "-f", "-", stdin=STATEFULSET)
    kubectl.ok(server, "rollout", "status", "sts/web", "--timeout=60s")
    kubectl.ok(server, "wait", "--for=condition=Ready", "pod", "-l", "app=web",
               "--timeout=60s")
    claims = json.loads(kubectl.ok(server, "get", "pvc", "-o", "json"))["items"]
    assert sorted(c["metadata"]["name"] for c in claims) == ["www-web-0", "www-web-1"]
    for item in claims:
        assert item["status"]["phase"] == "Bound"
        notes = item["metadata"]["annotations"]
        assert notes["volume.kubernetes.io/selected-node"] == "kubewire-node-0"
        assert notes["volume.kubernetes.io/storage-provisioner"] == "kubewire.io/local-path"
        assert notes["pv.kubernetes.io/bind-completed"] == "yes"
    table = kubectl.ok(server, "get", "pvc,pv")
    lines = table.splitlines()
    assert lines[0].split()[:7] == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES",
                                    "STORAGECLASS"]
    assert any(line.startswith("persistentvolumeclaim/www-web-0") and " Bound " in line
               and " standard " in line and " RWO " in line for line in lines), table
    assert any(line.startswith("persistentvolume/pvc-") and " Delete " in line
               and "default/www-web-0" in line for line in lines), table
    # the claims outlive the StatefulSet (kube's default retention), Bound still
    kubectl.ok(server, "delete", "sts/web")
    _until(lambda: not json.loads(kubectl.ok(server, "get", "pods", "-l", "app=web", "-o",
                                             "json"))["items"], "pods gone")
    kubectl.ok(server, "delete", "pvc", "--all")
    _until(lambda: not json.loads(kubectl.ok(server, "get", "pv", "-o", "json"))["items"],
           "volumes deleted by the provisioner")


async def test_scheduler_selects_the_node_and_binds_after_the_claims(server: ServerThread,
                                                                     ) -> None:
    """VolumeBinding's PreBind: the claim of a WaitForFirstConsumer class gets the chosen node;
    the pod is bound only once its claim is Bound; a pod deleted meanwhile ends the wait."""
    add_node(server, node("n1"))
    async with await create_client(server.kubeconfig) as client:
        pvs, pvcs, _events = apis(client)
        pods = Api(dict, client=client, api_version="v1", kind="Pod")
        classes = Api(dict, client=client, api_version="storage.k8s.io/v1", kind="StorageClass")
        await classes.create({"metadata": {"name": "later"}, "provisioner": "example.com/none",
                              "volumeBindingMode": "WaitForFirstConsumer"})
        for name in ("data", "other"):
            await pvcs.create(claim(name, "1Gi", "later"), namespace="default")
        ctx = ClusterContext(client)
        sched = make_scheduler(ctx, None)
        async with run_components(ctx, [sched]):
            for name, volume_claim in (("p", "data"), ("q", "other")):
                await pods.create({"metadata": {"name": name}, "spec": {
                    "containers": [{"name": "c", "image": "nginx"}],
                    "volumes": [{"name": "v", "persistentVolumeClaim": {
                        "claimName": volume_claim}}]}}, namespace="default")

            async def selected() -> bool:
                got = [await pvcs.get(n, namespace="default") for n in ("data", "other")]
                return all(c["metadata"].get("annotations", {}).get(
                    "volume.kubernetes.io/selected-node") == "n1" for c in got)

            await eventually(selected, what="the node selected for both claims")
            await asyncio.sleep(0.5)
            assert not (await pods.get("p", namespace="default"))["spec"].get("nodeName")
            # a volume for "data" (as its provisioner would make it): the binder binds it,
            # then the scheduler binds the pod
            await pvs.create(volume("made", "1Gi", cls="later", claimRef={
                "namespace": "default", "name": "data"}))
            async with components(client):
                async def bound() -> bool:
                    got = await pods.get("p", namespace="default")
                    return got["spec"].get("nodeName") == "n1"

                await eventually(bound, what="the pod bound after its claim")
            # "q" waits on a claim nothing provisions; deleted, its binding task ends
            assert len(sched._tasks) == 1
            await pods.delete("q", namespace="default", grace_period_seconds=0)

            async def idle() -> bool:
                return not sched._tasks

            await eventually(idle, what="the waiting binding given up")
