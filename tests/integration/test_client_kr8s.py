"""kr8s (0.20.x, asyncio API) against the real server, unchanged: Pods and Services end to end.

What kr8s sends is in objects-and-clients.md §7.4: ``/version/``, ``/api/`` and ``/apis/`` with a
trailing slash and every legacy group-version document (it resolves kind names through them),
``Content-Type: application/json`` on every request, lists with ``limit=100`` (a get by name is a
list with ``fieldSelector=metadata.name=<n>``), merge patch by default, ``type="json"`` for a
JSON patch, DELETE with body ``{}``. Its watch ends when the server closes the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import kr8s
import kr8s.asyncio
import pytest
from kr8s.asyncio.objects import Pod, Service

from tests.integration.harness import ServerThread
from tests.integration.wire import Session, ok

NS = "default"
WATCH_TIMEOUT_S = 10.0  # bound on each wait for a watch event; a hung watch fails the test


@contextlib.asynccontextmanager
async def kr8s_api(server: ServerThread) -> AsyncIterator[kr8s.asyncio.Api]:
    """kr8s configured from the server's kubeconfig, as a user would load it."""
    client = await kr8s.asyncio.api(kubeconfig=str(server.kubeconfig))
    try:
        yield client
    finally:
        # kr8s keeps its httpx client for the Api's lifetime and offers no close; an unclosed
        # one would warn (ResourceWarning) when collected.
        if client._session is not None:
            await client._session.aclose()


@pytest.fixture
async def api(server: ServerThread) -> AsyncIterator[kr8s.asyncio.Api]:
    async with kr8s_api(server) as client:
        yield client


def pod_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}


def service_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": "web"}},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}


def rv(obj: Any) -> int:
    return int(obj.metadata.resourceVersion)


async def next_event(stream: AsyncIterator[tuple[str, Any]]) -> tuple[str, Any]:
    return await asyncio.wait_for(anext(stream), WATCH_TIMEOUT_S)


NOT_FOUND_POD = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": 'pods "missing" not found', "reason": "NotFound",
    "details": {"name": "missing", "kind": "pods"}, "code": 404}


# --- Pods ---------------------------------------------------------------------------------------


async def test_version_and_kind_lookup(api: kr8s.asyncio.Api) -> None:
    version = await api.version()
    assert set(version) >= {"major", "minor", "gitVersion"}
    assert await api.lookup_kind("pods") == ("pod/v1", "pods", True)
    assert await api.lookup_kind("svc") == ("service/v1", "services", True)


async def test_pod_create_get_list(api: kr8s.asyncio.Api) -> None:
    pod = Pod(pod_body("web-0"), api=api)
    await pod.create()
    assert pod.metadata.uid
    assert pod.metadata.namespace == NS
    assert pod.raw["status"]["phase"] == "Pending"

    got = await Pod.get("web-0", namespace=NS, api=api)
    assert isinstance(got, Pod)
    assert got.raw == pod.raw

    listed = [p async for p in api.get("pods", namespace=NS)]
    assert [type(p) for p in listed] == [Pod]
    assert listed[0].raw == pod.raw
    assert [p async for p in api.get("pods", namespace=NS, label_selector={"app": "x"})] == []

    # Listing every namespace goes through /api/v1/pods.
    everywhere = [p async for p in api.get(Pod, namespace=kr8s.ALL)]
    assert [p.name for p in everywhere] == ["web-0"]


async def test_list_pages_through_continue_tokens(server: ServerThread,
                                                  api: kr8s.asyncio.Api) -> None:
    """kr8s lists with ``limit=100`` and follows ``continue`` until it is empty."""
    with Session(server) as session:
        for i in range(130):
            ok(session.call("POST", f"/api/v1/namespaces/{NS}/pods", pod_body(f"p{i:03d}")), 201)
    names = [p.name async for p in api.get("pods", namespace=NS)]
    assert names == [f"p{i:03d}" for i in range(130)]
    selected = [p.name async for p in api.get("pods", namespace=NS,
                                               field_selector={"metadata.name": "p042"})]
    assert selected == ["p042"]


