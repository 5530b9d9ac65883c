"""What is particular to kubewire on etcd, seen from outside: real clients (kubectl, HTTP) on one
side, ``etcdctl`` (Debian's etcd-client, ETCDCTL_API=3) on the other, a real etcd per test
(``tests/etcd_cluster``: one member, three with ``KUBEWIRE_TEST_STORAGE=etcd-3``) and the
server under kube's own prefix, ``/registry``.

- Objects are where kube-apiserver v1.32 keeps them (``/registry/configmaps/<ns>/<name>``,
  ``services/specs``, ``minions``, ``ingress``, ``deployments`` without a group segment, a
  custom resource under ``<group>/<plural>``), as kube's JSON (``--storage-media-type
  application/json``): ``kind`` and ``apiVersion`` first, no ``resourceVersion`` nor
  ``selfLink``, a newline at the end, a custom resource's keys sorted.
- resourceVersions are etcd's revisions: an object's is its ``mod_revision``, a list's the
  revision a range at the same moment reports.
- A write made beside kubewire (``etcdctl put``) reaches its watchers with its revision; a
  DELETE event carries the object's last state at the delete's revision.
- Once etcd is compacted (a short ``--history-max-changes``), an Exact list and a watch at a
  compacted revision get kube's 410s.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubewire.storage.base import Retention
from tests.etcd_cluster import ETCD, Cluster, etcd_cluster
from tests.integration import kubectl
from tests.integration.custom_kinds import GIZMO, serve
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, get, list_rv, ok, rv_of, wait_for, watch
from tests.storage_choice import chosen

ETCDCTL = shutil.which("etcdctl")
pytestmark = [
    pytest.mark.skipif(ETCD is None or ETCDCTL is None,
                       reason="no etcd/etcdctl (tools/ensure-etcd installs Debian's etcd-server "
                              "and etcd-client)"),
    kubectl.needs_kubectl,
]
NS = "default"


@pytest.fixture
def etcd() -> Iterator[Cluster]:
    """One member; three under ``KUBEWIRE_TEST_STORAGE=etcd-3`` (``make test-etcd``)."""
    with etcd_cluster(3 if chosen() == "etcd-3" else 1) as cluster:
        yield cluster


@pytest.fixture
def on_etcd(etcd: Cluster, make_server: Callable[..., ServerThread],
            ) -> Callable[..., ServerThread]:
    """Start a server on this test's etcd under ``/registry`` (overrides as ``make_server``)."""
    def start(**overrides: Any) -> ServerThread:
        return make_server(storage="etcd", etcd_servers=tuple(etcd.endpoints),
                           etcd_prefix="/registry", **overrides)
    return start


def etcdctl(etcd: Cluster, *args: str) -> dict[str, Any]:
    """``etcdctl -w json ARGS`` against the test's etcd, decoded."""
    assert ETCDCTL is not None
    done = subprocess.run([ETCDCTL, "--endpoints", ",".join(etcd.endpoints), "-w", "json", *args],
                          env={**os.environ, "ETCDCTL_API": "3"}, capture_output=True,
                          text=True, timeout=30, check=False)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def kv_at(etcd: Cluster, key: str) -> dict[str, Any]:
    """The key's kv (key and value decoded); fails when it is absent."""
    found = etcdctl(etcd, "get", key)
    assert found.get("kvs"), f"{key} is not in etcd"
    kv = dict(found["kvs"][0])
    kv["key"] = base64.b64decode(kv["key"]).decode()
    kv["value"] = base64.b64decode(kv.get("value", "")).decode()
    return kv


def keys_under(etcd: Cluster, prefix: str) -> list[str]:
    found = etcdctl(etcd, "get", prefix, "--prefix", "--keys-only")
    return [base64.b64decode(kv["key"]).decode() for kv in found.get("kvs", ())]


def apply(server: ServerThread, obj: dict[str, Any]) -> dict[str, Any]:
    """``kubectl create -o json`` of ``obj``; the object kubewire answered."""
    created: dict[str, Any] = json.loads(kubectl.ok(server, "create", "-o", "json", "-f", "-",
                                                    stdin=json.dumps(obj)))
    return created


