"""Server-side apply as pure functions: field sets, FieldsV1, merge, prune, conflicts, Updates."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from kubewire.resources import REGISTRY
from kubewire.schema import TypeNode, type_for
from kubewire.server.patch.apply import ApplyRequest, apply_config, merge
from kubewire.server.patch.apply_request import ServerSideApply, decode_apply_body
from kubewire.server.patch.field_ownership import (
    WriteFacts,
    default_field_manager,
    resource_schema,
    track_write,
)
from kubewire.server.patch.field_paths import (
    FieldSetError,
    compare,
    field_set,
    fields_v1,
    parse_fields_v1,
    path_text,
)
from kubewire.server.patch.managed_fields import (
    ManagedSet,
    UpdateRecord,
    cap_update_managers,
    decode_managed,
    encode_managed,
    manager_key,
    record_update,
)
from kubewire.server.request.routes import Route
from kubewire.server.request.write_options import WriteOptions
from kubewire.status import BadRequest, Conflict
from tests.gateway_api import gateway_resource

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def deployment_schema() -> TypeNode:
    return type_for("apps/v1", "Deployment")


def pod_schema() -> TypeNode:
    return type_for("v1", "Pod")


def deployment(replicas: int = 2, labels: dict[str, str] | None = None,
               image: str = "nginx:1") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default",
                     "labels": {"app": "web"} if labels is None else labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": image,
                                                       "ports": [{"containerPort": 80}]}]}}},
    }


def request(manager: str = "alice", *, now: str = T0, force: bool = False,
            kind: str = "Deployment", api_version: str = "apps/v1") -> ApplyRequest:
    return ApplyRequest(manager=manager, api_version=api_version, kind=kind, now=now,
                        force=force, has_status=True)


def entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = obj["metadata"]["managedFields"]
    return result


# --- field sets and FieldsV1 --------------------------------------------------------------------

def test_field_set_of_a_deployment_encodes_like_kube() -> None:
    paths = field_set(deployment(), deployment_schema())
    encoded = fields_v1(p for p in paths if p[0] != "f:apiVersion" and p[0] != "f:kind"
                        and p[:2] not in {("f:metadata", "f:name"),
                                          ("f:metadata", "f:namespace")})
    assert encoded == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},  # LabelSelector is an atomic map
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {'k:{"name":"nginx"}': {
                    ".": {}, "f:image": {}, "f:name": {},
                    "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {
                        ".": {}, "f:containerPort": {}}}}}},
            },
        },
    }


def test_fields_v1_round_trips() -> None:
    paths = field_set(deployment(), deployment_schema())
    assert parse_fields_v1(fields_v1(paths)) == paths


def test_set_lists_use_value_elements_and_atomic_lists_are_one_leaf() -> None:
    pod = {"metadata": {"finalizers": ["b", "a"]},
           "spec": {"tolerations": [{"key": "k"}], "containers": [
               {"name": "c", "args": ["x", "y"]}]}}
    assert fields_v1(field_set(pod, pod_schema())) == {
        "f:metadata": {"f:finalizers": {'v:"a"': {}, 'v:"b"': {}}},
        "f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:args": {}, "f:name": {}}},
                   "f:tolerations": {}},
    }


def test_values_that_do_not_fit_the_schema_are_refused_with_every_reason() -> None:
    pod = {"spec": {"containers": [{"image": "x"}]}}
    with pytest.raises(FieldSetError) as caught:
        field_set(pod, pod_schema())
    assert str(caught.value) == (
        '.spec.containers: element 0: associative list with keys has an element that omits '
        'key field "name" (and doesn\'t have default value)')
    pod2: dict[str, Any] = {
        "spec": {"containers": [{"name": "a"}, {"name": "a", "bogus": 1}], "nope": 1,
                 "priority": "high"}}
    with pytest.raises(FieldSetError) as caught:
        field_set(pod2, pod_schema())
    assert str(caught.value) == (
        "errors:\n"
        '  .spec.containers: duplicate entries for key [name="a"]\n'
        "  .spec.nope: field not declared in schema\n"
        "  .spec.priority: expected numeric (int or float), got string")


def test_bad_configuration_is_a_400_naming_the_object() -> None:
    config = deployment()
    config["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"protocol": "TCP"}]
    with pytest.raises(BadRequest) as caught:
        apply_config(None, config, deployment_schema(), request())
    assert caught.value.message == (
        "failed to create typed patch object (default/web; apps/v1, Kind=Deployment): "
        '.spec.template.spec.containers[name="nginx"].ports: element 0: associative list with '
        'keys has an element that omits key field "containerPort" (and doesn\'t have default '
        "value)")


def test_path_text_prints_like_fieldpath() -> None:
    assert path_text(("f:spec", "f:containers", 'k:{"name":"web"}', "f:image")) == \
        '.spec.containers[name="web"].image'
    assert path_text(("f:ports", 'k:{"containerPort":80,"protocol":"TCP"}')) == \
        '.ports[containerPort=80,protocol="TCP"]'
    assert path_text(("f:metadata", "f:finalizers", 'v:"a"')) == '.metadata.finalizers[="a"]'


def test_compare_reports_leaves_and_new_map_entries() -> None:
    old, new = deployment(), deployment(replicas=3, labels={"app": "web", "tier": "x"})
    changes = compare(old, new, deployment_schema(), is_custom=False)
    assert changes.modified == {("f:spec", "f:replicas")}
    assert changes.added == {("f:metadata", "f:labels", "f:tier")}
    assert not changes.removed


# --- merge --------------------------------------------------------------------------------------

def test_merge_merges_maps_and_keyed_lists_and_replaces_atomic_ones() -> None:
    schema = pod_schema()
    live = {"metadata": {"labels": {"a": "1"}},
            "spec": {"containers": [{"name": "a", "image": "i", "args": ["1"]},
                                    {"name": "b", "image": "j"}],
                     "tolerations": [{"key": "x"}]}}
    config = {"metadata": {"labels": {"b": "2"}},
              "spec": {"containers": [{"name": "b", "image": "k"}, {"name": "a", "args": ["2"]}],
                       "tolerations": [{"key": "y"}]}}
    assert merge(live, config, schema) == {
        "metadata": {"labels": {"a": "1", "b": "2"}},
        "spec": {"containers": [{"name": "b", "image": "k"},
                                {"name": "a", "image": "i", "args": ["2"]}],
                 "tolerations": [{"key": "y"}]}}


def test_merge_keeps_live_only_items_in_place_and_null_unsets() -> None:
    schema = pod_schema()
    live = {"spec": {"containers": [{"name": "a"}, {"name": "x"}, {"name": "b"}],
                     "hostname": "h"}}
    config = {"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
                       "hostname": None}}
    assert merge(live, config, schema) == {
        "spec": {"containers": [{"name": "a"}, {"name": "x"}, {"name": "b"}, {"name": "c"}]}}


# --- apply --------------------------------------------------------------------------------------

def test_create_records_one_apply_entry() -> None:
    obj = apply_config(None, deployment(), deployment_schema(), request())
    [entry] = entries(obj)
    assert {k: v for k, v in entry.items() if k != "fieldsV1"} == {
        "manager": "alice", "operation": "Apply", "apiVersion": "apps/v1", "time": T0,
        "fieldsType": "FieldsV1"}
    assert entry["fieldsV1"]["f:metadata"] == {"f:labels": {"f:app": {}}}
    assert obj["spec"]["replicas"] == 2


def test_dropped_fields_are_pruned_and_kept_ones_stay() -> None:
    schema = deployment_schema()
    live = apply_config(None, deployment(labels={"app": "web", "tier": "x"}), schema, request())
    config = deployment(labels={"app": "web"})
    del config["spec"]["replicas"]
    obj = apply_config(live, config, schema, request(now=T1))
    assert obj["metadata"]["labels"] == {"app": "web"}
    assert "replicas" not in obj["spec"]
    assert "f:replicas" not in entries(obj)[0]["fieldsV1"]["f:spec"]
    assert entries(obj)[0]["time"] == T1


def test_a_field_another_applier_owns_is_not_pruned() -> None:
    schema = deployment_schema()
    live = apply_config(None, deployment(labels={"app": "web", "tier": "x"}), schema, request())
    shared = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "labels": {"tier": "x"}}}
    live = apply_config(live, shared, schema, request("bob"))
    obj = apply_config(live, deployment(), schema, request(now=T1))
    assert obj["metadata"]["labels"] == {"app": "web", "tier": "x"}
    # Neither bob's apply nor alice's second one changed the object: bob's entry has no
    # time and sorts first (time 0), alice's keeps her first apply's.
    assert [(e["manager"], e.get("time")) for e in entries(obj)] == [("bob", None),
                                                                      ("alice", T0)]


def test_no_op_apply_keeps_the_time() -> None:
    schema = deployment_schema()
    live = apply_config(None, deployment(), schema, request())
    assert apply_config(live, deployment(), schema, request(now=T1)) == live


def with_updater(live: dict[str, Any], manager: str, new: dict[str, Any]) -> dict[str, Any]:
    managed = decode_managed(live["metadata"].get("managedFields")) or {}
    bare = {k: v for k, v in live.items() if k != "metadata"}
    changes = compare(bare, {k: v for k, v in new.items() if k != "metadata"},
                      deployment_schema(), is_custom=False)
    key = manager_key(manager, "Update", "apps/v1")
    out = copy.deepcopy(new)
    out["metadata"]["managedFields"] = encode_managed(
        record_update(managed, changes, UpdateRecord(key, T0, has_status=True)))
    return out


def test_changing_a_field_an_updater_owns_is_a_conflict() -> None:
    schema = deployment_schema()
    live = with_updater(apply_config(None, deployment(), schema, request()), "bob",
                        deployment(replicas=5))
    assert [(e["manager"], e["operation"]) for e in entries(live)] == [
        ("alice", "Apply"), ("bob", "Update")]
    with pytest.raises(Conflict) as caught:
        apply_config(live, deployment(replicas=3), schema, request(now=T1))
    assert caught.value.to_status() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "bob" using apps/v1: '
                   ".spec.replicas",
        "reason": "Conflict",
        "details": {"causes": [{"reason": "FieldManagerConflict",
                                "message": 'conflict with "bob" using apps/v1',
                                "field": ".spec.replicas"}]},
        "code": 409}


def test_the_same_value_is_shared_not_a_conflict() -> None:
    schema = deployment_schema()
    live = with_updater(apply_config(None, deployment(), schema, request()), "bob",
                        deployment(replicas=5))
    obj = apply_config(live, deployment(replicas=5), schema, request("carol", now=T1))
    owners = {e["manager"] for e in entries(obj) if "f:replicas" in e["fieldsV1"].get(
        "f:spec", {})}
    assert owners == {"bob", "carol"}


def test_force_takes_ownership() -> None:
    schema = deployment_schema()
    live = with_updater(apply_config(None, deployment(), schema, request()), "bob",
                        deployment(replicas=5))
    obj = apply_config(live, deployment(replicas=3), schema, request(now=T1, force=True))
    assert obj["spec"]["replicas"] == 3
    assert [e["manager"] for e in entries(obj)] == ["alice"]  # bob owned nothing else


def test_several_conflicts_are_listed_per_manager() -> None:
    schema = deployment_schema()
    live = apply_config(None, deployment(), schema, request("bob"))
    with pytest.raises(Conflict) as caught:
        apply_config(live, deployment(replicas=3, image="nginx:2"), schema, request())
    assert caught.value.message == (
        'Apply failed with 2 conflicts: conflicts with "bob":\n'
        "- .spec.replicas\n"
        '- .spec.template.spec.containers[name="nginx"].image')
    assert [c["field"] for c in caught.value.details["causes"]] == [  # type: ignore[index]
        ".spec.replicas", '.spec.template.spec.containers[name="nginx"].image']


@pytest.mark.parametrize(("config", "message"), [
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}},
     "invalid object type: /v1, Kind=Pod"),
    ({"metadata": {"name": "web"}}, "invalid object type: /, Kind="),
    ({"apiVersion": "apps/v1", "kind": "Deployment",
      "metadata": {"name": "web", "managedFields": [{"manager": "x"}]}},
     "metadata.managedFields must be nil"),
])
def test_bad_configurations_are_400(config: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        apply_config(None, config, deployment_schema(), request())
    assert caught.value.message == message


def test_custom_kinds_keep_lists_without_a_list_type_atomic() -> None:
    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "r"},
             "spec": {"hostnames": ["a.example"], "parentRefs": [{"name": "gw"}]}}
    schema = resource_schema(gateway_resource("httproutes"))  # from the CRD's schema
    obj = apply_config(None, route, schema, ApplyRequest(
        manager="m", api_version="gateway.networking.k8s.io/v1", kind="HTTPRoute", now=T0,
        is_custom=True, has_status=True))
    # Neither list declares a list type: both are atomic, one leaf each.
    assert entries(obj)[0]["fieldsV1"]["f:spec"] == {"f:hostnames": {}, "f:parentRefs": {}}


def test_decode_apply_body_reads_yaml_and_json() -> None:
    assert decode_apply_body(b"kind: Pod\nmetadata:\n  name: x\n").config == {
        "kind": "Pod", "metadata": {"name": "x"}}
    assert decode_apply_body(b'{"kind":"Pod"}').config == {"kind": "Pod"}
    assert decode_apply_body(b"t: 2024-01-01T00:00:00Z\n").config == {
        "t": "2024-01-01T00:00:00Z"}
    with pytest.raises(BadRequest, match="cannot unmarshal array into Go value of type "
                                         "map"):
        decode_apply_body(b"[1]")


def test_an_update_takes_what_it_changed_from_the_applier() -> None:
    schema = deployment_schema()
    live = apply_config(None, deployment(), schema, request())
    obj = with_updater(live, "bob", deployment(replicas=5))
    alice, bob = entries(obj)
    assert "f:replicas" not in alice["fieldsV1"]["f:spec"]
    assert bob == {"manager": "bob", "operation": "Update", "apiVersion": "apps/v1",
                   "time": T0, "fieldsType": "FieldsV1",
                   "fieldsV1": {"f:spec": {"f:replicas": {}}}}


def test_kubectl_takes_over_fields_its_client_side_apply_set() -> None:
    schema = deployment_schema()
    last = deployment()
    live = deployment()
    live["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(last)}
    live = with_updater(apply_config(None, {"apiVersion": "apps/v1", "kind": "Deployment",
                                            "metadata": {"name": "web"}}, schema, request()),
                        "kubectl-client-side-apply", live)
    with pytest.raises(Conflict):  # another applier name gets the conflict
        apply_config(live, deployment(replicas=3), schema, request("other"))
    obj = apply_config(live, deployment(replicas=3), schema, request("kubectl", now=T1))
    assert obj["spec"]["replicas"] == 3
    annotation = obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    assert json.loads(annotation) == deployment(replicas=3)
    assert annotation.endswith("}\n")


def test_kubectl_writes_the_last_applied_annotation_as_go_encodes_it() -> None:
    """buildLastApplied: json.Encoder (sorted keys, HTML-safe, Go 1.22+ escapes, float64
    numbers as sigs.k8s.io/yaml decodes them) of the configuration, with a newline."""
    schema = deployment_schema()
    live = deployment()
    live["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(deployment())}
    live = with_updater(apply_config(None, {"apiVersion": "apps/v1", "kind": "Deployment",
                                            "metadata": {"name": "web"}}, schema, request()),
                        "kubectl-client-side-apply", live)
    config = deployment(replicas=3)
    config["metadata"]["annotations"] = {"note": "<b>&\b\f\u2028\U0001F600"}
    obj = apply_config(live, config, schema, request("kubectl", now=T1))
    annotation = obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    assert annotation == (
        '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{"note":'
        '"\\u003cb\\u003e\\u0026\\b\\f\\u2028\U0001F600"},"labels":{"app":"web"},"name":"web",'
        '"namespace":"default"},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},'
        '"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"image":'
        '"nginx:1","name":"nginx","ports":[{"containerPort":80}]}]}}}}\n')


def test_the_last_applied_annotation_prints_numbers_as_go_float64s() -> None:
    """sigs.k8s.io/yaml decodes the configuration's numbers into float64s: 1.0 is ``1``,
    ints past 2^53 round, small ones take Go's ``1e-7`` form (json.dumps: 1.0, exact, 1e-07)."""
    widget = ApplyRequest(manager="alice", api_version="example.com/v1", kind="Widget", now=T0,
                          is_custom=True)
    config: dict[str, Any] = {
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default", "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"ratio": 1.0, "tiny": 1e-7, "big": 12345678901234567890,
                 "id": 9007199254740993}}
    live = apply_config(None, config, None, widget)  # alice keeps the annotation
    del config["metadata"]["annotations"]
    obj = apply_config(live, config, None, replace(widget, manager="kubectl", now=T1))
    assert obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] == (
        '{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w",'
        '"namespace":"default"},"spec":{"big":12345678901234567000,"id":9007199254740992,'
        '"ratio":1,"tiny":1e-7}}\n')


