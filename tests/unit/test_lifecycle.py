"""server/lifecycle.py: server-set metadata, update rules and delete planning, kube's Statuses."""

from __future__ import annotations

import copy
import random
import uuid
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest

from kubewire.quantity import parse_quantity
from kubewire.resources import REGISTRY, Resource
from kubewire.server.writes.lifecycle import (
    CreateContext,
    DeleteRequest,
    UpdateContext,
    delete_response,
    generate_name,
    is_noop_update,
    namespace_terminating_error,
    plan_delete,
    pod_qos_class,
    prepare_create,
    prepare_update,
    should_remove_after_update,
    update_precondition,
)
from kubewire.status import StatusError
from kubewire.times import format_time, parse_time
from tests.gateway_api import gateway_resource

NOW = datetime(2024, 12, 11, 9, 15, 2, 500_000, tzinfo=UTC)
NOW_TEXT = "2024-12-11T09:15:02Z"
SEED = 7


def _res(plural: str) -> Resource:
    found = next((r for r in REGISTRY if r.plural == plural), None)
    assert found is not None
    return found


PODS, NAMESPACES, NODES, SERVICES = (_res(p) for p in ("pods", "namespaces", "nodes", "services"))
DEPLOYMENTS, INGRESSES, NETPOLS = (_res(p) for p in ("deployments", "ingresses", "networkpolicies"))
SLICES = _res("endpointslices")
GATEWAYS = gateway_resource("gateways")  # a custom resource: served from its CRD


def _create(resource: Resource, obj: dict[str, Any], namespace: str = "demo") -> dict[str, Any]:
    return prepare_create(resource, obj, CreateContext(namespace, NOW, random.Random(SEED)))


def _update(resource: Resource, old: dict[str, Any], new: dict[str, Any],
            subresource: str = "") -> dict[str, Any]:
    meta = old["metadata"]
    ctx = UpdateContext(meta.get("namespace", ""), meta["name"], NOW, subresource)
    return prepare_update(resource, old, new, ctx)


