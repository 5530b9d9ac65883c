"""server/strategic_patch.py: kubectl's SMP bodies, apimachinery's vectors, every error's Status.

Vectors marked "apimachinery" restate cases of ``pkg/util/strategicpatch/patch_test.go`` on real
fields (its ``mergingList`` is a list merged by ``name``, like ``spec.containers``; its
``mergingIntList`` a primitive merge list, like ``metadata.finalizers``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubewire.resources import REGISTRY, Resource
from kubewire.server.patch.json_patch import PATCH_REJECTED_MESSAGE
from kubewire.server.patch.strategic import (
    PANIC_MESSAGE,
    UNMERGEABLE_MESSAGE,
    apply_strategic_merge_patch,
)
from kubewire.status import StatusError


def _resource(api_version: str, kind: str) -> Resource:
    resource = REGISTRY.by_kind(api_version, kind)
    assert resource is not None
    return resource


DEPLOYMENT = _resource("apps/v1", "Deployment")
POD = _resource("v1", "Pod")
SERVICE = _resource("v1", "Service")


def _smp(doc: dict[str, Any], patch: Any, resource: Resource = POD) -> dict[str, Any]:
    body = patch if isinstance(patch, bytes) else json.dumps(patch).encode()
    return apply_strategic_merge_patch(doc, body, resource)


def _status_of(doc: dict[str, Any], patch: Any, resource: Resource = POD) -> dict[str, Any]:
    with pytest.raises(StatusError) as info:
        _smp(doc, patch, resource)
    return info.value.to_status()


def _status(message: str, code: int, reason: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Failure", "message": message}
    if reason:
        status["reason"] = reason
    if code == 422:
        status["details"] = {}
    status["code"] = code
    return status


def _pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": list(containers), **spec}}


def _names(items: list[dict[str, Any]], key: str = "name") -> list[Any]:
    return [item[key] for item in items]


def _deployment() -> dict[str, Any]:
    container = {"name": "nginx", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}],
                 "ports": [{"containerPort": 80, "protocol": "TCP"}]}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "strategy": {"type": "RollingUpdate",
                              "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [container]}}},
        "status": {"conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]},
    }


# --- what kubectl 1.32 sends (objects-and-clients.md §2.5) ----------------------------------------

def test_kubectl_second_apply_body_changes_image_replicas_and_env() -> None:
    body = (b'{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":'
            b'"{\\"new\\":1}"}},"spec":{"replicas":3,"template":{"spec":{"$setElementOrder/'
            b'containers":[{"name":"nginx"}],"containers":[{"$setElementOrder/env":[{"name":"A"}],'
            b'"env":[{"name":"A","value":"2"}],"image":"nginx:1.28","name":"nginx"}]}}}}')
    doc = _deployment()
    out = _smp(doc, body, DEPLOYMENT)
    expected = _deployment()
    expected["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = (
        '{"new":1}')
    expected["spec"]["replicas"] = 3
    container = expected["spec"]["template"]["spec"]["containers"][0]
    container["image"] = "nginx:1.28"
    container["env"] = [{"name": "A", "value": "2"}]
    assert out == expected
    assert doc == _deployment()  # the input is never mutated


def test_set_element_order_reorders_env_and_keeps_unlisted_entries() -> None:
    doc = _pod({"name": "c", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "1"},
                                     {"name": "C", "value": "1"}]})
    patch = {"spec": {"containers": [{"name": "c", "$setElementOrder/env": [{"name": "B"},
                                                                            {"name": "A"}],
                                      "env": [{"name": "A", "value": "2"}]}]}}
    env = _smp(doc, patch)["spec"]["containers"][0]["env"]
    assert env == [{"name": "B", "value": "1"}, {"name": "A", "value": "2"},
                   {"name": "C", "value": "1"}]


def test_delete_directive_removes_a_container_by_name() -> None:
    doc = _pod({"name": "A", "image": "a"}, {"name": "B", "image": "b"})
    patch = {"spec": {"$setElementOrder/containers": [{"name": "B"}],
                      "containers": [{"$patch": "delete", "name": "A"}]}}
    assert _smp(doc, patch)["spec"]["containers"] == [{"name": "B", "image": "b"}]


def test_retain_keys_with_null_switches_deployment_strategy_to_recreate() -> None:
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": None,
                                   "type": "Recreate"}}}
    out = _smp(_deployment(), patch, DEPLOYMENT)
    assert out["spec"]["strategy"] == {"type": "Recreate"}


def test_retain_keys_alone_clears_fields_missing_from_the_list() -> None:
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    assert _smp(_deployment(), patch, DEPLOYMENT)["spec"]["strategy"] == {"type": "Recreate"}


def test_tolerations_have_no_strategy_and_are_replaced_whole() -> None:
    old = [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]
    new = [{"key": "c", "operator": "Exists", "effect": "NoSchedule"}]
    out = _smp(_pod({"name": "c"}, tolerations=old), {"spec": {"tolerations": new}})
    assert out["spec"]["tolerations"] == new


def test_service_ports_merge_by_port() -> None:
    doc = {"spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080},
                              {"name": "https", "port": 443, "targetPort": 8443}]}}
    out = _smp(doc, {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}, SERVICE)
    assert out["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 9090},
                                    {"name": "https", "port": 443, "targetPort": 8443}]


def test_new_elements_go_before_server_only_ones_without_set_element_order() -> None:
    # mergeSortedSlice: an element the server never ordered is taken first.
    doc = {"spec": {"ports": [{"port": 80}, {"port": 443}]}}
    patch = {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 8443}]}}
    assert _names(_smp(doc, patch, SERVICE)["spec"]["ports"], "port") == [80, 8443, 443]


def test_labels_and_annotations_merge_and_null_deletes() -> None:
    doc = {"metadata": {"labels": {"a": "1", "b": "2"}, "annotations": {"x": "1"}}}
    patch = {"metadata": {"labels": {"b": None, "c": "3", "gone": None},
                          "annotations": {"x": None, "y": "2"}}}
    assert _smp(doc, patch)["metadata"] == {"labels": {"a": "1", "c": "3"},
                                            "annotations": {"y": "2"}}


def test_nulls_in_a_new_map_are_discarded() -> None:
    out = _smp({"metadata": {}}, {"metadata": {"labels": {"a": "1", "b": None}}})
    assert out == {"metadata": {"labels": {"a": "1"}}}


def test_finalizers_are_a_primitive_merge_list() -> None:
    out = _smp({"metadata": {"finalizers": ["a", "b"]}}, {"metadata": {"finalizers": ["b", "c"]}})
    assert out["metadata"]["finalizers"] == ["a", "b", "c"]


def test_delete_from_primitive_list_removes_finalizers() -> None:
    doc = {"metadata": {"finalizers": ["a", "b", "a", "c"]}}
    out = _smp(doc, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "zzz"]}})
    assert out["metadata"]["finalizers"] == ["b", "c"]


def test_delete_from_primitive_list_also_applies_to_lists_without_strategy() -> None:
    doc = _pod({"name": "c", "args": ["x", "y", "z"]})
    patch = {"spec": {"containers": [{"name": "c", "$deleteFromPrimitiveList/args": ["y"]}]}}
    assert _smp(doc, patch)["spec"]["containers"][0]["args"] == ["x", "z"]


def test_status_conditions_merge_by_type() -> None:
    patch = {"status": {"conditions": [{"type": "Progressing", "status": "False",
                                        "reason": "ProgressDeadlineExceeded"}]}}
    conditions = _smp(_deployment(), patch, DEPLOYMENT)["status"]["conditions"]
    assert conditions == [
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]


def test_map_directives_replace_and_delete() -> None:
    doc = {"metadata": {"labels": {"a": "1"}, "annotations": {"b": "2"}}}
    patch = {"metadata": {"labels": {"$patch": "replace", "z": "9"},
                          "annotations": {"$patch": "delete"}}}
    assert _smp(doc, patch)["metadata"] == {"labels": {"z": "9"}, "annotations": {}}


def test_a_directive_on_an_absent_field_drops_it() -> None:
    # removeDirectives (kubernetes#117568): a `$patch` map taken as a new value is not kept.
    out = _smp({"metadata": {}}, {"metadata": {"labels": {"$patch": "replace", "a": "1"}}})
    assert out == {"metadata": {}}


def test_null_body_changes_nothing() -> None:
    doc = _pod({"name": "c"})
    assert _smp(doc, b"null") == doc


# --- apimachinery patch_test.go vectors -----------------------------------------------------------

def test_apimachinery_delete_all_duplicate_entries_in_a_merging_list() -> None:
    doc = _pod({"name": "1"}, {"name": "1"}, {"name": "2", "image": "a"}, {"name": "3"},
               {"name": "3"})
    patch = {"spec": {"containers": [{"name": "1", "$patch": "delete"},
                                     {"name": "3", "$patch": "delete"}]}}
    assert _smp(doc, patch)["spec"]["containers"] == [{"name": "2", "image": "a"}]


def test_apimachinery_replace_directive_element_empties_a_merging_list() -> None:
    doc = _pod({"name": "1"}, {"name": "2"})
    assert _smp(doc, {"spec": {"containers": [{"$patch": "replace"}]}})["spec"] == {
        "containers": []}


def test_apimachinery_unique_scalars_when_merging_lists() -> None:
    out = _smp({"metadata": {"finalizers": ["1", "2"]}}, {"metadata": {"finalizers": ["2", "3"]}})
    assert out["metadata"]["finalizers"] == ["1", "2", "3"]


@pytest.mark.parametrize(("patch", "expected"), [
    (["3", "1", "2"], ["3", "1", "2"]),
    (["3", "1"], ["2", "3", "1"]),
])
def test_apimachinery_preserve_patch_order_in_a_merging_primitive_list(
        patch: list[str], expected: list[str]) -> None:
    out = _smp({"metadata": {"finalizers": ["1", "2", "3"]}}, {"metadata": {"finalizers": patch}})
    assert out["metadata"]["finalizers"] == expected


def test_apimachinery_preserve_patch_order_in_a_merging_list() -> None:
    doc = _pod({"name": "1"}, {"name": "2", "image": "b"}, {"name": "3"})
    patch = {"spec": {"containers": [{"name": "3", "image": "c"}, {"name": "1", "image": "a"}]}}
    assert _smp(doc, patch)["spec"]["containers"] == [
        {"name": "2", "image": "b"}, {"name": "3", "image": "c"}, {"name": "1", "image": "a"}]


def test_apimachinery_set_element_order_naming_an_absent_item() -> None:
    doc = _pod({"name": "1"}, {"name": "3"})
    patch = {"spec": {"$setElementOrder/containers": [{"name": "3"}, {"name": "2"},
                                                      {"name": "1"}],
                      "containers": [{"name": "3", "image": "3"}, {"name": "1", "image": "1"}]}}
    assert _smp(doc, patch)["spec"]["containers"] == [{"name": "3", "image": "3"},
                                                      {"name": "1", "image": "1"}]


def test_apimachinery_merge_lists_of_maps_with_set_element_order() -> None:
    doc = _pod({"name": "1", "args": ["a"]}, {"name": "2", "image": "2"})
    patch = {"spec": {"$setElementOrder/containers": [{"name": "4"}, {"name": "1"},
                                                      {"name": "2"}, {"name": "3"}],
                      "containers": [{"name": "4", "image": "4"}, {"name": "3", "image": "3"}]}}
    assert _names(_smp(doc, patch)["spec"]["containers"]) == ["4", "1", "2", "3"]


def test_apimachinery_delete_items_in_primitive_list_with_set_element_order() -> None:
    doc = {"metadata": {"finalizers": ["1", "2", "3", "4"]}}
    patch = {"metadata": {"$setElementOrder/finalizers": ["1", "2", "4"],
                          "$deleteFromPrimitiveList/finalizers": ["3"], "finalizers": ["4"]}}
    assert _smp(doc, patch)["metadata"]["finalizers"] == ["1", "2", "4"]


@pytest.mark.parametrize(("doc", "patch"), [
    ({"metadata": {"finalizers": ["1", "2"]}}, {"$deleteFromPrimitiveList/finalizers": ["3"]}),
    ({"metadata": {"finalizers": []}}, {"$deleteFromPrimitiveList/finalizers": ["3"]}),
    ({"metadata": {"labels": {"a": "b"}}}, {"$deleteFromPrimitiveList/finalizers": ["3"]}),
])
def test_apimachinery_delete_from_primitive_list_never_adds(
        doc: dict[str, Any], patch: dict[str, Any]) -> None:
    assert _smp(doc, {"metadata": patch}) == doc


def test_apimachinery_nested_patch_merge_with_empty_list() -> None:
    patch = {"spec": {"containers": [{"name": "hello"},
                                     {"$patch": "delete", "name": "doesntexist"}]}}
    assert _smp({"spec": {}}, patch) == {"spec": {"containers": [{"name": "hello"}]}}


def test_apimachinery_retain_keys_map_without_directive_merges() -> None:
    doc = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    patch = {"spec": {"strategy": {"rollingUpdate": {"maxUnavailable": 0}}}}
    assert _smp(doc, patch, DEPLOYMENT)["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}


# --- errors ---------------------------------------------------------------------------------------

def _merge_error(message: str) -> dict[str, Any]:
    """kube answers these with a bare 500; they are the client's mistake, so kubewire says 400."""
    if message == PANIC_MESSAGE:
        message = UNMERGEABLE_MESSAGE
    return _status(message, 400, "BadRequest")