def pairs_sorted(text: str) -> bool:
    """Every JSON object in ``text`` has its keys in sorted order (Go's map encoding)."""
    in_order = True

    def check(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal in_order
        keys = [k for k, _ in pairs]
        in_order = in_order and keys == sorted(keys)
        return dict(pairs)

    json.loads(text, object_pairs_hook=check)
    return in_order


def test_a_configmap_is_stored_as_kube_stores_it(on_etcd: Callable[..., ServerThread],
                                                  etcd: Cluster) -> None:
    server = on_etcd()
    made = apply(server, {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "settings", "namespace": NS},
                          "data": {"mode": "<fast> & loud"}})
    kv = kv_at(etcd, f"/registry/configmaps/{NS}/settings")
    value = kv["value"]
    assert value.startswith('{"kind":"ConfigMap","apiVersion":"v1",')
    assert value.endswith("}\n")
    assert value.count("\n") == 1
    assert "resourceVersion" not in value and "selfLink" not in value
    assert "\\u003cfast\\u003e \\u0026 loud" in value  # Go's json.Encoder escapes <, > and &
    stored = json.loads(value)
    assert stored["data"] == {"mode": "<fast> & loud"}
    assert stored["metadata"]["uid"] == made["metadata"]["uid"]
    assert int(made["metadata"]["resourceVersion"]) == int(kv["mod_revision"])
    assert int(kv["create_revision"]) == int(kv["mod_revision"])
    read = json.loads(kubectl.ok(server, "get", "configmap", "settings", "-o", "json"))
    assert read["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]

    kubectl.ok(server, "label", "configmap", "settings", "tier=gold")
    updated = json.loads(kubectl.ok(server, "get", "configmap", "settings", "-o", "json"))
    kv = kv_at(etcd, f"/registry/configmaps/{NS}/settings")
    assert int(updated["metadata"]["resourceVersion"]) == int(kv["mod_revision"])
    assert int(kv["version"]) == 2
    assert json.loads(kv["value"])["metadata"]["labels"] == {"tier": "gold"}


def rv_matches_mod_revision(server: ServerThread, etcd: Cluster, obj: dict[str, Any],
                            key: str) -> bool:
    """kubectl's resourceVersion of ``obj`` is ``key``'s mod_revision. A controller may write
    the object meanwhile (a Deployment's status): only a read between two etcd reads that agree
    is compared."""
    for _ in range(20):
        before = int(kv_at(etcd, key)["mod_revision"])
        now = json.loads(kubectl.ok(server, "get", "-f", "-", "-o", "json",
                                    stdin=json.dumps(obj)))
        now = now["items"][0] if now["kind"] == "List" else now
        if before == int(kv_at(etcd, key)["mod_revision"]):
            return int(now["metadata"]["resourceVersion"]) == before
    raise AssertionError(f"{key} kept changing")


def workload(kind: str, name: str) -> dict[str, object]:
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def test_kinds_land_where_kube_keeps_them(on_etcd: Callable[..., ServerThread],
                                          etcd: Cluster) -> None:
    server = on_etcd()
    objs = {
        f"/registry/services/specs/{NS}/web": {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
            "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}},
        "/registry/minions/worker-1": {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"}},
        f"/registry/ingress/{NS}/front": {
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "front", "namespace": NS},
            "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}},
        f"/registry/deployments/{NS}/app": {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "app", "namespace": NS},
            "spec": {"selector": {"matchLabels": {"app": "a"}},
                     "template": {"metadata": {"labels": {"app": "a"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
        "/registry/namespaces/team-a": {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
        f"/registry/replicasets/{NS}/app-1": workload("ReplicaSet", "app-1"),
        f"/registry/statefulsets/{NS}/db": workload("StatefulSet", "db"),
        f"/registry/daemonsets/{NS}/agent": workload("DaemonSet", "agent"),
        f"/registry/controllerrevisions/{NS}/db-1": {
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "db-1", "namespace": NS}, "data": {"spec": {}}, "revision": 1},
        f"/registry/resourcequotas/{NS}/quota": {
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "quota", "namespace": NS},
            "spec": {"hard": {"count/widgets.example.com": "1"}}},
        f"/registry/limitranges/{NS}/limits": {
            "apiVersion": "v1", "kind": "LimitRange",
            "metadata": {"name": "limits", "namespace": NS},
            "spec": {"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "5Gi"}}]}},
        f"/registry/persistentvolumeclaims/{NS}/data": {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": NS},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}},
        "/registry/persistentvolumes/pv1": {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "hostPath": {"path": "/tmp/pv1"}}},
        "/registry/storageclasses/fast": {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "fast"}, "provisioner": "example.com/fast"},
        f"/registry/services/endpoints/{NS}/db": {
            "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "db", "namespace": NS},
            "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 5432}]}]},
        # pkg/registry/core/replicationcontroller/storage: the "controllers" prefix
        f"/registry/controllers/{NS}/web": {
            "apiVersion": "v1", "kind": "ReplicationController",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
        # issue 20: kube keys these by plural alone
        f"/registry/jobs/{NS}/once": {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": NS},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}],
                                           "restartPolicy": "Never"}}}},
        f"/registry/cronjobs/{NS}/tick": {
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "tick", "namespace": NS},
            "spec": {"schedule": "@hourly", "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}],
                "restartPolicy": "OnFailure"}}}}}},
        f"/registry/poddisruptionbudgets/{NS}/web": {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}},
        "/registry/priorityclasses/high": {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "high"}, "value": 1000},
        "/registry/ingressclasses/nginx": {
            "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": "nginx"}, "spec": {"controller": "example.com/ingress"}},
    }
    for key, obj in objs.items():
        made = apply(server, obj)
        kv = kv_at(etcd, key)
        value = kv["value"]
        assert value.startswith(f'{{"kind":"{obj["kind"]}","apiVersion":"{obj["apiVersion"]}",'), \
            key
        assert value.endswith("\n") and "resourceVersion" not in value, key
        assert json.loads(value)["metadata"]["uid"] == made["metadata"]["uid"], key
        assert rv_matches_mod_revision(server, etcd, obj, key), key
    assert keys_under(etcd, "/registry/apps/") == []
    assert keys_under(etcd, "/registry/batch/") == []
    assert keys_under(etcd, "/registry/priorityclasses/") == [
        "/registry/priorityclasses/high", "/registry/priorityclasses/system-cluster-critical",
        "/registry/priorityclasses/system-node-critical"]
    assert keys_under(etcd, "/registry/services/specs/default/") == [
        "/registry/services/specs/default/kubernetes", "/registry/services/specs/default/web"]
    # Endpoints share kube's services/ prefix, beside the Services (the bootstrap's too)
    assert keys_under(etcd, "/registry/services/endpoints/default/") == [
        "/registry/services/endpoints/default/db",
        "/registry/services/endpoints/default/kubernetes"]