def _status(call: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(StatusError) as info:
        call(*args)
    return info.value.to_status()


def _failure(code: int, reason: str, message: str, details: Any = None) -> dict[str, Any]:
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Failure", "message": message, "reason": reason}
    if details is not None:
        status["details"] = details
    status["code"] = code
    return status


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


def _stored(resource: Resource, obj: dict[str, Any], namespace: str = "demo") -> dict[str, Any]:
    stored = _create(resource, obj, namespace)
    stored["metadata"]["resourceVersion"] = "5"
    return stored


# --- names and times ------------------------------------------------------------------------------

def test_generate_name_appends_five_chars_from_kubes_alphabet() -> None:
    name = generate_name("web-", random.Random(SEED))
    assert name.startswith("web-") and len(name) == 9
    assert set(name[4:]) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert name == generate_name("web-", random.Random(SEED))  # deterministic for a seed


def test_generate_name_draws_what_random_choice_draws() -> None:
    # the drawing is inlined for speed: a seeded generator must still give the names (and the
    # state after them: later uids) that ``rng.choice`` per character gives, rejections and all
    class OwnChoice(random.Random):
        def choice(self, seq: Any) -> Any:
            return seq[0]

    fast, reference = random.Random(SEED), random.Random(SEED)
    for _ in range(2000):
        assert generate_name("p-", fast) == "p-" + "".join(
            reference.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
    assert fast.getrandbits(128) == reference.getrandbits(128)
    assert generate_name("p-", OwnChoice(SEED)) == "p-bbbbb"  # a generator's own choice rules


def test_generate_name_cuts_the_prefix_to_58_chars() -> None:
    name = generate_name("x" * 70, random.Random(SEED))
    assert len(name) == 63 and name.startswith("x" * 58) and name[58] != "x"


def test_times_are_rfc3339_seconds_utc() -> None:
    assert format_time(NOW) == NOW_TEXT
    assert format_time(datetime(2024, 1, 1, 12, tzinfo=UTC).astimezone()) == "2024-01-01T12:00:00Z"
    assert parse_time("2026-11-22T02:05:47+00:00") == datetime(2026, 11, 22, 2, 5, 47, tzinfo=UTC)
    assert parse_time("2024-12-11T09:15:02.123456Z").microsecond == 123456


# --- create ---------------------------------------------------------------------------------------

def test_create_sets_server_fields_and_drops_client_ones() -> None:
    body = _pod()
    body["metadata"].update({
        "uid": "client-uid", "creationTimestamp": "2000-01-01T00:00:00Z", "resourceVersion": "0",
        "deletionTimestamp": "2000-01-01T00:00:00Z", "deletionGracePeriodSeconds": 5,
        "selfLink": "/x", "managedFields": [{"manager": "m"}], "labels": {"a": "b"}})
    before = copy.deepcopy(body)
    out = _create(PODS, body)
    expected_uid = str(uuid.UUID(int=random.Random(SEED).getrandbits(128), version=4))
    assert out["metadata"] == {"name": "web-0", "namespace": "demo", "uid": expected_uid,
                               "creationTimestamp": NOW_TEXT, "labels": {"a": "b"}}
    assert list(out["metadata"]) == ["name", "namespace", "uid", "creationTimestamp", "labels"]
    assert uuid.UUID(expected_uid).version == 4
    assert out["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert body == before


def test_create_resolves_generate_name() -> None:
    out = _create(PODS, {"metadata": {"generateName": "gen-"}, "spec": {}})
    rng = random.Random(SEED)
    rng.getrandbits(128)  # the uid is drawn first
    assert out["metadata"]["name"] == generate_name("gen-", rng)
    assert out["metadata"]["generateName"] == "gen-"


def test_create_keeps_an_explicit_name_over_generate_name() -> None:
    out = _create(PODS, {"metadata": {"name": "a", "generateName": "gen-"}, "spec": {}})
    assert out["metadata"]["name"] == "a"


def test_create_rejects_a_namespace_that_differs_from_the_url() -> None:
    body = _pod()
    body["metadata"]["namespace"] = "other"
    assert _status(_create, PODS, body) == _failure(
        400, "BadRequest", "the namespace of the provided object does not match the namespace "
        "sent on the request")


def test_create_clears_the_namespace_of_cluster_scoped_kinds() -> None:
    out = _create(NODES, {"metadata": {"name": "n1", "namespace": "x"}}, namespace="")
    assert "namespace" not in out["metadata"]


@pytest.mark.parametrize("version", ["1", "42"])
def test_create_with_a_resource_version_is_400(version: str) -> None:
    body = _pod()
    body["metadata"]["resourceVersion"] = version
    assert _status(_create, PODS, body) == _failure(
        400, "BadRequest", "resourceVersion should not be set on objects to be created")


def test_create_ignores_an_unparseable_resource_version() -> None:
    body = _pod()
    body["metadata"]["resourceVersion"] = "abc"  # etcd3 store: only a parsed non-zero RV fails
    assert "resourceVersion" not in _create(PODS, body)["metadata"]


@pytest.mark.parametrize(("resource", "generation"), [
    (DEPLOYMENTS, 1), (INGRESSES, 1), (NETPOLS, 1), (SLICES, 1), (GATEWAYS, 1), (PODS, None),
    (SERVICES, None), (NAMESPACES, None), (NODES, None)])
def test_create_sets_generation_per_policy(resource: Resource, generation: int | None) -> None:
    namespace = "demo" if resource.namespaced else ""
    out = _create(resource, {"metadata": {"name": "x", "generation": 9}, "spec": {}}, namespace)
    assert out["metadata"].get("generation", None) == (generation if generation else 9)


@pytest.mark.parametrize(("resource", "status"), [
    (DEPLOYMENTS, {}), (SERVICES, {"loadBalancer": {}}), (INGRESSES, {"loadBalancer": {}}),
    (NODES, {"capacity": {"cpu": "4"}}),  # nodes may register with a status
    (NETPOLS, {"capacity": {"cpu": "4"}}),  # no status subresource: untouched
    (GATEWAYS, None),  # CRs with a status subresource: removed
])
def test_create_resets_status_per_kind(resource: Resource, status: Any) -> None:
    namespace = "demo" if resource.namespaced else ""
    out = _create(resource, {"metadata": {"name": "x"}, "spec": {},
                             "status": {"capacity": {"cpu": "4"}}}, namespace)
    assert out.get("status") == status


def test_create_pod_with_scheduling_gates_gets_the_gated_condition() -> None:
    out = _create(PODS, _pod(schedulingGates=[{"name": "g"}]))
    assert out["status"] == {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                        "lastTransitionTime": NOW_TEXT, "reason": "SchedulingGated",
                        "message": "Scheduling is blocked due to non-empty scheduling gates"}],
        "qosClass": "BestEffort"}


def test_create_namespace_defaults() -> None:
    out = _create(NAMESPACES, {"metadata": {"name": "team", "labels": {"a": "b"}},
                               "spec": {"finalizers": ["example.com/x"]}}, namespace="")
    assert out["metadata"]["labels"] == {"a": "b", "kubernetes.io/metadata.name": "team"}
    assert out["spec"] == {"finalizers": ["example.com/x", "kubernetes"]}
    assert out["status"] == {"phase": "Active"}
    plain = _create(NAMESPACES, {"metadata": {"name": "a"}}, namespace="")
    assert plain["spec"] == {"finalizers": ["kubernetes"]}


# --- pod QoS --------------------------------------------------------------------------------------

def _containers(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": f"c{i}", "resources": r}
                                    for i, r in enumerate(resources)]}}