@pytest.mark.parametrize(("body", "message"), [
    (b"{", "unexpected end of JSON input"),
    (b"nope", "invalid character 'o' in literal null (expecting 'u')"),
    (b"[]", "json: cannot unmarshal array into Go value of type map[string]interface {}"),
    (b'"x"', "json: cannot unmarshal string into Go value of type map[string]interface {}"),
    (b"1", "json: cannot unmarshal number into Go value of type map[string]interface {}"),
    (b"true", "json: cannot unmarshal bool into Go value of type map[string]interface {}"),
])
def test_body_that_is_not_a_json_object_is_400(body: bytes, message: str) -> None:
    assert _status_of(_pod(), body) == _status(message, 400, "BadRequest")


@pytest.mark.parametrize(("patch", "message"), [
    ({"metadata": {"$retainKeys": "type"}}, "invalid patch format of retainKeys"),
    ({"metadata": {"$retainKeys": ["name"], "labels": {"a": "b"}}},
     "invalid patch format of retainKeys"),
    ({"metadata": {"$setElementOrderfinalizers": []}},
     "invalid patch format of setElementOrder list"),
    ({"metadata": {"$deleteFromPrimitiveList": ["a"]}}, "invalid patch format of primitive list"),
    ({"metadata": {"$deleteFromPrimitiveListX/finalizers": ["a"]}},
     "invalid patch format of primitive list"),
])
def test_directive_format_errors_are_400(patch: dict[str, Any], message: str) -> None:
    doc = {"metadata": {"name": "p", "finalizers": ["a"]}}
    assert _status_of(doc, patch) == _status(message, 400, "BadRequest")


