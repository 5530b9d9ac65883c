"""core/v1 ReplicationControllers as kube-apiserver and kube-controller-manager serve them.

kubectl and the ``kubernetes`` package create, read, list, watch, scale and delete RCs (the
selector and the RC's labels defaulted from the template, printers.go's table, a Scale whose
selector is the label map as a string); bad specs get kube's 422 texts and change nothing; on a
cluster server the replication manager (``replicationcontroller-controller``, as its service
account under RBAC) makes pods that a simulated node runs, adopts a matching orphan, keeps the
status kube keeps, scales, and its pods are orphaned by a DELETE that names no policy (v1's
default) or collected by kubectl's background one. Run in the test's loop, the replication
manager reports failed creates as kube's ReplicaFailure condition and releases a pod that stops
matching.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from kubewire.client import Api
from kubewire.client.client import create_client
from kubewire.cluster.controllers.replicaset import make_replication_controller_controller
from kubewire.cluster.runtime import ClusterContext
from tests.integration import kubectl
from tests.integration.controller_helpers import eventually, owned_pods, run_components
from tests.integration.harness import ServerThread
from tests.integration.test_bad_input import invalid
from tests.integration.wire import call, create, get, ok

NS = "default"
RCS = f"/api/v1/namespaces/{NS}/replicationcontrollers"
WAIT = "60s"
Obj = dict[str, Any]


def manifest(name: str, replicas: int | None = None, **spec: Any) -> Obj:
    """An RC with neither selector nor labels: both come from the template's labels."""
    body: Obj = {"template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}},
                 **spec}
    if replicas is not None:
        body["replicas"] = replicas
    return {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": name},
            "spec": body}


def _until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


def _json(server: ServerThread, *args: str) -> Any:
    return json.loads(kubectl.ok(server, "get", *args, "-o", "json"))


# --- the API -------------------------------------------------------------------------------