def test_a_custom_resource_is_stored_under_its_group_with_sorted_keys(
        on_etcd: Callable[..., ServerThread], etcd: Cluster) -> None:
    server = on_etcd()
    serve(server, GIZMO)
    crd_key = "/registry/apiextensions.k8s.io/customresourcedefinitions/gizmos.tests.kubewire.io"
    assert kv_at(etcd, crd_key)["value"].startswith(
        '{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1",')
    made = create(server, GIZMO.collection(), GIZMO.obj("g1", labels={"z": "1", "a": "2"}))
    key = f"/registry/tests.kubewire.io/gizmos/{NS}/g1"
    kv = kv_at(etcd, key)
    value = kv["value"]
    assert value.startswith('{"apiVersion":"tests.kubewire.io/v1","kind":"Gizmo","metadata":{')
    assert value.endswith("}\n") and "resourceVersion" not in value
    assert pairs_sorted(value)
    assert json.loads(value)["spec"] == {"shape": "round", "size": 1}  # defaulted, then stored
    assert rv_of(made) == int(kv["mod_revision"])
    assert keys_under(etcd, "/registry/tests.kubewire.io/") == [key]


def test_a_list_is_at_the_revision_a_range_reports(on_etcd: Callable[..., ServerThread],
                                                   etcd: Cluster) -> None:
    server = on_etcd()
    for i in range(3):
        create(server, "/api/v1/namespaces/default/configmaps",
               {"metadata": {"name": f"cm{i}"}, "data": {"i": str(i)}})
    for _ in range(20):  # a controller's write in between would only move both on: retry
        before = int(etcdctl(etcd, "get", "/registry/configmaps/", "--prefix",
                             "--keys-only")["header"]["revision"])
        listed = get(server, "/api/v1/namespaces/default/configmaps")
        after = etcdctl(etcd, "get", "/registry/configmaps/default/", "--prefix")
        rv = int(listed["metadata"]["resourceVersion"])
        assert before <= rv <= int(after["header"]["revision"])
        if before == int(after["header"]["revision"]):
            break
    assert rv == int(after["header"]["revision"])
    by_name = {item["metadata"]["name"]: int(item["metadata"]["resourceVersion"])
               for item in listed["items"]}
    stored = {base64.b64decode(kv["key"]).decode().rsplit("/", 1)[1]: int(kv["mod_revision"])
              for kv in after["kvs"]}
    assert by_name == stored
    # a list at an older revision is etcd's range at that revision
    older = min(by_name.values())
    exact = get(server, "/api/v1/namespaces/default/configmaps", resourceVersion=str(older),
                resourceVersionMatch="Exact")
    assert exact["metadata"]["resourceVersion"] == str(older)
    assert [i["metadata"]["name"] for i in exact["items"]] == ["cm0"]