def test_list_of_lists_is_422() -> None:
    status = _status_of({"metadata": {"finalizers": []}}, {"metadata": {"finalizers": [["a"]]}})
    assert status == _status(PATCH_REJECTED_MESSAGE, 422, "Invalid")


@pytest.mark.parametrize(("patch", "message"), [
    ({"spec": {"containers": [{"image": "x"}]}},
     "map: map[image:x] does not contain declared merge key: name"),
    ({"spec": {"containers": [{"$patch": "delete"}]}},
     "map: map[$patch:delete] does not contain declared merge key: name"),
    ({"spec": {"containers": [{"$patch": "bogus", "name": "a"}]}},
     "unknown patch type: bogus in map: map[$patch:bogus name:a]"),
    ({"spec": {"containers": [{"$patch": "merge", "name": "a"}]}},
     "merging lists cannot yet be specified in the patch"),
    ({"spec": {"$patch": "merge"}}, "unknown patch type: merge in map: map[$patch:merge]"),
    ({"spec": {"$patch": 1}}, "unknown patch type: %!s(int64=1) in map: map[$patch:1]"),
    ({"spec": {"$patch": None, "a": 1.5}},
     "unknown patch type: %!s(<nil>) in map: map[$patch:<nil> a:1.5]"),
    ({"spec": {"$setElementOrder/containers": "a"}},
     "expected a []interface {}, but received a string"),
    ({"spec": {"$setElementOrder/containers": [{"name": "a"}], "containers": {"name": "a"}}},
     "expected a []interface {}, but received a map[string]interface {}"),
    ({"spec": {"$setElementOrder/containers": ["a"], "containers": [{"name": "a"}]}},
     "expected a map[string]interface {}, but received a string"),
    ({"spec": {"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
               "containers": [{"name": "b"}, {"name": "a"}]}},
     "The order in patch list:\n[map[name:b] map[name:a]]\n doesn't match $setElementOrder "
     "list:\n[map[name:a] map[name:b]]\n"),
])
def test_merge_errors_are_400_with_apimachinery_text(patch: dict[str, Any], message: str) -> None:
    doc = _pod({"name": "a", "image": "a"}, {"name": "b", "image": "b"})
    assert _status_of(doc, patch) == _merge_error(message)


