"""Replicas when etcd fails: two ``kubewire serve`` replicas on a real three-member etcd cluster.

A follower killed while both replicas write changes nothing a client sees; the leader killed, the
writes in flight get etcd's 500, as from kube. Two down (no quorum): a write gets a ``Status``
(kube's: 500 with etcd's own text, or 504 Timeout) within a bounded time, never a hang past the
request deadline, RV=0 reads are still served from the cache, and ``/readyz`` turns red as kube's
does. Members back: the replicas recover by themselves, and their watchers, which never
stopped, hold every event etcd has, in order, none twice.
"""

from __future__ import annotations

import asyncio
import http.client
import itertools
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubewire.storage.etcd.client import EtcdClient, EtcdConfig
from tests.etcd_cluster import ETCD, Cluster, Member, etcd_cluster
from tests.etcd_replicas import Replicas, etcd_history
from tests.reliability.proc import HOST, MARKER, Reply, Seen, WatchReader, call

pytestmark = pytest.mark.skipif(ETCD is None, reason="no etcd binary (tools/ensure-etcd)")

REQUEST_TIMEOUT_S = 20.0
NS = "outage"
PATH = f"/api/v1/namespaces/{NS}/configmaps"
ETCD_FAILED = "[-]etcd failed: reason withheld"


def _cm(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "annotations": {MARKER: name}}}