def test_a_write_made_with_etcdctl_reaches_kubewires_watchers(
        on_etcd: Callable[..., ServerThread], etcd: Cluster) -> None:
    server = on_etcd()
    start = list_rv(server, "/api/v1/namespaces/default/configmaps")
    value = json.dumps({"kind": "ConfigMap", "apiVersion": "v1",
                        "metadata": {"name": "beside", "namespace": NS,
                                     "uid": "0c8e6b5e-4d3f-4b7e-9a55-5a0cf0a1d001",
                                     "creationTimestamp": "2026-01-02T03:04:05Z"},
                        "data": {"written": "by etcdctl"}}, separators=(",", ":")) + "\n"
    with watch(server, "/api/v1/namespaces/default/configmaps", resourceVersion=start) as stream:
        put = etcdctl(etcd, "put", f"/registry/configmaps/{NS}/beside", value)
        event = stream.next_event()
    revision = int(put["header"]["revision"])
    assert event["type"] == "ADDED"
    obj = event["object"]
    assert obj["metadata"]["name"] == "beside"
    assert obj["data"] == {"written": "by etcdctl"}
    assert rv_of(obj) == revision
    read = json.loads(kubectl.ok(server, "get", "configmap", "beside", "-o", "json"))
    assert read["metadata"]["resourceVersion"] == str(revision)
    assert read["metadata"]["uid"] == "0c8e6b5e-4d3f-4b7e-9a55-5a0cf0a1d001"

    with watch(server, "/api/v1/namespaces/default/configmaps",
               resourceVersion=str(revision)) as stream:
        gone = etcdctl(etcd, "del", f"/registry/configmaps/{NS}/beside")
        event = stream.next_event()
    assert event["type"] == "DELETED"
    assert rv_of(event["object"]) == int(gone["header"]["revision"])
    assert event["object"]["data"] == {"written": "by etcdctl"}


def delete_revision(etcd: Cluster, key: str, after: int) -> int:
    """The revision at which ``key`` was deleted after revision ``after`` (etcd's own watch)."""
    assert ETCDCTL is not None
    try:
        subprocess.run([ETCDCTL, "--endpoints", etcd.endpoints[0], "watch", f"--rev={after + 1}",
                        key, "-w", "json"], env={**os.environ, "ETCDCTL_API": "3"},
                       capture_output=True, text=True, timeout=2, check=False)
    except subprocess.TimeoutExpired as expired:  # etcdctl watch runs until stopped
        out = expired.stdout or b""
    text = out.decode() if isinstance(out, bytes) else out
    for line in text.splitlines():
        for event in json.loads(line).get("Events") or ():
            if event.get("type") == 1:  # DELETE
                return int(event["kv"]["mod_revision"])
    raise AssertionError(f"no delete of {key} after {after}: {text!r}")


def test_a_delete_event_carries_the_last_state_at_the_deletes_revision(
        on_etcd: Callable[..., ServerThread], etcd: Cluster) -> None:
    server = on_etcd()
    create(server, "/api/v1/namespaces/default/configmaps",
           {"metadata": {"name": "brief"}, "data": {"v": "1"}})
    last = ok(call(server, "PATCH", "/api/v1/namespaces/default/configmaps/brief",
                   {"data": {"v": "2"}, "metadata": {"labels": {"final": "yes"}}}), 200)
    with watch(server, "/api/v1/namespaces/default/configmaps",
               resourceVersion=last["metadata"]["resourceVersion"]) as stream:
        kubectl.ok(server, "delete", "configmap", "brief")
        event = stream.next_event()
    at = delete_revision(etcd, f"/registry/configmaps/{NS}/brief", rv_of(last))
    assert event["type"] == "DELETED"
    obj = event["object"]
    assert rv_of(obj) == at > rv_of(last)
    assert obj["data"] == {"v": "2"} and obj["metadata"]["labels"] == {"final": "yes"}
    assert {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"} == {
        k: v for k, v in last["metadata"].items() if k != "resourceVersion"}
    assert etcdctl(etcd, "get", f"/registry/configmaps/{NS}/brief").get("kvs") is None


