"""Replicas: several real ``kubewire serve`` processes on one etcd serve one API.

Each replica has its own data dir, port and watch caches; etcd (a real member from
``tests/etcd_cluster.py``) is the only thing they share. Checked over plain HTTP, as any client
sees it: a write on one replica reaches watchers on every replica in the same order; a watch
resumes on one replica from a resourceVersion another gave; an RV-unset read on one replica
sees what another acknowledged; creates and stale updates racing on two replicas end as kube's
optimistic concurrency says (one 201 and one 409 AlreadyExists; one 200 and one 409 Conflict);
a replica starts on a populated etcd, and replicas starting at the same moment on an empty one
make each bootstrap object once, log no error and then stop writing (TLS replicas with their own
CAs too); replicas leave each other's ``default/kubernetes`` advertisement alone; CRDs, namespace
deletion, the ``kubernetes`` package and kubectl work across replicas. On a ``lagging`` replica
(its etcd link delays etcd's answers, so its cache is behind the other's writes for a moment)
reads, admission, updates, deletes, binding, eviction, scale and TokenRequest right after a
write on the other replica build on that write, as on kube.
"""

from __future__ import annotations

import itertools
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from tests.etcd_cluster import ETCD, Cluster, etcd_cluster
from tests.etcd_replicas import (
    LaggingLink,
    Replicas,
    etcd_keys,
    etcd_newest,
    log_problems,
)
from tests.reliability.proc import MARKER, Reply, Seen, ServerProcess, WatchReader, call

pytestmark = pytest.mark.skipif(ETCD is None, reason="no etcd binary (tools/ensure-etcd)")

CM = "/api/v1/namespaces/{ns}/configmaps"
CONFLICT = ("Operation cannot be fulfilled on configmaps \"{name}\": the object has been "
            "modified; please apply your changes to the latest version and try again")
INITIAL_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}
GATEWAY_CRDS = {"gatewayclasses.gateway.networking.k8s.io", "gateways.gateway.networking.k8s.io",
                "grpcroutes.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io",
                "referencegrants.gateway.networking.k8s.io"}
GATEWAY_KINDS = (("gatewayclasses", "v1"), ("gateways", "v1"), ("grpcroutes", "v1"),
                 ("httproutes", "v1"), ("referencegrants", "v1beta1"))
LAG_S = 0.3
_names = itertools.count()