def test_kubectl_still_conflicts_on_fields_changed_since_its_client_side_apply() -> None:
    schema = deployment_schema()
    live = deployment(replicas=5)
    live["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(deployment())}
    live = with_updater(apply_config(None, {"apiVersion": "apps/v1", "kind": "Deployment",
                                            "metadata": {"name": "web"}}, schema, request()),
                        "scaler", live)
    with pytest.raises(Conflict) as caught:
        apply_config(live, deployment(replicas=3), schema, request("kubectl", now=T1))
    assert caught.value.message == ('Apply failed with 1 conflict: conflict with "scaler" '
                                    "using apps/v1: .spec.replicas")


def test_update_managers_are_capped_into_ancient_changes() -> None:
    managed = {
        manager_key(f"m{i:02}", "Update", "apps/v1"): ManagedSet(
            frozenset({("f:spec", f"f:f{i}")}), "apps/v1", f"2026-01-01T00:00:{i:02}Z")
        for i in range(12)}
    managed[manager_key("applier", "Apply", "apps/v1")] = ManagedSet(
        frozenset({("f:spec", "f:replicas")}), "apps/v1", T0)
    capped = cap_update_managers(managed)
    updaters = sorted(k.manager for k in capped if k.operation == "Update")
    assert updaters == ["ancient-changes", *(f"m{i:02}" for i in range(3, 12))]
    bucket = capped[manager_key("ancient-changes", "Update", "apps/v1")]
    assert bucket.fields == {("f:spec", "f:f0"), ("f:spec", "f:f1"), ("f:spec", "f:f2")}
    assert bucket.time == "2026-01-01T00:00:02Z"  # the newest merged entry's
    assert manager_key("applier", "Apply", "apps/v1") in capped  # appliers are never merged


def test_capping_breaks_time_ties_by_the_go_encoded_identifier() -> None:
    """BuildManagerIdentifier is ``json.Marshal`` of the entry, whose appendString escapes
    ``<`` as \\u003c (escapeHTML): "a<" sorts after "a=" and "a[" (``\\`` is 0x5c), so
    the oldest two are "a=" and "a[" and "a<" survives."""
    managed = {manager_key(name, "Update", "apps/v1"): ManagedSet(
        frozenset({("f:spec", f"f:{i}")}), "apps/v1", T0)
        for i, name in enumerate(("a<", "a=", "a["))}
    capped = cap_update_managers(managed, limit=2)
    assert sorted(k.manager for k in capped) == ["a<", "ancient-changes"]


def test_strict_apply_refuses_repeated_keys_after_applying() -> None:
    body = (b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},\n'
            b' "spec":{"replicas":1,"replicas":2,"paused":true,"paused":false}}')
    applied = decode_apply_body(body)
    assert applied.config["spec"] == {"replicas": 2, "paused": False}
    lenient = ServerSideApply(applied, deployment_schema(), request())
    assert lenient.create("web")["spec"]["replicas"] == 2
    with pytest.raises(BadRequest) as caught:
        ServerSideApply(applied, deployment_schema(), request(), strict=True).create("web")
    assert caught.value.message == (
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n"
        '  line 2: key "replicas" already set in map\n'
        '  line 2: key "paused" already set in map')


