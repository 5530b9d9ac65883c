"""Hostile clients against what issue 20 gave the server to hold: the RBAC authorizer's memos,
service-account token verification, the eviction and binding subresources and the disruption
budgets they consult. Each test floods or oversizes one of them through the API, as a client
with ordinary credentials, and proves the bound: every answer is kube's Status, what the
server holds stays under its bound (or the time it takes under one), and it keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubewire.server.access.rbac_authorizer import RbacAuthorizer
from kubewire.server.context import ServerConfig
from kubewire.storage.base import Change, ChangeType
from tests.integration.harness import ServerThread
from tests.integration.test_access import ensure_namespaces, https, issue
from tests.integration.wire import (
    Reply,
    Session,
    call,
    create,
    get,
    ok,
    send_oversized,
    wait_for,
)

GROUP = "rbac.authorization.k8s.io"
LONG = 200 * 1024  # characters of one name: far over any valid name, well inside a 1 MiB head


@pytest.fixture(scope="module")
def rbac(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    data_dir: Path = tmp_path_factory.mktemp("bounds")
    server = ServerThread(ServerConfig(data_dir=data_dir, host="127.0.0.1", port=0,
                                       insecure_http=False, authorization_mode="RBAC",
                                       cluster=False)).start()
    try:
        ensure_namespaces(server, "team")
        admin(server, "POST", f"/apis/{GROUP}/v1/namespaces/team/rolebindings", {
            "metadata": {"name": "alice-view"},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": GROUP}]}, 201)
        yield server
    finally:
        server.stop()


def admin(server: ServerThread, method: str, path: str, body: Any = None,
          *codes: int) -> Any:
    pki = server.config.data_dir / "pki"
    reply = https(server, method, path, cert=(pki / "admin.crt", pki / "admin.key"), body=body)
    assert not codes or reply.status in codes, (reply.status, reply.body[:300])
    return json.loads(reply.body) if reply.body else None


def alice_token(server: ServerThread) -> str:
    kubeconfig = issue(server, "alice", token=True)
    return str(yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"])


def status_of(reply: Reply, code: int, reason: str) -> dict[str, Any]:
    body = json.loads(reply.body)
    assert (reply.status, body.get("kind"), body.get("code"), body.get("reason")) == (
        code, "Status", code, reason), reply.body[:300]
    return dict(body)


def _chars(key: object) -> int:
    if isinstance(key, str):
        return len(key)
    if isinstance(key, tuple):
        return sum(_chars(part) for part in key)
    return 0


def held_key_chars(authorizer: RbacAuthorizer) -> int:
    """The characters of every key the authorizer's memos hold."""
    total = 0
    for memo in (authorizer._namespaced, authorizer._resolved, authorizer._decisions):
        mapping = memo if isinstance(memo, dict) else memo.items
        total += sum(_chars(key) for key in mapping)
    return total


def rbac_authorizer(server: ServerThread) -> RbacAuthorizer:
    assert server.server is not None
    found = [a for a in server.server.access.authorizer.authorizers
             if isinstance(a, RbacAuthorizer)]
    assert len(found) == 1
    return found[0]


def test_long_names_and_namespaces_do_not_fill_the_rbac_memos(rbac: ServerThread) -> None:
    """64 reads naming distinct 200 KiB objects and 64 in distinct 200 KiB namespaces (38 MiB
    of keys): each gets kube's answer (404 where alice may read, 403 elsewhere) and the memos
    hold at most their 4 MiB of keys each."""
    token = alice_token(rbac)
    for i in range(64):
        name = f"{i:04d}" + "n" * LONG
        reply = https(rbac, "GET", f"/api/v1/namespaces/team/configmaps/{name}", token=token)
        assert status_of(reply, 404, "NotFound")["details"]["name"] == name
        namespace = f"{i:04d}" + "s" * LONG
        reply = https(rbac, "GET", f"/api/v1/namespaces/{namespace}/configmaps", token=token)
        body = status_of(reply, 403, "Forbidden")
        assert body["message"].startswith('configmaps is forbidden: User "alice" cannot list '
                                          'resource "configmaps" in API group "" in the '
                                          f'namespace "{i:04d}sss')
    assert held_key_chars(rbac_authorizer(rbac)) <= 3 * 4 * 1024 * 1024
    reply = https(rbac, "GET", "/api/v1/namespaces/team/configmaps", token=token)
    assert reply.status == 200, reply.body[:300]  # and the memos still serve
    assert https(rbac, "GET", "/api/v1/namespaces/team/configmaps",
                 token=token).status == 200