@pytest.fixture(scope="module")
def etcd() -> Iterator[Cluster]:
    with etcd_cluster(1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def pair(etcd: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    with Replicas(tmp_path_factory.mktemp("pair"), etcd.endpoints, 2) as replicas:
        yield replicas


@pytest.fixture(scope="module")
def lagging(etcd: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    """Two replicas, the second one's etcd link delaying what etcd sends by ``LAG_S``: its
    cache learns the first one's writes that late, so reads and writes on it right after
    a write on the first meet a cache that is behind etcd."""
    link = LaggingLink(int(etcd.endpoints[0].rsplit(":", 1)[1]), LAG_S)
    # (another prefix: an API of their own, apart from ``pair``'s on the same etcd)
    replicas = Replicas(tmp_path_factory.mktemp("lagging"), etcd.endpoints, 2,
                        prefix="/lagging")
    args = replicas[1].args
    args[args.index("--etcd-servers") + 1] = link.url
    try:
        with replicas:
            yield replicas
    finally:
        link.close()


def _namespace(replicas: Replicas) -> str:
    name = f"rep-{next(_names)}"
    reply = call(replicas[0].port, "POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert reply.status == 201, reply
    return name


def _cm(name: str, marker: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "annotations": {MARKER: marker}}, "data": {"v": marker}}


def _rv(reply: Reply) -> int:
    return int(reply.body["metadata"]["resourceVersion"])


def _list_rv(port: int, path: str) -> int:
    reply = call(port, "GET", path)
    assert reply.status == 200, reply
    return _rv(reply)


def _writes_on_both(replicas: Replicas, ns: str, n: int) -> list[Seen]:
    """``n`` creates, patches and deletes of configmaps, alternating replicas, then a sentinel;
    the events they must produce, from their answers."""
    expected: list[Seen] = []
    path = CM.format(ns=ns)
    for i in range(n):
        port = replicas[i % 2].port
        name = f"cm-{i % 5}"
        marker = f"m{i}"
        if i % 3 == 0 or not any(s.key == f"{ns}/{name}" for s in expected):
            call(port, "DELETE", f"{path}/{name}")  # may be 404: not an event then
            reply = call(port, "POST", path, _cm(name, marker))
        else:
            reply = call(port, "PATCH", f"{path}/{name}",
                         {"metadata": {"annotations": {MARKER: marker}}},
                         "application/merge-patch+json")
        assert reply.status in (200, 201), reply
        expected.append(Seen(_rv(reply), "ADDED" if reply.status == 201 else "MODIFIED",
                             f"{ns}/{name}", marker))
    reply = call(replicas[1].port, "POST", path, _cm("sentinel", "sentinel"))
    assert reply.status == 201, reply
    expected.append(Seen(_rv(reply), "ADDED", f"{ns}/sentinel", "sentinel"))
    return expected


def _until_sentinel(events: list[Seen]) -> bool:
    return events[-1].marker == "sentinel"


def _port(server: ServerProcess) -> Callable[[], int]:
    return lambda: server.port


def test_a_write_on_one_replica_reaches_watchers_on_both_in_the_same_order(
        pair: Replicas) -> None:
    ns = _namespace(pair)
    path = CM.format(ns=ns)
    start = _list_rv(pair[0].port, path)
    readers = [WatchReader(_port(server), path, start, until=_until_sentinel)
               for server in pair.servers]
    expected = _writes_on_both(pair, ns, 30)
    for reader in readers:
        assert reader.wait(30), reader.errors
        reader.stop()
        assert reader.errors == []
    # deletes between the writes show up as DELETED events: compare without them, then whole
    a, b = readers[0].events, readers[1].events
    assert a == b
    assert [s for s in a if s.type != "DELETED"] == expected
    revisions = [s.revision for s in a]
    assert revisions == sorted(set(revisions))


def test_a_watch_resumes_on_another_replica_from_a_revision_the_first_gave(
        pair: Replicas) -> None:
    ns = _namespace(pair)
    path = CM.format(ns=ns)
    start = _list_rv(pair[0].port, path)
    first = WatchReader(_port(pair[0]), path, start, until=lambda evs: len(evs) == 12)
    whole = WatchReader(_port(pair[0]), path, start, until=_until_sentinel)
    expected = _writes_on_both(pair, ns, 30)
    assert first.wait(30) and whole.wait(30), (first.errors, whole.errors)
    first.stop()
    whole.stop()
    resumed = WatchReader(_port(pair[1]), path, first.last, until=_until_sentinel)
    assert resumed.wait(30), resumed.errors
    resumed.stop()
    assert first.errors == resumed.errors == whole.errors == []
    assert first.events + resumed.events == whole.events  # no gap, no duplicate
    assert [s for s in whole.events if s.type != "DELETED"] == expected


def test_an_rv_unset_read_on_one_replica_sees_what_another_acknowledged(pair: Replicas) -> None:
    _read_after_write(pair, 40, alternate=True)


def test_an_rv_unset_read_on_a_lagging_replica_waits_for_what_another_acknowledged(
        lagging: Replicas) -> None:
    _read_after_write(lagging, 4, alternate=False)


def _read_after_write(pair: Replicas, n: int, *, alternate: bool) -> None:
    ns = _namespace(pair)
    path = CM.format(ns=ns)
    for i in range(n):
        writer, reader = (pair[0], pair[1]) if i % 2 == 0 or not alternate else (pair[1], pair[0])
        created = call(writer.port, "POST", path, _cm(f"read-{i}", f"r{i}"))
        assert created.status == 201, created
        got = call(reader.port, "GET", f"{path}/read-{i}")
        assert got.status == 200, got
        assert _rv(got) == _rv(created)
        listed = call(reader.port, "GET", path)
        assert f"read-{i}" in {item["metadata"]["name"] for item in listed.body["items"]}
        assert _rv(listed) >= _rv(created)
        patched = call(writer.port, "PATCH", f"{path}/read-{i}", {"data": {"v": "changed"}},
                       "application/merge-patch+json")
        assert patched.status == 200, patched
        got = call(reader.port, "GET", f"{path}/read-{i}")
        assert (_rv(got), got.body["data"]) == (_rv(patched), {"v": "changed"})
        deleted = call(writer.port, "DELETE", f"{path}/read-{i}")
        assert deleted.status == 200, deleted
        assert call(reader.port, "GET", f"{path}/read-{i}").status == 404


def _at_once(*calls: Callable[[], Reply]) -> list[Reply]:
    """Run the calls on threads released together; their replies in order."""
    barrier = threading.Barrier(len(calls))
    replies: list[Reply | None] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        replies[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert all(r is not None for r in replies)
    return [r for r in replies if r is not None]


def test_the_same_create_on_two_replicas_gives_one_201_and_one_409(pair: Replicas) -> None:
    ns = _namespace(pair)
    path = CM.format(ns=ns)
    for i in range(15):
        name = f"race-{i}"
        replies = _at_once(*(lambda s=s, name=name: call(s.port, "POST", path,
                                                         _cm(name, str(s.port)))
                             for s in pair.servers))
        statuses = sorted(r.status for r in replies)
        assert statuses == [201, 409], replies
        loser = next(r for r in replies if r.status == 409)
        assert loser.body["reason"] == "AlreadyExists"
        assert loser.body["message"] == f'configmaps "{name}" already exists'
        assert loser.body["details"] == {"name": name, "kind": "configmaps"}
        winner = next(r for r in replies if r.status == 201)
        for server in pair.servers:  # both replicas hold the winner's object
            got = call(server.port, "GET", f"{path}/{name}")
            assert got.body["data"] == winner.body["data"]


def test_stale_updates_racing_on_two_replicas_give_one_409_conflict(pair: Replicas) -> None:
    ns = _namespace(pair)
    path = CM.format(ns=ns)
    name = "contended"
    created = call(pair[0].port, "POST", path, _cm(name, "0"))
    assert created.status == 201
    winners: list[int] = []
    for i in range(15):
        current = call(pair[i % 2].port, "GET", f"{path}/{name}").body

        def put(server: ServerProcess, obj: dict[str, Any] = current, i: int = i) -> Reply:
            return call(server.port, "PUT", f"{path}/{name}",
                        {**obj, "data": {"v": f"{i}-{server.port}"}})

        replies = _at_once(*(lambda s=s: put(s) for s in pair.servers))
        assert sorted(r.status for r in replies) == [200, 409], replies
        loser = next(r for r in replies if r.status == 409)
        assert loser.body["reason"] == "Conflict"
        assert loser.body["message"] == CONFLICT.format(name=name)
        winners.append(_rv(next(r for r in replies if r.status == 200)))
    assert winners == sorted(set(winners))
    final = [call(s.port, "GET", f"{path}/{name}").body for s in pair.servers]
    assert final[0] == final[1]
    assert _rv(Reply(200, final[0])) == winners[-1]


def _bootstrap_state(port: int) -> dict[str, Any]:
    """What replicas write at start, as one replica serves it."""
    def items(path: str) -> list[dict[str, Any]]:
        reply = call(port, "GET", path)
        assert reply.status == 200, reply
        return list(reply.body["items"])

    crds = items("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    return {
        "namespaces": {(n["metadata"]["name"], n["metadata"]["resourceVersion"])
                       for n in items("/api/v1/namespaces")},
        "crds": {(c["metadata"]["name"], c["metadata"]["uid"]) for c in crds},
        "services": [(s["metadata"]["namespace"], s["metadata"]["name"])
                     for s in items("/api/v1/services")],
        "slices": [(s["metadata"]["namespace"], s["metadata"]["name"])
                   for s in items("/apis/discovery.k8s.io/v1/endpointslices")],
        "accounts": sorted((a["metadata"]["namespace"], a["metadata"]["name"])
                           for a in items("/api/v1/serviceaccounts")),
        "priorityclasses": {(p["metadata"]["name"], p["metadata"]["uid"])
                            for p in items("/apis/scheduling.k8s.io/v1/priorityclasses")},
    }


# What the replicas make at start and would rewrite at each other if they disagreed. Leases
# (the controller manager's election, the replicas' master leases) are renewed every few
# seconds by design, as on a cluster, so the store's revision never holds still.
_BOOTSTRAP_LISTS = ("/api/v1/namespaces", "/api/v1/services", "/api/v1/serviceaccounts",
                    "/api/v1/configmaps", "/apis/discovery.k8s.io/v1/endpointslices",
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    "/apis/scheduling.k8s.io/v1/priorityclasses")


def _objects_revision(port: int) -> int:
    """The newest resourceVersion among the objects the replicas make at start."""
    newest = 0
    for path in _BOOTSTRAP_LISTS:
        reply = call(port, "GET", path)
        assert reply.status == 200, reply
        for item in reply.body["items"]:
            newest = max(newest, int(item["metadata"]["resourceVersion"]))
    return newest


def _settled_revision(port: int, quiet_s: float = 2.0, timeout_s: float = 30.0) -> int:
    """The newest revision of the start-up objects once none changed for ``quiet_s`` (fails
    after ``timeout_s``: replicas that keep writing at each other never settle)."""
    deadline = time.monotonic() + timeout_s
    last = _objects_revision(port)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = _objects_revision(port)
        if now == last:
            return now
        last = now
    raise AssertionError(f"replicas still writing after {timeout_s}s (revision {last})")


def _check_bootstrap(replicas: Replicas) -> dict[str, Any]:
    states = [_bootstrap_state(port) for port in replicas.ports]
    assert all(state == states[0] for state in states), states
    state = states[0]
    assert {name for name, _ in state["namespaces"]} >= INITIAL_NAMESPACES
    assert {name for name, _ in state["crds"]} >= GATEWAY_CRDS
    assert state["services"] == [("default", "kubernetes")]
    assert state["slices"] == [("default", "kubernetes")]
    assert state["accounts"] == sorted((ns, "default") for ns, _ in state["namespaces"])
    assert {name for name, _ in state["priorityclasses"]} == {"system-node-critical",
                                                             "system-cluster-critical"}
    for server in replicas.servers:
        # every pre-installed kind is served, from a cache of its own, on every replica
        for kind, version in GATEWAY_KINDS:
            path = f"/apis/gateway.networking.k8s.io/{version}/{kind}"
            assert call(server.port, "GET", path).status == 200, (server.port, path)
        assert log_problems(server) == [], server.log_tail()
    return state


def test_replicas_starting_together_on_an_empty_etcd_make_each_object_once(
        tmp_path: Path) -> None:
    with etcd_cluster(1) as etcd, Replicas(tmp_path, etcd.endpoints, 3) as replicas:
        revision = _settled_revision(replicas[0].port)
        _check_bootstrap(replicas)
        assert all(_objects_revision(port) == revision for port in replicas.ports)
        # the kubernetes endpoint points at one live replica
        slice_ = call(replicas[0].port, "GET", "/apis/discovery.k8s.io/v1/namespaces/default/"
                                               "endpointslices/kubernetes").body
        assert slice_["ports"][0]["port"] in replicas.ports


def test_a_replica_starts_on_a_populated_etcd(tmp_path: Path) -> None:
    with etcd_cluster(1) as etcd:
        replicas = Replicas(tmp_path, etcd.endpoints, 2)
        try:
            first = replicas[0].start()
            ns = f"pop-{next(_names)}"
            assert call(first.port, "POST", "/api/v1/namespaces",
                        {"metadata": {"name": ns}}).status == 201
            for i in range(20):
                assert call(first.port, "POST", CM.format(ns=ns),
                            _cm(f"cm-{i}", str(i))).status == 201
            _settled_revision(first.port)
            before = _bootstrap_state(first.port)
            listed = call(first.port, "GET", CM.format(ns=ns)).body["items"]
            replicas[1].start()
            _settled_revision(first.port)
            after = _check_bootstrap(replicas)
            # the second replica re-made nothing (same uids and revisions)
            assert (after["namespaces"], after["crds"]) == (before["namespaces"], before["crds"])
            assert after["priorityclasses"] == before["priorityclasses"]
            assert call(replicas[1].port, "GET", CM.format(ns=ns)).body["items"] == listed
        finally:
            replicas.stop()


def test_a_users_edit_of_the_kubernetes_endpoint_is_put_back_once(pair: Replicas) -> None:
    """Replicas leave each other's advertisement alone but undo a user's, and then settle."""
    path = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes"
    edited = call(pair[0].port, "PATCH", f"{path}?fieldManager=kubectl-patch",
                  {"ports": [{"name": "https", "port": 1, "protocol": "TCP"}]},
                  "application/merge-patch+json")
    assert edited.status == 200, edited
    revision = _settled_revision(pair[0].port)
    for server in pair.servers:
        got = call(server.port, "GET", path).body
        assert got["ports"][0]["port"] in pair.ports
        assert _rv(Reply(200, got)) <= revision
        managers = {e["manager"] for e in got["metadata"]["managedFields"]}
        assert managers == {"kube-apiserver"}


def test_tls_replicas_with_their_own_cas_do_not_rewrite_each_others_root_ca(
        tmp_path: Path) -> None:
    """Each replica made its own DIR/pki (a misconfiguration: clients of one cannot verify the
    other), so each has another kube-root-ca.crt to publish: the one written stands until a
    replica starts again, instead of the two putting theirs back at each other."""
    with etcd_cluster(1) as etcd, Replicas(tmp_path, etcd.endpoints, 2, tls=True) as replicas:
        # the ConfigMaps settle (Leases are renewed every few seconds by design)
        deadline = time.monotonic() + 30
        last = etcd_newest(etcd.endpoints, "/registry/configmaps/")
        while True:
            time.sleep(2)
            now = etcd_newest(etcd.endpoints, "/registry/configmaps/")
            if now == last:
                break
            assert time.monotonic() < deadline, f"replicas still writing at revision {now}"
            last = now
        keys = etcd_keys(etcd.endpoints, "/registry/configmaps/")
        assert {k for k in keys if k.endswith("/kube-root-ca.crt")} == {
            f"/registry/configmaps/{ns}/kube-root-ca.crt" for ns in INITIAL_NAMESPACES}
        for server in replicas.servers:
            assert log_problems(server) == [], server.log_tail()


def _wait(check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_crd_created_on_one_replica_is_served_by_every_replica(pair: Replicas) -> None:
    group, plural = f"r{next(_names)}.replicas.example.com", "widgets"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"{plural}.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": plural, "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {
                                      "type": "object",
                                      "x-kubernetes-preserve-unknown-fields": True}}}]}}
    assert call(pair[0].port, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                crd).status == 201
    path = f"/apis/{group}/v1/namespaces/default/{plural}"
    for server in pair.servers:
        _wait(lambda s=server: call(s.port, "GET", path).status == 200,
              f"{plural}.{group} served on {server.port}")
    made = call(pair[1].port, "POST", path, {"apiVersion": f"{group}/v1", "kind": "Widget",
                                             "metadata": {"name": "w"}, "spec": {"n": 1}})
    assert made.status == 201, made
    got = call(pair[0].port, "GET", f"{path}/w")
    assert (got.status, _rv(got)) == (200, _rv(made))
    assert call(pair[1].port, "DELETE", f"/apis/apiextensions.k8s.io/v1/"
                                        f"customresourcedefinitions/{plural}.{group}").status == 200
    for server in pair.servers:
        _wait(lambda s=server: call(s.port, "GET", path).status == 404,
              f"{plural}.{group} no longer served on {server.port}")