# --- the write hook -------------------------------------------------------------------------------

def deployments_route() -> Route:
    resource = REGISTRY.lookup("apps", "v1", "deployments")
    assert resource is not None
    return Route(resource, "default", "web", "", False)


NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)


def test_track_write_records_the_writer_and_keeps_entries_on_a_no_op() -> None:
    route = deployments_route()
    live = apply_config(None, deployment(), deployment_schema(), request())
    facts = WriteFacts(route, default_field_manager(WriteOptions(), "edit/1.0 (x)"), NOW)
    changed = deployment(replicas=7)
    tracked = track_write(facts, live, changed, copy.deepcopy(changed))
    assert [(e["manager"], e["time"]) for e in entries(tracked)] == [
        ("alice", T0), ("edit", "2026-01-01T00:01:00Z")]
    same = copy.deepcopy(live)
    assert track_write(facts, live, same, copy.deepcopy(same)) == live


def test_track_write_honours_a_reset_and_ignores_body_entries_on_status() -> None:
    route = deployments_route()
    live = apply_config(None, deployment(), deployment_schema(), request())
    facts = WriteFacts(route, WriteOptions(field_manager="m"), NOW)
    reset = deployment()
    reset["metadata"]["managedFields"] = [{}]
    assert "managedFields" not in track_write(facts, live, reset, deployment())["metadata"]
    status_facts = WriteFacts(Route(route.resource, "default", "web", "status", False),
                              WriteOptions(field_manager="m"), NOW)
    tracked = track_write(status_facts, live, reset, copy.deepcopy(live))
    assert tracked["metadata"]["managedFields"] == live["metadata"]["managedFields"]
