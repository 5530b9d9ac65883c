"""core/v1 ReplicationController's pure rules: SetDefaults_ReplicationController, kube's
validation texts, the Scale's selector string, and the replica controller's view of an RC."""

from __future__ import annotations

from typing import Any

from kubewire.cluster.controllers.replica_rules import REPLICA_SET, REPLICATION_CONTROLLER
from kubewire.resources import REGISTRY, Resource
from kubewire.server.writes.defaults import apply_kind_defaults
from kubewire.server.writes.lifecycle import default_gc_policy
from kubewire.server.writes.scale import builtin_scale_shape, scale_from_deployment
from kubewire.server.writes.validation.kinds import validate_kind


def _rc_resource() -> Resource:
    found = REGISTRY.lookup("", "v1", "replicationcontrollers")
    assert found is not None
    return found


RC = _rc_resource()


def controller(**spec: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    return {"apiVersion": "v1", "kind": "ReplicationController",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"template": template, **spec}}


def messages(obj: dict[str, Any], old: dict[str, Any] | None = None,
             subresource: str = "") -> list[str]:
    return [str(e) for e in validate_kind(RC, apply_kind_defaults(RC, obj), old,
                                          subresource=subresource)]


# --- defaults ------------------------------------------------------------------------------------

def test_selector_labels_and_replicas_default_from_the_template() -> None:
    out = apply_kind_defaults(RC, controller())
    assert out["spec"]["selector"] == {"app": "web"}
    assert out["metadata"]["labels"] == {"app": "web"}
    assert out["spec"]["replicas"] == 1
    pod_spec = out["spec"]["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Always"  # the template's pod spec is defaulted too
    assert pod_spec["containers"][0]["imagePullPolicy"] == "Always"
    assert out["spec"]["template"]["metadata"]["creationTimestamp"] is None


def test_given_selector_labels_and_zero_replicas_are_kept() -> None:
    obj = controller(selector={"app": "web", "tier": "x"}, replicas=0)
    obj["metadata"]["labels"] = {"owner": "me"}
    out = apply_kind_defaults(RC, obj)
    assert out["spec"]["selector"] == {"app": "web", "tier": "x"}
    assert out["metadata"]["labels"] == {"owner": "me"}
    assert out["spec"]["replicas"] == 0


def test_no_template_defaults_only_replicas() -> None:
    out = apply_kind_defaults(RC, {"metadata": {"name": "x"}, "spec": {}})
    assert out["spec"] == {"replicas": 1}
    assert "labels" not in out["metadata"]


def test_defaulting_is_idempotent_and_pure() -> None:
    obj = controller()
    once = apply_kind_defaults(RC, obj)
    assert apply_kind_defaults(RC, once) == once
    assert "selector" not in obj["spec"]


# --- validation (pkg/apis/core/validation ValidateReplicationController*) ----------------------

def test_a_defaulted_controller_is_valid() -> None:
    assert messages(controller(replicas=3, minReadySeconds=5)) == []


def test_selector_must_match_the_template_labels() -> None:
    assert messages(controller(selector={"app": "other"})) == [
        'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: '
        "`selector` does not match template `labels`"]


def test_negative_counts_are_refused_in_kubes_order() -> None:
    assert messages(controller(replicas=-1, minReadySeconds=-2)) == [
        "spec.minReadySeconds: Invalid value: -2: must be greater than or equal to 0",
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0"]


def test_selector_and_template_are_required() -> None:
    no_labels = controller()
    no_labels["spec"]["template"]["metadata"] = {}
    assert messages(no_labels) == ["spec.selector: Required value"]
    assert messages({"metadata": {"name": "web"}, "spec": {"replicas": 0,
                                                          "selector": {"a": "b"}}}) == [
        "spec.template: Required value"]


def test_template_restart_policy_and_deadline_are_the_workloads_rules() -> None:
    obj = controller()
    obj["spec"]["template"]["spec"].update(restartPolicy="Never", activeDeadlineSeconds=5)
    assert messages(obj) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: '
        '"Always"',
        "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in "
        "ReplicationController is not Supported"]


def test_the_selector_may_change_on_update() -> None:
    old = apply_kind_defaults(RC, controller())
    new = controller(selector={"app": "web"})
    new["spec"]["template"]["metadata"]["labels"]["v"] = "2"
    assert messages(new, old) == []


def test_status_counters_are_checked() -> None:
    old = apply_kind_defaults(RC, controller())
    new = {**old, "status": {"replicas": 1, "readyReplicas": 2, "availableReplicas": -1}}
    assert messages(new, old, subresource="status") == [
        "status.availableReplicas: Invalid value: -1: must be greater than or equal to 0",
        "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas"]


# --- scale, deletion and the controller's view ---------------------------------------------------

def test_scale_renders_the_label_map_as_a_selector_string() -> None:
    stored = apply_kind_defaults(RC, controller(replicas=2, selector={"b": "2", "a": "1"}))
    stored["spec"]["template"]["metadata"]["labels"] = {"a": "1", "b": "2"}
    stored["status"] = {"replicas": 1}
    scale = scale_from_deployment(stored, builtin_scale_shape("", "replicationcontrollers"))
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 1, "selector": "a=1,b=2"}


def test_v1_deletion_orphans_by_default() -> None:
    assert default_gc_policy(RC) == "Orphan"


def test_the_replica_controller_reads_an_rc_selector_as_a_label_map() -> None:
    rc = apply_kind_defaults(RC, controller())
    pod = {"metadata": {"labels": {"app": "web", "extra": "1"}}}
    assert REPLICATION_CONTROLLER.selects(rc, pod)
    assert not REPLICATION_CONTROLLER.selects(rc, {"metadata": {"labels": {"app": "x"}}})
    assert not REPLICA_SET.selects(rc, pod)  # a map is no LabelSelector
    assert (REPLICATION_CONTROLLER.api_version, REPLICATION_CONTROLLER.kind) == (
        "v1", "ReplicationController")
