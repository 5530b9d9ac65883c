"""The garbage collector and owners of kinds it does not watch (yet): found by kopf's
``02-children`` operator on a cluster server, whose Pod outlived its deleted custom resource
when the resource's CRD was created while the collector was starting.

Two holes, shown here with the collector's periodic rediscovery out of the way
(``resync_s`` an hour): a CRD created while the first monitors sync must still bring a monitor
for its kind (the "a CRD changed" signal was dropped when the resync loop began), and an owner
the collector only knows as a reference (a *virtual* node), verified to exist, is verified
again until an informer observes it (kube's ``attemptToDeleteWorker`` requeues it, issue
56121); otherwise its deletion is never noticed and its dependents stay.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubewire.client.client import create_client
from kubewire.cluster.controllers.garbage_collector import GarbageCollector
from kubewire.cluster.runtime import ClusterContext
from kubewire.server.controllers.selection import CLUSTER_COMPONENTS
from tests.integration.controller_helpers import run_components
from tests.integration.custom_kinds import CRDS, established
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, ok

NS = "/api/v1/namespaces/default"
HOUR = 3600.0
WIDGETS = "/apis/late.example.com/v1/namespaces/default/widgets"
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.late.example.com"},
    "spec": {"group": "late.example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object",
                                     "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture
def server(make_server: Callable[..., ServerThread]) -> ServerThread:
    # the server adds the GC finalizers; this test's loop runs the collector
    return make_server(enable_garbage_collector=True,
                       controllers=("*", *(f"-{name}" for name in CLUSTER_COMPONENTS)))


@pytest.fixture
async def starting(server: ServerThread) -> AsyncIterator[GarbageCollector]:
    """A collector whose first discovery has run and whose monitors are starting, not yet
    synced; no periodic rediscovery within the test."""
    async with await create_client(server.kubeconfig) as client:
        ctx = ClusterContext(client)
        gc = GarbageCollector(ctx, resync_s=HOUR)
        async with run_components(ctx, [gc]):
            for _ in range(400):
                if gc.monitors:
                    break
                await asyncio.sleep(0.005)
            assert gc.monitors, "the collector's first discovery did not run"
            yield gc


async def synced(gc: GarbageCollector) -> GarbageCollector:
    for _ in range(400):
        if all(m.has_synced for m in gc.monitors.values()):
            return gc
        await asyncio.sleep(0.05)
    raise AssertionError("the collector's monitors did not sync")


def owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"]}


async def gone(server: ServerThread, path: str, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if call(server, "GET", path).status == 404:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} still there after {timeout} s")


async def test_a_crd_created_while_the_collector_starts_gets_a_monitor(
        server: ServerThread, starting: GarbageCollector) -> None:
    create(server, CRDS, CRD)  # the collector's CRD monitor is listing or watching
    established(server, CRD["metadata"]["name"])
    await synced(starting)
    for _ in range(200):
        if ("late.example.com", "widgets") in starting.monitors:
            break
        await asyncio.sleep(0.05)
    assert ("late.example.com", "widgets") in starting.monitors

    widget = create(server, WIDGETS, {"apiVersion": "late.example.com/v1", "kind": "Widget",
                                      "metadata": {"name": "w"}})
    create(server, f"{NS}/configmaps", {"metadata": {"name": "of-w",
                                                     "ownerReferences": [owner_ref(widget)]}})
    ok(call(server, "DELETE", f"{WIDGETS}/w"), 200)
    await gone(server, f"{NS}/configmaps/of-w")


async def test_an_owner_deleted_before_its_kind_is_watched_still_goes(
        server: ServerThread, starting: GarbageCollector) -> None:
    """The CRD, a Widget and its dependent are made while the collector's loop waits (this
    test's HTTP calls block the loop they share); the collector then finds the dependent,
    verifies its owner with a GET (a virtual node: no monitor watches widgets yet) and the
    Widget is deleted before the monitor the new CRD brings starts (0.2 s after the CRD's
    event). The monitor's first list has no Widget to observe: only verifying the virtual
    owner again finds it gone."""
    gc = await synced(starting)
    create(server, CRDS, CRD)
    established(server, CRD["metadata"]["name"])
    widget = create(server, WIDGETS, {"apiVersion": "late.example.com/v1", "kind": "Widget",
                                      "metadata": {"name": "early"}})
    uid = widget["metadata"]["uid"]
    create(server, f"{NS}/configmaps", {"metadata": {"name": "of-early",
                                                     "ownerReferences": [owner_ref(widget)]}})
    for _ in range(100):  # the collector takes the dependent and queues its owner's check
        await asyncio.sleep(0.002)
        if uid in gc.nodes:
            break
    await asyncio.sleep(0.05)  # the check's GET: the owner is there
    assert uid in gc.nodes and not gc.nodes[uid].observed
    assert ("late.example.com", "widgets") not in gc.monitors
    ok(call(server, "DELETE", f"{WIDGETS}/early"), 200)
    await gone(server, f"{NS}/configmaps/of-early")