@kubectl.needs_kubectl
def test_kubectl_creates_gets_watches_scales_and_deletes(server: ServerThread) -> None:
    kubectl.ok(server, "apply", "-f", "-", stdin=json.dumps(manifest("web", 2)))
    rc = _json(server, "rc/web")
    assert rc["spec"]["selector"] == {"app": "web"}
    assert rc["metadata"]["labels"] == {"app": "web"}
    assert rc["metadata"]["generation"] == 1
    assert rc["status"] == {"replicas": 0}
    assert rc["spec"]["template"]["spec"]["restartPolicy"] == "Always"

    table = kubectl.ok(server, "get", "rc").splitlines()
    assert table[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    assert table[1].split()[:4] == ["web", "2", "0", "0"]
    wide = kubectl.ok(server, "get", "rc", "-o", "wide").splitlines()
    assert wide[0].split()[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert wide[1].split()[-3:] == ["nginx", "nginx", "app=web"]
    assert "replicationcontroller/web" in kubectl.ok(server, "get", "all", "-o", "name")
    assert kubectl.ok(server, "get", "rc", "--field-selector", "status.replicas=0",
                      "-o", "name") == "replicationcontroller/web\n"
    refused = kubectl.run(server, "get", "rc", "--field-selector", "spec.replicas=2")
    assert "field label not supported: spec.replicas" in refused.stderr

    watcher = kubectl.background(server, "get", "rc", "--watch", "--output-watch-events",
                                 "--request-timeout=30s")
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().split()[:3] == ["EVENT", "NAME", "DESIRED"]
        assert watcher.stdout.readline().split()[:3] == ["ADDED", "web", "2"]
        kubectl.ok(server, "scale", "rc/web", "--replicas=4")
        assert watcher.stdout.readline().split()[:3] == ["MODIFIED", "web", "4"]
        scale = json.loads(kubectl.ok(server, "get", "--raw", f"{RCS}/web/scale"))
        assert scale["spec"] == {"replicas": 4}
        assert scale["status"] == {"replicas": 0, "selector": "app=web"}
        assert _json(server, "rc/web")["metadata"]["generation"] == 2
        kubectl.ok(server, "delete", "rc/web")
        assert watcher.stdout.readline().split()[:3] == ["DELETED", "web", "4"]
    finally:
        kubectl.stop(watcher)
    assert call(server, "GET", f"{RCS}/web").status == 404


@pytest.fixture
def core(server: ServerThread) -> Iterator[Any]:
    """A ``CoreV1Api``, typed Any: the package's stubs make every field optional and its
    methods take only model objects, where this test reads fields it knows are set and sends
    plain dicts (which the package accepts)."""
    with client.ApiClient(client.Configuration(host=server.url)) as api:
        yield client.CoreV1Api(api)


def test_the_kubernetes_package_lists_watches_and_scales(core: Any) -> None:
    created = core.create_namespaced_replication_controller(NS, manifest("api", 1))
    assert created.spec.selector == {"app": "api"}
    assert created.spec.replicas == 1
    listed = core.list_namespaced_replication_controller(NS)
    assert [rc.metadata.name for rc in listed.items] == ["api"]
    assert core.list_replication_controller_for_all_namespaces().items[0].metadata.name == "api"

    scale = core.read_namespaced_replication_controller_scale("api", NS)
    assert (scale.spec.replicas, scale.status.selector) == (1, "app=api")
    stream = watch.Watch().stream(core.list_namespaced_replication_controller, NS,  # type: ignore[no-untyped-call]
                                  resource_version=listed.metadata.resource_version,
                                  timeout_seconds=10)
    core.patch_namespaced_replication_controller_scale("api", NS, {"spec": {"replicas": 3}})
    event = next(stream)
    assert (event["type"], event["object"].spec.replicas) == ("MODIFIED", 3)
    assert event["object"].metadata.generation == 2
    replaced = core.replace_namespaced_replication_controller_scale(
        "api", NS, {"apiVersion": "autoscaling/v1", "kind": "Scale",
                    "metadata": {"name": "api", "namespace": NS}, "spec": {"replicas": 0}})
    assert replaced.spec.replicas is None  # Scale's spec.replicas is omitempty
    assert core.read_namespaced_replication_controller("api", NS).spec.replicas == 0
    event = next(stream)
    assert (event["type"], event["object"].spec.replicas) == ("MODIFIED", 0)

    core.delete_namespaced_replication_controller("api", NS)
    event = next(stream)
    assert (event["type"], event["object"].metadata.name) == ("DELETED", "api")
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_replication_controller("api", NS)
    assert gone.value.status == 404


# --- validation ----------------------------------------------------------------------------

def _rejected(server: ServerThread, body: Obj) -> Any:
    reply = call(server, "POST", RCS, body)
    assert reply.status == 422, reply.body[:500]
    return reply.json


SELECTOR_TEXT = "`selector` does not match template `labels`"
NEGATIVE = "must be greater than or equal to 0"


def test_bad_specs_get_kubes_422_and_change_nothing(server: ServerThread) -> None:
    before = get(server, RCS)["items"]
    mismatch = manifest("bad", selector={"app": "other"}, replicas=-1, minReadySeconds=-5)
    assert _rejected(server, mismatch) == invalid("ReplicationController", "bad", [
        ("FieldValueInvalid", "spec.minReadySeconds", f"Invalid value: -5: {NEGATIVE}"),
        ("FieldValueInvalid", "spec.replicas", f"Invalid value: -1: {NEGATIVE}"),
        ("FieldValueInvalid", "spec.template.metadata.labels",
         f'Invalid value: map[string]string{{"app":"bad"}}: {SELECTOR_TEXT}')])
    unlabelled = manifest("bare")
    unlabelled["spec"]["template"]["metadata"] = {}
    assert _rejected(server, unlabelled) == invalid("ReplicationController", "bare", [
        ("FieldValueRequired", "spec.selector", "Required value")])
    no_template = {"apiVersion": "v1", "kind": "ReplicationController",
                   "metadata": {"name": "empty"}, "spec": {"selector": {"a": "b"}}}
    assert _rejected(server, no_template) == invalid("ReplicationController", "empty", [
        ("FieldValueRequired", "spec.template", "Required value")])
    assert get(server, RCS)["items"] == before


def test_bad_updates_of_the_rc_its_scale_and_status_are_refused(server: ServerThread) -> None:
    stored = create(server, RCS, manifest("web", 1))
    reply = call(server, "PATCH", f"{RCS}/web", {"spec": {"selector": {"app": "nope"}}})
    assert reply.status == 422
    assert reply.json == invalid("ReplicationController", "web", [
        ("FieldValueInvalid", "spec.template.metadata.labels",
         f'Invalid value: map[string]string{{"app":"web"}}: {SELECTOR_TEXT}')])
    reply = call(server, "PATCH", f"{RCS}/web/scale", {"spec": {"replicas": -2}})
    assert reply.status == 422
    assert reply.json == invalid("Scale", "web", [
        ("FieldValueInvalid", "spec.replicas", f"Invalid value: -2: {NEGATIVE}")],
        group="autoscaling")
    reply = call(server, "PATCH", f"{RCS}/web/status",
                 {"status": {"replicas": 1, "readyReplicas": 2}})
    assert reply.status == 422
    assert reply.json == invalid("ReplicationController", "web", [
        ("FieldValueInvalid", "status.readyReplicas",
         "Invalid value: 2: cannot be greater than status.replicas")])
    assert get(server, f"{RCS}/web") == stored
    # the selector may change, as long as it still matches the template (no apps/v1 rule)
    relabel = {"spec": {"selector": {"app": "web"},
                        "template": {"metadata": {"labels": {"app": "web", "v": "2"}}}}}
    moved = ok(call(server, "PATCH", f"{RCS}/web", relabel), 200)
    assert moved["metadata"]["generation"] == 2


# --- the replication manager on a cluster server ------------------------------------------

def _gone(server: ServerThread, name: str) -> bool:
    return kubectl.run(server, "get", name).returncode != 0


def _owned(server: ServerThread, uid: str) -> list[Obj]:
    pods = _json(server, "pods")["items"]
    return [p for p in pods
            if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])]