def test_a_token_review_of_many_audiences_takes_linear_time(rbac: ServerThread) -> None:
    """A bound token carrying 6,500 audiences (under the 64 KiB a token may have) reviewed for
    250,000 others (a 2.5 MB body): kube's refusal, in well under the time a product of the
    two would take (1.6e9 comparisons stalled the server for half a minute)."""
    admin(rbac, "POST", "/api/v1/namespaces/team/serviceaccounts",
          {"metadata": {"name": "robot"}}, 201)
    audiences = [f"{i:x}" for i in range(6500)]
    made = admin(rbac, "POST", "/api/v1/namespaces/team/serviceaccounts/robot/token",
                 {"spec": {"audiences": audiences}}, 201)
    token = made["status"]["token"]
    assert len(token) < 64 * 1024
    wanted = [f"w{i:x}" for i in range(250_000)]
    started = time.monotonic()
    review = admin(rbac, "POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                   {"spec": {"token": token, "audiences": wanted}}, 201)
    elapsed = time.monotonic() - started
    status = review["status"]
    assert status.get("authenticated") is not True
    assert status["error"].startswith('token audiences ["0" "1" "2"')
    assert '] is invalid for the target audiences ["w0" "w1"' in status["error"]
    assert elapsed < 8.0, elapsed
    # and one audience of the many still authenticates it
    review = admin(rbac, "POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                   {"spec": {"token": token, "audiences": [*wanted[:100_000], "1963"]}}, 201)
    assert review["status"]["authenticated"] is True
    assert review["status"]["audiences"] == ["1963"]


# --- eviction, binding, disruption budgets (plain HTTP, everyone admin) -------------------------

PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"


def running_pod(server: ServerThread, name: str, *, bound: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}],
                            "terminationGracePeriodSeconds": 0}
    if bound:
        spec["nodeName"] = "n1"
    pod = create(server, PODS, {"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"name": name, "labels": {"app": "web"}},
                                "spec": spec})
    if not bound:
        return pod
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return dict(ok(call(server, "PUT", f"{PODS}/{name}/status", pod), 200))


def evict(server: ServerThread, name: str) -> Reply:
    return call(server, "POST", f"{PODS}/{name}/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})


def test_evictions_stop_growing_a_budget_at_kubes_bound(server: ServerThread) -> None:
    """A budget whose controller never confirms evictions (``disruptedPods`` at kube's 2,000)
    takes one more, then answers kube's 403 and changes nothing: the map a client's evictions
    grow holds at most 2,001 pods."""
    for name in ("p1", "p2"):
        running_pod(server, name)
    budget = create(server, PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                   "metadata": {"name": "web"},
                                   "spec": {"selector": {"matchLabels": {"app": "web"}},
                                            "maxUnavailable": 1}})
    budget["status"] = {"observedGeneration": 1, "disruptionsAllowed": 100, "currentHealthy": 2,
                        "desiredHealthy": 0, "expectedPods": 2,
                        "disruptedPods": {f"gone-{i:04d}": "2026-01-01T00:00:00Z"
                                          for i in range(2000)}}
    ok(call(server, "PUT", f"{PDBS}/web/status", budget), 200)
    assert evict(server, "p1").status == 201
    after = get(server, f"{PDBS}/web")["status"]
    assert (len(after["disruptedPods"]), after["disruptionsAllowed"]) == (2001, 99)
    reply = evict(server, "p2")
    body = status_of(reply, 403, "Forbidden")
    assert body["message"] == ('poddisruptionbudget.policy "web" is forbidden: DisruptedPods '
                               'map too big - too many evictions not confirmed by PDB '
                               'controller')
    again = get(server, f"{PDBS}/web")["status"]
    assert (len(again["disruptedPods"]), again["disruptionsAllowed"]) == (2001, 99)
    assert call(server, "GET", f"{PODS}/p2").status == 200  # not evicted


@pytest.mark.parametrize("path", [f"{PODS}/p/eviction", f"{PODS}/p/binding",
                                  "/api/v1/namespaces/default/bindings"])