async def test_wait_for_a_condition_and_for_delete(api: kr8s.asyncio.Api) -> None:
    """``wait`` reads the pod, then watches it (``fieldSelector=metadata.name``) until the
    condition holds; a status merge patch makes it Ready."""
    pod = Pod(pod_body("web-0"), api=api)
    await pod.create()
    waiter = asyncio.create_task(pod.wait("condition=Ready", timeout=WATCH_TIMEOUT_S))
    await pod.patch({"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                    subresource="status")
    await waiter
    assert [c["type"] for c in pod.status.conditions] == ["Ready"]

    deleting = asyncio.create_task(pod.wait("delete", timeout=WATCH_TIMEOUT_S))
    await Pod({"metadata": {"name": "web-0", "namespace": NS}}, api=api).delete()
    await deleting
    assert not await pod.exists()


async def test_pod_patches(api: kr8s.asyncio.Api) -> None:
    pod = Pod(pod_body("web-0"), api=api)
    await pod.create()
    created_rv = rv(pod)

    await pod.patch({"metadata": {"labels": {"app": None, "tier": "front"}}})
    assert pod.labels == {"tier": "front"}
    assert rv(pod) > created_rv
    merged_rv = rv(pod)

    await pod.patch([{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}],
                    type="json")
    assert pod.annotations == {"a": "b"}
    assert rv(pod) > merged_rv

    await pod.label(extra="yes")
    await pod.annotate({"b": "c"})
    await pod.refresh()
    assert pod.labels == {"tier": "front", "extra": "yes"}
    assert pod.annotations == {"a": "b", "b": "c"}


async def test_pod_delete(api: kr8s.asyncio.Api) -> None:
    pod = Pod(pod_body("web-0"), api=api)
    await pod.create()
    assert await pod.exists()
    await pod.delete()  # body {}
    assert not await pod.exists()
    assert [p async for p in api.get("pods", namespace=NS)] == []


async def test_pod_not_found_carries_status(api: kr8s.asyncio.Api) -> None:
    missing = Pod({"metadata": {"name": "missing", "namespace": NS}}, api=api)
    with pytest.raises(kr8s.NotFoundError) as raised:
        await missing.refresh()
    cause = raised.value.__cause__
    assert isinstance(cause, kr8s.ServerError)
    assert cause.response is not None
    assert cause.response.status_code == 404
    assert cause.status == NOT_FOUND_POD

    with pytest.raises(kr8s.NotFoundError):
        await missing.delete()
    with pytest.raises(kr8s.NotFoundError):
        await Pod.get("missing", namespace=NS, api=api, timeout=1)


async def test_create_conflict_carries_status(api: kr8s.asyncio.Api) -> None:
    await Pod(pod_body("web-0"), api=api).create()
    with pytest.raises(kr8s.ServerError) as raised:
        await Pod(pod_body("web-0"), api=api).create()
    assert raised.value.response is not None
    assert raised.value.response.status_code == 409
    assert raised.value.status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods "web-0" already exists', "reason": "AlreadyExists",
        "details": {"name": "web-0", "kind": "pods"}, "code": 409}


# --- Services -----------------------------------------------------------------------------------


async def test_service_crud(api: kr8s.asyncio.Api) -> None:
    service = Service(service_body("web"), api=api)
    await service.create()
    assert service.metadata.uid
    assert service.spec.type == "ClusterIP"
    assert service.spec.clusterIPs == [service.spec.clusterIP]
    assert service.spec.ports == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    got = await Service.get("web", namespace=NS, api=api)
    assert got.raw == service.raw
    # every cluster has the kubernetes Service in default
    assert [s.name async for s in api.get("services", namespace=NS)] == ["kubernetes", "web"]

    await service.patch({"spec": {"selector": {"app": "api"}}})
    assert service.spec.selector == {"app": "api"}
    await service.patch([{"op": "replace", "path": "/spec/ports/0/port", "value": 8080}],
                        type="json")
    assert [p["port"] for p in service.spec.ports] == [8080]

    await service.delete()
    assert not await service.exists()


async def test_service_not_found_carries_status(api: kr8s.asyncio.Api) -> None:
    missing = Service({"metadata": {"name": "missing", "namespace": NS}}, api=api)
    with pytest.raises(kr8s.NotFoundError) as raised:
        await missing.patch({"metadata": {"labels": {"a": "b"}}})
    cause = raised.value.__cause__
    assert isinstance(cause, kr8s.ServerError)
    assert cause.status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'services "missing" not found', "reason": "NotFound",
        "details": {"name": "missing", "kind": "services"}, "code": 404}


