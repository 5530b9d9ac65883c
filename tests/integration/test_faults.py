"""Faults on demand (server/faults) against the real server, seen by real clients: kubewire's
watch and informer, kubectl, the ``kubernetes`` package, raw HTTP; the admin endpoints'
answers to good and bad specs; the manual clock finishing a graceful pod deletion."""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import random
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

import aiohttp
import kubernetes
import pytest

from kubewire.client.api import Api
from kubewire.client.backoff import Backoff
from kubewire.client.client import Client, create_client
from kubewire.client.events import WatchEvent
from kubewire.client.informers.informer import Informer
from kubewire.client.watch import WatchSettings
from kubewire.models import ConfigMap, ObjectMeta
from kubewire.server.faults.faults import Faults
from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl
from tests.integration.wire import call, host_port

EVENT_WAIT_S = 30.0
FAST = dict(backoff=Backoff(initial_s=0.05, max_s=0.5, rng=random.Random(3)))


def faults_of(server: ServerThread) -> Faults:
    assert server.server is not None
    return server.server.faults


def on_loop(server: ServerThread, fn: Callable[[Faults], Any]) -> Any:
    """Call the server's ``Faults`` on its loop (as the public API must)."""
    return server.call(lambda: fn(faults_of(server)))


def injected(server: ServerThread, fault: str) -> float:
    """``kubewire_faults_injected_total{fault=...}`` as ``/metrics`` shows it (0 if absent)."""
    prefix = f'kubewire_faults_injected_total{{fault="{fault}"}} '
    for line in call(server, "GET", "/metrics").body.decode().splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    return 0.0


async def next_event(stream: AsyncIterator[WatchEvent[ConfigMap]]) -> WatchEvent[ConfigMap]:
    return await asyncio.wait_for(anext(stream), EVENT_WAIT_S)


def name_of(event: WatchEvent[ConfigMap]) -> tuple[str, str]:
    obj = event.object
    assert isinstance(obj, ConfigMap) and obj.metadata is not None
    return event.type.value, obj.metadata.name or ""


async def wait_until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + EVENT_WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


# --- watch streams ------------------------------------------------------------------------------

