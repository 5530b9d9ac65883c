"""deployments/scale (server/scale.py): kube's scaleFromDeployment and scale updates."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubewire.server.writes.scale import apply_scale, scale_from_deployment
from kubewire.status import BadRequest, Conflict, Invalid

DEPLOYMENT: dict[str, Any] = {
    "kind": "Deployment", "apiVersion": "apps/v1",
    "metadata": {"name": "web", "namespace": "default", "uid": "u-1", "resourceVersion": "12",
                 "generation": 2, "creationTimestamp": "2024-12-11T09:15:02Z",
                 "labels": {"app": "web"}},
    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
    "status": {"replicas": 2},
}


def test_scale_from_deployment() -> None:
    assert scale_from_deployment(DEPLOYMENT) == {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "web", "namespace": "default", "uid": "u-1",
                     "resourceVersion": "12", "creationTimestamp": "2024-12-11T09:15:02Z"},
        "spec": {"replicas": 3},
        "status": {"replicas": 2, "selector": "app=web"},
    }


def test_zero_replicas_and_missing_status_follow_omitempty() -> None:
    deployment = copy.deepcopy(DEPLOYMENT)
    deployment["spec"] = {"replicas": 0}
    del deployment["status"]
    scale = scale_from_deployment(deployment)
    assert scale["spec"] == {} and scale["status"] == {"replicas": 0}


def test_selector_with_expressions() -> None:
    deployment = copy.deepcopy(DEPLOYMENT)
    deployment["spec"]["selector"] = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}
    assert scale_from_deployment(deployment)["status"]["selector"] == "app=web,tier in (a,b)"


def test_invalid_stored_selector_is_bad_request() -> None:
    deployment = copy.deepcopy(DEPLOYMENT)
    deployment["spec"]["selector"] = {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}
    with pytest.raises(BadRequest):
        scale_from_deployment(deployment)


def _scale(**spec: Any) -> dict[str, Any]:
    scale = scale_from_deployment(DEPLOYMENT)
    scale["spec"] = spec
    return scale


def test_apply_scale_sets_replicas_and_keeps_the_rest() -> None:
    before = copy.deepcopy(DEPLOYMENT)
    updated = apply_scale(DEPLOYMENT, _scale(replicas=5))
    assert updated["spec"] == {"replicas": 5, "selector": {"matchLabels": {"app": "web"}}}
    assert updated["metadata"] == DEPLOYMENT["metadata"]
    assert before == DEPLOYMENT


def test_missing_replicas_means_zero_and_missing_rv_is_unconditional() -> None:
    scale = _scale()
    del scale["metadata"]["resourceVersion"]
    updated = apply_scale(DEPLOYMENT, scale)
    assert updated["spec"]["replicas"] == 0
    assert "resourceVersion" not in updated["metadata"]


def test_negative_replicas_is_invalid() -> None:
    with pytest.raises(Invalid) as info:
        apply_scale(DEPLOYMENT, _scale(replicas=-1))
    assert info.value.message == ('Scale.autoscaling "web" is invalid: spec.replicas: '
                                  "Invalid value: -1: must be greater than or equal to 0")
    assert info.value.details == {
        "name": "web", "group": "autoscaling", "kind": "Scale",
        "causes": [{"reason": "FieldValueInvalid", "field": "spec.replicas",
                    "message": "Invalid value: -1: must be greater than or equal to 0"}]}


@pytest.mark.parametrize(("value", "go_type"), [
    ("4", "string"), (True, "bool"), (4.5, "number 4.5"), (2**31, "number 2147483648")])
def test_non_int32_replicas_is_bad_request(value: Any, go_type: str) -> None:
    with pytest.raises(BadRequest) as info:
        apply_scale(DEPLOYMENT, _scale(replicas=value))
    assert info.value.message == (f"json: cannot unmarshal {go_type} into Go struct field "
                                  "ScaleSpec.spec.replicas of type int32")


def test_uid_precondition() -> None:
    scale = _scale(replicas=1)
    scale["metadata"]["uid"] = "other"
    with pytest.raises(Conflict) as info:
        apply_scale(DEPLOYMENT, scale)
    assert info.value.message == (
        'Operation cannot be fulfilled on deployments/scale.apps "web": Precondition failed: '
        "UID in precondition: other, UID in object meta: u-1")


def test_stale_resource_version_conflicts() -> None:
    scale = _scale(replicas=1)
    scale["metadata"]["resourceVersion"] = "11"
    with pytest.raises(Conflict) as info:
        apply_scale(DEPLOYMENT, scale)
    assert info.value.message == (
        'Operation cannot be fulfilled on deployments.apps "web": the object has been '
        "modified; please apply your changes to the latest version and try again")
    assert info.value.details == {"name": "web", "group": "apps", "kind": "deployments"}