# --- Watch --------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def watching(api: kr8s.asyncio.Api, kind: str,
                   since: str) -> AsyncIterator[AsyncIterator[tuple[str, Any]]]:
    stream = api.watch(kind, namespace=NS, since=since)
    try:
        yield stream
    finally:
        await stream.aclose()


async def test_pod_watch_from_list_resource_version(api: kr8s.asyncio.Api) -> None:
    """Deleting an unscheduled pod marks it (grace 0) and then removes it: MODIFIED, DELETED
    (store.go updateForGracefulDeletionAndFinalizers)."""
    await Pod(pod_body("before"), api=api).create()
    async with api.call_api("GET", url="pods", namespace=NS) as response:
        list_rv = response.json()["metadata"]["resourceVersion"]

    async with watching(api, "pods", list_rv) as stream:
        pod = Pod(pod_body("web"), api=api)
        await pod.create()
        created_rv = rv(pod)
        await pod.patch({"metadata": {"labels": {"app": "changed"}}})
        patched_rv = rv(pod)
        await pod.delete()
        events = [await next_event(stream) for _ in range(4)]

    assert [(kind, obj.name) for kind, obj in events] == [
        ("ADDED", "web"), ("MODIFIED", "web"), ("MODIFIED", "web"), ("DELETED", "web")]
    assert all(isinstance(obj, Pod) for _, obj in events)
    assert [rv(obj) for _, obj in events[:2]] == [created_rv, patched_rv]
    assert patched_rv < rv(events[2][1]) < rv(events[3][1])
    assert events[1][1].labels == {"app": "changed"}
    assert events[2][1].metadata.deletionGracePeriodSeconds == 0
    assert "deletionTimestamp" in events[2][1].metadata


async def test_service_watch_from_list_resource_version(api: kr8s.asyncio.Api) -> None:
    await Service(service_body("before"), api=api).create()
    async with api.call_api("GET", url="services", namespace=NS) as response:
        listed = response.json()
    assert [s["metadata"]["name"] for s in listed["items"]] == ["before", "kubernetes"]

    async with watching(api, "services", listed["metadata"]["resourceVersion"]) as stream:
        service = Service(service_body("web"), api=api)
        await service.create()
        created_rv = rv(service)
        await service.patch({"spec": {"selector": {"app": "changed"}}})
        patched_rv = rv(service)
        await service.delete()
        events = [await next_event(stream) for _ in range(3)]

    assert [(kind, obj.name) for kind, obj in events] == [
        ("ADDED", "web"), ("MODIFIED", "web"), ("DELETED", "web")]
    assert all(isinstance(obj, Service) for _, obj in events)
    assert [rv(obj) for _, obj in events[:2]] == [created_rv, patched_rv]
    assert rv(events[2][1]) > patched_rv
    assert events[1][1].spec.selector == {"app": "changed"}


# --- The default server: HTTPS with its own CA and an admin client certificate -----------------


async def test_default_https_server_with_its_kubeconfig(
        make_server: Callable[..., ServerThread]) -> None:
    tls = make_server(insecure_http=False)
    assert tls.url.startswith("https://")
    async with kr8s_api(tls) as api:
        pod = Pod(pod_body("web-0"), api=api)
        await pod.create()
        got = await Pod.get("web-0", namespace=NS, api=api)
        assert got.metadata.uid == pod.metadata.uid
        assert [p.name async for p in api.get("pods", namespace=NS)] == ["web-0"]
