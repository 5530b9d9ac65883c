"""endpointslice-controller against a real server (controllers.md §8.1): slices for a selector
Service, from pods whose status the test writes as a kubelet would; kubectl shows kube's
shapes; readiness moves endpoints; named target ports resolve per pod; 100-per-slice style
splitting; the placeholder slice; the Service's ownerReference for the garbage collector."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubewire.client.client import Client, create_client
from kubewire.cluster.controllers.endpointslice import (
    EndpointSliceController,
    make_endpointslice_controller,
)
from kubewire.cluster.runtime import ClusterContext
from tests.integration import kubectl
from tests.integration.controller_helpers import run_components
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, get, ok

NS = "default"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
PODS = "/api/v1/namespaces/default/pods"
SERVICES = "/api/v1/namespaces/default/services"


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


@contextlib.asynccontextmanager
async def running(client: Client, **kwargs: Any) -> AsyncIterator[EndpointSliceController]:
    ctx = ClusterContext(client)
    controller = (EndpointSliceController(ctx, **kwargs) if kwargs
                  else make_endpointslice_controller(ctx, None))
    async with run_components(ctx, [controller]):
        yield controller


async def eventually(predicate: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def node(server: ServerThread, name: str, zone: str | None = None) -> None:
    labels = {"topology.kubernetes.io/zone": zone} if zone else {}
    create(server, "/api/v1/nodes", {"metadata": {"name": name, "labels": labels}})


def pod(server: ServerThread, name: str, ip: str, *, ready: bool = True,
        node_name: str = "node-a", labels: dict[str, str] | None = None,
        port_name: str = "http", container_port: int = 8080) -> dict[str, Any]:
    """A pod on ``node_name`` and the status a kubelet would report for it."""
    made = create(server, PODS, {
        "metadata": {"name": name, "labels": labels or {"app": "web"}},
        "spec": {"nodeName": node_name, "containers": [{
            "name": "c", "image": "nginx",
            "ports": [{"name": port_name, "containerPort": container_port}]}]}})
    set_status(server, name, ip, ready)
    return made


def set_status(server: ServerThread, name: str, ip: str, ready: bool) -> None:
    flag = "True" if ready else "False"
    ok(call(server, "PATCH", f"{PODS}/{name}/status", {"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": flag},
                       {"type": "ContainersReady", "status": flag}]}},
        {"Content-Type": "application/merge-patch+json"}), 200)


def service(server: ServerThread, name: str = "web", **spec: Any) -> dict[str, Any]:
    body = {"metadata": {"name": name, "labels": {"tier": "front"}},
            "spec": {"selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 80, "targetPort": "http"}], **spec}}
    return create(server, SERVICES, body)


def slices_of(server: ServerThread, name: str) -> list[dict[str, Any]]:
    body = get(server, SLICES, labelSelector=f"kubernetes.io/service-name={name}")
    return sorted(body["items"], key=lambda s: s["metadata"]["name"])


def endpoints_by_pod(slices: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["targetRef"]["name"]: e for s in slices for e in s.get("endpoints") or []}


async def test_slices_follow_pods_and_show_in_kubectl(server: ServerThread,
                                                      client: Client) -> None:
    node(server, "node-a", zone="zone-1")
    svc = service(server)
    web0 = pod(server, "web-0", "10.244.0.10")
    pod(server, "web-1", "10.244.0.11", ready=False)
    pod(server, "other", "10.244.0.12", labels={"app": "other"})
    async with running(client):
        slices = await eventually(
            lambda: (s := slices_of(server, "web")) and len(endpoints_by_pod(s)) == 2 and s,
            "the web slice with two endpoints")
        [slice_] = slices
        meta = slice_["metadata"]
        assert re.fullmatch(r"web-[a-z0-9]{5}", meta["name"]), meta["name"]
        assert meta["labels"] == {
            "tier": "front", "kubernetes.io/service-name": "web",
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}
        assert meta["ownerReferences"] == [{
            "apiVersion": "v1", "kind": "Service", "name": "web",
            "uid": svc["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
        assert meta["annotations"]["endpoints.kubernetes.io/last-change-trigger-time"]
        assert slice_["addressType"] == "IPv4"
        assert slice_["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
        eps = endpoints_by_pod(slices)
        assert eps["web-0"] == {
            "addresses": ["10.244.0.10"],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "targetRef": {"kind": "Pod", "namespace": NS, "name": "web-0",
                          "uid": web0["metadata"]["uid"]},
            "nodeName": "node-a", "zone": "zone-1"}
        assert eps["web-1"]["conditions"] == {"ready": False, "serving": False,
                                              "terminating": False}

        table = kubectl.ok(server, "get", "endpointslices", "-l",
                           "kubernetes.io/service-name=web")
        header, row = table.splitlines()
        assert header.split() == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
        cells = row.split()
        assert cells[:3] == [meta["name"], "IPv4", "8080"]
        assert sorted(cells[3].split(",")) == ["10.244.0.10", "10.244.0.11"]

        # the kubelet reports web-0 unready and web-1 ready: the conditions follow
        set_status(server, "web-0", "10.244.0.10", ready=False)
        set_status(server, "web-1", "10.244.0.11", ready=True)
        await eventually(lambda: (e := endpoints_by_pod(slices_of(server, "web")))
                         and not e["web-0"]["conditions"]["ready"]
                         and e["web-1"]["conditions"]["ready"], "readiness to move")
        assert [s["metadata"]["name"] for s in slices_of(server, "web")] == [meta["name"]]

        # a terminal pod leaves; a deleted pod leaves
        ok(call(server, "PATCH", f"{PODS}/web-1/status", {"status": {"phase": "Succeeded"}},
                {"Content-Type": "application/merge-patch+json"}), 200)
        ok(call(server, "DELETE", f"{PODS}/web-0", params={"gracePeriodSeconds": 0}), 200)
        await eventually(lambda: [bool(s.get("endpoints")) for s in slices_of(server, "web")]
                         == [False], "the slice to empty (the placeholder)")
        [placeholder] = slices_of(server, "web")
        assert placeholder["metadata"]["name"] == meta["name"]  # kept, not recreated
        assert not placeholder.get("ports")

        # the Service goes: its slices wait for the garbage collector (controller ownerRef)
        ok(call(server, "DELETE", f"{SERVICES}/web"), 200)
        await asyncio.sleep(0.3)
        [left] = slices_of(server, "web")
        assert left["metadata"]["ownerReferences"][0]["uid"] == svc["metadata"]["uid"]


async def test_named_ports_group_pods_and_slices_split(server: ServerThread,
                                                       client: Client) -> None:
    node(server, "node-a")
    service(server, "api", publishNotReadyAddresses=True)
    for i in range(3):
        pod(server, f"api-{i}", f"10.1.0.{i + 1}", ready=(i != 0))
    pod(server, "api-odd", "10.1.0.9", port_name="http", container_port=9090)
    pod(server, "api-nameless", "10.1.0.8", port_name="metrics")
    async with running(client, max_endpoints_per_slice=2):
        await eventually(lambda: len(endpoints_by_pod(slices_of(server, "api"))) == 5,
                         "five endpoints")
        slices = slices_of(server, "api")
        by_ports: dict[str, list[int]] = {}
        for s in slices:
            key = json.dumps(s.get("ports"), sort_keys=True)
            by_ports.setdefault(key, []).append(len(s["endpoints"]))
        assert sorted(sorted(v) for v in by_ports.values()) == [[1], [1], [1, 2]]
        eps = endpoints_by_pod(slices)
        # publishNotReadyAddresses: ready even when the pod is not
        assert eps["api-0"]["conditions"] == {"ready": True, "serving": False,
                                              "terminating": False}
        nameless = next(s for s in slices
                        if any(e["targetRef"]["name"] == "api-nameless" for e in s["endpoints"]))
        assert not nameless.get("ports")  # no port resolves on it: a slice without ports
        odd = next(s for s in slices
                   if any(e["targetRef"]["name"] == "api-odd" for e in s["endpoints"]))
        assert odd["ports"] == [{"name": "http", "port": 9090, "protocol": "TCP"}]


async def test_pods_on_unknown_nodes_wait_and_services_without_selector_get_nothing(
        server: ServerThread, client: Client) -> None:
    service(server, "late")
    create(server, SERVICES, {"metadata": {"name": "manual"},
                              "spec": {"ports": [{"port": 80}]}})
    pod(server, "late-0", "10.2.0.1", node_name="node-late")
    async with running(client):
        await eventually(lambda: slices_of(server, "late"), "the placeholder")
        assert [bool(s.get("endpoints")) for s in slices_of(server, "late")] == [False]
        node(server, "node-late")
        await eventually(lambda: "late-0" in endpoints_by_pod(slices_of(server, "late")),
                         "the pod once its node is known")
        assert slices_of(server, "manual") == []
