"""The HPA controller's pure decisions (kube's replica_calculator.go and horizontal.go
arithmetic) and the autoscaling v1<->v2 conversion (kube's autoscaling/v1 conversion.go)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubewire import hpa_conversion as conv
from kubewire.cluster.controllers import hpa_rules as rules

Obj = dict[str, Any]
CPU = rules.Source("cpu")


def pod(name: str, usage: str | None = None, request: str | None = "100m", *,
        ready: bool = True, phase: str = "Running") -> Obj:
    resources = {"requests": {"cpu": request}} if request else {}
    meta: Obj = {"name": name}
    if usage is not None:
        meta["annotations"] = {"kubewire.io/cpu-usage": usage}
    return {"metadata": meta,
            "spec": {"containers": [{"name": "c", "resources": resources}]},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": "True" if ready else "False"}]}}


def samples(pods: list[Obj]) -> dict[str, int]:
    return {p["metadata"]["name"]: int(rules.pod_usage(p, "cpu") * 1000) for p in pods}


def test_usage_from_annotation_else_half_the_requests() -> None:
    assert rules.pod_usage(pod("a", "250m"), "cpu") * 1000 == 250
    assert rules.pod_usage(pod("a"), "cpu") * 1000 == 50
    assert rules.pod_usage(pod("a", request=None), "cpu") == 0


def test_ratio_tolerance_and_ceil() -> None:
    pods = [pod("a", "90m"), pod("b", "90m")]
    assert rules.utilization_replicas(2, 50, pods, samples(pods), CPU) == (4, 90, 90)
    near = [pod("a", "54m"), pod("b", "54m")]  # 1.08: within the 0.1 tolerance
    assert rules.utilization_replicas(2, 50, near, samples(near), CPU)[0] == 2
    low = [pod("a", "10m"), pod("b", "10m"), pod("c", "10m")]
    assert rules.utilization_replicas(3, 50, low, samples(low), CPU)[0] == 1


def test_unready_pods_count_zero_on_scale_up_only() -> None:
    pods = [pod("a", "100m"), pod("b", "100m", ready=False)]
    # ready a alone: ratio 2.0; b at 0% -> (100+0)/200 = 0.5/0.5 -> ceil(1.0*2) = 2
    assert rules.utilization_replicas(2, 50, pods, samples(pods), CPU)[0] == 2
    pending = [pod("a", "10m"), pod("b", phase="Pending")]
    assert rules.utilization_replicas(2, 50, pending, samples(pending), CPU)[0] == 1


def test_missing_request_and_no_pods_are_metric_errors() -> None:
    with pytest.raises(rules.MetricError, match="missing request for cpu in container c"):
        rules.utilization_replicas(1, 50, [pod("a", request=None)], {"a": 1}, CPU)
    with pytest.raises(rules.MetricError, match="no pods returned by selector"):
        rules.utilization_replicas(1, 50, [], {}, CPU)


def test_average_value_target() -> None:
    pods = [pod("a", "300m"), pod("b", "300m")]
    assert rules.average_value_replicas(2, 200, pods, samples(pods), "cpu") == (3, 300)


def test_limits_without_behavior() -> None:
    assert rules.limit_with_rules(2, 10, 1, 20) == (
        4, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum "
                           "scale rate")
    assert rules.limit_with_rules(2, 10, 1, 3)[:2] == (3, "TooManyReplicas")
    assert rules.limit_with_rules(3, 1, 2, 5)[:2] == (2, "TooFewReplicas")
    assert rules.limit_with_rules(3, 4, 2, 5)[:2] == (4, "DesiredWithinRange")


def test_scale_down_stabilization_keeps_the_window_highest() -> None:
    history = rules.History()
    assert rules.stabilize(history, 5, now=0.0) == 5
    assert rules.stabilize(history, 2, now=100.0) == 5  # within 300 s of the 5
    assert rules.stabilize(history, 2, now=400.0) == 2  # the 5 is older than the window
    assert len(history.recommendations) == 2  # the stale slot was reused


def norm(current: int, desired: int, now: float) -> rules.Normalization:
    return rules.Normalization(current, desired, 1, 30, now)


def test_behavior_policies_and_events() -> None:
    behavior = {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                         {"type": "Percent", "value": 100,
                                          "periodSeconds": 15}]},
                "scaleDown": {"selectPolicy": "Max", "policies": [
                    {"type": "Pods", "value": 1, "periodSeconds": 60}]}}
    history = rules.History()
    # scale-up: max(2 + 4, 2 * 2) = 6
    assert rules.limit_with_behavior(history, behavior, norm(2, 20, 0.0))[:2] == (
        6, "ScaleUpLimit")
    rules.record_scale_event(history, behavior, 2, 6, 0.0)
    # within the period the 4 added count: the start is 2 again
    assert rules.limit_with_behavior(history, behavior, norm(6, 20, 5.0))[0] == 6
    # scale-down: one pod per minute
    assert rules.limit_with_behavior(history, behavior, norm(6, 1, 100.0))[:2] == (
        5, "ScaleDownLimit")
    disabled = {**behavior, "scaleDown": {"selectPolicy": "Disabled", "policies": []}}
    assert rules.limit_with_behavior(history, disabled, norm(6, 1, 100.0))[0] == 6


def test_behavior_stabilization_windows() -> None:
    history = rules.History()
    rules.stabilize_with_behavior(history, norm(4, 8, 0.0), (0, 300))
    got = rules.stabilize_with_behavior(history, norm(8, 3, 10.0), (0, 300))
    assert got[:2] == (8, "ScaleDownStabilized")


def test_conditions_keep_their_transition_time_until_the_status_changes() -> None:
    conds = rules.Conditions([], "t1")
    conds.set("AbleToScale", "True", "A", "a")
    conds.now = "t2"
    conds.set("AbleToScale", "True", "B", "b")
    assert conds.items == [{"type": "AbleToScale", "status": "True",
                           "lastTransitionTime": "t1", "reason": "B", "message": "b"}]
    conds.now = "t3"
    conds.set("AbleToScale", "False", "C", "c")
    assert conds.items[0]["lastTransitionTime"] == "t3"


def test_milli_quantities() -> None:
    assert rules.milli_quantity(250) == "250m"
    assert rules.milli_quantity(2000) == "2"


# --- conversion ------------------------------------------------------------------------------

V2: Obj = {
    "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "h", "annotations": {"keep": "me",
                                              conv.METRIC_SPECS_ANNOTATION: "stale"}},
    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 1,
             "maxReplicas": 4, "metrics": [
                 {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {
                     "type": "AverageValue", "averageValue": "10"}}},
                 {"type": "Resource", "resource": {"name": "cpu", "target": {
                     "type": "Utilization", "averageUtilization": 70}}}]},
    "status": {"desiredReplicas": 2, "currentReplicas": 2, "currentMetrics": None}}


def test_v2_to_v1_keeps_other_metrics_in_the_annotation() -> None:
    v1 = conv.v2_to_v1(V2)
    assert v1["spec"] == {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                          "minReplicas": 1, "maxReplicas": 4,
                          "targetCPUUtilizationPercentage": 70}
    notes = v1["metadata"]["annotations"]
    assert notes["keep"] == "me"
    assert json.loads(notes[conv.METRIC_SPECS_ANNOTATION]) == [
        {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "10"}}]
    assert v1["status"] == {"currentReplicas": 2, "desiredReplicas": 2}


def test_v2_to_v1_annotation_is_json_marshal_of_the_v1_structs() -> None:
    """autoscaling/v1 conversion.go writes ``json.Marshal(otherMetrics)``: struct field order
    (a LabelSelector's matchLabels, a Go map, sorted), and encode.go appendString's escapes
    with escapeHTML (``<`` as \\u003c, ``&`` as \\u0026) and U+2028 as \\u2028."""
    hpa = json.loads(json.dumps(V2))
    selector = {"matchExpressions": [{"values": ["x"], "operator": "In", "key": "k"}],
                "matchLabels": {"b": "2", "a": "1"}}
    hpa["spec"]["metrics"][0]["pods"]["metric"] = {"selector": selector, "name": "q<&>\u2028"}
    text = conv.v2_to_v1(hpa)["metadata"]["annotations"][conv.METRIC_SPECS_ANNOTATION]
    assert text == (
        '[{"type":"Pods","pods":{"metricName":"q\\u003c\\u0026\\u003e\\u2028",'
        '"targetAverageValue":"10","selector":{"matchLabels":{"a":"1","b":"2"},'
        '"matchExpressions":[{"key":"k","operator":"In","values":["x"]}]}}}]')


def test_round_trip_v2_v1_v2() -> None:
    back = conv.v1_to_v2(conv.v2_to_v1(V2))
    assert back["spec"]["metrics"] == V2["spec"]["metrics"]
    assert back["metadata"]["annotations"] == {"keep": "me"}


def test_v1_without_metrics_gets_cpu_80_and_bad_annotations_are_ignored() -> None:
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
          "metadata": {"name": "h", "annotations": {conv.METRIC_SPECS_ANNOTATION: "{bad",
                                                    conv.BEHAVIOR_ANNOTATION: "{}"}},
          "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 2}}
    v2 = conv.v1_to_v2(v1)
    assert v2["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    assert "behavior" not in v2["spec"]
    assert "annotations" not in v2["metadata"]
    assert v2["status"] == {"desiredReplicas": 0, "currentMetrics": None}


def test_behavior_annotation_uses_go_field_names() -> None:
    hpa = json.loads(json.dumps(V2))
    hpa["spec"]["behavior"] = {"scaleDown": {"selectPolicy": "Min", "policies": [
        {"type": "Pods", "value": 1, "periodSeconds": 60}]}}
    text = conv.v2_to_v1(hpa)["metadata"]["annotations"][conv.BEHAVIOR_ANNOTATION]
    assert json.loads(text) == {"ScaleUp": None, "ScaleDown": {
        "StabilizationWindowSeconds": None, "SelectPolicy": "Min",
        "Policies": [{"Type": "Pods", "Value": 1, "PeriodSeconds": 60}]}}
    assert conv.v1_to_v2(conv.v2_to_v1(hpa))["spec"]["behavior"] == hpa["spec"]["behavior"]


def metrics(name: str, *containers: tuple[str, Obj]) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns"},
            "containers": [{"name": c, "usage": usage} for c, usage in containers]}


def test_samples_from_pod_metrics_as_kubes_rest_client_reads_them() -> None:
    items = [metrics("a", ("web", {"cpu": "33333334n"}), ("side", {"cpu": "33333333n"})),
             metrics("b", ("web", {"cpu": "200m"}), ("side", {"memory": "1Mi"})),
             metrics("c")]
    # a pod's value is the sum of its containers' MilliValue (each rounded up); a container
    # without the resource, or no container, leaves the pod out
    assert rules.pod_samples(items, "cpu", "") == {"a": 68}
    assert rules.pod_samples(items[:2], "cpu", "web") == {"a": 34, "b": 200}
    assert rules.pod_samples(items[:2], "cpu", "side") == {"a": 34}
    with pytest.raises(ValueError, match="container web not present in metrics for pod ns/c"):
        rules.pod_samples(items, "cpu", "web")


def test_tolerance_is_a_parameter() -> None:
    pods = [pod("a", "140m"), pod("b", "140m")]
    assert rules.utilization_replicas(2, 100, pods, samples(pods), CPU)[0] == 3
    assert rules.utilization_replicas(2, 100, pods, samples(pods), CPU, tolerance=0.5)[0] == 2
    assert rules.average_value_replicas(2, 100, pods, samples(pods), "cpu",
                                        tolerance=0.5)[0] == 2


def test_the_first_turn_records_the_current_replicas() -> None:
    history = rules.History()
    rules.record_initial_recommendation(history, 4, 100.0)
    rules.record_initial_recommendation(history, 9, 101.0)  # only once
    assert history.recommendations == [(100.0, 4)]
    assert rules.stabilize(history, 1, 102.0, 300.0) == 4  # within the window: held at 4
    assert rules.stabilize(history, 1, 500.0, 300.0) == 1  # past it
