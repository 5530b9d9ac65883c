"""The cluster wing's runtime against a real server: shared informers are shared, events are
recorded as client-go's recorders record them (core/v1 aggregated by count, events.k8s.io/v1
with regarding/note/action)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kubewire.client.client import Client, create_client
from kubewire.cluster.runtime import ClusterContext
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, ok


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


async def test_informers_are_shared_and_see_objects(server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    try:
        pods = ctx.informer("v1", "ConfigMap", namespace="default")
        assert ctx.informer("v1", "ConfigMap", namespace="default") is pods
        assert ctx.informer("v1", "ConfigMap") is not pods
        create(server, "/api/v1/namespaces/default/configmaps",
               {"metadata": {"name": "shared"}, "data": {"a": "1"}})
        await pods.wait_for_sync()
        for _ in range(200):
            if pods.get("shared", "default") is not None:
                break
            await asyncio.sleep(0.02)
        assert pods.get("shared", "default") is not None
    finally:
        await ctx.close()


async def test_core_events_aggregate_by_count(server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    cm = create(server, "/api/v1/namespaces/default/configmaps",
                {"metadata": {"name": "evented"}})
    try:
        events = ctx.recorder("test-controller")
        for _ in range(3):
            events.event(cm, "Normal", "Poked", "poked it")
            await ctx.events.drain()
        events.event(cm, "Warning", "Other", "something else")
        await ctx.events.drain()
    finally:
        await ctx.close()
    body = ok(call(server, "GET", "/api/v1/namespaces/default/events"), 200)
    mine = {e["reason"]: e for e in body["items"]
            if e["involvedObject"].get("name") == "evented"}
    assert set(mine) == {"Poked", "Other"}
    poked = mine["Poked"]
    assert poked["count"] == 3
    assert poked["involvedObject"]["kind"] == "ConfigMap"
    assert poked["involvedObject"]["uid"] == cm["metadata"]["uid"]
    assert poked["source"] == {"component": "test-controller"}
    assert poked["metadata"]["name"].startswith("evented.")
    assert mine["Other"]["type"] == "Warning" and mine["Other"]["count"] == 1


async def test_new_events_have_regarding_and_note(server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    cm = create(server, "/api/v1/namespaces/default/configmaps",
                {"metadata": {"name": "regarded"}})
    try:
        ctx.new_recorder("default-scheduler").event(cm, "Normal", "Scheduled", "assigned it",
                                                    action="Binding")
        await ctx.new_events.drain()
    finally:
        await ctx.close()
    body = ok(call(server, "GET", "/apis/events.k8s.io/v1/namespaces/default/events"), 200)
    mine = [e for e in body["items"] if e["regarding"].get("name") == "regarded"]
    assert len(mine) == 1
    event = mine[0]
    assert (event["reason"], event["note"], event["action"]) == ("Scheduled", "assigned it",
                                                                  "Binding")
    assert event["reportingController"] == "default-scheduler"
    assert event["eventTime"].endswith("Z")


async def test_a_burst_of_events_is_sent_on_concurrent_lanes(server: ServerThread,
                                                              client: Client) -> None:
    """300 events about 300 objects (under the 1,000 queue bound; each object's first, so the
    correlator lets all through) are all recorded, none dropped; the lanes send them
    concurrently and ``close`` leaves nothing behind."""
    ctx = ClusterContext(client)
    events = ctx.recorder("burst-controller")
    for i in range(300):
        events.event({"kind": "ConfigMap", "apiVersion": "v1",
                      "metadata": {"name": f"bursty-{i}", "namespace": "default",
                                   "uid": f"uid-{i}"}}, "Normal", "Burst", f"event {i}")
    assert sum(1 for task in ctx.events._tasks if task is not None) > 1
    await ctx.events.drain()
    await ctx.close()
    assert (ctx.events.sent, ctx.events.dropped, ctx.events.filtered) == (300, 0, 0)
    body = ok(call(server, "GET", "/api/v1/namespaces/default/events"), 200)
    mine = [e for e in body["items"] if e["involvedObject"].get("name", "").startswith("bursty-")]
    assert sorted(e["message"] for e in mine) == sorted(f"event {i}" for i in range(300))


async def test_similar_events_are_combined_and_a_source_is_held_to_its_burst(
        server: ServerThread, client: Client) -> None:
    """client-go's correlator: 100 ``Created pod`` events about one ReplicaSet (messages
    differ) are nine events as they are, then one ``(combined from similar events)`` event
    counted up by PATCH; the source's burst of 25 events about the object lets 16 of those
    through and keeps the other 75 back (the refill is one per five minutes). Another
    object's events are not held back by the first's."""
    ctx = ClusterContext(client)
    owner = {"kind": "ReplicaSet", "apiVersion": "apps/v1",
             "metadata": {"name": "many", "namespace": "default", "uid": "uid-many"}}
    events = ctx.recorder("replicaset-controller")
    try:
        for i in range(100):
            events.event(owner, "Normal", "SuccessfulCreate", f"Created pod: many-{i}")
            if i % 10 == 9:
                await ctx.events.drain()
        events.event({**owner, "metadata": {**owner["metadata"], "name": "other",
                                            "uid": "uid-other"}},
                     "Normal", "SuccessfulCreate", "Created pod: other-0")
        await ctx.events.drain()
    finally:
        await ctx.close()
    assert ctx.events.filtered == 75
    body = ok(call(server, "GET", "/api/v1/namespaces/default/events"), 200)
    mine = [e for e in body["items"] if e["involvedObject"].get("name") == "many"]
    plain = sorted(e["message"] for e in mine if e["count"] == 1
                   and not e["message"].startswith("(combined"))
    assert plain == sorted(f"Created pod: many-{i}" for i in range(9))
    combined = [e for e in mine if e["message"].startswith("(combined")]
    assert len(combined) == 1 and len(mine) == 10
    assert combined[0]["count"] == 16
    assert combined[0]["message"] == "(combined from similar events): Created pod: many-24"
    assert combined[0]["reason"] == "SuccessfulCreate"
    assert combined[0]["source"] == {"component": "replicaset-controller"}
    assert [e["message"] for e in body["items"]
            if e["involvedObject"].get("name") == "other"] == ["Created pod: other-0"]