def test_a_namespace_deleted_on_one_replica_is_emptied_and_removed(pair: Replicas) -> None:
    ns = _namespace(pair)
    for i in range(30):
        assert call(pair[i % 2].port, "POST", CM.format(ns=ns), _cm(f"cm-{i}", str(i))).status \
            == 201
    assert call(pair[1].port, "DELETE", f"/api/v1/namespaces/{ns}").status == 200
    for server in pair.servers:
        _wait(lambda s=server: call(s.port, "GET", f"/api/v1/namespaces/{ns}").status == 404,
              f"namespace {ns} removed, as {server.port} sees it")
        assert call(server.port, "GET", CM.format(ns=ns)).body["items"] == []
        assert log_problems(server) == [], server.log_tail()


def test_a_write_on_one_replica_right_after_anothers_builds_on_it(lagging: Replicas) -> None:
    """Admission and the update/delete paths see what another replica acknowledged (kube's
    NamespaceLifecycle looks a namespace up live when its cache lacks it; GuaranteedUpdate
    reads etcd, or retries a compare a stale cached object failed)."""
    pair = lagging
    for i in range(4):
        first, second = (pair[0], pair[1]) if i % 2 == 0 else (pair[1], pair[0])
        ns = f"fresh-{next(_names)}"
        assert call(first.port, "POST", "/api/v1/namespaces",
                    {"metadata": {"name": ns}}).status == 201
        path = CM.format(ns=ns)
        created = call(second.port, "POST", path, _cm("cm", "0"))
        assert created.status == 201, created
        patched = call(first.port, "PATCH", f"{path}/cm", {"data": {"v": "1"}},
                       "application/merge-patch+json")
        assert patched.status == 200, patched
        put = call(second.port, "PUT", f"{path}/cm", {**patched.body, "data": {"v": "2"}})
        assert put.status == 200, put
        unconditional = call(first.port, "PUT", f"{path}/cm",
                             {**_cm("cm", "3"), "metadata": {"name": "cm"}})
        assert unconditional.status == 200, unconditional
        deleted = call(second.port, "DELETE", f"{path}/cm")
        assert deleted.status == 200, deleted
        assert call(first.port, "DELETE", f"/api/v1/namespaces/{ns}").status == 200


