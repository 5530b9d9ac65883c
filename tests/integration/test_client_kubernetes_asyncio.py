"""kubernetes_asyncio (36.x) against the real server, unchanged: Pods and Services end to end.

What the client sends is in objects-and-clients.md §7.3: ``Content-Type: application/json`` on
every request (GETs and body-less DELETEs too), ``watch=True`` with a capital T, a dict patch body
as strategic merge, a list body as JSON patch; ``_content_type`` picks merge patch or apply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kubernetes_asyncio import config, watch
from kubernetes_asyncio.client import (
    ApiClient,
    Configuration,
    CoreV1Api,
    V1Container,
    V1DeleteOptions,
    V1ObjectMeta,
    V1Pod,
    V1PodList,
    V1PodSpec,
    V1Preconditions,
    V1Service,
    V1ServiceList,
    V1ServicePort,
    V1ServiceSpec,
)
from kubernetes_asyncio.client.exceptions import ApiException

from tests.integration.harness import ServerThread

NS = "default"
WATCH_TIMEOUT_S = 10.0  # bound on each wait for a watch event; a hung watch fails the test
MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"


@contextlib.asynccontextmanager
async def core_api(server: ServerThread) -> AsyncIterator[CoreV1Api]:
    """A CoreV1Api configured from the server's kubeconfig, as a user would load it."""
    configuration = Configuration()
    await config.load_kube_config(config_file=str(server.kubeconfig),
                                  client_configuration=configuration)
    async with ApiClient(configuration) as api:
        yield CoreV1Api(api)


@pytest.fixture
async def core(server: ServerThread) -> AsyncIterator[CoreV1Api]:
    async with core_api(server) as api:
        yield api


def new_pod(name: str) -> V1Pod:
    return V1Pod(metadata=V1ObjectMeta(name=name, labels={"app": "web"}),
                 spec=V1PodSpec(containers=[V1Container(name="c", image="nginx:1.27")]))


def new_service(name: str) -> V1Service:
    return V1Service(metadata=V1ObjectMeta(name=name, labels={"app": "web"}),
                     spec=V1ServiceSpec(selector={"app": "web"},
                                        ports=[V1ServicePort(port=80)]))


async def next_event(stream: Any) -> dict[str, Any]:
    event: dict[str, Any] = await asyncio.wait_for(stream.__anext__(), WATCH_TIMEOUT_S)
    return event


def rv(obj: Any) -> int:
    return int(obj.metadata.resource_version)


# --- Pods ---------------------------------------------------------------------------------------


async def test_pod_create_get_list(core: CoreV1Api) -> None:
    created = await core.create_namespaced_pod(NS, new_pod("web-0"))
    assert isinstance(created, V1Pod)
    assert created.metadata.name == "web-0"
    assert created.metadata.namespace == NS
    assert created.metadata.uid
    assert created.metadata.labels == {"app": "web"}
    assert created.spec.containers[0].image == "nginx:1.27"
    assert created.spec.containers[0].image_pull_policy == "IfNotPresent"
    assert created.spec.restart_policy == "Always"
    assert created.spec.termination_grace_period_seconds == 30
    assert created.status.phase == "Pending"

    read = await core.read_namespaced_pod("web-0", NS)
    assert isinstance(read, V1Pod)
    assert read.to_dict() == created.to_dict()

    listed = await core.list_namespaced_pod(NS)
    assert isinstance(listed, V1PodList)
    # List items carry no kind/apiVersion on the wire; everything else is the stored pod.
    created.kind = created.api_version = None
    assert [p.to_dict() for p in listed.items] == [created.to_dict()]
    assert rv(listed) >= rv(created)

    selected = await core.list_namespaced_pod(NS, label_selector="app=other")
    assert selected.items == []


async def test_pod_patches(core: CoreV1Api) -> None:
    created = await core.create_namespaced_pod(NS, new_pod("web-0"))

    # A dict body goes out as strategic merge: containers merge by name.
    smp = await core.patch_namespaced_pod(
        "web-0", NS, {"spec": {"containers": [{"name": "c", "image": "nginx:1.28"}]}})
    assert isinstance(smp, V1Pod)
    assert [(c.name, c.image) for c in smp.spec.containers] == [("c", "nginx:1.28")]
    assert rv(smp) > rv(created)

    merged = await core.patch_namespaced_pod(
        "web-0", NS, {"metadata": {"labels": {"app": None, "tier": "front"}}},
        _content_type=MERGE)
    assert merged.metadata.labels == {"tier": "front"}
    assert rv(merged) > rv(smp)

    jsonpatch = await core.patch_namespaced_pod(
        "web-0", NS, [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}])
    assert jsonpatch.metadata.annotations == {"a": "b"}
    assert jsonpatch.metadata.labels == {"tier": "front"}
    assert rv(jsonpatch) > rv(merged)