async def test_a_dropped_watch_resumes_with_nothing_missing_or_repeated(
        server: ServerThread, client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    since = (await maps.list()).resource_version
    async with aclosing(maps.watch(resource_version=since,
                                   settings=WatchSettings(**FAST))) as stream:
        await maps.create(ConfigMap(metadata=ObjectMeta(name="a")))
        seen = [name_of(await next_event(stream))]
        # another kind's watches are not touched
        assert on_loop(server, lambda f: f.drop_watches(resource="secrets")) == 0
        assert on_loop(server, lambda f: f.drop_watches(resource="configmaps")) == 1
        await maps.create(ConfigMap(metadata=ObjectMeta(name="b")))
        seen.append(name_of(await next_event(stream)))
    assert seen == [("ADDED", "a"), ("ADDED", "b")]
    assert injected(server, "dropWatches") == 1


async def test_expired_history_makes_the_informer_relist(server: ServerThread,
                                                         client: Client) -> None:
    maps = Api(ConfigMap, client=client, namespace="default")
    informer = Informer(maps, settings=WatchSettings(**FAST))
    async with informer:
        await asyncio.wait_for(informer.wait_for_sync(), EVENT_WAIT_S)
        # hold its stream, write meanwhile, expire: its resume point is now too old
        stall = on_loop(server, lambda f: f.stall_streams(resource="configmaps"))
        await maps.create(ConfigMap(metadata=ObjectMeta(name="while-held")))
        on_loop(server, lambda f: f.expire_history())
        assert on_loop(server, lambda f: f.drop_watches(resource="configmaps")) == 1
        on_loop(server, lambda f: f.clear(stall))
        await wait_until(lambda: informer.get("while-held", "default") is not None,
                         "the informer to list again")
        assert informer.relists == 1
        await maps.create(ConfigMap(metadata=ObjectMeta(name="after")))
        await wait_until(lambda: informer.get("after", "default") is not None,
                         "the informer to watch again")
    assert injected(server, "expireHistory") == 1


def watch_lines(server: ServerThread, path: str) -> list[dict[str, Any]]:
    host, port = host_port(server)
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        assert resp.status == 200
        return [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    finally:
        conn.close()


def test_expired_history_answers_410_from_the_ring_and_from_the_log(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(ring_capacity=8)
    base = "/api/v1/namespaces/default/configmaps"
    early = call(server, "GET", base).json["metadata"]["resourceVersion"]
    for i in range(20):  # the ring holds the last 8: ``early`` is served from the log
        assert call(server, "POST", base, {"metadata": {"name": f"m{i}"}}).status == 201
    recent = call(server, "GET", base).json["metadata"]["resourceVersion"]
    assert call(server, "POST", base, {"metadata": {"name": "last"}}).status == 201
    for rv in (early, recent):  # both resumable before the fault
        events = watch_lines(server, f"{base}?watch=1&resourceVersion={rv}&timeoutSeconds=1")
        assert events and events[0]["type"] == "ADDED"
    paged = call(server, "GET", base, params={"limit": 5}).json["metadata"]["continue"]
    assert call(server, "POST", base, {"metadata": {"name": "after-page"}}).status == 201
    on_loop(server, lambda f: f.expire_history())
    now = call(server, "GET", base).json["metadata"]["resourceVersion"]
    for rv in (early, recent):
        events = watch_lines(server, f"{base}?watch=1&resourceVersion={rv}&timeoutSeconds=1")
        assert [e["type"] for e in events] == ["ERROR"]
        status = events[0]["object"]
        assert (status["code"], status["reason"]) == (410, "Expired")
        assert status["message"].startswith(f"too old resource version: {rv} (")
    # lists read at an expired revision get kube's 410s too: an exact one, and a continue
    exact = call(server, "GET", base, params={"limit": 5, "resourceVersion": recent,
                                              "resourceVersionMatch": "Exact"})
    assert exact.status == 410 and exact.json["reason"] == "Expired"
    page = call(server, "GET", base, params={"limit": 5, "continue": paged})
    assert page.status == 410
    assert page.json["message"].startswith("The provided continue parameter is too old")
    assert call(server, "GET", base, params={
        "limit": 5, "resourceVersion": now, "resourceVersionMatch": "Exact"}).status == 200
    # from now on resumes work: the relist's revision is not expired
    assert call(server, "POST", base, {"metadata": {"name": "later"}}).status == 201
    events = watch_lines(server, f"{base}?watch=1&resourceVersion={now}&timeoutSeconds=1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "later")]


async def test_a_stalled_stream_holds_events_until_cleared(server: ServerThread,
                                                           client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    since = (await maps.list()).resource_version
    async with aclosing(maps.watch(resource_version=since,
                                   settings=WatchSettings(**FAST))) as stream:
        await maps.create(ConfigMap(metadata=ObjectMeta(name="before")))
        assert name_of(await next_event(stream)) == ("ADDED", "before")
        stall = on_loop(server, lambda f: f.stall_streams(resource="configmaps"))
        for name in ("x", "y"):
            await maps.create(ConfigMap(metadata=ObjectMeta(name=name)))
        pending = asyncio.ensure_future(next_event(stream))
        await asyncio.sleep(0.5)
        assert not pending.done()  # held back
        assert on_loop(server, lambda f: f.clear(stall)) == 1
        seen = [name_of(await pending), name_of(await next_event(stream))]
    assert seen == [("ADDED", "x"), ("ADDED", "y")]
    assert injected(server, "stall") == 1


def test_a_watch_opened_during_a_stall_gets_its_snapshot_on_release(
        server: ServerThread) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    assert call(server, "POST", base, {"metadata": {"name": "one"}}).status == 201
    stall = on_loop(server, lambda f: f.stall_streams(resource="configmaps"))
    received: list[dict[str, Any]] = []
    host, port = host_port(server)
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", f"{base}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                        "&resourceVersionMatch=NotOlderThan&timeoutSeconds=3")
    resp = conn.getresponse()
    assert resp.status == 200  # the head is out; the events are held

    def read() -> None:
        while line := resp.readline():
            if line.strip():
                received.append(json.loads(line))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        time.sleep(0.3)
        assert received == []
        on_loop(server, lambda f: f.clear(stall))
    finally:
        reader.join(10)
        conn.close()
    assert [e["type"] for e in received[:2]] == ["ADDED", "BOOKMARK"]
    assert received[1]["object"]["metadata"]["annotations"][
        "k8s.io/initial-events-end"] == "true"


async def test_the_client_watchdog_fires_on_a_stalled_stream(server: ServerThread,
                                                             client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    since = (await maps.list()).resource_version
    settings = WatchSettings(idle_timeout_s=0.5, **FAST)
    async with aclosing(maps.watch(resource_version=since, settings=settings)) as stream:
        await maps.create(ConfigMap(metadata=ObjectMeta(name="before")))
        assert name_of(await next_event(stream)) == ("ADDED", "before")
        stall = on_loop(server, lambda f: f.stall_streams(resource="configmaps"))
        await maps.create(ConfigMap(metadata=ObjectMeta(name="during")))
        pending = asyncio.ensure_future(next_event(stream))
        # the watchdog gives up on the silent stream and reconnects: the new stream is
        # stalled too (the fault holds new watches), so each reconnect counts one more
        await wait_until(lambda: injected(server, "stall") >= 2, "the watchdog to reconnect")
        assert not pending.done()
        on_loop(server, lambda f: f.clear(stall))
        assert name_of(await pending) == ("ADDED", "during")


async def test_a_stall_with_a_duration_ends_by_itself(server: ServerThread,
                                                      client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    since = (await maps.list()).resource_version
    async with aclosing(maps.watch(resource_version=since,
                                   settings=WatchSettings(**FAST))) as stream:
        on_loop(server, lambda f: f.stall_streams(resource="configmaps", seconds=0.3))
        await maps.create(ConfigMap(metadata=ObjectMeta(name="late")))
        assert name_of(await next_event(stream)) == ("ADDED", "late")
    assert on_loop(server, lambda f: f.list_faults()) == []


def test_suppressed_initial_events_end_and_bookmarks(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(bookmark_interval_s=0.2)
    base = "/api/v1/namespaces/default/configmaps"
    assert call(server, "POST", base, {"metadata": {"name": "one"}}).status == 201
    watch_list = (f"{base}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                  "&resourceVersionMatch=NotOlderThan&timeoutSeconds=3")  # bookmarks: 1 s

    def kinds(events: list[dict[str, Any]]) -> list[str]:
        return [e["type"] if e["type"] != "BOOKMARK" else
                "END" if (e["object"]["metadata"].get("annotations") or {}).get(
                    "k8s.io/initial-events-end") else "BOOKMARK" for e in events]

    def watch_while_writing(name: str) -> list[str]:
        # another kind's write while the watch is open: the store's revision moves past the
        # watch's, so a bookmark is due
        writer = threading.Timer(0.3, lambda: call(server, "POST",
                                                    "/api/v1/namespaces/default/secrets",
                                                    {"metadata": {"name": name}}))
        writer.start()
        try:
            return kinds(watch_lines(server, watch_list))
        finally:
            writer.join()

    found = watch_while_writing("two")
    assert found[:3] == ["ADDED", "END", "BOOKMARK"]
    fid = on_loop(server, lambda f: f.suppress_bookmarks(resource="configmaps",
                                                         initial_events_end=True))
    assert watch_while_writing("three") == ["ADDED"]
    assert injected(server, "bookmarks-initial-events-end") == 1
    assert injected(server, "bookmarks-suppress") >= 1
    on_loop(server, lambda f: f.clear(fid))
    assert kinds(watch_lines(server, watch_list))[:2] == ["ADDED", "END"]


async def test_a_dropped_websocket_watch_gets_a_close_frame(server: ServerThread) -> None:
    url = server.url.replace("http", "ws", 1) + "/api/v1/namespaces/default/configmaps?watch=1"
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        await wait_until(lambda: on_loop(server, lambda f: f.drop_watches()) == 1,
                         "the watch to be registered")
        msg = await asyncio.wait_for(ws.receive(), 10)
        assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == 1000


def test_delayed_bookmarks_come_late(make_server: Callable[..., ServerThread]) -> None:
    server = make_server(bookmark_interval_s=0.2)
    base = "/api/v1/namespaces/default/configmaps"

    def first_bookmark_after() -> float:
        since = call(server, "GET", base).json["metadata"]["resourceVersion"]
        path = f"{base}?watch=1&allowWatchBookmarks=true&resourceVersion={since}&timeoutSeconds=4"
        # another kind's write moves the store's revision past the watch's: bookmarks are due
        writer = threading.Timer(0.1, lambda: call(server, "POST",
                                                    "/api/v1/namespaces/default/secrets",
                                                    {"metadata": {"generateName": "s-"}}))
        host, port = host_port(server)
        conn = http.client.HTTPConnection(host, port, timeout=10)
        started = time.monotonic()
        writer.start()
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            while line := resp.readline():
                if line.strip() and json.loads(line)["type"] == "BOOKMARK":
                    return time.monotonic() - started
            return float("inf")
        finally:
            writer.join()
            conn.close()

    assert first_bookmark_after() < 1.0
    on_loop(server, lambda f: f.delay_bookmarks(1.0, resource="configmaps"))
    late = first_bookmark_after()
    assert 1.0 <= late < 2.0, late  # bookmarks stop 2 s before the watch's end
    assert injected(server, "bookmarks-delay") >= 1


# --- requests -----------------------------------------------------------------------------------

@needs_kubectl
def test_kubectl_sees_503_and_waits_out_429(server: ServerThread) -> None:
    on_loop(server, lambda f: f.inject_error(503, verb="list", resource="configmaps"))
    done = kubectl.run(server, "get", "configmaps")
    assert done.returncode == 1
    assert "(ServiceUnavailable)" in done.stderr, done.stderr
    assert kubectl.run(server, "get", "secrets").returncode == 0  # others are served
    on_loop(server, lambda f: f.clear())
    on_loop(server, lambda f: f.inject_error(429, verb="list", resource="configmaps", count=1,
                                             retry_after_seconds=1))
    started = time.monotonic()
    # client-go honours Retry-After and retries
    assert kubectl.run(server, "get", "configmaps").returncode == 0
    assert time.monotonic() - started >= 1.0
    assert injected(server, "error-429") == 1
    assert on_loop(server, lambda f: f.list_faults()) == []  # its count is spent


def test_kubernetes_package_gets_kubes_status_bodies(server: ServerThread) -> None:
    config = kubernetes.client.Configuration()
    config.host = server.url
    api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))
    api.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    expected = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                504: "Timeout"}
    for code, reason in expected.items():
        fid = on_loop(server, lambda f, code=code: f.inject_error(code, verb="patch",
                                                                  resource="configmaps"))
        with pytest.raises(kubernetes.client.ApiException) as err:
            api.patch_namespaced_config_map("c", "default", {"data": {"k": "v"}})
        assert err.value.status == code
        body = json.loads(err.value.body)
        assert (body["kind"], body["code"], body["reason"]) == ("Status", code, reason)
        if code == 429:
            assert err.value.headers["Retry-After"] == "1"
        on_loop(server, lambda f, fid=fid: f.clear(fid))
    api.patch_namespaced_config_map("c", "default", {"data": {"k": "v"}})


def test_a_reset_aborts_the_connection_unanswered(server: ServerThread) -> None:
    on_loop(server, lambda f: f.reset_connections(resource="configmaps", count=1))
    host, port = host_port(server)
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", "/api/v1/namespaces/default/configmaps")
    with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
        conn.getresponse()
    conn.close()
    assert call(server, "GET", "/api/v1/namespaces/default/configmaps").status == 200
    assert injected(server, "reset") == 1
    # recorded as unanswered (code 0), then the next list as answered
    assert server.server is not None
    lists = server.call(lambda: server.server.requests.select(  # type: ignore[union-attr]
        verb="list", resource="configmaps"))
    assert [(e.code, e.fault) for e in lists] == [(0, "reset"), (200, None)]


def test_rates_latency_and_the_request_log(server: ServerThread,
                                           caplog: pytest.LogCaptureFixture) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    on_loop(server, lambda f: f.inject_error(500, verb="get", resource="configmaps",
                                             rate=0.5))
    on_loop(server, lambda f: f.add_latency(0.2, verb="create", count=1))
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="kubewire.httplog"):
        assert call(server, "POST", base, {"metadata": {"name": "slow"}}).status == 201
        codes = [call(server, "GET", f"{base}/slow").status for _ in range(40)]
    assert time.monotonic() - started >= 0.2
    assert set(codes) == {200, 500}  # about half fail
    assert injected(server, "error-500") == codes.count(500)
    assert injected(server, "latency") == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "kubewire.httplog"]
    assert any('verb="POST"' in line and line.endswith('resp=201 fault="latency"')
               for line in lines), lines
    assert sum(line.endswith('resp=500 fault="error-500"') for line in lines) == codes.count(500)


# --- the store ----------------------------------------------------------------------------------

def test_a_failed_store_fails_writes_and_readyz_until_it_recovers(server: ServerThread) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    assert call(server, "POST", base, {"metadata": {"name": "a"}}).status == 201
    on_loop(server, lambda f: f.fail_store())
    reply = call(server, "GET", "/readyz?verbose")
    assert reply.status == 500
    assert "[-]etcd failed: reason withheld" in reply.body.decode()
    assert call(server, "GET", "/readyz/etcd").status == 500
    write = call(server, "POST", base, {"metadata": {"name": "b"}})
    assert write.status == 500
    status = write.json
    assert (status["kind"], status["code"], status["message"]) == (
        "Status", 500, "etcdserver: request timed out")
    assert call(server, "GET", f"{base}/a").status == 200  # reads still come from the cache
    assert call(server, "GET", f"{base}/b").status == 404  # nothing was written
    assert on_loop(server, lambda f: f.recover_store()) == 1
    assert call(server, "GET", "/readyz").status == 200
    assert call(server, "POST", base, {"metadata": {"name": "b"}}).status == 201
    assert injected(server, "storeFailure") == 1


# --- the clock ----------------------------------------------------------------------------------

def test_advancing_the_manual_clock_finishes_a_graceful_pod_deletion(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(manual_clock=True)
    base = "/api/v1/namespaces/default/pods"
    pod = {"metadata": {"name": "p"},  # scheduled: an unscheduled pod is deleted at once
           "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "x"}]}}
    assert call(server, "POST", base, pod).status == 201
    clock = call(server, "GET", "/kubewire/clock").json
    assert clock["manual"] is True
    assert call(server, "DELETE", f"{base}/p", {"gracePeriodSeconds": 30}).status == 200
    time.sleep(0.3)
    assert call(server, "GET", f"{base}/p").json["metadata"]["deletionTimestamp"]
    reply = call(server, "POST", "/kubewire/clock", {"advanceSeconds": 29})
    assert reply.json["fired"] == 0
    reply = call(server, "POST", "/kubewire/clock", {"advanceSeconds": 1})
    assert reply.json["fired"] == 1
    deadline = time.monotonic() + 10
    while call(server, "GET", f"{base}/p").status != 404:
        assert time.monotonic() < deadline, "the pod was not removed"
        time.sleep(0.02)


def test_namespace_deletion_waits_on_the_manual_clock(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(manual_clock=True)
    assert call(server, "POST", "/api/v1/namespaces", {"metadata": {"name": "gone"}}).status \
        == 201
    assert call(server, "DELETE", "/api/v1/namespaces/gone").status == 200
    time.sleep(0.3)
    assert call(server, "GET", "/api/v1/namespaces/gone").json["status"]["phase"] == \
        "Terminating"  # the controller's delay (1 s) has not passed on this clock
    assert call(server, "POST", "/kubewire/clock", {"advanceSeconds": 1}).json["fired"] == 1
    deadline = time.monotonic() + 10
    while call(server, "GET", "/api/v1/namespaces/gone").status != 404:
        assert time.monotonic() < deadline, "the namespace was not removed"
        time.sleep(0.02)


def test_a_real_clock_cannot_be_advanced(server: ServerThread) -> None:
    reply = call(server, "POST", "/kubewire/clock", {"advanceSeconds": 1})
    assert reply.status == 400
    assert reply.json["reason"] == "BadRequest"
    assert call(server, "GET", "/kubewire/clock").json["manual"] is False


# --- the admin endpoint -------------------------------------------------------------------------

def test_the_endpoint_adds_lists_and_clears(server: ServerThread) -> None:
    added = call(server, "POST", "/kubewire/faults",
                 {"type": "error", "verb": "patch", "resource": "pods", "code": 503,
                  "rate": 0.5})
    assert added.status == 201
    fault = added.json
    assert fault == {"id": fault["id"], "type": "error", "verb": "patch", "resource": "pods",
                     "code": 503, "rate": 0.5, "injected": 0}
    assert call(server, "GET", "/kubewire/faults").json == {"kind": "FaultList",
                                                              "items": [fault]}
    dropped = call(server, "POST", "/kubewire/faults", {"type": "dropWatches"})
    assert (dropped.status, dropped.json) == (200, {"type": "dropWatches", "dropped": 0})
    missing = call(server, "DELETE", "/kubewire/faults/nope")
    assert (missing.status, missing.json["reason"]) == (404, "NotFound")
    assert call(server, "DELETE", f"/kubewire/faults/{fault['id']}").json == {"cleared": 1}
    assert call(server, "GET", "/kubewire/faults").json["items"] == []


@pytest.mark.parametrize("spec", [
    {"type": "error", "code": 404},
    {"type": "error", "code": 503, "rate": 1.5},
    {"type": "error", "code": 503, "verb": "explode"},
    {"type": "error", "code": 503, "count": 0},
    {"type": "latency"},
    {"type": "latency", "seconds": -1},
    {"type": "stall", "labelSelector": "a in ("},
    {"type": "bookmarks", "mode": "later"},
    {"type": "bookmarks", "mode": "delay", "initialEventsEnd": True, "seconds": 1},
    {"type": "storeFailure", "resource": "pods"},
    {"type": "nope"},
    [],
    "error",
])
def test_bad_specs_get_400_and_change_nothing(server: ServerThread, spec: Any) -> None:
    reply = call(server, "POST", "/kubewire/faults", spec)
    assert reply.status == 400, reply.body
    status = reply.json
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "BadRequest", 400)
    assert call(server, "GET", "/kubewire/faults").json["items"] == []
    assert call(server, "GET", "/readyz").status == 200


def test_not_json_gets_400(server: ServerThread) -> None:
    reply = call(server, "POST", "/kubewire/faults", b"{not json",
                 {"Content-Type": "application/json"})
    assert reply.status == 400


def test_active_faults_are_bounded(server: ServerThread) -> None:
    spec = {"type": "latency", "seconds": 0, "verb": "get"}
    for _ in range(64):
        assert call(server, "POST", "/kubewire/faults", spec).status == 201
    over = call(server, "POST", "/kubewire/faults", spec)
    assert over.status == 400
    assert "64 faults are active already" in over.json["message"]
    assert len(call(server, "GET", "/kubewire/faults").json["items"]) == 64
    assert call(server, "DELETE", "/kubewire/faults").json == {"cleared": 64}
