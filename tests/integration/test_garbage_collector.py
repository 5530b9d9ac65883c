"""The garbage collector (``garbage-collector-controller``) against a real server: background,
foreground and orphan deletion of ConfigMaps, Secrets, Pods and custom resources owned by other
objects, dangling references, and kube's ``OwnerRefInvalidNamespace`` event; with kubectl
(``--cascade``) and the ``kubernetes`` package."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubewire.client.client import create_client
from kubewire.cluster.controllers.garbage_collector import GarbageCollector
from kubewire.cluster.runtime import ClusterContext
from kubewire.server.controllers.selection import CLUSTER_COMPONENTS
from tests.integration.controller_helpers import run_components
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, ok

NS = "/api/v1/namespaces/default"


@pytest.fixture
def server(make_server: Callable[..., ServerThread]) -> ServerThread:
    # the server adds the GC finalizers; this test's loop runs the collector
    return make_server(enable_garbage_collector=True,
                       controllers=("*", *(f"-{name}" for name in CLUSTER_COMPONENTS)))


@pytest.fixture
async def collector(server: ServerThread) -> AsyncIterator[GarbageCollector]:
    async with await create_client(server.kubeconfig) as client:
        ctx = ClusterContext(client)
        gc = GarbageCollector(ctx, resync_s=1.0)
        async with run_components(ctx, [gc]):
            for _ in range(200):
                if gc.monitors and all(m.has_synced for m in gc.monitors.values()):
                    break
                await asyncio.sleep(0.05)
            yield gc


def owner_ref(obj: dict[str, Any], *, block: bool = False,
              controller: bool | None = None) -> dict[str, Any]:
    ref = {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj["kind"],
           "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"]}
    if block:
        ref["blockOwnerDeletion"] = True
    if controller is not None:
        ref["controller"] = controller
    return ref


def configmap(server: ServerThread, name: str, *refs: dict[str, Any],
              finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "ownerReferences": list(refs)}
    if finalizers:
        meta["finalizers"] = finalizers
    obj = create(server, f"{NS}/configmaps", {"metadata": meta})
    obj.setdefault("kind", "ConfigMap")
    obj.setdefault("apiVersion", "v1")
    return obj


async def gone(server: ServerThread, path: str, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if call(server, "GET", path).status == 404:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} still there: {call(server, 'GET', path).body!r}")


async def stays(server: ServerThread, path: str, seconds: float = 0.5) -> dict[str, Any]:
    await asyncio.sleep(seconds)
    return ok(call(server, "GET", path), 200)


async def test_background_deletes_dependents(server: ServerThread,
                                             collector: GarbageCollector) -> None:
    owner = configmap(server, "owner")
    configmap(server, "child", owner_ref(owner))
    create(server, f"{NS}/secrets", {"metadata": {"name": "secret-child",
                                                  "ownerReferences": [owner_ref(owner)]}})
    ok(call(server, "DELETE", f"{NS}/configmaps/owner",
            {"propagationPolicy": "Background"}), 200)
    await gone(server, f"{NS}/configmaps/owner")
    await gone(server, f"{NS}/configmaps/child")
    await gone(server, f"{NS}/secrets/secret-child")


async def test_foreground_deletes_blocking_dependents_first(
        server: ServerThread, collector: GarbageCollector) -> None:
    owner = configmap(server, "fg-owner")
    configmap(server, "fg-child", owner_ref(owner, block=True),
              finalizers=["example.com/hold"])
    marked = ok(call(server, "DELETE", f"{NS}/configmaps/fg-owner",
                     {"propagationPolicy": "Foreground"}), 200)
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert marked["metadata"]["deletionTimestamp"]
    # the child is being deleted but held by its own finalizer: the owner waits for it
    for _ in range(100):
        child = ok(call(server, "GET", f"{NS}/configmaps/fg-child"), 200)
        if child["metadata"].get("deletionTimestamp"):
            break
        await asyncio.sleep(0.05)
    assert child["metadata"].get("deletionTimestamp")
    held = await stays(server, f"{NS}/configmaps/fg-owner")
    assert held["metadata"]["finalizers"] == ["foregroundDeletion"]
    ok(call(server, "PATCH", f"{NS}/configmaps/fg-child",
            {"metadata": {"finalizers": None}},
            headers={"Content-Type": "application/merge-patch+json"}), 200)
    await gone(server, f"{NS}/configmaps/fg-child")
    await gone(server, f"{NS}/configmaps/fg-owner")


async def test_orphan_keeps_dependents_without_the_reference(
        server: ServerThread, collector: GarbageCollector) -> None:
    owner = configmap(server, "or-owner")
    other = configmap(server, "or-other")
    configmap(server, "or-child", owner_ref(owner, block=True), owner_ref(other))
    marked = ok(call(server, "DELETE", f"{NS}/configmaps/or-owner",
                     {"propagationPolicy": "Orphan"}), 200)
    assert marked["metadata"]["finalizers"] == ["orphan"]
    await gone(server, f"{NS}/configmaps/or-owner")
    child = await stays(server, f"{NS}/configmaps/or-child", 0.2)
    assert [r["name"] for r in child["metadata"]["ownerReferences"]] == ["or-other"]


async def test_dangling_owner_uid_is_absent(server: ServerThread,
                                            collector: GarbageCollector) -> None:
    real = configmap(server, "real")
    # same name, another uid: the owner counts as absent, so the dependent goes
    ghost = dict(owner_ref(real), uid="00000000-0000-0000-0000-000000000001")
    configmap(server, "dangling", ghost)
    await gone(server, f"{NS}/configmaps/dangling")
    # one solid owner keeps it; the dangling reference is dropped
    configmap(server, "kept", ghost, owner_ref(real))
    for _ in range(100):
        kept = ok(call(server, "GET", f"{NS}/configmaps/kept"), 200)
        if len(kept["metadata"]["ownerReferences"]) == 1:
            break
        await asyncio.sleep(0.05)
    assert [r["uid"] for r in kept["metadata"]["ownerReferences"]] == [real["metadata"]["uid"]]


async def test_owner_in_another_namespace_is_reported(server: ServerThread,
                                                      collector: GarbageCollector) -> None:
    create(server, "/api/v1/namespaces", {"metadata": {"name": "elsewhere"}})
    owner = create(server, "/api/v1/namespaces/elsewhere/configmaps",
                   {"metadata": {"name": "far-owner"}})
    owner.update(kind="ConfigMap", apiVersion="v1")
    await asyncio.sleep(0.3)  # the collector observes the owner first
    configmap(server, "cross", owner_ref(owner))
    await gone(server, f"{NS}/configmaps/cross")
    for _ in range(100):
        events = ok(call(server, "GET", f"{NS}/events"), 200)["items"]
        found = [e for e in events if e["reason"] == "OwnerRefInvalidNamespace"]
        if found:
            break
        await asyncio.sleep(0.05)
    assert found, "no OwnerRefInvalidNamespace event"
    event = found[0]
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "cross"
    assert event["source"]["component"] == "garbage-collector-controller"
    uid = owner["metadata"]["uid"]
    assert event["message"] == (f"ownerRef [v1/ConfigMap, namespace: default, name: far-owner, "
                                f'uid: {uid}] does not exist in namespace "default"')


async def test_pods_of_a_replicaset_with_kubectl_cascade(
        server: ServerThread, collector: GarbageCollector) -> None:
    rs_path = "/apis/apps/v1/namespaces/default/replicasets"
    has_rs = call(server, "GET", rs_path).status == 200  # apps/v1 lands with issue 20's apps
    for cascade in ("background", "foreground", "orphan"):
        if has_rs:
            owner = create(server, rs_path, {
                "metadata": {"name": f"rs-{cascade}"},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": cascade}},
                         "template": {"metadata": {"labels": {"app": cascade}}, "spec": {
                             "containers": [{"name": "c", "image": "nginx"}]}}}})
            owner.update(kind="ReplicaSet", apiVersion="apps/v1")
            resource, owner_path, shown = "rs", f"{rs_path}/rs-{cascade}", "replicaset.apps"
        else:
            owner = configmap(server, f"rs-{cascade}")
            resource, owner_path = "configmap", f"{NS}/configmaps/rs-{cascade}"
            shown = "configmap"
        for i in range(2):
            create(server, f"{NS}/pods", {
                "metadata": {"name": f"pod-{cascade}-{i}", "labels": {"app": cascade},
                             "ownerReferences": [owner_ref(owner, block=True, controller=True)]},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        done = await asyncio.to_thread(subprocess.run, [
            "kubectl", "--kubeconfig", str(server.kubeconfig), "delete", resource,
            f"rs-{cascade}", f"--cascade={cascade}", "--wait=true", "--timeout=20s"],
            capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert f'{shown} "rs-{cascade}" deleted' in done.stdout
        await gone(server, owner_path)
        for i in range(2):
            path = f"{NS}/pods/pod-{cascade}-{i}"
            if cascade == "orphan":
                pod = await stays(server, path, 0.2)
                assert not pod["metadata"].get("ownerReferences")
            else:
                await gone(server, path)


async def test_custom_resource_owns_configmaps(server: ServerThread,
                                               collector: GarbageCollector) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}}]}}
    create(server, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    path = "/apis/example.com/v1/namespaces/default/widgets"
    for _ in range(100):
        if call(server, "GET", path).status == 200:
            break
        await asyncio.sleep(0.05)
    # the collector discovers the new kind (a CRD changed) and watches it
    for _ in range(200):
        if ("example.com", "widgets") in collector.monitors:
            break
        await asyncio.sleep(0.05)
    assert ("example.com", "widgets") in collector.monitors
    for policy in ("Foreground", "Orphan", "Background"):
        widget = create(server, path, {"apiVersion": "example.com/v1", "kind": "Widget",
                                       "metadata": {"name": f"w-{policy.lower()}"}})
        configmap(server, f"of-{policy.lower()}", owner_ref(widget, block=True))
        ok(call(server, "DELETE", f"{path}/w-{policy.lower()}",
                {"propagationPolicy": policy}), 200)
        await gone(server, f"{path}/w-{policy.lower()}")
        if policy == "Orphan":
            cm = await stays(server, f"{NS}/configmaps/of-orphan", 0.2)
            assert not cm["metadata"].get("ownerReferences")
        else:
            await gone(server, f"{NS}/configmaps/of-{policy.lower()}")


async def test_kubernetes_package_delete_options(server: ServerThread,
                                                 collector: GarbageCollector) -> None:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    api_client = k8s_config.new_client_from_config(str(server.kubeconfig))
    core = k8s.CoreV1Api(api_client)
    owner = configmap(server, "py-owner")
    configmap(server, "py-child", owner_ref(owner, block=True))
    await asyncio.to_thread(core.delete_namespaced_config_map, "py-owner", "default",
                            body=k8s.V1DeleteOptions(propagation_policy="Foreground"))
    await gone(server, f"{NS}/configmaps/py-child")
    await gone(server, f"{NS}/configmaps/py-owner")
    # orphanDependents (deprecated) still orphans
    owner = configmap(server, "py-owner2")
    configmap(server, "py-child2", owner_ref(owner))
    await asyncio.to_thread(core.delete_namespaced_config_map, "py-owner2", "default",
                            body=k8s.V1DeleteOptions(orphan_dependents=True))
    await gone(server, f"{NS}/configmaps/py-owner2")
    cm = await stays(server, f"{NS}/configmaps/py-child2", 0.2)
    assert not cm["metadata"].get("ownerReferences")
    api_client.close()


async def test_foreground_goes_down_a_chain(server: ServerThread,
                                            collector: GarbageCollector) -> None:
    """A foreground deletion deletes a dependent that has dependents of its own in the
    foreground too: grandchildren first, then the child, then the owner."""
    top = configmap(server, "top")
    middle = configmap(server, "middle", owner_ref(top, block=True))
    configmap(server, "bottom", owner_ref(middle, block=True),
              finalizers=["example.com/hold"])
    ok(call(server, "DELETE", f"{NS}/configmaps/top", {"propagationPolicy": "Foreground"}), 200)
    for _ in range(200):
        mid = ok(call(server, "GET", f"{NS}/configmaps/middle"), 200)
        if "foregroundDeletion" in (mid["metadata"].get("finalizers") or []):
            break
        await asyncio.sleep(0.05)
    assert mid["metadata"]["finalizers"] == ["foregroundDeletion"]  # deleted in the foreground
    held = await stays(server, f"{NS}/configmaps/top", 0.3)
    assert held["metadata"]["finalizers"] == ["foregroundDeletion"]
    ok(call(server, "PATCH", f"{NS}/configmaps/bottom", {"metadata": {"finalizers": None}},
            headers={"Content-Type": "application/merge-patch+json"}), 200)
    await gone(server, f"{NS}/configmaps/bottom")
    await gone(server, f"{NS}/configmaps/middle")
    await gone(server, f"{NS}/configmaps/top")


async def test_cluster_scoped_dependent_of_a_namespaced_owner(
        server: ServerThread, collector: GarbageCollector) -> None:
    """A cluster-scoped object cannot have a namespaced owner: kube reports it on the dependent
    (in ``default``, where cluster-scoped objects' events go) and never collects it."""
    owner = configmap(server, "ns-owner")
    await asyncio.sleep(0.3)  # the collector observes the owner first
    create(server, "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "metadata": {"name": "odd-dependent", "ownerReferences": [owner_ref(owner)]},
        "rules": []})
    uid = owner["metadata"]["uid"]
    message = (f"ownerRef [v1/ConfigMap, namespace: , name: ns-owner, uid: {uid}] does not "
               'exist in namespace ""')
    for _ in range(100):
        events = ok(call(server, "GET", f"{NS}/events"), 200)["items"]
        found = [e for e in events if e["reason"] == "OwnerRefInvalidNamespace"
                 and e["involvedObject"]["name"] == "odd-dependent"]
        if found:
            break
        await asyncio.sleep(0.05)
    assert [e["message"] for e in found] == [message]
    assert found[0]["involvedObject"]["kind"] == "ClusterRole"
    ok(call(server, "DELETE", f"{NS}/configmaps/ns-owner"), 200)
    await stays(server, "/apis/rbac.authorization.k8s.io/v1/clusterroles/odd-dependent", 0.5)