def test_compacted_revisions_get_kubes_410s(on_etcd: Callable[..., ServerThread],
                                            etcd: Cluster) -> None:
    # a small watch cache ring as well: kube's cacher serves a watch from its own window even
    # where etcd is compacted, so the 410 needs a revision outside both
    server = on_etcd(retention=Retention(max_changes=5, max_age_s=None),
                     etcd_compaction_interval_s=0.2, ring_capacity=8)
    collection = "/api/v1/namespaces/default/configmaps"
    create(server, collection, {"metadata": {"name": "busy"}, "data": {"n": "0"}})
    early = int(list_rv(server, collection))
    for n in range(1, 21):
        ok(call(server, "PATCH", f"{collection}/busy", {"data": {"n": str(n)}}), 200)

    def compacted() -> int | None:
        found = etcdctl(etcd, "get", "compact_rev_key").get("kvs")
        revision = int(base64.b64decode(found[0]["value"])) if found else 0
        return revision if revision > early else None

    horizon = wait_for(compacted, timeout=20, what="etcd to be compacted past the early RV")
    # etcd itself no longer has it
    assert ETCDCTL is not None
    gone = subprocess.run([ETCDCTL, "--endpoints", etcd.endpoints[0], "get", "compact_rev_key",
                           f"--rev={early}"], env={**os.environ, "ETCDCTL_API": "3"},
                          capture_output=True, text=True, timeout=30, check=False)
    assert "required revision has been compacted" in gone.stderr, gone

    listed = call(server, "GET", f"{collection}?resourceVersion={early}"
                                 "&resourceVersionMatch=Exact")
    assert listed.status == 410
    assert listed.json == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure",
                           "message": "The resourceVersion for the provided list is too old.",
                           "reason": "Expired", "code": 410}
    with watch(server, collection, resourceVersion=str(early)) as stream:
        assert stream.status == 200
        error = stream.next_event()
        assert stream.ended(timeout=10)
    assert error["type"] == "ERROR"
    status = error["object"]
    assert status["code"] == 410 and status["reason"] == "Expired"
    assert status["message"].startswith(f"too old resource version: {early} (")
    assert int(status["message"].split("(")[1].rstrip(")")) >= min(horizon, early + 1)
    # what is kept still serves
    current = list_rv(server, collection)
    assert get(server, f"{collection}/busy")["data"] == {"n": "20"}
    assert call(server, "GET", f"{collection}?resourceVersion={current}"
                               "&resourceVersionMatch=Exact").status == 200


def test_a_pod_delete_answers_the_pod_at_the_deletes_revision(
        on_etcd: Callable[..., ServerThread]) -> None:
    """An unscheduled pod's DELETE marks it (grace 0) and removes it; kubewire's pod-termination
    controller, seeing the mark, may remove it first (on etcd it often does). Either way the
    answer is the removed pod at the delete's revision, as its DELETED event carries it."""
    server = on_etcd()
    pods = "/api/v1/namespaces/default/pods"
    names = [f"p{i}" for i in range(15)]
    for name in names:
        create(server, pods, {"metadata": {"name": name},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    answers: dict[str, dict[str, Any]] = {}
    with watch(server, pods, resourceVersion=list_rv(server, pods)) as stream:
        for name in names:
            answers[name] = ok(call(server, "DELETE", f"{pods}/{name}"), 200)
        events = stream.events_until(lambda e: e["type"] == "DELETED"
                                     and e["object"]["metadata"]["name"] == names[-1])
    deleted = {e["object"]["metadata"]["name"]: e["object"] for e in events
               if e["type"] == "DELETED"}
    assert sorted(deleted) == sorted(names)
    for name in names:
        assert answers[name] == deleted[name], name