@pytest.mark.parametrize(("pod", "qos"), [
    (_containers({}), "BestEffort"),
    (_containers({"requests": {"cpu": "0", "memory": "0"}}), "BestEffort"),
    (_containers({"requests": {"nvidia.com/gpu": "1"}}), "BestEffort"),
    (_containers({"requests": {"cpu": "100m"}}), "Burstable"),
    (_containers({"limits": {"cpu": "1", "memory": "1Gi"}}), "Guaranteed"),  # requests default
    (_containers({"limits": {"cpu": "1", "memory": "1Gi"},
                  "requests": {"cpu": "1000m", "memory": "1024Mi"}}), "Guaranteed"),
    (_containers({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}),
     "Burstable"),
    (_containers({"limits": {"cpu": "1"}}), "Burstable"),  # memory limit missing
    (_containers({"limits": {"cpu": "1", "memory": "1Gi"}}, {}), "Burstable"),
    ({"spec": {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1G"}}}],
               "initContainers": [{"resources": {"requests": {"cpu": "1"}}}]}}, "Burstable"),
])
def test_pod_qos_class(pod: dict[str, Any], qos: str) -> None:
    assert pod_qos_class(pod) == qos


@pytest.mark.parametrize(("text", "value"), [
    ("100m", Fraction(1, 10)), ("1", Fraction(1)), ("1.5", Fraction(3, 2)), ("1Ki", Fraction(1024)),
    ("1Gi", Fraction(2**30)), ("2G", Fraction(2 * 10**9)), ("1e3", Fraction(1000)),
    ("5E-1", Fraction(1, 2)), (".5", Fraction(1, 2)), (3, Fraction(3)), ("abc", None),
    ("1Qi", None), (True, None),
    # Quantity.UnmarshalJSON trims spaces before ParseQuantity, as the decoder's check does
    (" 1Gi\n", Fraction(2**30))])
def test_parse_quantity(text: Any, value: Fraction | None) -> None:
    assert parse_quantity(text) == value


# --- update ---------------------------------------------------------------------------------------

