"""The EndpointSlice controller's pure decisions (k8s.io/endpointslice reconciler.go, utils.go)."""

from __future__ import annotations

from typing import Any

from kubewire.cluster.controllers import endpointslice_rules as rules

SVC: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid", "labels": {"a": "b"}},
    "spec": {"selector": {"app": "web"}, "clusterIP": "10.96.0.10", "ipFamilies": ["IPv4"],
             "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                       {"name": "raw", "port": 81, "targetPort": 9000, "protocol": "UDP"}]}}
NODES = {"n1": {"metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "z"}}}}


def pod(name: str, ip: str, *, ready: bool = True, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"{name}-uid",
                         "labels": {"app": "web"}, **extra.get("meta", {})},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "c", "ports": [{"name": "http", "containerPort": 8080,
                                         "protocol": "TCP"}]}]},
            "status": {"phase": extra.get("phase", "Running"), "podIP": ip,
                       "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def test_ports_resolve_named_and_numeric_target_ports() -> None:
    assert rules.endpoint_ports(SVC, pod("p", "10.0.0.1")) == [
        {"name": "http", "port": 8080, "protocol": "TCP"},
        {"name": "raw", "port": 9000, "protocol": "UDP"}]
    other = pod("q", "10.0.0.2")
    other["spec"]["containers"][0]["ports"][0]["protocol"] = "UDP"  # name matches, not protocol
    assert rules.endpoint_ports(SVC, other) == [{"name": "raw", "port": 9000, "protocol": "UDP"}]


def test_endpoint_conditions() -> None:
    endpoint = rules.pod_to_endpoint(pod("p", "10.0.0.1", ready=True,
                                         meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}),
                                     NODES["n1"], SVC, "IPv4")
    assert endpoint["conditions"] == {"ready": False, "serving": True, "terminating": True}
    assert endpoint["zone"] == "z" and endpoint["nodeName"] == "n1"
    publish = {**SVC, "spec": {**SVC["spec"], "publishNotReadyAddresses": True}}
    assert rules.pod_to_endpoint(pod("p", "10.0.0.1", ready=False), None, publish,
                                 "IPv4")["conditions"]["ready"] is True
    assert rules.pod_to_endpoint(pod("p", "fd00::1"), None, SVC, "IPv4")["addresses"] == []


def test_plan_creates_one_slice_per_hundred() -> None:
    pods = [pod(f"p{i}", f"10.0.{i // 250}.{i % 250 + 1}") for i in range(250)]
    result = rules.plan(SVC, pods, NODES, [])
    assert [len(s["endpoints"]) for s in result.create] == [100, 100, 50]
    first = result.create[0]
    assert first["metadata"]["generateName"] == "web-"
    assert first["metadata"]["labels"] == {
        "a": "b", "kubernetes.io/service-name": "web",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}
    assert not result.update and not result.delete and not result.errors


def test_plan_terminal_pods_unknown_nodes_and_placeholder() -> None:
    done = pod("done", "10.0.0.1", phase="Succeeded")
    lost = pod("lost", "10.0.0.2")
    lost["spec"]["nodeName"] = "gone"
    result = rules.plan(SVC, [done, lost], NODES, [])
    [placeholder] = result.create
    assert placeholder["endpoints"] == [] and placeholder["ports"] == []
    assert result.errors == ["skipping Pod lost for Service ns/web: Node gone Not Found"]
    existing = {**placeholder, "metadata": {**placeholder["metadata"], "name": "web-abcde"}}
    again = rules.plan(SVC, [done], NODES, [existing])
    assert again.empty  # the placeholder stays as it is


def test_plan_updates_in_place_and_reuses_deleted_names() -> None:
    first = rules.plan(SVC, [pod("p", "10.0.0.1")], NODES, [])
    [made] = first.create
    made["metadata"]["name"] = "web-aaaaa"
    unready = rules.plan(SVC, [pod("p", "10.0.0.1", ready=False)], NODES, [made])
    [updated] = unready.update
    assert updated["metadata"]["name"] == "web-aaaaa"
    assert updated["endpoints"][0]["conditions"]["ready"] is False
    assert not unready.create and not unready.delete
    # the port set changes: the slice is reused under its name, not deleted and created
    svc = {**SVC, "spec": {**SVC["spec"], "ports": [{"name": "x", "port": 1, "targetPort": 2,
                                                      "protocol": "TCP"}]}}
    moved = rules.plan(svc, [pod("p", "10.0.0.1")], NODES, [made])
    assert not moved.create and not moved.delete
    assert moved.update[0]["metadata"]["name"] == "web-aaaaa"
    assert moved.update[0]["ports"] == [{"name": "x", "port": 2, "protocol": "TCP"}]


def test_headless_label_and_trigger_times() -> None:
    headless = {**SVC, "spec": {**SVC["spec"], "clusterIP": "None"}}
    labels, changed = rules.slice_labels({"a": "b"}, headless)
    assert labels["service.kubernetes.io/headless"] == "" and not changed
    triggers = rules.TriggerTimes()
    svc = {**SVC, "metadata": {**SVC["metadata"], "creationTimestamp": "2025-12-01T00:00:00Z"}}
    assert triggers.compute(svc, [pod("p", "10.0.0.1")]) == "2025-12-01T00:00:00Z"
    assert triggers.compute(svc, [pod("p", "10.0.0.1")]) == ""
    later = pod("p", "10.0.0.1")
    later["status"]["conditions"][0]["lastTransitionTime"] = "2026-02-01T00:00:00Z"
    assert triggers.compute(svc, [later]) == "2026-02-01T00:00:00Z"
