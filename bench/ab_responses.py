"""Byte-for-byte A/B of write responses: the same corpus of requests against two source trees.

Not a benchmark: the proof that a change of the write path (issue 15, "each write does its work
once") changes no answer. Starts ``kubewire serve --insecure-http`` from each tree with a seeded
random generator and a clock that advances one second per reading (``_LAUNCHER``), so uids,
generated names, allocated addresses and timestamps are reproducible; sends every request of
``corpus()`` in order over one connection, waiting for the namespace's default ServiceAccount
after each namespace create so no controller write interleaves differently; then compares status
line, headers (less ``Date`` and ``Audit-Id``) and body of every answer.

    python -m bench.ab_responses --src OTHER/src [--src2 THIS/src] [--show 5] [--dump DIR]

Exit status 0 when every answer is the same, 1 otherwise (the first differences are printed).
The corpus covers creates, PUTs (with and without resourceVersion, managedFields sent, reset or
malformed), merge, JSON and strategic merge patches, server-side applies (conflicts, force, other
managers, status), status updates, dry runs, many field managers (the ``ancient-changes`` cap)
and bad inputs (wrong kinds and types, invalid JSON, failing JSON patch tests, conflicts).
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.servers import REPO_ROOT, ServerProcess, tree_without_components

SEED = 15
# Runs inside the server process: a seeded rng and a clock of one reading per second.
_LAUNCHER = f"""
import datetime, itertools, random, sys
from kubewire.server import context
_base = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
_ticks = itertools.count()
_post_init = context.ServerContext.__post_init__
def _post(self):
    self.rng = random.Random({SEED})
    self.now = lambda: _base + datetime.timedelta(seconds=next(_ticks))
    _post_init(self)