def test_update_keeps_server_owned_metadata() -> None:
    old = _stored(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": {"replicas": 1}})
    new = {"metadata": {"name": "web", "resourceVersion": "5", "generation": 40,
                        "creationTimestamp": "1999-01-01T00:00:00Z", "managedFields": [{}]},
           "spec": {"replicas": 1}, "status": {"replicas": 9}}
    out = _update(DEPLOYMENTS, old, new)
    assert out["metadata"] == {**old["metadata"]}
    assert out["status"] == {}  # status is restored on the main endpoint


def test_update_bumps_generation_on_spec_change_only() -> None:
    old = _stored(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": {"replicas": 1}})
    changed = copy.deepcopy(old)
    changed["spec"]["replicas"] = 2
    assert _update(DEPLOYMENTS, old, changed)["metadata"]["generation"] == 2
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"] = {"a": "b"}
    assert _update(DEPLOYMENTS, old, relabelled)["metadata"]["generation"] == 1
    annotated = copy.deepcopy(old)
    annotated["metadata"]["annotations"] = {"a": "b"}  # deployments: annotations count too
    assert _update(DEPLOYMENTS, old, annotated)["metadata"]["generation"] == 2
    emptied = copy.deepcopy(old)
    emptied["spec"]["template"] = {}  # {} equals absent for a built-in kind
    assert _update(DEPLOYMENTS, old, emptied)["metadata"]["generation"] == 1


@pytest.mark.parametrize(("resource", "change", "bumped"), [
    (INGRESSES, ("metadata", "annotations", {"a": "b"}), False),
    (INGRESSES, ("spec", "ingressClassName", "x"), True),
    (SLICES, ("metadata", "labels", {"a": "b"}), True),
    (SLICES, ("metadata", "annotations", {"a": "b"}), False),
    (SLICES, ("endpoints", None, [{"addresses": ["10.0.0.1"]}]), True),
    (GATEWAYS, ("spec", "gatewayClassName", "x"), True),
    (GATEWAYS, ("status", "x", 1), False),  # status is restored first
    (GATEWAYS, ("spec", "listeners", []), True),  # CRs compare raw JSON: [] differs from absent
])
def test_update_generation_policies(resource: Resource, change: tuple[str, Any, Any],
                                    bumped: bool) -> None:
    old = _stored(resource, {"metadata": {"name": "x"}, "spec": {}})
    new = copy.deepcopy(old)
    top, key, value = change
    if key is None:
        new[top] = value
    else:
        new.setdefault(top, {})[key] = value
    assert _update(resource, old, new)["metadata"]["generation"] == (2 if bumped else 1)


def test_update_status_endpoint_restores_everything_else() -> None:
    old = _stored(DEPLOYMENTS, {"metadata": {"name": "web", "labels": {"a": "1"}},
                                "spec": {"replicas": 1}})
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 5
    new["metadata"]["labels"] = {"a": "2"}
    new["metadata"]["annotations"] = {"n": "v"}
    new["status"] = {"replicas": 1}
    out = _update(DEPLOYMENTS, old, new, "status")
    assert out["spec"] == {"replicas": 1}
    assert out["metadata"]["labels"] == {"a": "1"}  # deployments/status keeps labels
    assert out["metadata"]["annotations"] == {"n": "v"}
    assert out["metadata"]["generation"] == 1
    assert out["status"] == {"replicas": 1}


def test_update_pod_status_keeps_owner_references_and_qos() -> None:
    old = _stored(PODS, _pod())
    old["metadata"]["ownerReferences"] = [{"uid": "u1"}]
    new = copy.deepcopy(old)
    new["metadata"]["ownerReferences"] = []
    new["status"] = {"phase": "Running"}
    out = _update(PODS, old, new, "status")
    assert out["metadata"]["ownerReferences"] == [{"uid": "u1"}]
    assert out["status"] == {"phase": "Running", "qosClass": "BestEffort"}


def test_update_custom_resource_status_changes_only_status() -> None:
    old = _stored(GATEWAYS, {"metadata": {"name": "gw", "labels": {"a": "1"}}, "spec": {"x": 1}})
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"a": "2"}
    new["metadata"]["resourceVersion"] = "4"
    new["spec"] = {"x": 2}
    new["status"] = {"ok": True}
    out = _update(GATEWAYS, old, new, "status")
    assert out["metadata"] == {**old["metadata"], "resourceVersion": "4"}
    assert out["spec"] == {"x": 1} and out["status"] == {"ok": True}


def test_update_name_mismatch_is_400() -> None:
    old = _stored(PODS, _pod())
    new = copy.deepcopy(old)
    new["metadata"]["name"] = "other"
    assert _status(_update, PODS, old, new) == _failure(
        400, "BadRequest", "the name of the object (other) does not match the name on the URL "
        "(web-0)")


def test_update_namespace_mismatch_is_400_and_missing_namespace_is_filled() -> None:
    old = _stored(PODS, _pod())
    new = copy.deepcopy(old)
    new["metadata"]["namespace"] = "other"
    assert _status(_update, PODS, old, new)["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request")
    del new["metadata"]["namespace"]
    assert _update(PODS, old, new)["metadata"]["namespace"] == "demo"


def test_update_with_another_uid_is_a_409_precondition_failure() -> None:
    old = _stored(PODS, _pod())
    new = copy.deepcopy(old)
    new["metadata"]["uid"] = "other-uid"
    stored_uid = old["metadata"]["uid"]
    assert _status(_update, PODS, old, new) == _failure(
        409, "Conflict",
        'Operation cannot be fulfilled on pods "web-0": StorageError: invalid object, Code: 4, '
        "Key: /registry/pods/demo/web-0, ResourceVersion: 0, AdditionalErrorMsg: Precondition "
        f"failed: UID in precondition: other-uid, UID in object meta: {stored_uid}",
        {"name": "web-0", "kind": "pods"})
    new["metadata"]["uid"] = ""
    assert _update(PODS, old, new)["metadata"]["uid"] == stored_uid


def _deleting(resource: Resource, obj: dict[str, Any], namespace: str = "demo") -> dict[str, Any]:
    old = _stored(resource, obj, namespace)
    old["metadata"].update({"deletionTimestamp": NOW_TEXT, "deletionGracePeriodSeconds": 0,
                            "finalizers": ["a/one"]})
    return old


def test_update_cannot_clear_or_move_deletion_fields() -> None:
    old = _deleting(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": {}})
    new = copy.deepcopy(old)
    del new["metadata"]["deletionTimestamp"]
    del new["metadata"]["deletionGracePeriodSeconds"]
    out = _update(DEPLOYMENTS, old, new)
    assert out["metadata"]["deletionTimestamp"] == NOW_TEXT
    assert out["metadata"]["deletionGracePeriodSeconds"] == 0
    fresh = _stored(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": {}})
    forged = copy.deepcopy(fresh)
    forged["metadata"]["deletionTimestamp"] = NOW_TEXT
    forged["metadata"]["deletionGracePeriodSeconds"] = 3
    assert "deletionTimestamp" not in _update(DEPLOYMENTS, fresh, forged)["metadata"]


def test_update_rejects_new_finalizers_and_grace_changes_while_deleting() -> None:
    old = _deleting(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": {}})
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = ["b/two", "a/one", "a/zero"]
    new["metadata"]["deletionGracePeriodSeconds"] = 30
    finalizers = ('metadata.finalizers: Forbidden: no new finalizers can be added if the object '
                  'is being deleted, found new finalizers []string{"a/zero", "b/two"}')
    grace = "metadata.deletionGracePeriodSeconds: Invalid value: 30: field is immutable"
    assert _status(_update, DEPLOYMENTS, old, new) == _failure(
        422, "Invalid", f'Deployment.apps "web" is invalid: [{finalizers}, {grace}]',
        {"name": "web", "group": "apps", "kind": "Deployment", "causes": [
            {"reason": "FieldValueForbidden", "field": "metadata.finalizers",
             "message": finalizers.split(": ", 1)[1]},
            {"reason": "FieldValueInvalid", "field": "metadata.deletionGracePeriodSeconds",
             "message": "Invalid value: 30: field is immutable"}]})
    new["metadata"]["finalizers"] = []
    new["metadata"]["deletionGracePeriodSeconds"] = 0
    assert "finalizers" not in _update(DEPLOYMENTS, old, new)["metadata"]  # omitempty


def test_update_namespace_spec_finalizers_only_via_finalize() -> None:
    old = _stored(NAMESPACES, {"metadata": {"name": "team"}}, namespace="")
    new = copy.deepcopy(old)
    new["spec"]["finalizers"] = []
    new["status"] = {"phase": "Terminating"}
    new["metadata"]["labels"] = {}
    out = _update(NAMESPACES, old, new)
    assert out["spec"] == {"finalizers": ["kubernetes"]}
    assert out["status"] == {"phase": "Active"}
    assert out["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}
    finalized = _update(NAMESPACES, old, new, "finalize")
    assert finalized["spec"] == {"finalizers": []} and finalized["status"] == {"phase": "Active"}


def test_update_precondition() -> None:
    pod = _stored(PODS, _pod())
    assert update_precondition(PODS, pod) == 5
    del pod["metadata"]["resourceVersion"]
    assert update_precondition(PODS, pod) is None
    pod["metadata"]["resourceVersion"] = "abc"
    assert _status(update_precondition, PODS, pod) == _failure(
        400, "BadRequest", 'strconv.ParseUint: parsing "abc": invalid syntax')
    gateway = {"metadata": {"name": "gw", "resourceVersion": "0"}}
    body = "Invalid value: 0x0: must be specified for an update"
    assert _status(update_precondition, GATEWAYS, gateway) == _failure(
        422, "Invalid",
        f'gateways.gateway.networking.k8s.io "gw" is invalid: metadata.resourceVersion: {body}',
        {"name": "gw", "group": "gateway.networking.k8s.io", "kind": "gateways",
         "causes": [{"reason": "FieldValueInvalid", "message": body,
                     "field": "metadata.resourceVersion"}]})


def test_is_noop_update_ignores_only_the_resource_version() -> None:
    old = _stored(PODS, _pod())
    same = copy.deepcopy(old)
    same["metadata"]["resourceVersion"] = "9"
    assert is_noop_update(old, same)
    same["metadata"]["labels"] = {}
    assert not is_noop_update(old, same)


# --- delete ---------------------------------------------------------------------------------------

def test_delete_without_finalizers_removes_now() -> None:
    dep = _stored(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": {}})
    plan = plan_delete(DEPLOYMENTS, dep, DeleteRequest(propagation_policy="Foreground"), NOW)
    assert (plan.action, plan.remove, plan.obj) == ("remove", True, dep)  # no GC finalizers


def test_delete_with_finalizers_marks_once() -> None:
    dep = _stored(DEPLOYMENTS, {"metadata": {"name": "web", "finalizers": ["a/x"]}, "spec": {}})
    before = copy.deepcopy(dep)
    plan = plan_delete(DEPLOYMENTS, dep, DeleteRequest(), NOW)
    assert plan.action == "mark" and plan.needs_write and not plan.remove
    meta = plan.obj["metadata"]
    assert (meta["deletionTimestamp"], meta["deletionGracePeriodSeconds"], meta["generation"]) == (
        NOW_TEXT, 0, 2)
    assert dep == before
    again = plan_delete(DEPLOYMENTS, plan.obj, DeleteRequest(), NOW + timedelta(seconds=9))
    assert (again.action, again.obj) == ("unchanged", plan.obj)


def test_delete_preconditions_are_409_naming_the_kind() -> None:
    dep = _stored(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": {}})
    uid = dep["metadata"]["uid"]
    details = {"name": "web", "group": "apps", "kind": "Deployment"}
    assert _status(plan_delete, DEPLOYMENTS, dep, DeleteRequest(precondition_uid="u"), NOW) == (
        _failure(409, "Conflict", 'Operation cannot be fulfilled on Deployment.apps "web": the '
                 f"UID in the precondition (u) does not match the UID in record ({uid}). The "
                 "object might have been deleted and then recreated", details))
    request = DeleteRequest(precondition_uid=uid, precondition_resource_version="4")
    assert _status(plan_delete, DEPLOYMENTS, dep, request, NOW) == _failure(
        409, "Conflict", 'Operation cannot be fulfilled on Deployment.apps "web": the '
        "ResourceVersion in the precondition (4) does not match the ResourceVersion in record "
        "(5). The object might have been modified", details)
    matching = DeleteRequest(precondition_uid=uid, precondition_resource_version="5")
    assert plan_delete(DEPLOYMENTS, dep, matching, NOW).action == "remove"


def test_delete_with_an_unknown_propagation_policy_is_422() -> None:
    pod = _stored(PODS, _pod())
    body = ('Unsupported value: "Sideways": supported values: "Foreground", "Background", '
            '"Orphan", "nil"')
    assert _status(plan_delete, PODS, pod, DeleteRequest(propagation_policy="Sideways"), NOW) == (
        _failure(422, "Invalid", f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: '
                 f"{body}", {"group": "meta.k8s.io", "kind": "DeleteOptions", "causes": [
                     {"reason": "FieldValueNotSupported", "message": body,
                      "field": "propagationPolicy"}]}))


def _scheduled_pod(**spec: Any) -> dict[str, Any]:
    return _stored(PODS, _pod(nodeName="node-1", **spec))


@pytest.mark.parametrize(("pod", "request_grace", "grace"), [
    (_scheduled_pod(), None, 30),  # the default terminationGracePeriodSeconds
    (_scheduled_pod(terminationGracePeriodSeconds=5), None, 5),
    (_scheduled_pod(terminationGracePeriodSeconds=5), 10, 10),
    (_scheduled_pod(), -3, 1),  # negative means 1
])
def test_delete_scheduled_pod_is_graceful(pod: dict[str, Any], request_grace: int | None,
                                          grace: int) -> None:
    plan = plan_delete(PODS, pod, DeleteRequest(grace_period_seconds=request_grace), NOW)
    assert plan.action == "mark"
    assert plan.obj["metadata"]["deletionTimestamp"] == format_time(NOW + timedelta(seconds=grace))
    assert plan.obj["metadata"]["deletionGracePeriodSeconds"] == grace
    assert "generation" not in plan.obj["metadata"]


@pytest.mark.parametrize("pod", [
    _stored(PODS, _pod()),  # never scheduled
    _scheduled_pod(),  # explicit grace 0 below
])
def test_delete_pod_with_grace_zero_marks_then_removes(pod: dict[str, Any]) -> None:
    plan = plan_delete(PODS, pod, DeleteRequest(grace_period_seconds=0), NOW)
    assert (plan.action, plan.remove, plan.needs_write) == ("mark_then_remove", True, True)
    assert plan.obj["metadata"]["deletionTimestamp"] == NOW_TEXT
    assert plan.obj["metadata"]["deletionGracePeriodSeconds"] == 0


def test_delete_terminated_pod_has_no_grace() -> None:
    pod = _scheduled_pod()
    pod["status"]["phase"] = "Succeeded"
    assert plan_delete(PODS, pod, DeleteRequest(), NOW).action == "mark_then_remove"


def test_delete_pod_with_finalizers_and_grace_zero_stays() -> None:
    pod = _stored(PODS, {**_pod(), "metadata": {"name": "web-0", "finalizers": ["a/x"]}})
    plan = plan_delete(PODS, pod, DeleteRequest(), NOW)
    assert plan.action == "mark" and plan.obj["metadata"]["deletionGracePeriodSeconds"] == 0


def test_later_pod_delete_may_only_shorten_the_grace_period() -> None:
    first = plan_delete(PODS, _scheduled_pod(), DeleteRequest(), NOW).obj
    assert plan_delete(PODS, first, DeleteRequest(), NOW).action == "unchanged"
    longer = plan_delete(PODS, first, DeleteRequest(grace_period_seconds=60), NOW)
    assert (longer.action, longer.obj) == ("unchanged", first)
    shorter = plan_delete(PODS, first, DeleteRequest(grace_period_seconds=10), NOW)
    assert shorter.action == "mark"
    assert shorter.obj["metadata"]["deletionTimestamp"] == format_time(NOW + timedelta(seconds=10))
    now_please = plan_delete(PODS, first, DeleteRequest(grace_period_seconds=0), NOW)
    assert now_please.action == "mark_then_remove"
    assert plan_delete(PODS, now_please.obj, DeleteRequest(), NOW).action == "remove"


def test_first_namespace_delete_marks_it_terminating() -> None:
    ns = _stored(NAMESPACES, {"metadata": {"name": "team"}}, namespace="")
    plan = plan_delete(NAMESPACES, ns, DeleteRequest(), NOW)
    assert plan.action == "mark"
    assert plan.obj["metadata"]["deletionTimestamp"] == NOW_TEXT
    assert "deletionGracePeriodSeconds" not in plan.obj["metadata"]
    assert plan.obj["status"] == {"phase": "Terminating"}
    assert plan_delete(NAMESPACES, plan.obj, DeleteRequest(), NOW).action == "unchanged"
    finalized = copy.deepcopy(plan.obj)
    finalized["spec"]["finalizers"] = []
    assert plan_delete(NAMESPACES, finalized, DeleteRequest(), NOW).action == "remove"


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
def test_immortal_namespaces_are_403(name: str) -> None:
    ns = _stored(NAMESPACES, {"metadata": {"name": name}}, namespace="")
    assert _status(plan_delete, NAMESPACES, ns, DeleteRequest(), NOW) == _failure(
        403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted',
        {"name": name, "kind": "namespaces"})


def test_namespace_delete_preconditions_use_the_storage_wording() -> None:
    ns = _stored(NAMESPACES, {"metadata": {"name": "team"}}, namespace="")
    uid = ns["metadata"]["uid"]
    assert _status(plan_delete, NAMESPACES, ns, DeleteRequest(precondition_uid="u"), NOW) == (
        _failure(409, "Conflict", 'Operation cannot be fulfilled on namespaces "team": '
                 f"Precondition failed: UID in precondition: u, UID in object meta: {uid}",
                 {"name": "team", "kind": "namespaces"}))


@pytest.mark.parametrize(("meta", "spec", "expected"), [
    ({"deletionTimestamp": NOW_TEXT, "deletionGracePeriodSeconds": 0}, {}, True),
    ({"deletionTimestamp": NOW_TEXT}, {}, True),
    ({"deletionTimestamp": NOW_TEXT, "deletionGracePeriodSeconds": 30}, {}, False),
    ({"deletionTimestamp": NOW_TEXT, "finalizers": ["a/x"]}, {}, False),
    ({}, {}, False),
])
def test_should_remove_after_update(meta: dict[str, Any], spec: dict[str, Any],
                                    expected: bool) -> None:
    assert should_remove_after_update(PODS, {"metadata": meta, "spec": spec}) is expected


def test_terminating_namespace_waits_for_its_spec_finalizers() -> None:
    ns: dict[str, Any] = {"metadata": {"deletionTimestamp": NOW_TEXT},
                          "spec": {"finalizers": ["kubernetes"]}}
    assert not should_remove_after_update(NAMESPACES, ns)
    ns["spec"]["finalizers"] = []
    assert should_remove_after_update(NAMESPACES, ns)


def test_delete_response() -> None:
    pod = _stored(PODS, _pod())
    assert delete_response(PODS, pod) == pod
    dep = _stored(DEPLOYMENTS, {"metadata": {"name": "web"}, "spec": {}})
    assert delete_response(DEPLOYMENTS, dep) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": "web", "group": "apps", "kind": "deployments",
                    "uid": dep["metadata"]["uid"]}}
    assert delete_response(DEPLOYMENTS, dep, removed=False) == dep


def test_namespace_terminating_error() -> None:
    assert namespace_terminating_error(PODS, "x", "demo").to_status() == _failure(
        403, "Forbidden", 'pods "x" is forbidden: unable to create new content in namespace demo '
        "because it is being terminated",
        {"name": "x", "kind": "pods", "causes": [{"reason": "NamespaceTerminating",
                                                   "message": "namespace demo is being terminated",
                                                   "field": "metadata.namespace"}]})