@kubectl.needs_kubectl
def test_the_replication_manager_runs_pods_on_a_node(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(cluster=True, insecure_http=False, authorization_mode="RBAC")
    kubectl.ok(server, "run", "stray", "--image=nginx", "--labels=app=web")
    kubectl.ok(server, "create", "-f", "-", stdin=json.dumps(manifest("web", 3)))
    uid = _json(server, "rc/web")["metadata"]["uid"]
    kubectl.ok(server, "wait", "--for=condition=Ready", "pod", "-l", "app=web",
               f"--timeout={WAIT}")

    def settled() -> Obj | None:
        rc: Obj = _json(server, "rc/web")
        status = rc.get("status") or {}
        return rc if status.get("availableReplicas") == 3 and len(_owned(server, uid)) == 3 \
            else None

    rc = _until(settled, "three available replicas")
    assert rc["status"] == {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 3,
                            "availableReplicas": 3, "observedGeneration": 1}
    pods = _owned(server, uid)
    assert "stray" in {p["metadata"]["name"] for p in pods}  # adopted: two were created
    for pod in pods:
        assert pod["metadata"]["ownerReferences"] == [{
            "apiVersion": "v1", "kind": "ReplicationController", "name": "web", "uid": uid,
            "controller": True, "blockOwnerDeletion": True}]
        assert pod["status"]["phase"] == "Running"
        assert pod["spec"]["nodeName"] == "kubewire-node-0"
    events = [e for e in _json(server, "events")["items"]
              if e["involvedObject"].get("uid") == uid]
    assert sorted(e["reason"] for e in events) == ["SuccessfulCreate", "SuccessfulCreate"]
    assert {e["source"]["component"] for e in events} == {"replication-controller"}

    kubectl.ok(server, "scale", "rc/web", "--replicas=1")
    _until(lambda: len(_owned(server, uid)) == 1 and _json(server, "rc/web")["status"].get(
        "observedGeneration") == 2, "a scale down to one")

    # a DELETE that asks for no policy: v1 RCs orphan by default (rcStrategy
    # DefaultGarbageCollectionPolicy), so the collector strips the pod's reference
    kubectl.ok(server, "delete", "--raw", f"{RCS}/web")
    _until(lambda: _gone(server, "rc/web"), "the RC's deletion")
    left = _until(lambda: [p for p in _json(server, "pods", "-l", "app=web")["items"]
                           if not p["metadata"].get("ownerReferences")], "the orphaned pod")
    assert len(left) == 1

    kubectl.ok(server, "create", "-f", "-", stdin=json.dumps(manifest("db", 2)))
    kubectl.ok(server, "wait", "--for=condition=Ready", "pod", "-l", "app=db",
               f"--timeout={WAIT}")
    kubectl.ok(server, "delete", "rc/db")  # kubectl deletes in the background: the GC's turn
    _until(lambda: not _json(server, "pods", "-l", "app=db")["items"], "the pods' collection")


@contextlib.asynccontextmanager
async def replication_manager(server: ServerThread) -> AsyncIterator[tuple[Api[Obj], Api[Obj]]]:
    """The replication manager alone, in the test's loop; the RC and Pod APIs."""
    async with await create_client(server.kubeconfig) as api_client:
        ctx = ClusterContext(api_client)
        async with run_components(ctx, [make_replication_controller_controller(ctx, {})]):
            yield (Api(dict, client=api_client, api_version="v1", kind="ReplicationController"),
                   Api(dict, client=api_client, api_version="v1", kind="Pod"))


async def test_failed_creates_set_replica_failure_until_they_succeed(
        server: ServerThread) -> None:
    async with replication_manager(server) as (rcs, pods):
        body = manifest("nosa", 2)
        body["spec"]["template"]["spec"]["serviceAccountName"] = "missing"
        rc = await rcs.create(body, namespace=NS)

        async def failing() -> Obj | None:
            got: Obj = await rcs.get("nosa", namespace=NS)
            return got if (got.get("status") or {}).get("conditions") else None

        got = await eventually(failing, what="ReplicaFailure")
        [condition] = got["status"]["conditions"]
        assert (condition["type"], condition["status"], condition["reason"]) == (
            "ReplicaFailure", "True", "FailedCreate")
        assert "error looking up service account default/missing" in condition["message"]
        assert got["status"]["replicas"] == 0
        accounts = Api(dict, client=rcs.client, api_version="v1", kind="ServiceAccount")
        await accounts.create({"metadata": {"name": "missing"}}, namespace=NS)

        async def recovered() -> Obj | None:
            got = await rcs.get("nosa", namespace=NS)
            status = got.get("status") or {}
            return got if status.get("replicas") == 2 and not status.get("conditions") else None

        await eventually(recovered, what="two pods once the account exists")
        events = Api(dict, client=rcs.client, api_version="v1", kind="Event")
        failed = [e for e in (await events.list(namespace=NS)).items
                  if e["involvedObject"].get("uid") == rc["metadata"]["uid"]
                  and e["reason"] == "FailedCreate"]
        assert failed and failed[0]["type"] == "Warning"
        assert failed[0]["source"] == {"component": "replication-controller"}
        assert len(await owned_pods(pods, NS, rc["metadata"]["uid"])) == 2


async def test_a_pod_that_stops_matching_is_released_and_replaced(server: ServerThread) -> None:
    async with replication_manager(server) as (rcs, pods):
        rc = await rcs.create(manifest("web", 2), namespace=NS)
        uid = rc["metadata"]["uid"]

        async def owned(count: int) -> list[Obj] | None:
            found = await owned_pods(pods, NS, uid)
            return found if len(found) == count else None

        first, _ = await eventually(lambda: owned(2), what="two pods")
        name = first["metadata"]["name"]
        await pods.patch(name, {"metadata": {"labels": {"app": "elsewhere"}}}, namespace=NS)

        async def released() -> Obj | None:
            got: Obj = await pods.get(name, namespace=NS)
            return got if not got["metadata"].get("ownerReferences") else None

        await eventually(released, what="the relabelled pod's release")
        replaced = await eventually(lambda: owned(2), what="a replacement")
        assert name not in {p["metadata"]["name"] for p in replaced}
