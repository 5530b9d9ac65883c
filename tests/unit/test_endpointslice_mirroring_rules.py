"""The EndpointSlice mirroring controller's pure decisions (endpointslicemirroring)."""

from __future__ import annotations

from typing import Any

from kubewire.cluster.controllers import endpointslice_mirroring_rules as rules

EPS: dict[str, Any] = {
    "metadata": {"name": "db", "namespace": "ns", "uid": "eps-uid",
                 "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "t",
                                 "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
    "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}, {"ip": "bad"}],
                 "ports": [{"name": "a", "port": 1, "protocol": "TCP"}]}]}
SVC = {"metadata": {"name": "db", "namespace": "ns"}, "spec": {"ports": [{"port": 1}]}}


def test_one_slice_per_family_and_port_set_invalid_counted() -> None:
    result, calc = rules.plan(EPS, [])
    assert sorted(s["addressType"] for s in result.create) == ["IPv4", "IPv6"]
    assert calc.invalid == 1 and calc.skipped == 1
    ipv4 = next(s for s in result.create if s["addressType"] == "IPv4")
    assert ipv4["metadata"]["generateName"] == "db-"
    assert "annotations" not in ipv4["metadata"]  # trigger time and last-applied stay behind
    assert ipv4["endpoints"] == [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}]


def test_at_most_max_per_subset_and_recycling() -> None:
    many = {**EPS, "subsets": [{"addresses": [{"ip": f"10.0.0.{i}"} for i in range(1, 6)],
                                "ports": [{"name": "a", "port": 1, "protocol": "TCP"}]}]}
    result, calc = rules.plan(many, [], max_per_subset=3)
    [made] = result.create
    assert len(made["endpoints"]) == 3 and calc.skipped == 2
    made["metadata"].update(name="db-aaaaa", resourceVersion="7")
    moved = {**many, "subsets": [{**many["subsets"][0],
                                  "ports": [{"name": "b", "port": 2, "protocol": "TCP"}]}]}
    again, _ = rules.plan(moved, [made], max_per_subset=3)
    assert not again.create and not again.delete
    [updated] = again.update
    assert updated["metadata"]["name"] == "db-aaaaa"
    assert updated["metadata"]["resourceVersion"] == "7"
    assert updated["ports"] == [{"name": "b", "port": 2, "protocol": "TCP"}]
    same, _ = rules.plan(many, [made], max_per_subset=3)
    assert same.empty


def test_should_mirror() -> None:
    assert rules.should_mirror(EPS, SVC)
    assert not rules.should_mirror(EPS, None)
    assert not rules.should_mirror(EPS, {**SVC, "spec": {"selector": {"a": "b"}}})
    skip = {**EPS, "metadata": {**EPS["metadata"],
                                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}}}
    assert not rules.should_mirror(skip, SVC)