def test_oversized_bodies_to_the_new_subresources_get_413(server: ServerThread,
                                                          path: str) -> None:
    running_pod(server, "p", bound=False)
    reply = send_oversized(server, "POST", path, 4 * 1024 * 1024)
    body = status_of(reply, 413, "RequestEntityTooLarge")
    assert body["message"] == "Request entity too large: limit is 3145728"
    pod = get(server, f"{PODS}/p")
    assert "nodeName" not in pod["spec"] and "deletionTimestamp" not in pod["metadata"]


def test_a_binding_cannot_grow_a_pod_past_the_object_bound(server: ServerThread) -> None:
    """The binding copies its annotations onto the pod with no validation (kube's
    ``setPodNodeAndMetadata``): 2 MiB of them, inside the body bound, would make a pod over
    the store's 1.5 MiB. kube's 413, the pod unchanged; a plain binding then works."""
    running_pod(server, "p", bound=False)
    binding = {"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": "p", "annotations": {"big": "x" * (2 * 1024 * 1024)}},
               "target": {"kind": "Node", "name": "n1"}}
    reply = call(server, "POST", f"{PODS}/p/binding", binding)
    body = status_of(reply, 413, "RequestEntityTooLarge")
    assert body["message"].startswith("Request entity too large: the object is ")
    pod = get(server, f"{PODS}/p")
    assert "nodeName" not in pod["spec"] and "big" not in (pod["metadata"].get("annotations")
                                                            or {})
    del binding["metadata"]["annotations"]
    assert call(server, "POST", f"{PODS}/p/binding", binding).status == 201
    assert get(server, f"{PODS}/p")["spec"]["nodeName"] == "n1"


def test_a_pod_write_costs_the_claims_it_names_not_every_claim(server: ServerThread) -> None:
    """1,000 claims in a namespace: a change of a pod there makes the pvc-protection
    controller look at the claims that pod names (kube's ``podAddedDeletedUpdated``), not
    decode all 1,000 on every pod write (milliseconds each, in the store's change callback)."""
    with Session(server) as session:
        for i in range(1000):
            reply = session.call("POST", "/api/v1/namespaces/default/persistentvolumeclaims", {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": f"c{i}"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}})
            assert reply.status == 201, reply.body[:300]
    pod = running_pod(server, "p")
    assert server.server is not None
    protection = server.server.controllers.storage_protection
    assert protection is not None and protection.running
    value = json.dumps(pod).encode()
    change = Change(int(pod["metadata"]["resourceVersion"]), ChangeType.MODIFIED,
                    "core/pods/default/p", value, value, time.time())
    costs = []
    for _ in range(10):
        started = time.perf_counter()
        protection._on_changes([change])  # names no claim: marks nothing
        costs.append(time.perf_counter() - started)
    assert min(costs) < 0.001, costs
    assert protection.queue.idle


def test_a_quota_sync_decodes_a_namespace_once_however_many_quotas(server: ServerThread) -> None:
    """1,000 ConfigMaps and 20 quotas counting them: a resync (any deletion in the namespace
    asks for one) decodes the ConfigMaps once, not once per quota (20,000 decodes holding the
    server's loop for a tenth of a second or more each time)."""
    ok(call(server, "POST", "/api/v1/namespaces", {"metadata": {"name": "q"}}), 201)
    with Session(server) as session:
        for i in range(1000):
            reply = session.call("POST", "/api/v1/namespaces/q/configmaps",
                                 {"metadata": {"name": f"cm{i}"}, "data": {"k": "v"}})
            assert reply.status == 201, reply.body[:300]
        for i in range(20):
            reply = session.call("POST", "/api/v1/namespaces/q/resourcequotas", {
                "metadata": {"name": f"q{i}"}, "spec": {"hard": {"count/configmaps": "5000"}}})
            assert reply.status == 201, reply.body[:300]

    def used() -> set[str]:
        items = get(server, "/api/v1/namespaces/q/resourcequotas")["items"]
        return {((q.get("status") or {}).get("used") or {}).get("count/configmaps", "")
                for q in items}

    wait_for(lambda: used() in ({"1k"}, {"1001"}), what="the quotas' used counts")
    before = used()
    assert server.server is not None and server._loop is not None
    controller = server.server.controllers.resource_quota
    assert controller is not None
    costs = []
    for _ in range(5):
        started = time.perf_counter()
        asyncio.run_coroutine_threadsafe(controller._sync("q"), server._loop).result(30)
        costs.append(time.perf_counter() - started)
    assert min(costs) < 0.05, costs
    assert used() == before
