"""autoscaling/v2 and autoscaling/v1 HorizontalPodAutoscalers (kube v1.32): kubectl autoscale and
its Table, protobuf request bodies, v2 defaults, the v1 view of a v2 object
(targetCPUUtilizationPercentage and the round-trip annotations) and back, validation texts, the
status subresource, and the ``kubernetes`` package's typed AutoscalingV1Api/V2Api."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, get, ok
from tests.unit.test_protobuf import HPA, HPA_V1, encode_body

pytestmark = kubectl.needs_kubectl

V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def _deployment(server: ServerThread, name: str = "web") -> None:
    kubectl.ok(server, "create", "deployment", name, "--image=nginx", "--replicas=1")


def _v2(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "web"}, "maxReplicas": 5, **spec}}


def test_kubectl_autoscale_and_get_hpa(server: ServerThread) -> None:
    _deployment(server)
    out = kubectl.ok(server, "autoscale", "deploy/web", "--min=2", "--max=5", "--cpu-percent=50")
    assert "autoscaled" in out
    hpa = json.loads(kubectl.ok(server, "get", "hpa", "web", "-o", "json"))
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["minReplicas"] == 2 and hpa["spec"]["maxReplicas"] == 5
    assert hpa["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]
    assert hpa["status"] == {"desiredReplicas": 0, "currentMetrics": None}
    lines = kubectl.ok(server, "get", "hpa").splitlines()
    assert lines[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS",
                                "REPLICAS", "AGE"]
    assert lines[1].split()[:7] == ["web", "Deployment/web", "cpu:", "<unknown>/50%", "2", "5",
                                    "0"]
    v1_table = kubectl.ok(server, "get", "horizontalpodautoscalers.v1.autoscaling", "web")
    assert "cpu: <unknown>/50%" in v1_table


def test_v2_defaults_and_behavior_rules(server: ServerThread) -> None:
    created = create(server, V2, _v2("plain"))
    assert created["spec"]["minReplicas"] == 1
    assert created["spec"]["metrics"][0]["resource"]["target"] == {
        "type": "Utilization", "averageUtilization": 80}
    assert "behavior" not in created["spec"]
    with_behavior = create(server, V2, _v2("b", behavior={"scaleDown": {
        "stabilizationWindowSeconds": 60}}))
    assert with_behavior["spec"]["behavior"] == {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15}]},
        "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                      "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}


def test_v1_view_of_v2_and_round_trip(server: ServerThread) -> None:
    memory = {"type": "Resource", "resource": {"name": "memory", "target": {
        "type": "AverageValue", "averageValue": "100Mi"}}}
    cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 60}}}
    create(server, V2, _v2("mixed", minReplicas=2, metrics=[memory, cpu],
                           behavior={"scaleUp": {"selectPolicy": "Disabled"}}))
    v1 = get(server, f"{V1}/mixed")
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"] == {"scaleTargetRef": {"kind": "Deployment", "name": "web",
                                             "apiVersion": "apps/v1"},
                          "minReplicas": 2, "maxReplicas": 5,
                          "targetCPUUtilizationPercentage": 60}
    assert v1["status"] == {"currentReplicas": 0, "desiredReplicas": 0}
    notes = v1["metadata"]["annotations"]
    assert json.loads(notes["autoscaling.alpha.kubernetes.io/metrics"]) == [
        {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "100Mi"}}]
    behavior = json.loads(notes["autoscaling.alpha.kubernetes.io/behavior"])
    assert behavior["ScaleUp"]["SelectPolicy"] == "Disabled"
    assert behavior["ScaleDown"]["Policies"] == [
        {"Type": "Percent", "Value": 100, "PeriodSeconds": 15}]
    # a v1 update carrying the annotations back keeps every v2 field; none is stored
    v1["spec"]["maxReplicas"] = 7
    ok(call(server, "PUT", f"{V1}/mixed", v1), 200)
    back = get(server, f"{V2}/mixed")
    assert back["spec"]["maxReplicas"] == 7
    assert back["spec"]["metrics"] == [memory, cpu]
    assert back["spec"]["behavior"]["scaleUp"]["selectPolicy"] == "Disabled"
    assert "annotations" not in back["metadata"]


def test_v2_writes_drop_round_trip_annotations(server: ServerThread) -> None:
    # v2 converts to kube's internal type without them (DropRoundTripHorizontalPodAutoscaler-
    # Annotations): a v2 client cannot store them
    body = _v2("noted")
    body["metadata"]["annotations"] = {"autoscaling.alpha.kubernetes.io/behavior": "{}",
                                       "keep": "me"}
    assert create(server, V2, body)["metadata"]["annotations"] == {"keep": "me"}


def test_v1_create_gets_the_cpu_default(server: ServerThread) -> None:
    body = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "old"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                     "maxReplicas": 3}}
    created = create(server, V1, body)
    assert created["spec"]["minReplicas"] == 1
    assert created["spec"]["targetCPUUtilizationPercentage"] == 80
    assert get(server, f"{V2}/old")["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]


def test_validation_texts(server: ServerThread) -> None:
    bad = _v2("bad", minReplicas=3, maxReplicas=2)
    bad["spec"]["scaleTargetRef"] = {"kind": "Deployment", "name": ""}
    bad["spec"]["behavior"] = {"scaleUp": {"policies": [
        {"type": "Fast", "value": 0, "periodSeconds": 1801}]}}
    status = ok(call(server, "POST", V2, bad), 422)
    assert status["message"] == (
        'HorizontalPodAutoscaler.autoscaling "bad" is invalid: ['
        "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`, "
        "spec.scaleTargetRef.name: Required value, "
        'spec.behavior.scaleUp.policies[0].type: Unsupported value: "Fast": supported values: '
        '"Percent", "Pods", '
        "spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero, "
        "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less "
        "than or equal to 1800]")
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
          "metadata": {"name": "zero"},
          "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                   "minReplicas": 0, "maxReplicas": 3, "targetCPUUtilizationPercentage": 0}}
    status = ok(call(server, "POST", V1, v1), 422)
    assert status["message"] == (
        'HorizontalPodAutoscaler.autoscaling "zero" is invalid: ['
        "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1, "
        "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be "
        "greater than 0, spec.metrics: Forbidden: must specify at least one Object or "
        "External metric to support scaling to zero replicas]")
    assert ok(call(server, "GET", V2), 200)["items"] == []


def test_status_subresource_and_v1_current_cpu(server: ServerThread) -> None:
    create(server, V2, _v2("s"))
    hpa = get(server, f"{V2}/s")
    hpa["status"] = {"currentReplicas": 2, "desiredReplicas": 3, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {
            "averageValue": "250m", "averageUtilization": 90}}}],
        "conditions": [{"type": "AbleToScale", "status": "True",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "reason": "SucceededRescale", "message": "ok"}]}
    hpa["spec"]["maxReplicas"] = 9  # ignored by /status
    ok(call(server, "PUT", f"{V2}/s/status", hpa), 200)
    v1 = get(server, f"{V1}/s")
    assert v1["spec"]["maxReplicas"] == 5
    assert v1["status"] == {"currentReplicas": 2, "desiredReplicas": 3,
                            "currentCPUUtilizationPercentage": 90}
    notes = v1["metadata"]["annotations"]
    assert json.loads(notes["autoscaling.alpha.kubernetes.io/conditions"])[0]["type"] == \
        "AbleToScale"
    assert "autoscaling.alpha.kubernetes.io/current-metrics" in notes
    lines = kubectl.ok(server, "get", "hpa", "s").splitlines()
    assert lines[1].split()[2:4] == ["cpu:", "90%/80%"]
    hpa["status"]["desiredReplicas"] = -1
    status = ok(call(server, "PUT", f"{V2}/s/status", get(server, f"{V2}/s") | {
        "status": hpa["status"]}), 422)
    assert "status.desiredReplicas: Invalid value: -1: must be greater than or equal to 0" \
        in status["message"]


def test_kubernetes_package_typed_apis(server: ServerThread) -> None:
    api_client = k8s_config.new_client_from_config(str(server.kubeconfig))
    try:
        v2 = k8s.AutoscalingV2Api(api_client)
        v1 = k8s.AutoscalingV1Api(api_client)
        v2.create_namespaced_horizontal_pod_autoscaler("default", _v2("typed"))
        got = v1.read_namespaced_horizontal_pod_autoscaler("typed", "default")
        assert got.spec.target_cpu_utilization_percentage == 80
        assert [h.metadata.name for h in
                v2.list_namespaced_horizontal_pod_autoscaler("default").items] == ["typed"]
        v1.delete_namespaced_horizontal_pod_autoscaler("typed", "default")
    finally:
        api_client.close()


def test_protobuf_bodies_of_either_version(server: ServerThread) -> None:
    # kubectl and client-go send built-in kinds as protobuf
    headers = {"Content-Type": "application/vnd.kubernetes.protobuf",
               "Accept": "application/json"}
    v1 = {**HPA_V1, "metadata": {"name": "proto-v1"}}
    ok(call(server, "POST", V1, encode_body(v1), headers), 201)
    assert get(server, f"{V2}/proto-v1")["spec"]["metrics"][0]["resource"]["target"] == {
        "type": "Utilization", "averageUtilization": 80}
    v2 = {**HPA, "metadata": {"name": "proto-v2"}}
    created = ok(call(server, "POST", V2, encode_body(v2), headers), 201)
    assert created["spec"]["behavior"]["scaleUp"]["stabilizationWindowSeconds"] == 0
    assert created["status"] == {"desiredReplicas": 0, "currentMetrics": None}
    assert get(server, f"{V1}/proto-v2")["spec"]["targetCPUUtilizationPercentage"] == 80
