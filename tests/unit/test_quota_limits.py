"""The pure parts of quota and LimitRange admission: Go's quantity text, what objects cost,
kube's verdict texts (``CheckRequest``, ``PodValidateLimitFunc``), LimitRanger's defaults and
the DefaultStorageClass choice."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest

from kubewire.quantity_text import Amount, add, amount_of, canonical
from kubewire.resources import REGISTRY
from kubewire.server.writes import limit_ranger, quota
from kubewire.server.writes.storage_admission import default_class
from kubewire.server.writes.validation.storage import (
    go_quantity,
    validate_limit_range,
    validate_resource_quota,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    ("0", "0"), ("100m", "100m"), ("1000m", "1"), ("1.5", "1500m"), ("2000", "2k"),
    ("1500", "1500"), ("1Gi", "1Gi"), ("1536Mi", "1536Mi"), ("1024Mi", "1Gi"), ("512", "512"),
    ("0.5Gi", "512Mi"), ("1e3", "1e3"), ("12e2", "1200"), ("128M", "128M"), ("1n", "1n"),
])
def test_canonical_quantity_text(text: str, expected: str) -> None:
    amount = amount_of(text)
    assert amount is not None
    assert canonical(amount) == expected


def test_sums_keep_the_first_non_zero_format() -> None:
    mi = amount_of("512Mi")
    assert mi is not None
    assert canonical(add(mi, mi)) == "1Gi"
    assert canonical(add(Amount(Fraction(0)), mi)) == "512Mi"  # a zero takes the other's
    decimal = amount_of("500M")
    assert decimal is not None
    assert canonical(add(decimal, mi)) == "1036870912"


def _pod(name: str = "p", *containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": list(containers), **spec}}


def _container(name: str, requests: dict[str, str] | None = None,
               limits: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "resources": {k: v for k, v in (("requests", requests),
                                                           ("limits", limits)) if v}}


def _quota(name: str, hard: dict[str, str], used: dict[str, str] | None,
           **spec: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"hard": hard}
    if used is not None:
        status["used"] = used
    return {"metadata": {"name": name}, "spec": {"hard": hard, **spec}, "status": status}


PODS = quota.evaluator_for("", "pods")


def test_pod_usage_sums_containers_and_init_maximum() -> None:
    pod = _pod("p", _container("a", {"cpu": "100m"}, {"cpu": "200m"}),
               _container("b", {"cpu": "300m", "memory": "1Gi"}),
               initContainers=[_container("i", {"cpu": "1"})])
    usage = quota.pod_usage(pod, NOW)
    assert {k: canonical(v) for k, v in usage.items()} == {
        "count/pods": "1", "pods": "1", "cpu": "1", "requests.cpu": "1", "limits.cpu": "200m",
        "memory": "1Gi", "requests.memory": "1Gi"}
    finished = {**pod, "status": {"phase": "Succeeded"}}
    assert set(quota.pod_usage(finished, NOW)) == {"count/pods"}


def test_exceeded_quota_text() -> None:
    quotas = [_quota("compute", {"requests.cpu": "1", "pods": "5"},
                     {"requests.cpu": "600m", "pods": "1"})]
    pod = _pod("p", _container("a", {"cpu": "500m"}))
    with pytest.raises(quota.QuotaRefused) as refused:
        quota.check_request(quotas, PODS, pod, None, NOW)
    assert str(refused.value) == ("exceeded quota: compute, requested: requests.cpu=500m, "
                                  "used: requests.cpu=600m, limited: requests.cpu=1")
    fits = _pod("p", _container("a", {"cpu": "400m"}))
    charges = quota.check_request(quotas, PODS, fits, None, NOW)
    assert charges == [quota.Charge("compute", {"pods": "2", "requests.cpu": "1"})]


def test_must_specify_and_unknown_status_texts() -> None:
    quotas = [_quota("q", {"limits.cpu": "2", "requests.memory": "1Gi"},
                     {"limits.cpu": "0", "requests.memory": "0"})]
    pod = _pod("p", _container("b"), _container("a", {"memory": "1Mi"}))
    with pytest.raises(quota.QuotaRefused) as refused:
        quota.check_request(quotas, PODS, pod, None, NOW)
    assert str(refused.value) == ("failed quota: q: must specify limits.cpu for: a,b; "
                                  "requests.memory for: b")
    unknown = [_quota("q", {"pods": "2"}, None)]
    with pytest.raises(quota.QuotaRefused) as refused:
        quota.check_request(unknown, PODS, _pod(), None, NOW)
    assert str(refused.value) == "status unknown for quota: q, resources: pods"


def test_scopes_and_other_kinds() -> None:
    best_effort = [_quota("be", {"pods": "0"}, {"pods": "0"}, scopes=["BestEffort"])]
    assert quota.check_request(best_effort, PODS, _pod("p", _container("a", {"cpu": "1"})),
                               None, NOW) == []
    with pytest.raises(quota.QuotaRefused):
        quota.check_request(best_effort, PODS, _pod("p", _container("a")), None, NOW)
    deployments = quota.evaluator_for("apps", "deployments")
    counted = [_quota("c", {"count/deployments.apps": "1"}, {"count/deployments.apps": "1"})]
    with pytest.raises(quota.QuotaRefused) as refused:
        quota.check_request(counted, deployments, {"metadata": {"name": "d"}}, None, NOW)
    assert "requested: count/deployments.apps=1" in str(refused.value)
    services = quota.evaluator_for("", "services")
    lb = {"metadata": {"name": "s", "resourceVersion": "5"},
          "spec": {"type": "LoadBalancer", "ports": [{"port": 80}, {"port": 81}]}}
    old = {"metadata": {"name": "s", "resourceVersion": "5"},
           "spec": {"type": "ClusterIP", "ports": [{"port": 80}, {"port": 81}]}}
    nodeports = [_quota("n", {"services.nodeports": "3", "services": "10"},
                        {"services.nodeports": "2", "services": "1"})]
    with pytest.raises(quota.QuotaRefused) as refused:
        quota.check_request(nodeports, services, lb, old, NOW)  # an update charges the change
    assert str(refused.value) == ("exceeded quota: n, requested: services.nodeports=2, used: "
                                  "services.nodeports=2, limited: services.nodeports=3")


def test_controller_usage() -> None:
    resource_quota = _quota("q", {"pods": "5", "requests.storage": "10Gi",
                                  "count/widgets.example.com": "1"}, None)
    claims = [{"spec": {"resources": {"requests": {"storage": "1Gi"}}}},
              {"spec": {"resources": {"requests": {"storage": "512Mi"}}}}]
    objects = {"pods": [_pod("a"), {**_pod("b"), "status": {"phase": "Failed"}}],
               "persistentvolumeclaims": claims}
    evaluators = [quota.evaluator_for("", plural) for plural in
                  ("pods", "persistentvolumeclaims", "configmaps")]
    status = quota.calculate_used(resource_quota, evaluators,
                                  lambda e: objects.get(e.plural, []), NOW)
    assert status == {"hard": {"count/widgets.example.com": "1", "pods": "5",
                               "requests.storage": "10Gi"},
                      "used": {"pods": "1", "requests.storage": "1536Mi"}}


LIMITS = [{"spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"},
                                "defaultRequest": {"cpu": "100m", "memory": "64Mi"},
                                "max": {"cpu": "1"}, "min": {"cpu": "50m"},
                                "maxLimitRequestRatio": {"cpu": "4"}},
                               {"type": "Pod", "max": {"memory": "1Gi"}}]}}]


def test_limit_ranger_defaults_and_annotation() -> None:
    pod = _pod("p", _container("app", limits={"cpu": "200m"}),
               initContainers=[_container("init")])
    limit_ranger.default_pod(pod, LIMITS)
    assert pod["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "200m"}, "requests": {"cpu": "100m", "memory": "64Mi"}}
    assert pod["metadata"]["annotations"][limit_ranger.ANNOTATION] == (
        "LimitRanger plugin set: cpu, memory request for container app; cpu, memory request "
        "for init container init; cpu limit for init container init")


def test_limit_ranger_bound_texts() -> None:
    pod = _pod("p", _container("app", {"cpu": "100m", "memory": "2Gi"},
                               {"cpu": "800m", "memory": "2Gi"}))
    problems = limit_ranger.pod_problems(pod, LIMITS)
    assert problems == [
        "cpu max limit to request ratio per Container is 4, but provided ratio is 8.000000",
        "maximum memory usage per Pod is 1Gi, but limit is 2Gi"]
    assert limit_ranger.aggregate(problems) == "[" + ", ".join(problems) + "]"
    assert limit_ranger.pod_problems(_pod("p", _container("a")), LIMITS)[:2] == [
        "minimum cpu usage per Container is 50m.  No request is specified",
        "maximum cpu usage per Container is 1.  No limit is specified"]
    claim = {"spec": {"resources": {"requests": {"storage": "5Gi"}}}}
    ranges = [{"spec": {"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "2Gi"},
                                    "min": {"storage": "1Gi"}}]}}]
    assert limit_ranger.claim_problems(claim, ranges) == [
        "maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"]


def test_default_storage_class_is_the_newest_default() -> None:
    def sc(name: str, created: str, default: bool) -> dict[str, Any]:
        annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
        return {"metadata": {"name": name, "creationTimestamp": created,
                             "annotations": annotations}}
    assert default_class([sc("a", "2026-01-01T00:00:00Z", False)]) is None
    assert default_class([sc("old", "2025-01-01T00:00:00Z", True),
                          sc("new", "2026-01-01T00:00:00Z", True),
                          sc("b", "2026-01-01T00:00:00Z", True)]) == "b"


def test_go_quantity_repr() -> None:
    assert repr(go_quantity("2")) == (
        'resource.Quantity{i:resource.int64Amount{value:2, scale:0}, '
        'd:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"2", Format:"DecimalSI"}')
    assert repr(go_quantity("1.5")).startswith(
        "resource.Quantity{i:resource.int64Amount{value:15, scale:-1}")
    assert repr(go_quantity("1Gi")).endswith('s:"1Gi", Format:"BinarySI"}')


def test_limit_range_type_and_quota_scope_validation() -> None:
    limit_ranges = REGISTRY.lookup("", "v1", "limitranges")
    quotas = REGISTRY.lookup("", "v1", "resourcequotas")
    assert limit_ranges is not None and quotas is not None
    errors = validate_limit_range(limit_ranges, {"spec": {"limits": [
        {"type": "Memory"}, {"type": "example.com/gpu"}, {"type": "Container"},
        {"type": "Container"}]}})
    assert [str(e) for e in errors] == [
        'spec.limits[0].type: Invalid value: "Memory": must be a standard limit type or fully '
        "qualified",
        'spec.limits[3].type: Duplicate value: "Container"']
    errors = validate_resource_quota(quotas, {"spec": {
        "hard": {"services": "1", "pods": "1"}, "scopes": ["BestEffort", "Terminating"]}})
    assert [str(e) for e in errors] == [
        'spec.scopes: Invalid value: []core.ResourceQuotaScope{"BestEffort", "Terminating"}: '
        "unsupported scope applied to resource"] * 2
