"""endpointslice-mirroring-controller against a real server: Endpoints written by hand for a
Service without a selector appear as EndpointSlices (kube's endpointslicemirroring), follow
the Endpoints, and go when the Service gains a selector; skip-mirror Endpoints (the
``default/kubernetes`` one) are left alone."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubewire.client.client import Client, create_client
from kubewire.cluster.controllers.endpointslice_mirroring import (
    make_endpointslice_mirroring_controller,
)
from kubewire.cluster.runtime import ClusterContext
from tests.integration.controller_helpers import run_components
from tests.integration.harness import ServerThread
from tests.integration.test_endpointslice_controller import SERVICES, eventually
from tests.integration.wire import call, create, get, ok

ENDPOINTS = "/api/v1/namespaces/default/endpoints"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
MIRRORED = "endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io"


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


@contextlib.asynccontextmanager
async def running(client: Client) -> AsyncIterator[None]:
    ctx = ClusterContext(client)
    async with run_components(ctx, [make_endpointslice_mirroring_controller(ctx, None)]):
        yield


def mirrored(server: ServerThread, name: str) -> list[dict[str, Any]]:
    return get(server, SLICES, labelSelector=f"{MIRRORED},kubernetes.io/service-name={name}"
               )["items"]


async def test_manual_endpoints_are_mirrored(server: ServerThread, client: Client) -> None:
    create(server, SERVICES, {"metadata": {"name": "db"}, "spec": {"ports": [{"port": 5432}]}})
    eps = create(server, ENDPOINTS, {
        "metadata": {"name": "db", "labels": {"team": "data"},
                     "annotations": {"note": "by hand"}},
        "subsets": [{"addresses": [{"ip": "10.5.0.1", "nodeName": "n1"}],
                     "notReadyAddresses": [{"ip": "10.5.0.2"}],
                     "ports": [{"name": "pg", "port": 5432}]}]})
    create(server, SERVICES, {"metadata": {"name": "quiet"},
                              "spec": {"ports": [{"port": 80}]}})
    create(server, ENDPOINTS, {
        "metadata": {"name": "quiet",
                     "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": "10.6.0.1"}], "ports": [{"port": 80}]}]})
    async with running(client):
        [slice_] = await eventually(lambda: mirrored(server, "db"), "the mirrored slice")
        meta = slice_["metadata"]
        assert re.fullmatch(r"db-[a-z0-9]{5}", meta["name"])
        assert meta["labels"] == {
            "team": "data", "kubernetes.io/service-name": "db",
            "endpointslice.kubernetes.io/managed-by": "endpointslicemirroring-controller.k8s.io"}
        assert meta["annotations"] == {"note": "by hand"}
        assert meta["ownerReferences"] == [{
            "apiVersion": "v1", "kind": "Endpoints", "name": "db",
            "uid": eps["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
        assert slice_["addressType"] == "IPv4"
        assert slice_["ports"] == [{"name": "pg", "port": 5432, "protocol": "TCP"}]
        assert sorted(slice_["endpoints"], key=lambda e: e["addresses"]) == [
            {"addresses": ["10.5.0.1"], "conditions": {"ready": True}, "nodeName": "n1"},
            {"addresses": ["10.5.0.2"], "conditions": {"ready": False}}]

        # the Endpoints change: the same slice follows
        ok(call(server, "PATCH", f"{ENDPOINTS}/db", {"subsets": [
            {"addresses": [{"ip": "10.5.0.3"}], "ports": [{"name": "pg", "port": 5432}]}]}), 200)
        await eventually(lambda: [e["addresses"] for s in mirrored(server, "db")
                                  for e in s["endpoints"]] == [["10.5.0.3"]], "the new address")
        assert [s["metadata"]["name"] for s in mirrored(server, "db")] == [meta["name"]]
        assert mirrored(server, "quiet") == [] and mirrored(server, "kubernetes") == []

        # the Service gains a selector: the mirrored slice goes
        ok(call(server, "PATCH", f"{SERVICES}/db", {"spec": {"selector": {"app": "db"}}}), 200)
        await eventually(lambda: mirrored(server, "db") == [], "the mirrored slice to go")