async def test_pod_server_side_apply(core: CoreV1Api) -> None:
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}
    created = await core.patch_namespaced_pod("web-0", NS, body, field_manager="tests",
                                              _content_type=APPLY)
    assert isinstance(created, V1Pod)
    assert created.metadata.labels == {"app": "web"}
    body["metadata"]["labels"] = {"app": "web", "applied": "twice"}
    applied = await core.patch_namespaced_pod("web-0", NS, body, field_manager="tests",
                                              _content_type=APPLY)
    assert applied.metadata.uid == created.metadata.uid
    assert applied.metadata.labels == {"app": "web", "applied": "twice"}


async def test_pod_delete(core: CoreV1Api) -> None:
    created = await core.create_namespaced_pod(NS, new_pod("web-0"))
    # Never scheduled (no nodeName): removed at once, the body is the pod (§1.11, §1.13).
    deleted = await core.delete_namespaced_pod("web-0", NS)
    assert isinstance(deleted, V1Pod)
    assert deleted.metadata.uid == created.metadata.uid
    with pytest.raises(ApiException) as missing:
        await core.read_namespaced_pod("web-0", NS)
    assert missing.value.status == 404


async def test_pod_delete_options_in_query_and_body(core: CoreV1Api) -> None:
    """kubernetes_asyncio sends keyword options as query parameters with an empty JSON body, and
    ``body=V1DeleteOptions`` as the body. A scheduled pod is deleted gracefully (§1.11)."""
    pod = new_pod("web-0")
    pod.spec.node_name = "node-1"
    created = await core.create_namespaced_pod(NS, pod)

    with pytest.raises(ApiException) as stale:
        await core.delete_namespaced_pod("web-0", NS, body=V1DeleteOptions(
            preconditions=V1Preconditions(resource_version="1")))
    # rest/delete.go BeforeDelete names the kind, not the resource, in this Conflict.
    assert json.loads(stale.value.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Operation cannot be fulfilled on Pod "web-0": the ResourceVersion in the '
                   f"precondition (1) does not match the ResourceVersion in record "
                   f"({created.metadata.resource_version}). The object might have been modified",
        "reason": "Conflict", "details": {"name": "web-0", "kind": "Pod"}, "code": 409}

    dry = await core.delete_namespaced_pod("web-0", NS, grace_period_seconds=20, dry_run="All")
    assert dry.metadata.deletion_grace_period_seconds == 20
    assert (await core.read_namespaced_pod("web-0", NS)).metadata.deletion_timestamp is None

    marked = await core.delete_namespaced_pod("web-0", NS, grace_period_seconds=20)
    assert marked.metadata.deletion_grace_period_seconds == 20
    assert marked.metadata.deletion_timestamp is not None
    shorter = await core.delete_namespaced_pod("web-0", NS,
                                               body=V1DeleteOptions(grace_period_seconds=10))
    assert shorter.metadata.deletion_grace_period_seconds == 10
    assert shorter.metadata.deletion_timestamp < marked.metadata.deletion_timestamp

    await core.delete_namespaced_pod("web-0", NS, grace_period_seconds=0)
    with pytest.raises(ApiException) as gone:
        await core.read_namespaced_pod("web-0", NS)
    assert gone.value.status == 404


