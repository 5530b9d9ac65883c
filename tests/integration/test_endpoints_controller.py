"""endpoints-controller against a real server (controllers.md §8.2), beside
endpointslice-controller: Endpoints named like the Service from pods whose status the test
writes as a kubelet would; ready and not-ready addresses; kubectl's ``get
endpointslices,endpoints``; a deleted Service's Endpoints go; leftovers are cleaned at start;
Endpoints of a Service without a selector are the user's."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubewire.client.client import Client, create_client
from kubewire.cluster.controllers.endpoints import make_endpoints_controller
from kubewire.cluster.controllers.endpointslice import make_endpointslice_controller
from kubewire.cluster.runtime import ClusterContext
from tests.integration import kubectl
from tests.integration.controller_helpers import run_components
from tests.integration.harness import ServerThread
from tests.integration.test_endpointslice_controller import (
    SERVICES,
    eventually,
    node,
    pod,
    service,
    set_status,
)
from tests.integration.wire import call, create, ok

ENDPOINTS = "/api/v1/namespaces/default/endpoints"


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


@contextlib.asynccontextmanager
async def running(client: Client, slices: bool = False) -> AsyncIterator[None]:
    ctx = ClusterContext(client)
    components = [make_endpoints_controller(ctx, None)]
    if slices:
        components.append(make_endpointslice_controller(ctx, None))
    async with run_components(ctx, components):
        yield


def endpoints(server: ServerThread, name: str) -> dict[str, Any] | None:
    reply = call(server, "GET", f"{ENDPOINTS}/{name}")
    return reply.json if reply.status == 200 else None


def address(name: str, ip: str, uid: str) -> dict[str, Any]:
    return {"ip": ip, "nodeName": "node-a",
            "targetRef": {"kind": "Pod", "namespace": "default", "name": name, "uid": uid}}


async def test_endpoints_follow_pods_beside_slices(server: ServerThread, client: Client) -> None:
    node(server, "node-a")
    service(server)
    web0 = pod(server, "web-0", "10.244.0.10")
    web1 = pod(server, "web-1", "10.244.0.11", ready=False)
    async with running(client, slices=True):
        eps = await eventually(lambda: (e := endpoints(server, "web")) and e.get("subsets")
                               and e, "the web Endpoints")
        assert eps["metadata"]["labels"] == {"tier": "front"}
        assert eps["metadata"]["annotations"][
            "endpoints.kubernetes.io/last-change-trigger-time"]
        assert eps["subsets"] == [{
            "addresses": [address("web-0", "10.244.0.10", web0["metadata"]["uid"])],
            "notReadyAddresses": [address("web-1", "10.244.0.11", web1["metadata"]["uid"])],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]
        await eventually(lambda: "10.244.0.11" in kubectl.ok(
            server, "get", "endpointslices", "-l", "kubernetes.io/service-name=web"),
            "the slice")
        listed = kubectl.ok(server, "get", "endpointslices,endpoints")
        # one table per kind, rows named kind/name as kubectl prints several kinds
        assert re.search(r"^endpointslice\.discovery\.k8s\.io/web-[a-z0-9]{5}\s+IPv4\s+8080\s+"
                         r"10\.244\.0\.1[01],10\.244\.0\.1[01]\s", listed, re.M), listed
        assert re.search(r"^endpoints/web\s+10\.244\.0\.10:8080\s", listed, re.M), listed
        assert re.search(r"^endpoints/kubernetes\s", listed, re.M), listed
        table = kubectl.ok(server, "get", "endpoints", "web")
        header, row = table.splitlines()
        assert header.split() == ["NAME", "ENDPOINTS", "AGE"]
        assert row.split()[:2] == ["web", "10.244.0.10:8080"]

        # readiness flips: the addresses move between addresses and notReadyAddresses
        set_status(server, "web-0", "10.244.0.10", ready=False)
        set_status(server, "web-1", "10.244.0.11", ready=True)
        moved = await eventually(
            lambda: (e := endpoints(server, "web")) and [
                a["ip"] for a in e["subsets"][0].get("addresses") or []] == ["10.244.0.11"]
            and e, "readiness to move")
        assert [a["ip"] for a in moved["subsets"][0]["notReadyAddresses"]] == ["10.244.0.10"]
        row = kubectl.ok(server, "get", "endpoints", "web").splitlines()[1]
        assert row.split()[:2] == ["web", "10.244.0.11:8080"]

        # the Service goes, its Endpoints go with it
        ok(call(server, "DELETE", f"{SERVICES}/web"), 200)
        await eventually(lambda: endpoints(server, "web") is None, "the Endpoints to go")


async def test_leftovers_cleaned_and_selectorless_left_alone(server: ServerThread,
                                                             client: Client) -> None:
    subsets = [{"addresses": [{"ip": "10.9.0.1"}], "ports": [{"port": 80}]}]
    create(server, ENDPOINTS, {"metadata": {"name": "orphan"}, "subsets": subsets})
    create(server, SERVICES, {"metadata": {"name": "manual"},
                              "spec": {"ports": [{"port": 80}]}})
    create(server, ENDPOINTS, {"metadata": {"name": "manual"}, "subsets": subsets})
    service(server, "empty")
    async with running(client):
        await eventually(lambda: endpoints(server, "orphan") is None, "the leftover to go")
        empty = await eventually(lambda: endpoints(server, "empty"), "the empty Endpoints")
        assert empty.get("subsets") in (None, [])
        assert kubectl.ok(server, "get", "ep", "empty").splitlines()[1].split()[1] == "<none>"
        manual = endpoints(server, "manual")
        assert manual is not None and manual["subsets"][0]["addresses"] == [{"ip": "10.9.0.1"}]
        assert re.search(r"manual\s+10\.9\.0\.1:80", kubectl.ok(server, "get", "ep", "manual"))