def test_binding_and_eviction_on_one_replica_right_after_a_create_on_another(
        lagging: Replicas) -> None:
    pair = lagging
    pods = "/api/v1/namespaces/default/pods"
    for i in range(4):
        first, second = (pair[0], pair[1]) if i % 2 == 0 else (pair[1], pair[0])
        name = f"pod-{next(_names)}"
        made = call(first.port, "POST", pods, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]}})
        assert made.status == 201, made
        bound = call(second.port, "POST", f"{pods}/{name}/binding", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"kind": "Node", "name": "n1"}})
        assert bound.status == 201, bound
        evicted = call(first.port, "POST", f"{pods}/{name}/eviction", {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name},
            "deleteOptions": {"gracePeriodSeconds": 0}})
        assert evicted.status == 201, evicted


def test_the_kubernetes_client_on_two_replicas_sees_one_api(pair: Replicas) -> None:
    """The ``kubernetes`` package, one ApiClient per replica: a list on one replica, a watch
    from its resourceVersion on the other, writes on both; kubectl reads the same from each."""
    ns = _namespace(pair)
    apis = [client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{s.port}"))
            for s in pair.servers]
    try:
        core = [client.CoreV1Api(api) for api in apis]
        start = core[0].list_namespaced_config_map(ns).metadata.resource_version
        for i in range(6):
            core[i % 2].create_namespaced_config_map(ns, client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=f"k-{i}"), data={"i": str(i)}))
        core[1].patch_namespaced_config_map("k-0", ns, {"data": {"i": "changed"}})
        core[0].delete_namespaced_config_map("k-1", ns)
        seen: list[tuple[str, str]] = []
        stream = watch.Watch()
        for event in stream.stream(core[1].list_namespaced_config_map, ns,
                                   resource_version=start, timeout_seconds=30):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 8:
                stream.stop()
        assert seen == [*(("ADDED", f"k-{i}") for i in range(6)), ("MODIFIED", "k-0"),
                        ("DELETED", "k-1")]
        names = [[c.metadata.name for c in api.list_namespaced_config_map(ns).items]
                 for api in core]
        assert names[0] == names[1] == ["k-0", "k-2", "k-3", "k-4", "k-5"]
        for server in pair.servers:
            out = subprocess.run(["kubectl", "--server", f"http://127.0.0.1:{server.port}",
                                  "get", "configmaps", "-n", ns, "-o", "name"],
                                 capture_output=True, text=True, timeout=60, check=True)
            assert out.stdout.split() == [f"configmap/{n}" for n in names[0]]
    finally:
        for api in apis:
            api.close()


