"""apps/v1 ReplicaSet, StatefulSet, DaemonSet and ControllerRevision: kube's defaulting,
strategies, validation texts and printer rows, as pure functions.

Expected values are written out from kube v1.32 (pkg/apis/apps/v1/defaults.go,
pkg/registry/apps/*/strategy.go, pkg/apis/apps/validation/validation.go,
pkg/printers/internalversion/printers.go), not read from kubewire.
"""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubewire.resources import REGISTRY, Resource
from kubewire.schema.validate import validate_types
from kubewire.server.tables.columns import column_definitions, row_cells
from kubewire.server.writes.defaults import apply_kind_defaults
from kubewire.server.writes.lifecycle import (
    CreateContext,
    UpdateContext,
    prepare_create,
    prepare_update,
)
from kubewire.server.writes.validation.kinds import validate_kind
from kubewire.status import BadRequest

NOW = datetime(2025, 3, 10, 12, 0, 0, tzinfo=UTC)
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"


def res(plural: str) -> Resource:
    found = REGISTRY.lookup("apps", "v1", plural)
    assert found is not None
    return found


RS, STS, DS, CR, DEPLOY = (res(p) for p in ("replicasets", "statefulsets", "daemonsets",
                                            "controllerrevisions", "deployments"))


def template(app: str = "web") -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}


def workload(resource: Resource, name: str = "w", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "apps/v1", "kind": resource.kind,
                            "metadata": {"name": name, "namespace": "demo"},
                            "spec": {"selector": {"matchLabels": {"app": "web"}},
                                     "template": template(), **spec}}
    return body


def created(resource: Resource, body: dict[str, Any]) -> dict[str, Any]:
    obj = apply_kind_defaults(resource, body)
    return prepare_create(resource, obj, CreateContext("demo", NOW, random.Random(1)))


def updated(resource: Resource, old: dict[str, Any], new: dict[str, Any],
            subresource: str = "") -> dict[str, Any]:
    ctx = UpdateContext("demo", old["metadata"]["name"], NOW, subresource)
    return prepare_update(resource, old, apply_kind_defaults(resource, new), ctx)


def errors(resource: Resource, obj: dict[str, Any], old: dict[str, Any] | None = None,
           subresource: str = "") -> list[str]:
    return [str(e) for e in validate_kind(resource, obj, old, subresource=subresource)]


# --- defaults ---------------------------------------------------------------------------------

