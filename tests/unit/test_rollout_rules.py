"""The workload controllers' pure rules against kube's own examples: fenceposts, the hash's
alphabet, revision annotations, proportional scaling, conditions, the delete ranking."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.cluster.controllers import replica_rules as rr
from kubewire.cluster.controllers import rollout as ro

Obj = dict[str, Any]


def deployment(replicas: int, surge: object = "25%", unavailable: object = "25%",
               **spec: Any) -> Obj:
    return {"metadata": {"name": "d", "generation": 1, "annotations": {}},
            "spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxSurge": surge, "maxUnavailable": unavailable}}, **spec}}


@pytest.mark.parametrize(("replicas", "surge", "unavailable", "want"), [
    (1, "25%", "25%", (1, 0)), (3, "25%", "25%", (1, 0)), (4, "25%", "25%", (1, 1)),
    (10, "25%", "25%", (3, 2)), (3, 0, "10%", (0, 1)), (5, 2, 0, (2, 0)),
])
def test_fenceposts_round_surge_up_unavailable_down(replicas: int, surge: object,
                                                    unavailable: object,
                                                    want: tuple[int, int]) -> None:
    assert ro.fenceposts(deployment(replicas, surge, unavailable)) == want


def test_max_unavailable_is_zero_for_recreate_and_capped() -> None:
    d = deployment(2, 0, 5)
    assert ro.max_unavailable(d) == 2
    d["spec"]["strategy"] = {"type": "Recreate"}
    assert ro.max_unavailable(d) == 0 and ro.max_surge(d) == 0


def test_safe_encoding_maps_decimal_digits() -> None:
    assert ro.safe_encode("0123456789") == "456789bcdf"
    hashed = ro.template_hash({"metadata": {"labels": {"app": "web"}}}, None)
    assert set(hashed) <= set("456789bcdf") and 1 <= len(hashed) <= 10
    assert ro.template_hash({"metadata": {"labels": {"app": "web"}}}, 1) != hashed


def test_fnv1a_matches_the_reference_vectors() -> None:
    assert ro.fnv1a32(b"") == 0x811C9DC5
    assert ro.fnv1a32(b"a") == 0xE40C292C
    assert ro.fnv1a32(b"foobar") == 0xBF9CF968


def test_equal_ignore_hash_treats_absent_and_empty_alike() -> None:
    a = {"metadata": {"labels": {"app": "x", ro.HASH_LABEL: "abc"}}, "spec": {"x": []}}
    b = {"metadata": {"labels": {"app": "x"}}, "spec": {}}
    assert ro.equal_ignore_hash(a, b)
    assert not ro.equal_ignore_hash(a, {"metadata": {"labels": {"app": "y"}}})


def test_new_rs_annotations_raise_revision_and_keep_history() -> None:
    d = deployment(3)
    d["metadata"]["annotations"] = {"kubernetes.io/change-cause": "v2", ro.LAST_APPLIED: "{}"}
    rs: Obj = {"metadata": {"annotations": {ro.REVISION: "1"}}}
    assert ro.set_new_rs_annotations(d, rs, 3, True)
    notes = rs["metadata"]["annotations"]
    assert notes[ro.REVISION] == "3" and notes[ro.REVISION_HISTORY] == "1"
    assert notes["kubernetes.io/change-cause"] == "v2" and ro.LAST_APPLIED not in notes
    assert ro.DESIRED_REPLICAS not in notes  # only a new RS gets them here
    fresh: Obj = {"metadata": {}}
    ro.set_new_rs_annotations(d, fresh, 1, False)
    assert fresh["metadata"]["annotations"][ro.DESIRED_REPLICAS] == "3"
    assert fresh["metadata"]["annotations"][ro.MAX_REPLICAS] == "4"
    assert ro.REVISION_HISTORY not in fresh["metadata"]["annotations"]


def test_new_rs_new_replicas_stops_at_max_total() -> None:
    d = deployment(10)  # surge 3
    old = {"spec": {"replicas": 10}}
    new = {"spec": {"replicas": 0}}
    assert ro.new_rs_new_replicas(d, [old, new], new) == 3
    new["spec"]["replicas"] = 3
    assert ro.new_rs_new_replicas(d, [old, new], new) == 3


def test_proportional_scaling_splits_by_max_replicas() -> None:
    # kube's TestScale "proportional scaling: 5 -> 10" shape: 10 replicas over 7+3 sized for 5
    d = deployment(20, 0, 1)
    a = {"metadata": {"name": "a", "creationTimestamp": "2024-01-01T00:00:00Z",
                      "annotations": {ro.MAX_REPLICAS: "10"}}, "spec": {"replicas": 7}}
    b = {"metadata": {"name": "b", "creationTimestamp": "2024-01-02T00:00:00Z",
                      "annotations": {ro.MAX_REPLICAS: "10"}}, "spec": {"replicas": 3}}
    operation, sizes = ro.proportional_sizes(d, [a, b], 10)
    assert operation == "up" and sizes == {"a": 14, "b": 6}
    operation, sizes = ro.proportional_sizes(deployment(5, 0, 1), [a, b], 10)
    assert operation == "down" and sum(sizes.values()) == 5


def test_conditions_keep_transition_time_and_append() -> None:
    status: Obj = {}
    ro.set_condition(status, ro.condition("Progressing", "True", "A", "a", 0))
    ro.set_condition(status, ro.condition("Available", "True", "B", "b", 10))
    ro.set_condition(status, ro.condition("Progressing", "True", "C", "c", 20))
    assert [c["type"] for c in status["conditions"]] == ["Available", "Progressing"]
    progressing = status["conditions"][1]
    assert progressing["lastTransitionTime"] == ro.rfc3339(0)
    assert progressing["lastUpdateTime"] == ro.rfc3339(20)


def test_complete_and_timed_out() -> None:
    d = deployment(2, progressDeadlineSeconds=5)
    status = {"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2,
              "observedGeneration": 1}
    assert ro.complete(d, status)
    stuck = {"conditions": [ro.condition("Progressing", "True", "ReplicaSetUpdated", "m", 100)]}
    assert not ro.timed_out(d, stuck, 104)
    assert ro.timed_out(d, stuck, 106)


def pod(name: str, *, node: str = "", phase: str = "Running", ready: bool = True,
        cost: int = 0, created: str = "2024-01-01T00:00:00Z") -> Obj:
    meta: Obj = {"name": name, "uid": name, "creationTimestamp": created}
    if cost:
        meta["annotations"] = {rr.DELETION_COST: str(cost)}
    conds = [{"type": "Ready", "status": "True" if ready else "False",
              "lastTransitionTime": created}]
    return {"metadata": meta, "spec": {"nodeName": node},
            "status": {"phase": phase, "conditions": conds}}


def test_delete_ranking_follows_kube() -> None:
    pods = [pod("ready", node="n1"), pod("unassigned", phase="Pending", ready=False),
            pod("pending", node="n1", phase="Pending", ready=False),
            pod("notready", node="n1", ready=False), pod("cheap", node="n2", cost=-5),
            pod("newer", node="n3", created="2024-06-01T00:00:00Z")]
    now = rr.parse_time("2024-07-01T00:00:00Z") or 0.0
    order = [p["metadata"]["name"] for p in rr.pods_to_delete(pods, pods, 5, now)]
    assert order[:4] == ["unassigned", "pending", "notready", "cheap"]
    assert order[4] == "ready"  # n1 holds more related pods than n3


def test_slow_start_batches() -> None:
    assert rr.slow_start_batches(10) == [1, 2, 4, 3]
    assert rr.slow_start_batches(0) == []


def test_replicaset_status_counts_and_failure() -> None:
    rs = {"metadata": {"generation": 2},
          "spec": {"minReadySeconds": 10, "template": {"metadata": {"labels": {"a": "1"}}}}}
    fresh = pod("p1")
    fresh["metadata"]["labels"] = {"a": "1"}
    now = rr.parse_time("2024-01-01T00:00:05Z") or 0.0
    status = rr.replicaset_status(rs, [fresh, pod("p2", ready=False)], now,
                                  ("FailedCreate", "quota"))
    assert status["replicas"] == 2 and status["fullyLabeledReplicas"] == 1
    assert status["readyReplicas"] == 1 and "availableReplicas" not in status
    assert status["observedGeneration"] == 2
    assert status["conditions"][0]["reason"] == "FailedCreate"
    assert "conditions" not in rr.replicaset_status({**rs, "status": status}, [], now, None)


def test_factory_options_from_a_mapping_or_an_options_object() -> None:
    class Options:
        extra = {"workers": "3"}

    assert rr.option({"workers": 2}, "workers", 5) == 2
    assert rr.option(Options(), "workers", 5) == 3
    assert rr.option(None, "workers", 5) == 5
    assert rr.option({"workers": "x"}, "workers", 5) == 5


def test_controller_uid_index_files_a_pod_under_its_controller_or_as_an_orphan() -> None:
    """``PodControllerUIDIndex``: the controller's UID (a non-controller owner does not count),
    else the namespace's orphan key, which no UID can equal."""
    owned = {"metadata": {"namespace": "a", "ownerReferences": [
        {"uid": "u-owner", "controller": False}, {"uid": "u-ctl", "controller": True}]}}
    helper_only = {"metadata": {"namespace": "a", "ownerReferences": [{"uid": "u-owner"}]}}
    bare = {"metadata": {"namespace": "b"}}
    assert rr.controller_uid_index(owned) == ["u-ctl"]
    assert rr.controller_uid_index(helper_only) == [rr.orphan_index_key("a")]
    assert rr.controller_uid_index(bare) == [rr.orphan_index_key("b")]
    assert rr.orphan_index_key("a") != rr.orphan_index_key("b")
    assert "/" in rr.orphan_index_key("a")