async def test_pod_not_found_carries_status(core: CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        await core.read_namespaced_pod("missing", NS)
    assert raised.value.status == 404
    assert raised.value.reason == "Not Found"
    assert json.loads(raised.value.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods "missing" not found', "reason": "NotFound",
        "details": {"name": "missing", "kind": "pods"}, "code": 404}


async def test_create_conflict_carries_status(core: CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, new_pod("web-0"))
    with pytest.raises(ApiException) as raised:
        await core.create_namespaced_pod(NS, new_pod("web-0"))
    assert raised.value.status == 409
    assert json.loads(raised.value.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods "web-0" already exists', "reason": "AlreadyExists",
        "details": {"name": "web-0", "kind": "pods"}, "code": 409}


# --- Services -----------------------------------------------------------------------------------


async def test_service_crud(core: CoreV1Api) -> None:
    created = await core.create_namespaced_service(NS, new_service("web"))
    assert isinstance(created, V1Service)
    assert created.metadata.name == "web"
    assert created.spec.selector == {"app": "web"}
    # Defaults and an allocated cluster IP (objects-and-clients.md §3).
    assert created.spec.type == "ClusterIP"
    assert created.spec.cluster_ip
    assert created.spec.cluster_ips == [created.spec.cluster_ip]
    assert created.spec.session_affinity == "None"
    assert [(p.port, p.protocol, p.target_port) for p in created.spec.ports] == [
        (80, "TCP", 80)]

    read = await core.read_namespaced_service("web", NS)
    assert read.to_dict() == created.to_dict()
    listed = await core.list_namespaced_service(NS)
    assert isinstance(listed, V1ServiceList)
    assert [s.metadata.name for s in listed.items] == ["kubernetes", "web"]  # every cluster's

    # Service ports merge by port under strategic merge (two ports must both be named).
    smp = await core.patch_namespaced_service(
        "web", NS, {"spec": {"ports": [{"port": 80, "name": "http"},
                                       {"port": 443, "name": "https"}]}})
    assert sorted(p.port for p in smp.spec.ports) == [80, 443]
    merged = await core.patch_namespaced_service(
        "web", NS, {"spec": {"selector": {"app": "api"}}}, _content_type=MERGE)
    assert merged.spec.selector == {"app": "api"}
    jsonpatch = await core.patch_namespaced_service(
        "web", NS, [{"op": "replace", "path": "/spec/selector", "value": {"app": "db"}}])
    assert jsonpatch.spec.selector == {"app": "db"}
    assert jsonpatch.spec.cluster_ip == created.spec.cluster_ip

    deleted = await core.delete_namespaced_service("web", NS)
    assert isinstance(deleted, V1Service)
    assert deleted.metadata.uid == created.metadata.uid
    left = (await core.list_namespaced_service(NS)).items
    assert [s.metadata.name for s in left] == ["kubernetes"]


async def test_service_not_found_carries_status(core: CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        await core.delete_namespaced_service("missing", NS)
    assert raised.value.status == 404
    assert json.loads(raised.value.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'services "missing" not found', "reason": "NotFound",
        "details": {"name": "missing", "kind": "services"}, "code": 404}


# --- Watch --------------------------------------------------------------------------------------


async def test_pod_watch_from_list_resource_version(core: CoreV1Api) -> None:
    """Events after a list's resourceVersion arrive once each, in order and typed; nothing from
    before the list is replayed. Deleting an unscheduled pod first marks it (grace forced to 0,
    store.go updateForGracefulDeletionAndFinalizers), then removes it: MODIFIED, DELETED."""
    await core.create_namespaced_pod(NS, new_pod("before"))
    listed = await core.list_namespaced_pod(NS)
    assert [o.metadata.name for o in listed.items] == ["before"]

    w = watch.Watch()
    stream = w.stream(core.list_namespaced_pod, NS,
                      resource_version=listed.metadata.resource_version)
    try:
        created = await core.create_namespaced_pod(NS, new_pod("web"))
        patched = await core.patch_namespaced_pod("web", NS,
                                                  {"metadata": {"labels": {"app": "changed"}}})
        deleted = await core.delete_namespaced_pod("web", NS)
        events = [await next_event(stream) for _ in range(4)]
    finally:
        w.stop()
        await w.close()

    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "web"), ("MODIFIED", "web"), ("MODIFIED", "web"), ("DELETED", "web")]
    assert all(isinstance(e["object"], V1Pod) for e in events)
    assert [rv(e["object"]) for e in events[:2]] == [rv(created), rv(patched)]
    assert rv(events[1]["object"]) < rv(events[2]["object"]) < rv(events[3]["object"])
    # The DELETE answer is the removed pod at the delete's revision (etcd3 conditionalDelete).
    assert deleted.to_dict() == events[3]["object"].to_dict()
    assert events[1]["object"].metadata.labels == {"app": "changed"}
    marked = events[2]["object"].metadata
    assert marked.deletion_timestamp is not None
    assert marked.deletion_grace_period_seconds == 0


async def test_service_watch_from_list_resource_version(core: CoreV1Api) -> None:
    await core.create_namespaced_service(NS, new_service("before"))
    listed = await core.list_namespaced_service(NS)
    assert [o.metadata.name for o in listed.items] == ["before", "kubernetes"]

    w = watch.Watch()
    stream = w.stream(core.list_namespaced_service, NS,
                      resource_version=listed.metadata.resource_version)
    try:
        created = await core.create_namespaced_service(NS, new_service("web"))
        patched = await core.patch_namespaced_service(
            "web", NS, {"spec": {"selector": {"app": "changed"}}}, _content_type=MERGE)
        deleted = await core.delete_namespaced_service("web", NS)
        events = [await next_event(stream) for _ in range(3)]
    finally:
        w.stop()
        await w.close()

    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "web"), ("MODIFIED", "web"), ("DELETED", "web")]
    assert all(isinstance(e["object"], V1Service) for e in events)
    assert [rv(e["object"]) for e in events[:2]] == [rv(created), rv(patched)]
    assert rv(events[2]["object"]) > rv(patched)
    assert events[1]["object"].spec.selector == {"app": "changed"}
    assert deleted.to_dict() == events[2]["object"].to_dict()


# --- The default server: HTTPS with its own CA and an admin client certificate -----------------


async def test_default_https_server_with_its_kubeconfig(
        make_server: Callable[..., ServerThread]) -> None:
    tls = make_server(insecure_http=False)
    assert tls.url.startswith("https://")
    async with core_api(tls) as core:
        created = await core.create_namespaced_pod(NS, new_pod("web-0"))
        assert (await core.read_namespaced_pod("web-0", NS)).metadata.uid == created.metadata.uid
        assert [p.metadata.name for p in (await core.list_namespaced_pod(NS)).items] == ["web-0"]