def test_replica_set_defaults_replicas_and_the_template() -> None:
    spec = apply_kind_defaults(RS, workload(RS))["spec"]
    assert spec["replicas"] == 1
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    assert spec["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert apply_kind_defaults(RS, workload(RS, replicas=0))["spec"]["replicas"] == 0


def test_stateful_set_defaults() -> None:
    claim = {"metadata": {"name": "data"},
             "spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "1Gi"}}}}
    spec = apply_kind_defaults(STS, workload(STS, serviceName="db",
                                             volumeClaimTemplates=[claim]))["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain",
                                                            "whenScaled": "Retain"}
    assert spec["replicas"] == 1
    assert spec["revisionHistoryLimit"] == 10
    assert spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    # embedded ObjectMeta: Go writes its zero creationTimestamp as null, in field order
    assert list(spec["template"]["metadata"].items()) == [("creationTimestamp", None),
                                                          ("labels", {"app": "web"})]
    [defaulted] = spec["volumeClaimTemplates"]
    assert list(defaulted)[:2] == ["kind", "apiVersion"]
    assert defaulted == {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                         "metadata": {"name": "data", "creationTimestamp": None},
                         "spec": {**claim["spec"], "volumeMode": "Filesystem"},
                         "status": {"phase": "Pending"}}


def test_stateful_set_on_delete_strategy_gets_no_rolling_update() -> None:
    spec = apply_kind_defaults(STS, workload(STS, updateStrategy={"type": "OnDelete"}))["spec"]
    assert spec["updateStrategy"] == {"type": "OnDelete"}
    rolling = apply_kind_defaults(STS, workload(
        STS, updateStrategy={"type": "RollingUpdate", "rollingUpdate": {}}))["spec"]
    assert rolling["updateStrategy"]["rollingUpdate"] == {"partition": 0}


def test_daemon_set_defaults() -> None:
    spec = apply_kind_defaults(DS, workload(DS))["spec"]
    assert spec["updateStrategy"] == {"type": "RollingUpdate",
                                      "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert spec["revisionHistoryLimit"] == 10
    on_delete = apply_kind_defaults(DS, workload(DS, updateStrategy={"type": "OnDelete"}))
    assert on_delete["spec"]["updateStrategy"] == {"type": "OnDelete"}


def test_defaulting_twice_changes_nothing() -> None:
    for resource in (RS, STS, DS):
        once = apply_kind_defaults(resource, workload(
            resource, volumeClaimTemplates=[{"metadata": {"name": "d"}, "spec": {}}]))
        assert apply_kind_defaults(resource, copy.deepcopy(once)) == once


# --- strategies -------------------------------------------------------------------------------

def test_create_resets_status_to_kubes_zero_value() -> None:
    body = workload(RS)
    body["status"] = {"replicas": 5, "readyReplicas": 5}
    assert created(RS, body)["status"] == {"replicas": 0}
    assert created(STS, workload(STS))["status"] == {"replicas": 0, "availableReplicas": 0}
    assert created(DS, workload(DS))["status"] == {
        "currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
        "numberReady": 0}
    assert created(RS, workload(RS))["metadata"]["generation"] == 1


def test_daemon_set_template_generation_annotation() -> None:
    ds = created(DS, workload(DS))
    assert ds["metadata"]["annotations"] == {TEMPLATE_GENERATION: "1"}
    kept = workload(DS)
    kept["metadata"]["annotations"] = {TEMPLATE_GENERATION: "7"}
    assert created(DS, kept)["metadata"]["annotations"][TEMPLATE_GENERATION] == "7"
    kept["metadata"]["annotations"] = {TEMPLATE_GENERATION: "seven"}
    with pytest.raises(BadRequest) as refused:  # the v1 -> internal conversion's error
        created(DS, kept)
    assert refused.value.message == 'strconv.ParseInt: parsing "seven": invalid syntax'
    # update may not set it: a changed spec outside the template keeps it, a template bumps it
    new = copy.deepcopy(ds)
    new["metadata"]["annotations"] = {}
    new["spec"]["minReadySeconds"] = 5
    same = updated(DS, ds, new)
    assert same["metadata"]["annotations"][TEMPLATE_GENERATION] == "1"
    assert same["metadata"]["generation"] == 2
    new["metadata"]["annotations"] = {TEMPLATE_GENERATION: "x"}
    with pytest.raises(BadRequest):
        updated(DS, ds, new)
    new["metadata"]["annotations"] = {}
    new["spec"]["template"]["metadata"]["labels"]["v"] = "2"
    bumped = updated(DS, ds, new)
    assert bumped["metadata"]["annotations"][TEMPLATE_GENERATION] == "2"
    # /status keeps the stored spec, and so its templateGeneration
    status = copy.deepcopy(new)
    status["status"] = {"numberReady": 1}
    after = updated(DS, ds, status, "status")
    assert after["metadata"]["annotations"][TEMPLATE_GENERATION] == "1"
    assert after["spec"] == ds["spec"]
    assert after["status"]["numberReady"] == 1


def test_stateful_set_max_unavailable_is_dropped_while_its_gate_is_off() -> None:
    body = workload(STS, updateStrategy={"type": "RollingUpdate",
                                         "rollingUpdate": {"partition": 1, "maxUnavailable": 2}})
    sts = created(STS, body)
    assert sts["spec"]["updateStrategy"]["rollingUpdate"] == {"partition": 1}
    assert body["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 2  # untouched
    new = copy.deepcopy(sts)
    new["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = 3
    assert "maxUnavailable" not in updated(STS, sts, new)["spec"]["updateStrategy"][
        "rollingUpdate"]
    in_use = copy.deepcopy(sts)
    in_use["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = 2
    assert updated(STS, in_use, new)["spec"]["updateStrategy"]["rollingUpdate"][
        "maxUnavailable"] == 3


def test_status_endpoint_ignores_spec_and_the_main_one_ignores_status() -> None:
    rs = created(RS, workload(RS))
    new = copy.deepcopy(rs)
    new["spec"]["replicas"] = 9
    new["status"] = {"replicas": 2}
    status_write = updated(RS, rs, new, "status")
    assert status_write["spec"]["replicas"] == 1
    assert status_write["status"] == {"replicas": 2}
    assert status_write["metadata"]["generation"] == 1
    main_write = updated(RS, rs, new)
    assert main_write["spec"]["replicas"] == 9
    assert main_write["status"] == {"replicas": 0}
    assert main_write["metadata"]["generation"] == 2


# --- validation -------------------------------------------------------------------------------

NOT_MATCHING = ('spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: '
                "`selector` does not match template `labels`")


def test_replica_set_validation() -> None:
    no_selector = workload(RS)
    del no_selector["spec"]["selector"]
    assert errors(RS, apply_kind_defaults(RS, no_selector)) == [
        "spec.selector: Required value", NOT_MATCHING]
    empty = apply_kind_defaults(RS, workload(RS, selector={}))
    assert errors(RS, empty) == [
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for "
        "deployment"]
    negative = apply_kind_defaults(RS, workload(RS, replicas=-1, minReadySeconds=-2))
    assert errors(RS, negative) == [
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        "spec.minReadySeconds: Invalid value: -2: must be greater than or equal to 0"]
    deadline = apply_kind_defaults(RS, workload(RS))
    deadline["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 5
    assert errors(RS, deadline) == [
        "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in "
        "ReplicaSet is not Supported"]


BAD_OPERATOR = {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["web"]}],
                "matchLabels": {"app": "-web"}}


def test_label_selectors_are_validated() -> None:
    """``ValidateLabelSelector`` first; a selector that does not parse is then Invalid for
    ReplicaSets (and Deployments), Invalid with no detail for StatefulSets, and skipped by
    DaemonSets."""
    shown = ('v1.LabelSelector{MatchLabels:map[string]string{"app":"-web"}, MatchExpressions:'
             '[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"app", '
             'Operator:"Near", Values:[]string{"web"}}}}')
    value_error = ('spec.selector.matchLabels: Invalid value: "-web": a valid label must be an '
                   "empty string or consist of alphanumeric characters, '-', '_' or '.', and "
                   "must start and end with an alphanumeric character (e.g. 'MyValue',  or "
                   "'my_value',  or '12345', regex used for validation is "
                   "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
    operator_error = ('spec.selector.matchExpressions[0].operator: Invalid value: "Near": not a '
                      "valid selector operator")
    for resource, last in ((RS, f"spec.selector: Invalid value: {shown}: invalid label selector"),
                           (STS, f"spec.selector: Invalid value: {shown}"), (DS, None)):
        body = apply_kind_defaults(resource, workload(resource, selector=BAD_OPERATOR))
        found = errors(resource, body)
        assert found[:2] == [value_error, operator_error], resource.kind
        assert found[2:] == ([last] if last else []), resource.kind


def test_replica_set_selector_is_immutable() -> None:
    old = apply_kind_defaults(RS, workload(RS))
    new = copy.deepcopy(old)
    new["spec"]["selector"] = {"matchLabels": {"app": "web", "tier": "x"}}
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    assert errors(RS, new, old) == [
        'spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":'
        '"web", "tier":"x"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is '
        "immutable"]


def test_replica_set_status_validation() -> None:
    obj = apply_kind_defaults(RS, workload(RS))
    obj["status"] = {"replicas": 1, "readyReplicas": 2, "availableReplicas": 3,
                     "fullyLabeledReplicas": -1}
    assert errors(RS, obj, obj, "status") == [
        "status.fullyLabeledReplicas: Invalid value: -1: must be greater than or equal to 0",
        "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
        "status.availableReplicas: Invalid value: 3: cannot be greater than status.replicas",
        "status.availableReplicas: Invalid value: 3: cannot be greater than readyReplicas"]


def test_stateful_set_validation() -> None:
    sts = apply_kind_defaults(STS, workload(STS, serviceName="db"))
    assert errors(STS, sts) == []
    bad = copy.deepcopy(sts)
    bad["spec"]["podManagementPolicy"] = "Random"
    bad["spec"]["updateStrategy"] = {"type": "Sometimes"}
    bad["spec"]["persistentVolumeClaimRetentionPolicy"]["whenScaled"] = "Keep"
    bad["spec"]["ordinals"] = {"start": -1}
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    assert errors(STS, bad) == [
        "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or "
        "'Parallel'",
        'spec.updateStrategy: Invalid value: apps.StatefulSetUpdateStrategy{Type:"Sometimes", '
        "RollingUpdate:(*apps.RollingUpdateStatefulSetStrategy)(nil)}: must be 'RollingUpdate' "
        "or 'OnDelete'",
        'spec.persistentVolumeClaimRetentionPolicy.whenScaled: Unsupported value: "Keep": '
        'supported values: "Retain", "Delete"',
        "spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0",
        'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: '
        '"Always"']
    on_delete = copy.deepcopy(sts)
    on_delete["spec"]["updateStrategy"] = {"type": "OnDelete", "rollingUpdate": {"partition": 2}}
    assert errors(STS, on_delete) == [
        "spec.updateStrategy.rollingUpdate: Invalid value: apps.RollingUpdateStatefulSetStrategy"
        "{Partition:2, MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for "
        "updateStrategy 'RollingUpdate'"]
    no_selector = copy.deepcopy(sts)
    del no_selector["spec"]["selector"]
    assert errors(STS, no_selector) == ["spec.selector: Required value", NOT_MATCHING]
    empty = apply_kind_defaults(STS, workload(STS, selector={}))
    assert errors(STS, empty) == [
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for "
        "statefulset"]


def test_stateful_set_pod_spec_is_not_validated() -> None:
    sts = apply_kind_defaults(STS, workload(STS))
    sts["spec"]["template"]["spec"]["containers"][0]["name"] = "Not_A_Label"
    assert errors(STS, sts) == []
    rs = apply_kind_defaults(RS, workload(RS))
    rs["spec"]["template"]["spec"]["containers"][0]["name"] = "Not_A_Label"
    assert errors(RS, rs) != []


def test_stateful_set_update_may_change_only_some_fields() -> None:
    old = apply_kind_defaults(STS, workload(STS, serviceName="db"))
    allowed = copy.deepcopy(old)
    allowed["spec"].update(replicas=3, minReadySeconds=4, ordinals={"start": 2})
    allowed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    allowed["spec"]["updateStrategy"] = {"type": "OnDelete"}
    assert errors(STS, allowed, old) == []
    for change in ({"serviceName": "other"}, {"podManagementPolicy": "Parallel"},
                   {"volumeClaimTemplates": [{"metadata": {"name": "d"}}]}):
        forbidden = copy.deepcopy(old)
        forbidden["spec"].update(change)
        assert errors(STS, forbidden, old) == [
            "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', "
            "'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' "
            "and 'minReadySeconds' are forbidden"]


def test_stateful_set_status_validation() -> None:
    old = apply_kind_defaults(STS, workload(STS))
    old["status"] = {"replicas": 2, "collisionCount": 3}
    new = copy.deepcopy(old)
    new["status"] = {"replicas": 2, "readyReplicas": 1, "availableReplicas": 2,
                     "collisionCount": 1}
    assert errors(STS, new, old, "status") == [
        "status.availableReplicas: Invalid value: 2: cannot be greater than "
        "status.readyReplicas",
        "status.collisionCount: Invalid value: 1: cannot be decremented"]


def test_daemon_set_validation() -> None:
    ds = apply_kind_defaults(DS, workload(DS))
    assert errors(DS, ds) == []
    no_selector = copy.deepcopy(ds)
    del no_selector["spec"]["selector"]
    assert errors(DS, no_selector) == [NOT_MATCHING]  # kube requires no selector for DaemonSets
    empty = copy.deepcopy(ds)
    empty["spec"]["selector"] = {}
    assert errors(DS, empty) == [
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for "
        "daemonset"]
    both = copy.deepcopy(ds)
    both["spec"]["updateStrategy"]["rollingUpdate"] = {"maxUnavailable": "200%", "maxSurge": 1}
    assert errors(DS, both) == [
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString"
        '{Type:1, IntVal:0, StrVal:"200%"}: must not be greater than 100%',
        "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:0, "
        'IntVal:1, StrVal:""}: may not be set when maxUnavailable is non-zero']
    zero = copy.deepcopy(ds)
    zero["spec"]["updateStrategy"]["rollingUpdate"] = {"maxUnavailable": 0, "maxSurge": 0}
    assert errors(DS, zero) == [
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when "
        "maxSurge is 0"]
    odd = copy.deepcopy(ds)
    odd["spec"]["updateStrategy"] = {"type": "Later"}
    assert errors(DS, odd) == [
        'spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:"Later", '
        'RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: "RollingUpdate", '
        '"OnDelete"']


def test_deployment_status_validation_ignores_the_spec() -> None:
    deployment = apply_kind_defaults(DEPLOY, workload(DEPLOY))
    deployment["spec"]["template"]["spec"]["restartPolicy"] = "Never"  # stored: not checked
    deployment["status"] = {"replicas": 2, "readyReplicas": 1, "availableReplicas": 2,
                            "unavailableReplicas": -1}
    assert errors(DEPLOY, deployment, deployment, "status") == [
        "status.unavailableReplicas: Invalid value: -1: must be greater than or equal to 0",
        "status.availableReplicas: Invalid value: 2: cannot be greater than readyReplicas"]


def test_daemon_set_status_validation() -> None:
    ds = apply_kind_defaults(DS, workload(DS))
    ds["status"] = {"numberReady": -1, "currentNumberScheduled": 1}
    assert errors(DS, ds, ds, "status") == [
        "status.numberReady: Invalid value: -1: must be greater than or equal to 0"]


def test_controller_revision_validation() -> None:
    revision = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": "web-1", "namespace": "demo"},
                "data": {"a": 1}, "revision": 1}
    assert errors(CR, revision) == []
    assert errors(CR, {**revision, "data": None, "revision": -1}) == [
        "data: Required value: data is mandatory",
        "revision: Invalid value: -1: must be greater than or equal to 0"]
    assert errors(CR, {**revision, "revision": 9}, revision) == []  # kube lets it change
    # data is a runtime.RawExtension: any JSON value decodes, not only an object
    assert validate_types("apps/v1", "ControllerRevision", {**revision, "data": "abc"}) == []
    assert validate_types("apps/v1", "ControllerRevision", {**revision, "data": [1]}) == []
    assert errors(CR, {**revision, "data": {"a": 2}}, revision) == [
        'data: Invalid value: runtime.Unknown{TypeMeta:runtime.TypeMeta{APIVersion:"", '
        'Kind:""}, Raw:[]uint8{0x7b, 0x22, 0x61, 0x22, 0x3a, 0x32, 0x7d}, ContentEncoding:"", '
        'ContentType:"application/json"}: field is immutable']


# --- tables -----------------------------------------------------------------------------------

def definitions(resource: Resource) -> list[tuple[str, str, int]]:
    return [(d["name"], d["type"], d["priority"]) for d in column_definitions(resource)]


@pytest.mark.parametrize(("resource", "expected"), [
    (RS, [("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0),
          ("Ready", "integer", 0), ("Age", "string", 0), ("Containers", "string", 1),
          ("Images", "string", 1), ("Selector", "string", 1)]),
    (STS, [("Name", "string", 0), ("Ready", "string", 0), ("Age", "string", 0),
           ("Containers", "string", 1), ("Images", "string", 1)]),
    (DS, [("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0),
          ("Ready", "integer", 0), ("Up-to-date", "integer", 0), ("Available", "integer", 0),
          ("Node Selector", "string", 0), ("Age", "string", 0), ("Containers", "string", 1),
          ("Images", "string", 1), ("Selector", "string", 1)]),
    (CR, [("Name", "string", 0), ("Controller", "string", 0), ("Revision", "string", 0),
          ("Age", "string", 0)]),
], ids=lambda v: v.kind if isinstance(v, Resource) else "")
def test_columns_as_kube_declares_them(resource: Resource, expected: list[Any]) -> None:
    assert definitions(resource) == expected


def stored(resource: Resource, **extra: Any) -> dict[str, Any]:
    obj = apply_kind_defaults(resource, workload(resource))
    obj["metadata"]["creationTimestamp"] = (NOW - timedelta(seconds=90)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    obj.update(extra)
    return obj


def test_rows() -> None:
    rs = stored(RS, status={"replicas": 2, "readyReplicas": 1})
    assert row_cells(RS, rs, NOW) == ["w", 1, 2, 1, "90s", "c", "nginx:1.27", "app=web"]
    sts = stored(STS, status={"replicas": 1, "readyReplicas": 1})
    assert row_cells(STS, sts, NOW) == ["w", "1/1", "90s", "c", "nginx:1.27"]
    ds = stored(DS, status={"desiredNumberScheduled": 3, "currentNumberScheduled": 2,
                            "numberReady": 1, "updatedNumberScheduled": 2,
                            "numberAvailable": 1})
    assert row_cells(DS, ds, NOW) == ["w", 3, 2, 1, 2, 1, "<none>", "90s", "c", "nginx:1.27",
                                      "app=web"]
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a", "os": "linux"}
    assert row_cells(DS, ds, NOW)[6] == "os=linux,zone=a"


def test_controller_revision_rows_name_the_controller() -> None:
    meta = {"name": "web-5d8f", "namespace": "demo",
            "creationTimestamp": (NOW - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")}
    revision = {"metadata": meta, "data": {}, "revision": 3}
    assert row_cells(CR, revision, NOW) == ["web-5d8f", "<none>", 3, "5m"]
    meta["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "u0"},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u1",
         "controller": True}]
    assert row_cells(CR, revision, NOW)[1] == "statefulset.apps/web"
    meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u",
                                "controller": True}]
    assert row_cells(CR, revision, NOW)[1] == "pod/p"