def test_scale_and_token_requests_on_one_replica_right_after_a_create_on_another(
        lagging: Replicas) -> None:
    pair = lagging
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    accounts = "/api/v1/namespaces/default/serviceaccounts"
    for i in range(4):
        first, second = (pair[0], pair[1]) if i % 2 == 0 else (pair[1], pair[0])
        name = f"app-{next(_names)}"
        made = call(first.port, "POST", deployments, {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
        assert made.status == 201, made
        scale = call(second.port, "GET", f"{deployments}/{name}/scale")
        assert (scale.status, scale.body["spec"]) == (200, {"replicas": 1}), scale
        patched = call(first.port, "PATCH", f"{deployments}/{name}",
                       {"spec": {"replicas": 2}}, "application/merge-patch+json")
        assert patched.status == 200, patched
        scale = call(second.port, "GET", f"{deployments}/{name}/scale")
        assert scale.body["spec"] == {"replicas": 2}, scale
        scaled = call(second.port, "PATCH", f"{deployments}/{name}/scale",
                      {"spec": {"replicas": 3}}, "application/merge-patch+json")
        assert scaled.status == 200, scaled
        account = call(first.port, "POST", accounts, {"metadata": {"name": name}})
        assert account.status == 201, account
        token = call(second.port, "POST", f"{accounts}/{name}/token",
                     {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"audiences": ["x"]}})
        assert token.status == 201, token
