"""Replicas when etcd fails: two ``kubewire serve`` replicas on a real three-member etcd cluster.

One member down changes nothing a client sees. Two down (no quorum): a write gets a ``Status``
(kube's: 500 with etcd's own text, or 504 Timeout) within a bounded time, never a hang past the
request deadline, RV=0 reads are still served from the cache, and ``/readyz`` turns red as kube's
does. Members back: the replicas recover by themselves, and their watchers, which never
stopped, hold every event etcd has, in order, none twice.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.etcd_cluster import ETCD, Cluster, etcd_cluster
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
    """kube's answer when etcd cannot answer: a 500 carrying etcd's text and no reason
    (``ErrorToAPIStatus``), or the 504 Timeout of a request deadline."""
    body = reply.body
    if body.get("kind") != "Status" or body.get("status") != "Failure":
        return False
    if reply.status == 500:
        return "reason" not in body and "Internal error" not in body["message"] and \
            body["message"].startswith("etcdserver: ")
    return reply.status == 504 and body.get("reason") == "Timeout"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with etcd_cluster(3) as etcd:
        yield etcd


def test_losing_one_member_changes_nothing_and_losing_quorum_fails_writes_in_bounded_time(
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

        cluster.members[0].stop()  # one of three: nothing visible changes
        for i in range(20):
            reply = write(replicas[i % 2].port, f"one-down-{i}")
            assert reply.status == 201, reply
        for server in replicas.servers:
            assert _text(server.port, "/readyz") == (200, "ok")

        cluster.members[1].stop()  # no quorum
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

        cluster.restart(cluster.members[0])
        cluster.restart(cluster.members[1])
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
        # the write refused without quorum may or may not have been applied, as with kube
        assert len(history) - len(acked) in (0, 1)