@pytest.mark.parametrize(("finalizers", "patch", "message"), [
    (["a"], [1], "list element types are not identical: [[a] [1]]"),
    (["a"], [None], "list element types are not identical: [[a] [<nil>]]"),
    ([], [{"a": "b"}], "cannot merge lists without merge key for string"),
    ([], [None], PANIC_MESSAGE),
])
def test_primitive_merge_list_errors(finalizers: list[Any], patch: list[Any],
                                     message: str) -> None:
    status = _status_of({"metadata": {"finalizers": finalizers}},
                        {"metadata": {"finalizers": patch}})
    assert status == _merge_error(message)


def test_set_element_order_on_two_empty_lists_is_merge_error() -> None:
    doc: dict[str, Any] = {"metadata": {"finalizers": []}}
    patch = {"metadata": {"$setElementOrder/finalizers": ["a"], "finalizers": []}}
    assert _status_of(doc, patch) == _merge_error("no elements in any of the given slices")


def test_equal_map_valued_merge_keys_are_where_go_panics() -> None:
    doc = _pod({"name": "a"})
    status = _status_of(doc, {"spec": {"containers": [{"name": {"x": 1}}]}})
    assert status == _merge_error(PANIC_MESSAGE)


def test_go_float_formatting_in_messages() -> None:
    status = _status_of({"spec": {}}, {"spec": {"$patch": 1e21, "a": 1e6, "b": 0.0001,
                                                "c": 123456.0, "d": -2.5e-7}})
    assert status["message"] == ("unknown patch type: %!s(float64=1e+21) in map: "
                                 "map[$patch:1e+21 a:1e+06 b:0.0001 c:123456 d:-2.5e-07]")


# --- properties -----------------------------------------------------------------------------------

_FIELDS = ["metadata", "labels", "annotations", "finalizers", "spec", "template", "containers",
           "name", "image", "env", "value", "ports", "containerPort", "strategy", "type",
           "rollingUpdate", "maxSurge", "replicas", "status", "conditions", "tolerations", "key",
           "args", "selector", "matchLabels", "volumes", "x"]
_SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False,
                                                                      allow_infinity=False) \
    | st.sampled_from(["", "a", "nginx", "A"])
_KEYS = st.sampled_from(_FIELDS) | st.text(max_size=3).filter(lambda k: not k.startswith("$"))
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_KEYS, inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(patch=st.dictionaries(_KEYS, _JSON, max_size=4))
def test_directive_free_patches_raise_only_status_errors(patch: dict[str, Any]) -> None:
    doc = _deployment()
    try:
        out = _smp(doc, patch, DEPLOYMENT)
    except StatusError:
        return
    finally:
        assert doc == _deployment()
    assert isinstance(out, dict)

