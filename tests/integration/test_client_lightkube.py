"""lightkube (1.x, AsyncClient) against the real server, unchanged: Pods and Services end to end.

What lightkube sends is in objects-and-clients.md §7.5: no discovery (its types are compiled in),
``Accept: */*``, strategic merge by default, ``PatchType`` for merge/JSON/apply, apply as
``PATCH ?fieldManager=<m>`` with ``application/apply-patch+yaml`` and a JSON body, DELETE with no
body, lists without ``limit`` unless ``chunk_size`` is given. ``ApiError.status`` is the decoded
Status.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.models.core_v1 import Container, PodSpec, ServicePort, ServiceSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod, Service
from lightkube.types import PatchType

from tests.integration.harness import ServerThread

NS = "default"
WATCH_TIMEOUT_S = 10.0  # bound on each wait for a watch event; a hung watch fails the test


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(KubeConfig.from_file(server.kubeconfig)) as kube:
        yield kube


def new_pod(name: str) -> Pod:
    return Pod(metadata=ObjectMeta(name=name, labels={"app": "web"}),
               spec=PodSpec(containers=[Container(name="c", image="nginx:1.27")]))


def new_service(name: str) -> Service:
    return Service(metadata=ObjectMeta(name=name, labels={"app": "web"}),
                   spec=ServiceSpec(selector={"app": "web"}, ports=[ServicePort(port=80)]))


def rv(obj: Any) -> int:
    return int(obj.metadata.resourceVersion)


async def next_event(stream: AsyncIterator[tuple[str, Any]]) -> tuple[str, Any]:
    return await asyncio.wait_for(anext(stream), WATCH_TIMEOUT_S)


def not_found(resource: str, name: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'{resource} "{name}" not found', "reason": "NotFound",
            "details": {"name": name, "kind": resource}, "code": 404}


# --- Pods ---------------------------------------------------------------------------------------


async def test_pod_create_get_list(client: AsyncClient) -> None:
    created = await client.create(new_pod("web-0"), namespace=NS)
    assert isinstance(created, Pod)
    assert created.metadata.namespace == NS
    assert created.metadata.uid
    assert created.spec.containers[0].image == "nginx:1.27"
    assert created.status.phase == "Pending"

    got = await client.get(Pod, "web-0", namespace=NS)
    assert got == created

    listing = client.list(Pod, namespace=NS)
    items = [p async for p in listing]
    assert [p.metadata.name for p in items] == ["web-0"]
    assert items[0].metadata == created.metadata
    assert int(listing.resourceVersion) >= rv(created)
    assert [p async for p in client.list(Pod, namespace=NS, labels={"app": "other"})] == []
    assert [p.metadata.name async for p in client.list(Pod, namespace="*")] == ["web-0"]


async def test_pod_list_in_chunks(client: AsyncClient) -> None:
    for i in range(5):
        await client.create(new_pod(f"web-{i}"), namespace=NS)
    names = [p.metadata.name async for p in client.list(Pod, namespace=NS, chunk_size=2)]
    assert names == [f"web-{i}" for i in range(5)]


async def test_pod_patches(client: AsyncClient) -> None:
    created = await client.create(new_pod("web-0"), namespace=NS)

    smp = await client.patch(Pod, "web-0", {"spec": {"containers": [
        {"name": "c", "image": "nginx:1.28"}]}}, namespace=NS)
    assert isinstance(smp, Pod)
    assert [(c.name, c.image) for c in smp.spec.containers] == [("c", "nginx:1.28")]
    assert rv(smp) > rv(created)

    merged = await client.patch(Pod, "web-0", {"metadata": {"labels": {"app": None, "t": "f"}}},
                                namespace=NS, patch_type=PatchType.MERGE)
    assert merged.metadata.labels == {"t": "f"}
    assert rv(merged) > rv(smp)

    jsonpatch = await client.patch(
        Pod, "web-0", [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}],
        namespace=NS, patch_type=PatchType.JSON)
    assert jsonpatch.metadata.annotations == {"a": "b"}
    assert rv(jsonpatch) > rv(merged)


async def test_pod_apply(client: AsyncClient) -> None:
    created = await client.apply(new_pod("web-0"), namespace=NS, field_manager="tests")
    assert isinstance(created, Pod)
    assert created.metadata.labels == {"app": "web"}
    again = new_pod("web-0")
    assert again.metadata is not None
    again.metadata.labels = {"app": "web", "applied": "twice"}
    applied = await client.apply(again, namespace=NS, field_manager="tests")
    assert applied.metadata.uid == created.metadata.uid
    assert applied.metadata.labels == {"app": "web", "applied": "twice"}


def labelled_pod(labels: dict[str, str]) -> Pod:
    pod = new_pod("web-0")
    assert pod.metadata is not None
    pod.metadata.labels = labels
    return pod


async def test_apply_prunes_conflicts_and_forces(client: AsyncClient) -> None:
    """Server-side apply semantics through ``Client.apply`` (objects-and-clients.md §2.6)."""
    await client.apply(labelled_pod({"app": "web", "tier": "front"}), namespace=NS,
                       field_manager="tests")
    pruned = await client.apply(labelled_pod({"app": "web"}), namespace=NS,
                                field_manager="tests")
    assert pruned.metadata.labels == {"app": "web"}  # this manager dropped "tier"

    await client.patch(Pod, "web-0", {"metadata": {"labels": {"app": "taken"}}}, namespace=NS,
                       patch_type=PatchType.MERGE, field_manager="other")
    with pytest.raises(ApiError) as conflict:
        await client.apply(labelled_pod({"app": "web"}), namespace=NS, field_manager="tests")
    assert conflict.value.status.to_dict() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "other" using v1: '
                   ".metadata.labels.app",
        "reason": "Conflict", "code": 409,
        "details": {"causes": [{"reason": "FieldManagerConflict", "field": ".metadata.labels.app",
                                "message": 'conflict with "other" using v1'}]}}

    forced = await client.apply(labelled_pod({"app": "web"}), namespace=NS,
                                field_manager="tests", force=True)
    assert forced.metadata.labels == {"app": "web"}
    assert [(m.manager, m.operation) for m in forced.metadata.managedFields] == [
        ("tests", "Apply")]


async def test_status_subresource_and_wait(client: AsyncClient) -> None:
    """``Pod.Status`` reads and patches ``/status``; ``wait`` watches the pod by name until the
    condition holds."""
    await client.create(new_pod("web-0"), namespace=NS)
    status = await client.get(Pod.Status, "web-0", namespace=NS)
    assert status.status.phase == "Pending"

    waiter = asyncio.create_task(client.wait(Pod, "web-0", for_conditions=["Ready"],
                                             namespace=NS))
    patched = await client.patch(
        Pod.Status, "web-0",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        namespace=NS, patch_type=PatchType.MERGE)
    assert [(c.type, c.status) for c in patched.status.conditions] == [("Ready", "True")]
    ready = await asyncio.wait_for(waiter, WATCH_TIMEOUT_S)
    assert ready.metadata.resourceVersion == patched.metadata.resourceVersion
    # A status write leaves the spec alone, and the main resource ignores status changes.
    spec_try = await client.patch(Pod, "web-0", {"status": {"phase": "Failed"}}, namespace=NS,
                                  patch_type=PatchType.MERGE)
    assert spec_try.status.phase == "Pending"


async def test_pod_delete(client: AsyncClient) -> None:
    await client.create(new_pod("web-0"), namespace=NS)
    await client.delete(Pod, "web-0", namespace=NS)
    assert [p async for p in client.list(Pod, namespace=NS)] == []


async def test_pod_not_found_carries_status(client: AsyncClient) -> None:
    with pytest.raises(ApiError) as raised:
        await client.get(Pod, "missing", namespace=NS)
    assert raised.value.response.status_code == 404
    assert raised.value.status.to_dict() == not_found("pods", "missing")
    with pytest.raises(ApiError) as deleting:
        await client.delete(Pod, "missing", namespace=NS)
    assert deleting.value.status.to_dict() == not_found("pods", "missing")


async def test_create_conflict_carries_status(client: AsyncClient) -> None:
    await client.create(new_pod("web-0"), namespace=NS)
    with pytest.raises(ApiError) as raised:
        await client.create(new_pod("web-0"), namespace=NS)
    assert raised.value.status.to_dict() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods "web-0" already exists', "reason": "AlreadyExists",
        "details": {"name": "web-0", "kind": "pods"}, "code": 409}


# --- Services -----------------------------------------------------------------------------------


async def test_service_crud(client: AsyncClient) -> None:
    created = await client.create(new_service("web"), namespace=NS)
    assert isinstance(created, Service)
    assert created.spec.type == "ClusterIP"
    assert created.spec.clusterIPs == [created.spec.clusterIP]
    assert [(p.port, p.protocol, p.targetPort) for p in created.spec.ports] == [(80, "TCP", 80)]
    assert await client.get(Service, "web", namespace=NS) == created
    assert [s.metadata.name async for s in client.list(Service, namespace=NS)] == [
        "kubernetes", "web"]  # every cluster has the kubernetes Service in default

    smp = await client.patch(Service, "web", {"spec": {"ports": [{"port": 80, "name": "a"},
                                                                 {"port": 443, "name": "b"}]}},
                             namespace=NS)
    assert sorted(p.port for p in smp.spec.ports) == [80, 443]
    merged = await client.patch(Service, "web", {"spec": {"selector": {"app": "api"}}},
                                namespace=NS, patch_type=PatchType.MERGE)
    assert merged.spec.selector == {"app": "api"}
    jsonpatch = await client.patch(
        Service, "web", [{"op": "replace", "path": "/spec/selector", "value": {"app": "db"}}],
        namespace=NS, patch_type=PatchType.JSON)
    assert jsonpatch.spec.selector == {"app": "db"}
    assert jsonpatch.spec.clusterIP == created.spec.clusterIP

    await client.delete(Service, "web", namespace=NS)
    with pytest.raises(ApiError) as raised:
        await client.get(Service, "web", namespace=NS)
    assert raised.value.status.to_dict() == not_found("services", "web")


async def test_service_apply(client: AsyncClient) -> None:
    created = await client.apply(new_service("web"), namespace=NS, field_manager="tests")
    assert isinstance(created, Service)
    changed = new_service("web")
    assert changed.spec is not None
    changed.spec.selector = {"app": "api"}
    applied = await client.apply(changed, namespace=NS, field_manager="tests")
    assert applied.metadata.uid == created.metadata.uid
    assert applied.spec.selector == {"app": "api"}


# --- Watch --------------------------------------------------------------------------------------


async def test_pod_watch_from_list_resource_version(client: AsyncClient) -> None:
    """Deleting an unscheduled pod marks it (grace 0) and then removes it: MODIFIED, DELETED
    (store.go updateForGracefulDeletionAndFinalizers)."""
    await client.create(new_pod("before"), namespace=NS)
    listing = client.list(Pod, namespace=NS)
    assert [p.metadata.name async for p in listing] == ["before"]

    stream = aiter(client.watch(Pod, namespace=NS, resource_version=listing.resourceVersion))
    try:
        created = await client.create(new_pod("web"), namespace=NS)
        patched = await client.patch(Pod, "web", {"metadata": {"labels": {"app": "changed"}}},
                                     namespace=NS)
        await client.delete(Pod, "web", namespace=NS)
        events = [await next_event(stream) for _ in range(4)]
    finally:
        await stream.aclose()

    assert [(kind, obj.metadata.name) for kind, obj in events] == [
        ("ADDED", "web"), ("MODIFIED", "web"), ("MODIFIED", "web"), ("DELETED", "web")]
    assert all(isinstance(obj, Pod) for _, obj in events)
    assert [rv(obj) for _, obj in events[:2]] == [rv(created), rv(patched)]
    assert rv(patched) < rv(events[2][1]) < rv(events[3][1])
    assert events[1][1].metadata.labels == {"app": "changed"}
    assert events[2][1].metadata.deletionGracePeriodSeconds == 0
    assert events[2][1].metadata.deletionTimestamp is not None


async def test_service_watch_from_list_resource_version(client: AsyncClient) -> None:
    await client.create(new_service("before"), namespace=NS)
    listing = client.list(Service, namespace=NS)
    assert [s.metadata.name async for s in listing] == ["before", "kubernetes"]

    stream = aiter(client.watch(Service, namespace=NS,
                                resource_version=listing.resourceVersion))
    try:
        created = await client.create(new_service("web"), namespace=NS)
        patched = await client.patch(Service, "web", {"spec": {"selector": {"app": "changed"}}},
                                     namespace=NS, patch_type=PatchType.MERGE)
        await client.delete(Service, "web", namespace=NS)
        events = [await next_event(stream) for _ in range(3)]
    finally:
        await stream.aclose()

    assert [(kind, obj.metadata.name) for kind, obj in events] == [
        ("ADDED", "web"), ("MODIFIED", "web"), ("DELETED", "web")]
    assert all(isinstance(obj, Service) for _, obj in events)
    assert [rv(obj) for _, obj in events[:2]] == [rv(created), rv(patched)]
    assert rv(events[2][1]) > rv(patched)
    assert events[1][1].spec.selector == {"app": "changed"}


# --- The default server: HTTPS with its own CA and an admin client certificate -----------------


async def test_default_https_server_with_its_kubeconfig(
        make_server: Callable[..., ServerThread]) -> None:
    tls = make_server(insecure_http=False)
    assert tls.url.startswith("https://")
    async with AsyncClient(KubeConfig.from_file(tls.kubeconfig)) as kube:
        created = await kube.create(new_pod("web-0"), namespace=NS)
        assert (await kube.get(Pod, "web-0", namespace=NS)).metadata.uid == created.metadata.uid
        assert [p.metadata.name async for p in kube.list(Pod, namespace=NS)] == ["web-0"]