def _text(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S + 30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def _timed(port: int, method: str, path: str, body: dict[str, object] | None = None
           ) -> tuple[Reply, float]:
    started = time.monotonic()
    reply = call(port, method, path, body)
    return reply, time.monotonic() - started


def _is_storage_failure(reply: Reply) -> bool:
    """kube's answer when etcd cannot answer: a 500 carrying etcd's (or gRPC's) text and no
    reason (``ErrorToAPIStatus``), or the 504 Timeout of a request deadline."""
    body = reply.body
    if body.get("kind") != "Status" or body.get("status") != "Failure":
        return False
    if reply.status == 500:
        return "reason" not in body and "Internal error" not in body["message"] and \
            bool(body["message"])
    return reply.status == 504 and body.get("reason") == "Timeout"


def _leader(cluster: Cluster) -> Member:
    """The member etcd's members say leads now."""
    async def find() -> Member:
        by_id: dict[int, Member] = {}
        leader = 0
        for member in cluster.members:
            async with EtcdClient(EtcdConfig([member.client_url], timeout=5)) as client:
                status = await client.status()
                by_id[status.member_id] = member
                leader = status.leader
        return by_id[leader]
    return asyncio.run(find())


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with etcd_cluster(3) as etcd:
        yield etcd


def test_losing_a_member_or_the_leader_and_then_quorum(
        cluster: Cluster, tmp_path: Path) -> None:
    extra = ["--request-timeout", f"{REQUEST_TIMEOUT_S:g}s"]
    with Replicas(tmp_path, cluster.endpoints, 2, extra=extra) as replicas:
        a, b = replicas.servers
        assert call(a.port, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}}).status == 201
        start = int(call(a.port, "GET", PATH).body["metadata"]["resourceVersion"])
        readers = [WatchReader(lambda s=s: s.port, PATH, start,
                               until=lambda evs: evs[-1].marker == "sentinel")
                   for s in replicas.servers]
        acked: list[Seen] = []

        def write(port: int, name: str) -> Reply:
            reply = call(port, "POST", PATH, _cm(name))
            if reply.status == 201:
                acked.append(Seen(int(reply.body["metadata"]["resourceVersion"]), "ADDED",
                                  f"{NS}/{name}", name))
            return reply

        for i in range(5):
            assert write(replicas[i % 2].port, f"before-{i}").status == 201

        names = itertools.count()

        def during(action: Callable[[], None]) -> list[Reply]:
            """Both replicas write without pause while ``action`` runs; their replies."""
            stop = threading.Event()
            replies: list[Reply] = []

            def keep_writing(k: int) -> None:
                i = 0
                while not stop.is_set():
                    replies.append(write(replicas[k].port, f"writer-{k}-{next(names)}-{i}"))
                    i += 1

            writers = [threading.Thread(target=keep_writing, args=(k,)) for k in range(2)]
            for thread in writers:
                thread.start()
            time.sleep(0.5)
            action()
            time.sleep(2)
            stop.set()
            for thread in writers:
                thread.join(60)
            assert len(replies) > 20
            return replies

        # a follower (not the member the replicas' channel picked first either) killed while
        # both replicas write: nothing visible changes
        leader = _leader(cluster)
        follower = next(m for m in cluster.members[1:] if m is not leader)
        replies = during(lambda: follower.stop(signal.SIGKILL))
        assert all(r.status == 201 for r in replies), [r for r in replies if r.status != 201]
        cluster.restart(follower)
        # the leader killed: the writes in flight get a 500 with etcd's (or gRPC's) text, as
        # kube relays it (they may or may not have been applied), for about an election; the
        # rest go on
        leader = _leader(cluster)
        replies = during(lambda: leader.stop(signal.SIGKILL))
        failed = [r for r in replies if r.status != 201]
        assert all(_is_storage_failure(r) for r in failed), failed
        deadline = time.monotonic() + 20  # writes go on by themselves once etcd elected
        for k, server in enumerate(replicas.servers):
            while (reply := write(server.port, f"recovered-{k}-{next(names)}")).status != 201:
                assert _is_storage_failure(reply), reply
                failed.append(reply)
                assert time.monotonic() < deadline, reply
        for i in range(10):
            reply = write(replicas[i % 2].port, f"one-down-{i}")
            assert reply.status == 201, reply
        for server in replicas.servers:
            assert _text(server.port, "/readyz") == (200, "ok")

        second = next(m for m in cluster.members if m is not leader)
        second.stop()  # no quorum
        reply, seconds = _timed(a.port, "POST", PATH, _cm("no-quorum"))
        assert _is_storage_failure(reply), reply
        assert seconds < REQUEST_TIMEOUT_S + 2
        reply, seconds = _timed(b.port, "GET", f"{PATH}/before-0")  # a linearizable read
        assert reply.status == 200 or _is_storage_failure(reply), reply
        assert seconds < REQUEST_TIMEOUT_S + 2
        listed = call(b.port, "GET", f"{PATH}?resourceVersion=0")  # from the cache
        assert listed.status == 200
        assert {i["metadata"]["name"] for i in listed.body["items"]} >= {"before-0", "one-down-0"}
        for server in replicas.servers:
            deadline = time.monotonic() + 15
            while (found := _text(server.port, "/readyz"))[0] != 500:
                assert time.monotonic() < deadline, found
                time.sleep(0.2)
            assert ETCD_FAILED in found[1].splitlines()
            assert found[1].endswith("readyz check failed\n")
            status, text = _text(server.port, "/readyz/etcd")
            assert status == 500
            assert text.startswith("internal server error: error getting data from etcd: ")
            # kube's texts: Go's context error at the check's deadline, or etcd's own
            reason = text.removeprefix("internal server error: error getting data from etcd: ")
            assert reason.rstrip("\n") == "context deadline exceeded" or \
                reason.startswith("etcdserver: "), text

        cluster.restart(leader)
        cluster.restart(second)
        deadline = time.monotonic() + 30
        for server in replicas.servers:  # by themselves, with no restart
            while _text(server.port, "/readyz") != (200, "ok"):
                assert time.monotonic() < deadline, server.log_tail()
                time.sleep(0.2)
        for i in range(10):
            reply = write(replicas[i % 2].port, f"after-{i}")
            assert reply.status == 201, reply
        assert write(b.port, "sentinel").status == 201
        for reader in readers:
            assert reader.wait(30), reader.errors
            reader.stop()
        events, _ = etcd_history(cluster.endpoints, ["configmaps"], since=start)
        history = [Seen(e.revision, e.type, e.key, e.marker) for e in events
                   if e.key.startswith(NS + "/")]
        for reader in readers:  # every event, in order, none twice, on both replicas
            assert reader.errors == []
            assert reader.events == history
        assert set(acked) <= set(history)
        # the writes answered 500 may or may not have been applied, as with kube
        assert len(history) - len(acked) <= len(failed) + 1