context.ServerContext.__post_init__ = _post
from kubewire.cli import main
sys.exit(main(sys.argv[1:]))
"""
SKIPPED_HEADERS = frozenset({"date", "audit-id"})
NS = "ab"
POD_PAD_BYTES = 1300


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: Any = None  # JSON value, or bytes sent as they are
    content_type: str = "application/json"
    agent: str = "ab-client/1.0"
    wait_namespace: str = ""  # after it: wait for this namespace's default ServiceAccount


def serve_argv(src: str, data_dir: Path) -> list[str]:
    return ["/usr/bin/env", f"PYTHONPATH={src}", sys.executable, "-c", _LAUNCHER, "serve",
            "--data-dir", str(data_dir), "--port", "0", "--insecure-http",
            "--log-level", "WARNING", *tree_without_components(src)]


def _pod(name: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app": "ab"},
                            "annotations": {"pad": "x" * POD_PAD_BYTES}}
    meta.update(extra.pop("meta", {}))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
           "spec": {"containers": [{"name": "c", "image": "registry.example/app:1.0",
                                    "ports": [{"containerPort": 80}]}]}}
    pod.update(extra)
    return pod


def _deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "w", "image": "nginx:1"}]}}}}


def _apply_cm(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


MERGE = "application/merge-patch+json"
JSONPATCH = "application/json-patch+json"
SMP = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


_NS_PATH = f"/api/v1/namespaces/{NS}"
pods, cms, svcs = f"{_NS_PATH}/pods", f"{_NS_PATH}/configmaps", f"{_NS_PATH}/services"
deps = f"/apis/apps/v1/namespaces/{NS}/deployments"
p1, cm2 = f"{pods}/p1", f"{cms}/cm2"


def corpus() -> Iterator[Call]:
    """Every request, in order (later ones depend on what earlier ones stored)."""
    yield Call("POST", "/api/v1/namespaces",
               {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
               wait_namespace=NS)
    for part in (_creates, _merge_patches, _managed_fields_patches, _json_patches,
                 _strategic_patches, _status_writes, _applies, _puts, _final_state):
        yield from part()


def _creates() -> Iterator[Call]:
    yield Call("POST", pods, _pod("p1"))
    yield Call("POST", pods, _pod("p2", meta={"generateName": "g-"}))
    yield Call("POST", pods, {**_pod(""), "metadata": {"generateName": "gen-"}})
    yield Call("POST", pods + "?dryRun=All", _pod("dry"))
    yield Call("POST", pods + "?fieldManager=mgr-a", _pod("p3"))
    yield Call("POST", pods, {**_pod("p4"), "spec": {
        "containers": [{"name": "c", "image": "i", "bogus": 1}]}})
    yield Call("POST", pods + "?fieldValidation=Strict", {**_pod("p5"), "spec": {
        "containers": [{"name": "c", "image": "i", "bogus": 1}]}})
    yield Call("POST", pods + "?fieldValidation=Ignore", {**_pod("p6"), "spec": {
        "containers": [{"name": "c", "image": "i", "bogus": 1}]}})
    yield Call("POST", pods, _pod("p1"))  # exists: 409
    yield Call("POST", pods, {**_pod("bad-type"), "spec": {"containers": "nope"}})
    yield Call("POST", pods, {**_pod("bad-port"), "spec": {"containers": [
        {"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}]}})
    yield Call("POST", pods, {**_pod("no-containers"), "spec": {}})
    yield Call("POST", pods, {**_pod("Bad_Name")})
    yield Call("POST", pods, {**_pod("wrong-kind"), "kind": "Service"})
    yield Call("POST", pods, {**_pod("wrong-version"), "apiVersion": "v2"})
    yield Call("POST", pods, b'{"apiVersion": "v1", "kind": "Pod", "metadata": {')
    yield Call("POST", pods, _pod("with-mf", meta={"managedFields": [
        {"manager": "someone", "operation": "Update", "apiVersion": "v1",
         "time": "2020-01-01T00:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}]}))
    yield Call("POST", pods, _pod("with-bad-mf", meta={"managedFields": [{"manager": 1}]}))
    yield Call("POST", pods, _pod("tolerant", spec={
        "containers": [{"name": "c", "image": "i"}],
        "tolerations": [{"key": "k", "operator": "Exists"}], "priority": 0}))
    yield from _admitted_pods()
    yield Call("POST", cms, _apply_cm("cm1", {"a": "1"}))
    yield Call("POST", cms, {**_apply_cm("cm-bad", {"a": "1"}), "data": {"a": 1}})
    yield Call("POST", deps, _deployment("d1"))
    yield Call("POST", svcs, {"apiVersion": "v1", "kind": "Service",
                              "metadata": {"name": "s1"},
                              "spec": {"ports": [{"port": 80}], "selector": {"app": "ab"}}})
    yield Call("POST", svcs, {"apiVersion": "v1", "kind": "Service",
                              "metadata": {"name": "s2"},
                              "spec": {"type": "NodePort", "ports": [{"port": 81}]}})


def _admitted_pods() -> Iterator[Call]:
    """Pods that pod admission (service account, priority, tolerations) changes or refuses."""
    mount = {"name": "own", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    specs: list[dict[str, Any]] = [
        {"containers": [{"name": "c", "image": "i", "volumeMounts": [mount]}],
         "volumes": [{"name": "own", "emptyDir": {}}]},
        {"containers": [{"name": "c", "image": "i"}], "volumes": [
            {"name": "kube-api-access-mine", "emptyDir": {}}]},
        {"containers": [{"name": "c", "image": "i"}], "automountServiceAccountToken": False},
        {"containers": [{"name": "c", "image": "i"}],
         "priorityClassName": "system-cluster-critical"},
        {"containers": [{"name": "c", "image": "i"}], "priorityClassName": "nope"},
        {"containers": [{"name": "c", "image": "i"}], "priority": 7},
        {"containers": [{"name": "c", "image": "i"}], "preemptionPolicy": "Never"},
        {"containers": [{"name": "c", "image": "i"}], "serviceAccountName": "missing"},
        {"containers": [{"name": "c", "image": "i"}], "serviceAccount": "default"},
        {"containers": [{"name": "c", "image": "i"}], "imagePullSecrets": [{"name": "s"}],
         "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                          "effect": "NoExecute"}]},
        {"containers": [{"name": "c", "image": "i"}], "initContainers": [
            {"name": "init", "image": "i"}], "volumes": [
            {"name": "kube-api-access-dup", "emptyDir": {}},
            {"name": "kube-api-access-dup2", "emptyDir": {}}]},
    ]
    for i, spec in enumerate(specs):
        yield Call("POST", pods, _pod(f"adm-{i}", spec=spec))
    yield Call("POST", pods, _pod("mirror", meta={"annotations": {
        "kubernetes.io/config.mirror": "x"}}, spec={"containers": [{"name": "c",
                                                                    "image": "i"}]}))


def _merge_patches() -> Iterator[Call]:
    for i in range(3):
        yield Call("PATCH", p1, {"metadata": {"annotations": {"seq": str(i)}}}, MERGE,
                   agent="patcher/1")
    yield Call("PATCH", p1, {"metadata": {"labels": {"app": None, "new": "v"}}}, MERGE)
    yield Call("PATCH", p1, {"metadata": {"labels": {"new": "v"}}}, MERGE)  # no-op
    yield Call("PATCH", p1 + "?dryRun=All", {"metadata": {"labels": {"dry": "1"}}}, MERGE)
    yield Call("PATCH", p1 + "?fieldManager=fm-x", {"spec": {"activeDeadlineSeconds": 30}},
               MERGE)
    yield Call("PATCH", p1, {"spec": {"containers": [{"name": "c", "image": "img:2"}]}}, MERGE)
    yield Call("PATCH", p1, {"spec": {"containers": "x"}}, MERGE)
    yield Call("PATCH", p1, {"spec": {"activeDeadlineSeconds": "x"}}, MERGE)
    yield Call("PATCH", p1, {"metadata": {"resourceVersion": "1"}}, MERGE)
    yield Call("PATCH", p1, {"metadata": {"name": "other"}}, MERGE)
    yield Call("PATCH", p1, {"kind": "Service"}, MERGE)
    yield Call("PATCH", p1, b"null", MERGE)
    yield Call("PATCH", p1, b"[1]", MERGE)
    yield Call("PATCH", p1, b"{bad", MERGE)
    yield Call("PATCH", p1, {"metadata": {"labels": {"x": 1}}}, MERGE)
    yield Call("PATCH", p1, {"spec": {"bogus": 1}}, MERGE)
    yield Call("PATCH", p1 + "?fieldValidation=Strict", {"spec": {"bogus": 1}}, MERGE)
    yield Call("PATCH", p1, {"status": {"phase": "Running"}}, MERGE)  # main endpoint: ignored
    yield Call("PATCH", f"{pods}/missing", {"metadata": {"labels": {"a": "b"}}}, MERGE)
    yield Call("PATCH", p1, {"metadata": {"annotations": {"pad": None}}}, MERGE)


def _managed_fields_patches() -> Iterator[Call]:
    """managedFields through patches: set, reset, malformed, unchanged; the manager cap."""
    yield Call("PATCH", p1, {"metadata": {"managedFields": [
        {"manager": "planted", "operation": "Update", "apiVersion": "v1",
         "time": "2020-01-01T00:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:new": {}}}, "f:spec": {
             "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}}}]}}, MERGE)
    yield Call("PATCH", p1, {"metadata": {"labels": {"after": "plant"}}}, MERGE)
    yield Call("PATCH", p1, {"metadata": {"managedFields": [{"manager": 3}]}}, MERGE)
    yield Call("PATCH", p1, {"metadata": {"managedFields": [{}]}}, MERGE)
    yield Call("PATCH", p1, {"metadata": {"labels": {"reset": "done"}}}, MERGE)
    yield Call("PATCH", p1, {"metadata": {"managedFields": []}}, MERGE)
    # many managers: the ancient-changes cap
    for i in range(13):
        yield Call("PATCH", f"{pods}/p3", {"metadata": {"labels": {f"m{i}": "v"}}}, MERGE,
                   agent=f"writer-{i}/1")
    yield Call("PATCH", f"{pods}/p3", {"metadata": {"labels": {"m0": None, "m5": "w"}}}, MERGE,
               agent="writer-0/1")


def _json_patches() -> Iterator[Call]:
    yield Call("PATCH", p1, [{"op": "add", "path": "/metadata/labels/jp", "value": "1"}],
               JSONPATCH)
    yield Call("PATCH", p1, [{"op": "replace", "path": "/spec/containers/0/image",
                              "value": "img:3"}], JSONPATCH, agent="jp/2")
    yield Call("PATCH", p1, [{"op": "remove", "path": "/metadata/labels/jp"}], JSONPATCH)
    yield Call("PATCH", p1, [{"op": "test", "path": "/metadata/name", "value": "nope"}],
               JSONPATCH)
    yield Call("PATCH", p1, [{"op": "remove", "path": "/metadata/nothing"}], JSONPATCH)
    yield Call("PATCH", p1, [{"op": "copy", "from": "/metadata/labels",
                              "path": "/metadata/annotations"}], JSONPATCH)
    yield Call("PATCH", p1, [{"op": "replace", "path": "", "value": [1]}], JSONPATCH)
    yield Call("PATCH", p1, [{"op": 1}], JSONPATCH)
    yield Call("PATCH", p1, [{"op": "add", "path": "/spec/containers/0/ports", "value": "x"}],
               JSONPATCH)
    yield Call("PATCH", p1, [{"op": "add", "path": "/metadata/managedFields", "value": []}],
               JSONPATCH)


def _strategic_patches() -> Iterator[Call]:
    yield Call("PATCH", p1, {"spec": {"containers": [{"name": "side", "image": "s:1"}]}}, SMP)
    yield Call("PATCH", p1, {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}},
               SMP)
    yield Call("PATCH", p1, {"metadata": {"labels": {"smp": "1", "new": None}}}, SMP,
               agent="smp/1")
    yield Call("PATCH", p1, {"spec": {"containers": [{"name": "c", "image": "img:5"}]}}, SMP,
               agent="smp/1")
    yield Call("PATCH", p1, {"spec": {"containers": [{"name": "c", "ports": "x"}]}}, SMP)
    yield Call("PATCH", p1, {"spec": {"tolerations": [
        {"key": "a", "operator": "Exists", "effect": "NoSchedule"}]}}, SMP)
    yield Call("PATCH", f"{deps}/d1", {"spec": {"replicas": 3}}, SMP)
    yield Call("PATCH", f"{deps}/d1", {"spec": {"template": {"spec": {"containers": [
        {"name": "w", "image": "nginx:2"}]}}}}, SMP, agent="rollout/1")
    yield Call("PATCH", f"{svcs}/s1", {"spec": {"ports": [{"port": 80, "targetPort": 8080}]}},
               SMP)
    yield Call("PATCH", f"{cms}/cm1", {"data": {"b": "2"}}, SMP)
    yield Call("PATCH", f"{cms}/cm1", {"data": {"b": 2}}, SMP)


def _status_writes() -> Iterator[Call]:
    yield Call("PATCH", p1 + "/status", {"status": {"phase": "Running",
                                                    "conditions": [{"type": "Ready",
                                                                    "status": "True"}]}},
               MERGE, agent="kubelet/1")
    yield Call("PATCH", p1 + "/status", {"status": {"phase": "Running"}}, MERGE,
               agent="kubelet/1")  # no-op
    yield Call("PATCH", p1 + "/status", {"metadata": {"labels": {"ignored": "1"}},
                                         "status": {"podIP": "10.0.0.1"}}, SMP,
               agent="kubelet/1")
    yield Call("PATCH", f"{deps}/d1/status", {"status": {"replicas": 3}}, MERGE)
    yield Call("PATCH", f"{deps}/d1/status", {"status": {"replicas": "x"}}, MERGE)


def _applies() -> Iterator[Call]:
    yield Call("PATCH", cm2 + "?fieldManager=alice", _apply_cm("cm2", {"a": "1", "b": "1"}),
               APPLY)
    yield Call("PATCH", cm2 + "?fieldManager=alice", _apply_cm("cm2", {"a": "2", "b": "1"}),
               APPLY)
    yield Call("PATCH", cm2 + "?fieldManager=bob", _apply_cm("cm2", {"a": "3"}), APPLY)
    yield Call("PATCH", cm2 + "?fieldManager=bob&force=true", _apply_cm("cm2", {"a": "3"}),
               APPLY)
    yield Call("PATCH", cm2 + "?fieldManager=bob&dryRun=All", _apply_cm("cm2", {"c": "3"}),
               APPLY)
    yield Call("PATCH", cm2, _apply_cm("cm2", {"a": "3"}), APPLY)  # no fieldManager: 422
    yield Call("PATCH", cm2 + "?fieldManager=bob", b"a: [", APPLY)
    yield Call("PATCH", cm2, {"data": {"c": "merged"}}, MERGE, agent="updater/1")
    yield Call("PATCH", cm2 + "?fieldManager=alice", _apply_cm("cm2", {"b": "1"}), APPLY)
    yield Call("PATCH", cm2 + "?fieldManager=alice", _apply_cm("cm2", {"c": "alice"}), APPLY)
    yield Call("PATCH", p1 + "?fieldManager=ssa", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "labels": {"ssa": "1"}},
        "spec": {"containers": [{"name": "c", "image": "img:4"}]}}, APPLY)
    yield Call("PATCH", p1 + "?fieldManager=ssa&force=true", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "labels": {"ssa": "1"}},
        "spec": {"containers": [{"name": "c", "image": "img:4"}]}}, APPLY)
    yield Call("PATCH", p1 + "/status?fieldManager=ssa-status", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
        "status": {"phase": "Succeeded"}}, APPLY)
    yield Call("PATCH", f"{deps}/d2?fieldManager=ssa", _deployment("d2", 2), APPLY)
    yield Call("PATCH", f"{deps}/d2?fieldManager=other", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d2"},
        "spec": {"replicas": 5}}, APPLY)


def _puts() -> Iterator[Call]:
    yield Call("GET", p1)
    yield Call("PUT", f"{cms}/cm1", {**_apply_cm("cm1", {"a": "put"})})
    yield Call("PUT", f"{cms}/cm1", {**_apply_cm("cm1", {"a": "put2"}),
                                     "metadata": {"name": "cm1", "resourceVersion": "2"}})
    yield Call("PUT", f"{cms}/cm1?fieldManager=putter", {**_apply_cm("cm1", {"z": "1"})})
    yield Call("PUT", f"{cms}/cm1", {**_apply_cm("cm1", {"z": "1"}), "metadata": {
        "name": "cm1", "managedFields": [
            {"manager": "m", "operation": "Update", "apiVersion": "v1",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:z": {}}}}]}})
    yield Call("PUT", f"{cms}/cm1", {**_apply_cm("cm1", {"z": "2"}), "metadata": {
        "name": "cm1", "managedFields": [{}]}})
    yield Call("PUT", f"{cms}/cm1", {**_apply_cm("cm1", {"z": "2"}), "metadata": {
        "name": "cm1", "managedFields": "bad"}})
    yield Call("PUT", f"{cms}/cm1", {**_apply_cm("cm1", {"z": "2"}), "kind": "Secret"})
    yield Call("PUT", f"{cms}/cm1?dryRun=All", _apply_cm("cm1", {"dry": "1"}))
    yield Call("PUT", f"{cms}/cm-new", _apply_cm("cm-new", {"created": "by put"}))
    yield Call("PUT", f"{cms}/cm1", _apply_cm("cm-other", {"a": "1"}))
    yield Call("PUT", f"{deps}/d1", _deployment("d1", 4))
    yield Call("PUT", f"{deps}/d1/status", {**_deployment("d1", 4),
                                            "status": {"replicas": 4, "readyReplicas": 1}})
    yield Call("PUT", f"{pods}/p3/status", {**_pod("p3"), "status": {"phase": "Running"}})
    yield Call("PUT", f"{pods}/tolerant", {**_pod("tolerant"), "spec": {
        "containers": [{"name": "c", "image": "i"}]}})


def _final_state() -> Iterator[Call]:
    for path in (p1, f"{pods}/p3", f"{pods}/tolerant", f"{cms}/cm1", cm2, f"{deps}/d1",
                 f"{deps}/d2", f"{svcs}/s1", pods, cms):
        yield Call("GET", path)


def _send(conn: http.client.HTTPConnection, call: Call) -> tuple[Any, ...]:
    body = call.body if isinstance(call.body, bytes) or call.body is None \
        else json.dumps(call.body).encode()
    headers = {"User-Agent": call.agent, "Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = call.content_type
    conn.request(call.method, call.path, body=body, headers=headers)
    response = conn.getresponse()
    kept = [(k, v) for k, v in response.getheaders() if k.lower() not in SKIPPED_HEADERS]
    return response.status, response.reason, kept, response.read()


def _wait_default_account(conn: http.client.HTTPConnection, namespace: str) -> None:
    deadline = time.monotonic() + 30
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
    while time.monotonic() < deadline:
        status, *_ = _send(conn, Call("GET", path))
        if status == 200:
            return
        time.sleep(0.05)
    raise RuntimeError(f"no default ServiceAccount in {namespace}")


def record(src: str, tmp: Path) -> list[tuple[Call, tuple[Any, ...]]]:
    """Every call of the corpus and its answer from a fresh server of ``src``."""
    data = tmp / f"data-{len(list(tmp.iterdir()))}"
    data.mkdir()
    with ServerProcess(src, serve_argv(src, data)) as server:
        server.wait_ready()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        out = []
        for call in corpus():
            out.append((call, _send(conn, call)))
            if call.wait_namespace:
                _wait_default_account(conn, call.wait_namespace)
        conn.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", required=True, help="the reference tree's src directory")
    parser.add_argument("--src2", default=str(REPO_ROOT / "src"),
                        help="the tree to compare (default: this checkout)")
    parser.add_argument("--show", type=int, default=5, help="differences to print")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write both answer lists here as JSON lines")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kw-ab-") as tmp:
        first, second = record(opts.src, Path(tmp)), record(opts.src2, Path(tmp))
    if opts.dump is not None:
        opts.dump.mkdir(parents=True, exist_ok=True)
        for name, answers in (("a", first), ("b", second)):
            with (opts.dump / f"{name}.jsonl").open("w") as f:
                for call, (status, reason, headers, body) in answers:
                    f.write(json.dumps({"call": [call.method, call.path], "status": status,
                                        "reason": reason, "headers": headers,
                                        "body": body.decode(errors="replace")}) + "\n")
    differences = [(call, a, b) for (call, a), (_, b) in zip(first, second, strict=True)
                   if a != b]
    statuses: dict[int, int] = {}
    for _, (status, *_rest) in first:
        statuses[status] = statuses.get(status, 0) + 1
    print(f"{len(first)} requests, statuses {dict(sorted(statuses.items()))}: "
          f"{len(differences)} answers differ")
    for call, a, b in differences[:opts.show]:
        print(f"--- {call.method} {call.path} ({call.content_type}, {call.agent})")
        print(f"  {opts.src}: {a[0]} {a[2]}\n    {a[3][:1500]!r}")
        print(f"  {opts.src2}: {b[0]} {b[2]}\n    {b[3][:1500]!r}")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
