"""scheduling.k8s.io/v1 PriorityClasses: kube's two system classes made at start and never
deletable, kubectl create priorityclass and its Table, validation (reserved names, values,
immutability), one global default, and pods' priorityClassName resolved at admission."""

from __future__ import annotations

import json
from typing import Any

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, get, ok

pytestmark = kubectl.needs_kubectl

PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"
PODS = "/api/v1/namespaces/default/pods"


def _pc(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, **fields}


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def test_system_classes_exist_and_cannot_be_deleted(server: ServerThread) -> None:
    node = get(server, f"{PCS}/system-node-critical")
    assert (node["value"], node["preemptionPolicy"]) == (2000001000, "PreemptLowerPriority")
    assert node["description"] == ("Used for system critical pods that must not be moved from "
                                   "their current node.")
    assert "globalDefault" not in node
    assert get(server, f"{PCS}/system-cluster-critical")["value"] == 2000000000
    reply = call(server, "DELETE", f"{PCS}/system-node-critical")
    assert reply.status == 403
    assert reply.status_object()["message"] == (
        'priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: this is a system '
        "priority class and cannot be deleted")
    lines = kubectl.ok(server, "get", "pc").splitlines()
    assert lines[0].split() == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    rows = [line.split() for line in lines[1:]]
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [
        ("system-cluster-critical", "2000000000", "false", "PreemptLowerPriority"),
        ("system-node-critical", "2000001000", "false", "PreemptLowerPriority")]


def test_kubectl_create_priorityclass_and_validation(server: ServerThread) -> None:
    kubectl.ok(server, "create", "priorityclass", "high", "--value=1000",
               "--description=high priority", "--preemption-policy=Never")
    high = json.loads(kubectl.ok(server, "get", "pc", "high", "-o", "json"))
    assert (high["value"], high["preemptionPolicy"], high["description"]) == (
        1000, "Never", "high priority")
    reply = call(server, "POST", PCS, _pc("system-mine", 5))
    assert reply.status_object()["message"] == (
        'PriorityClass.scheduling.k8s.io "system-mine" is invalid: metadata.name: Forbidden: '
        "priority class names with 'system-' prefix are reserved for system use only. error: "
        "system-mine is not a known system priority class")
    reply = call(server, "POST", PCS, _pc("huge", 1_000_000_001))
    assert reply.status_object()["message"] == (
        'PriorityClass.scheduling.k8s.io "huge" is invalid: value: Forbidden: maximum allowed '
        "value of a user defined priority is 1000000000")
    reply = call(server, "PATCH", f"{PCS}/high", {"value": 7})
    assert reply.status == 422
    assert reply.status_object()["message"] == (
        'PriorityClass.scheduling.k8s.io "high" is invalid: value: Forbidden: may not be '
        "changed in an update.")
    changed = ok(call(server, "PATCH", f"{PCS}/high", {"description": "changed"}), 200)
    assert changed["metadata"]["generation"] == high["metadata"]["generation"] == 1


def test_one_global_default_and_pods_get_its_priority(server: ServerThread) -> None:
    create(server, PCS, _pc("base", 100, globalDefault=True))
    reply = call(server, "POST", PCS, _pc("other", 200, globalDefault=True))
    assert reply.status == 403
    assert reply.status_object()["message"] == (
        'priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass base is already '
        "marked as default. Only one default can exist")
    pod = create(server, PODS, _pod("plain"))
    assert (pod["spec"]["priorityClassName"], pod["spec"]["priority"],
            pod["spec"]["preemptionPolicy"]) == ("base", 100, "PreemptLowerPriority")
    create(server, PCS, _pc("batch", 50, preemptionPolicy="Never"))
    pod = create(server, PODS, _pod("low", priorityClassName="batch"))
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (50, "Never")
    pod = create(server, PODS, _pod("critical", priorityClassName="system-node-critical"))
    assert pod["spec"]["priority"] == 2000001000
    reply = call(server, "POST", PODS, _pod("bad", priorityClassName="batch", priority=7))
    assert reply.status == 403
    assert reply.status_object()["message"] == (
        'pods "bad" is forbidden: the integer value of priority (7) must not be provided in pod '
        "spec; priority admission controller computed 50 from the given PriorityClass name")
    reply = call(server, "POST", PODS, _pod("bad", priorityClassName="nope"))
    assert reply.status_object()["message"] == (
        'pods "bad" is forbidden: no PriorityClass with name nope was found')
    # the admission plugin's lister follows the classes' changes (decoded once per revision)
    ok(call(server, "PATCH", f"{PCS}/base", {"globalDefault": False}), 200)
    pod = create(server, PODS, _pod("after-change"))
    assert "priorityClassName" not in pod["spec"] and pod["spec"]["priority"] == 0
    ok(call(server, "PATCH", f"{PCS}/base", {"globalDefault": True}), 200)
    assert create(server, PODS, _pod("again"))["spec"]["priority"] == 100
    ok(call(server, "DELETE", f"{PCS}/base"), 200)
    assert create(server, PODS, _pod("gone"))["spec"]["priority"] == 0


def test_pods_without_a_default_class_get_zero(server: ServerThread) -> None:
    pod = create(server, PODS, _pod("plain"))
    assert "priorityClassName" not in pod["spec"]
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (
        0, "PreemptLowerPriority")
