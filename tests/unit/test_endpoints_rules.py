"""The Endpoints controller's pure decisions (endpoints_controller.go syncService,
RepackSubsets, truncateEndpoints)."""

from __future__ import annotations

from typing import Any

from kubewire.cluster.controllers import endpoints_rules as rules

SVC: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "ns", "labels": {"a": "b"}},
    "spec": {"selector": {"app": "web"}, "clusterIP": "10.96.0.10", "ipFamilies": ["IPv4"],
             "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                       {"name": "dns", "port": 53, "targetPort": 53, "protocol": "UDP"}]}}


def pod(name: str, ip: str, *, ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"{name}-uid"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready",
                                       "status": "True" if ready else "False"}]}}


def ips(addresses: list[dict[str, Any]] | None) -> list[str]:
    return [a["ip"] for a in addresses or []]


def test_subsets_are_repacked_by_port_set() -> None:
    subsets = rules.repack(rules.raw_subsets(SVC, [pod("b", "10.0.0.2"), pod("a", "10.0.0.1"),
                                                   pod("c", "10.0.0.3", ready=False)]))
    assert len(subsets) == 1
    [subset] = subsets
    assert ips(subset["addresses"]) == ["10.0.0.1", "10.0.0.2"]  # sorted by IP
    assert ips(subset["notReadyAddresses"]) == ["10.0.0.3"]
    assert [p["name"] for p in subset["ports"]] == ["dns", "http"]
    assert subset["addresses"][0] == {
        "ip": "10.0.0.1", "nodeName": "n1",
        "targetRef": {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "a-uid"}}


def test_terminating_pods_only_with_publish_not_ready() -> None:
    going = pod("t", "10.0.0.9", deleting=True)
    assert rules.raw_subsets(SVC, [going]) == []
    publish = {**SVC, "spec": {**SVC["spec"], "publishNotReadyAddresses": True}}
    [subset] = rules.repack(rules.raw_subsets(publish, [going, pod("u", "10.0.0.8",
                                                                   ready=False)]))
    assert ips(subset["addresses"]) == ["10.0.0.8", "10.0.0.9"]


def test_truncation_keeps_ready_first_and_annotates() -> None:
    pods = [pod(f"r{i}", f"10.1.{i // 200}.{i % 200 + 1}") for i in range(900)]
    pods += [pod(f"n{i}", f"10.2.{i // 200}.{i % 200 + 1}", ready=False) for i in range(300)]
    one_port = {**SVC, "spec": {**SVC["spec"], "ports": SVC["spec"]["ports"][:1]}}
    obj = rules.desired(one_port, pods, None, "")
    assert obj is not None
    [subset] = obj["subsets"]
    assert len(subset["addresses"]) == 900 and len(subset["notReadyAddresses"]) == 100
    assert obj["metadata"]["annotations"] == {"endpoints.kubernetes.io/over-capacity":
                                              "truncated"}
    assert obj["metadata"]["labels"] == {"a": "b"}


def test_no_write_when_equal_and_headless_label() -> None:
    first = rules.desired(SVC, [pod("a", "10.0.0.1")], None, "2026-01-01T00:00:00Z")
    assert first is not None
    assert first["metadata"]["annotations"] == {
        "endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z"}
    assert rules.desired(SVC, [pod("a", "10.0.0.1")], first, "") is None
    headless = {**SVC, "spec": {**SVC["spec"], "clusterIP": "None", "ports": []}}
    obj = rules.desired(headless, [pod("a", "10.0.0.1")], None, "")
    assert obj is not None
    assert obj["metadata"]["labels"] == {"a": "b", "service.kubernetes.io/headless": ""}
    assert obj["subsets"] == [{"addresses": [{
        "ip": "10.0.0.1", "nodeName": "n1",
        "targetRef": {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "a-uid"}}]}]
