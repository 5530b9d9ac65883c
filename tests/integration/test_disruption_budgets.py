"""policy/v1 PodDisruptionBudgets and ``pods/eviction`` honouring them (kube's eviction.go):
kubectl create pdb and its Table, validation, the 429s with the DisruptionBudget cause, the
decrement and ``disruptedPods``, unhealthyPodEvictionPolicy for unready pods, two budgets, and
the ``kubernetes`` package's ``create_namespaced_pod_eviction``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, get, ok

pytestmark = kubectl.needs_kubectl

PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


def _running_pod(server: ServerThread, name: str, *, ready: bool = True,
                 app: str = "web") -> dict[str, Any]:
    pod = create(server, PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}],
                 "terminationGracePeriodSeconds": 0}})
    pod["status"] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}
    return ok(call(server, "PUT", f"{PODS}/{name}/status", pod), 200)


def _pdb(server: ServerThread, name: str, status: dict[str, Any] | None = None,
         **spec: Any) -> dict[str, Any]:
    body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}
    created = create(server, PDBS, body)
    if status is None:
        return created
    created["status"] = {**created["status"], **status}
    return ok(call(server, "PUT", f"{PDBS}/{name}/status", created), 200)


def _evict(server: ServerThread, name: str, **options: Any) -> Any:
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                            "metadata": {"name": name}}
    if options:
        body["deleteOptions"] = options
    return call(server, "POST", f"{PODS}/{name}/eviction", body)


def test_kubectl_create_pdb_and_table(server: ServerThread) -> None:
    kubectl.ok(server, "create", "pdb", "web", "--selector=app=web", "--min-available=50%")
    pdb = json.loads(kubectl.ok(server, "get", "pdb", "web", "-o", "json"))
    assert pdb["spec"] == {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}
    assert pdb["status"] == {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                             "expectedPods": 0}
    assert pdb["metadata"]["generation"] == 1
    lines = kubectl.ok(server, "get", "poddisruptionbudgets").splitlines()
    assert lines[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED",
                                "DISRUPTIONS", "AGE"]
    assert lines[1].split()[:4] == ["web", "50%", "N/A", "0"]


def test_pdb_validation(server: ServerThread) -> None:
    body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"},
            "spec": {"minAvailable": 1, "maxUnavailable": "120%",
                     "unhealthyPodEvictionPolicy": "Never"}}
    reply = call(server, "POST", PDBS, body)
    assert reply.status == 422
    causes = [(c["field"], c["message"]) for c in reply.status_object()["details"]["causes"]]
    assert causes[0][0] == "spec"
    assert causes[0][1].endswith("minAvailable and maxUnavailable cannot be both set")
    assert causes[1:] == [
        ("spec.maxUnavailable", 'Invalid value: intstr.IntOrString{Type:1, IntVal:0, '
                                'StrVal:"120%"}: must not be greater than 100%'),
        ("spec.unhealthyPodEvictionPolicy",
         'Unsupported value: "Never": supported values: "AlwaysAllow", "IfHealthyBudget"')]
    created = _pdb(server, "ok", minAvailable=1)
    created["status"]["disruptionsAllowed"] = -1
    reply = call(server, "PUT", f"{PDBS}/ok/status", created)
    assert reply.status == 422
    assert reply.status_object()["message"] == (
        'PodDisruptionBudget.policy "ok" is invalid: status.disruptionsAllowed: Invalid value: '
        "-1: must be greater than or equal to 0")


def test_eviction_waits_for_the_budget_to_be_processed(server: ServerThread) -> None:
    _running_pod(server, "p1")
    _pdb(server, "web", minAvailable=1)  # no controller: observedGeneration 0 < generation 1
    reply = _evict(server, "p1")
    assert reply.status == 429
    assert reply.headers.get("retry-after") == "10"
    assert reply.status_object() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": VIOLATION, "reason": "TooManyRequests",
        "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget "
                                "web is still being processed by the server."}],
                    "retryAfterSeconds": 10},
        "code": 429}
    assert get(server, f"{PODS}/p1")["metadata"]["name"] == "p1"


def test_eviction_refused_then_allowed_and_recorded(server: ServerThread) -> None:
    _running_pod(server, "p1")
    status = {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1,
              "desiredHealthy": 1, "expectedPods": 1}
    budget = _pdb(server, "web", status, minAvailable=1)
    reply = _evict(server, "p1")
    assert reply.status == 429
    assert "retry-after" not in reply.headers
    details = reply.status_object()["details"]
    assert details == {"causes": [{"reason": "DisruptionBudget", "message": "The disruption "
                                   "budget web needs 1 healthy pods and has 1 currently"}]}
    budget["status"]["disruptionsAllowed"] = 1
    ok(call(server, "PUT", f"{PDBS}/web/status", budget), 200)
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(server.kubeconfig)))
    eviction = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="p1", namespace="default"))
    api.create_namespaced_pod_eviction("p1", "default", eviction)
    with pytest.raises(ApiException) as caught:
        api.read_namespaced_pod("p1", "default")
    assert caught.value.status == 404
    written = get(server, f"{PDBS}/web")
    after = written["status"]
    # written as kube's loopback client's UpdateStatus
    entries = {(e["manager"], e["operation"], e.get("subresource", ""))
               for e in written["metadata"]["managedFields"]}
    assert ("kube-apiserver", "Update", "status") in entries
    assert after["disruptionsAllowed"] == 0
    assert list(after["disruptedPods"]) == ["p1"]
    assert [(c["type"], c["status"], c["reason"]) for c in after["conditions"]] == [
        ("DisruptionAllowed", "False", "InsufficientPods")]
    # the python client sees kube's 429 as an ApiException
    _running_pod(server, "p2")
    with pytest.raises(ApiException) as caught:
        api.create_namespaced_pod_eviction("p2", "default", k8s.V1Eviction(
            metadata=k8s.V1ObjectMeta(name="p2", namespace="default")))
    assert caught.value.status == 429
    assert json.loads(caught.value.body)["message"] == VIOLATION


def test_dry_run_eviction_changes_nothing(server: ServerThread) -> None:
    _running_pod(server, "p1")
    status = {"observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 2,
              "desiredHealthy": 1, "expectedPods": 2}
    before = _pdb(server, "web", status, minAvailable=1)
    assert _evict(server, "p1", dryRun=["All"]).status == 201
    assert get(server, f"{PDBS}/web")["metadata"]["resourceVersion"] == \
        before["metadata"]["resourceVersion"]
    assert get(server, f"{PODS}/p1")["metadata"]["name"] == "p1"


def test_unready_pods_and_unhealthy_pod_eviction_policy(server: ServerThread) -> None:
    _running_pod(server, "sick", ready=False)
    status = {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 0,
              "desiredHealthy": 1, "expectedPods": 1}
    _pdb(server, "web", status, minAvailable=1)
    assert _evict(server, "sick").status == 429  # IfHealthyBudget: the budget is not met
    patch = {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}
    ok(call(server, "PATCH", f"{PDBS}/web", patch), 200)
    assert _evict(server, "sick").status == 201
    assert call(server, "GET", f"{PODS}/sick").status == 404
    assert get(server, f"{PDBS}/web")["status"]["disruptionsAllowed"] == 0  # not decremented


def test_two_budgets_is_a_failure_status_in_a_201(server: ServerThread) -> None:
    _running_pod(server, "p1")
    _pdb(server, "one", minAvailable=1)
    _pdb(server, "two", maxUnavailable=0)
    reply = _evict(server, "p1")
    assert reply.status == 201
    assert reply.json == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Failure", "message": "This pod has more than one "
                          "PodDisruptionBudget, which the eviction subresource does not "
                          "support.", "code": 500}
    assert get(server, f"{PODS}/p1")["metadata"]["name"] == "p1"
    # a pending pod ignores budgets altogether
    create(server, PODS, {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": "new", "labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    assert _evict(server, "new").status == 201


def test_kubectl_drain_is_held_by_the_budget_then_drains(server: ServerThread) -> None:
    create(server, "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                     "metadata": {"name": "n1"}})
    pod = create(server, PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "n1",
                 "terminationGracePeriodSeconds": 0}})
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    ok(call(server, "PUT", f"{PODS}/x/status", pod), 200)
    status = {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1,
              "desiredHealthy": 1, "expectedPods": 1}
    budget = _pdb(server, "web", status, minAvailable=1)
    done = kubectl.run(server, "drain", "n1", "--force", "--timeout=2s")
    assert done.returncode != 0
    assert ("Cannot evict pod as it would violate the pod's disruption budget."
            in done.stderr), done.stderr
    assert get(server, f"{PODS}/x")["metadata"]["name"] == "x"
    budget["status"]["disruptionsAllowed"] = 1
    ok(call(server, "PUT", f"{PDBS}/web/status", budget), 200)
    done = kubectl.run(server, "drain", "n1", "--force", "--timeout=30s")
    assert done.returncode == 0, done.stderr
    assert "pod/x evicted" in done.stdout
    assert call(server, "GET", f"{PODS}/x").status == 404
