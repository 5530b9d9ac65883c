"""Custom resources' write path and kubectl flows against the real server, to kube's behaviour.

Server-side apply merging by the CRD's list and map types, ``/status`` and main-resource writes
each keeping to their part, ``/scale``, ratcheting on update, and what a CRD change does to the
next writes, reads and open watches (crds.md §3-§5, §7, §9; expectations from kube-apiserver
v1.32's apiextensions-apiserver source, cited by item).
"""

from __future__ import annotations

import copy
import json
import stat
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.test_crds import CRDS, established
from tests.integration.wire import call, create, get, ok, types_and_names, wait_for, watch

GADGETS = "/apis/example.com/v1/namespaces/default/gadgets"
CRD_NAME = "gadgets.example.com"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}

GADGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                  "listKind": "GadgetList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "selectableFields": [{"jsonPath": ".spec.color"}],
            "subresources": {"status": {}, "scale": {
                "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {
                            "color": {"type": "string"},
                            "replicas": {"type": "integer", "minimum": 0},
                            "ports": {
                                "type": "array", "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["name"],
                                "items": {"type": "object", "required": ["name"], "properties": {
                                    "name": {"type": "string"},
                                    "port": {"type": "integer"}}}},
                            "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                     "items": {"type": "string"}},
                            "args": {"type": "array", "items": {"type": "string"}},
                            "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                                         "additionalProperties": {"type": "string"}},
                            "labels": {"type": "object",
                                       "additionalProperties": {"type": "string"}},
                            "name": {"type": "string", "maxLength": 20,
                                     "x-kubernetes-validations": [
                                         {"rule": "self.startsWith('g')",
                                          "message": "must start with g"}]}}},
                    "status": {"type": "object", "properties": {
                        "replicas": {"type": "integer", "minimum": 0},
                        "phase": {"type": "string"}}}}}},
        }],
    },
}


def gadget(object_name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": object_name},
            "spec": {"replicas": 1, **spec}}


def install(server: ServerThread, crd: dict[str, Any] = GADGET_CRD) -> dict[str, Any]:
    create(server, CRDS, crd)
    return established(server, crd["metadata"]["name"])


def apply(server: ServerThread, name: str, body: dict[str, Any], manager: str,
          **params: Any) -> Any:
    return call(server, "PATCH", f"{GADGETS}/{name}", json.dumps(body), APPLY,
                params={"fieldManager": manager, **params})


def owned(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    for entry in obj["metadata"].get("managedFields") or ():
        if entry["manager"] == manager:
            fields: dict[str, Any] = entry["fieldsV1"]
            return fields
    raise AssertionError(f"no entry for {manager}: {obj['metadata'].get('managedFields')}")


def update_crd(server: ServerThread, change: Any) -> dict[str, Any]:
    crd = get(server, f"{CRDS}/{CRD_NAME}")
    change(crd)
    return ok(call(server, "PUT", f"{CRDS}/{CRD_NAME}", crd), 200)  # type: ignore[no-any-return]


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


# --- server-side apply by the CRD's schema (§7) -----------------------------------------------

def test_apply_merges_map_lists_and_sets_item_by_item(server: ServerThread) -> None:
    """§7: ``list-type: map`` items are matched by key and owned one by one; ``set`` values
    likewise; two appliers' items live side by side."""
    install(server)
    first = gadget("g1", ports=[{"name": "a", "port": 1}], tags=["x"])
    ok(apply(server, "g1", first, "alice"), 201)
    second = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"},
              "spec": {"ports": [{"name": "b", "port": 2}], "tags": ["y"]}}
    merged = ok(apply(server, "g1", second, "bob"), 200)
    assert merged["spec"]["ports"] == [{"name": "a", "port": 1}, {"name": "b", "port": 2}]
    assert merged["spec"]["tags"] == ["x", "y"]
    bobs = owned(merged, "bob")["f:spec"]
    assert bobs["f:ports"] == {'k:{"name":"b"}': {".": {}, "f:name": {}, "f:port": {}}}
    assert bobs["f:tags"] == {'v:"y"': {}}
    # alice drops her port: only hers goes
    first["spec"]["ports"] = []
    again = ok(apply(server, "g1", first, "alice"), 200)
    assert again["spec"]["ports"] == [{"name": "b", "port": 2}]


def test_apply_of_an_atomic_list_or_map_owns_it_whole(server: ServerThread) -> None:
    """§7: a list without list-type and an object with ``map-type: atomic`` are one field: a
    second applier changing it conflicts; a granular map merges key by key."""
    install(server)
    ok(apply(server, "g1", gadget("g1", args=["a"], selector={"a": "1"}, labels={"a": "1"}),
             "alice"), 201)
    other = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"},
             "spec": {"labels": {"b": "2"}}}
    merged = ok(apply(server, "g1", other, "bob"), 200)
    assert merged["spec"]["labels"] == {"a": "1", "b": "2"}
    assert owned(merged, "alice")["f:spec"]["f:selector"] == {}
    other["spec"] = {"selector": {"b": "2"}, "args": ["b"]}
    conflict = apply(server, "g1", other, "bob")
    assert conflict.status == 409
    assert conflict.status_object()["message"] == (
        'Apply failed with 2 conflicts: conflicts with "alice":\n'
        "- .spec.args\n- .spec.selector")
    forced = ok(apply(server, "g1", other, "bob", force="true"), 200)
    assert forced["spec"]["selector"] == {"b": "2"} and forced["spec"]["args"] == ["b"]


def test_apply_of_an_undeclared_field_or_duplicate_keys_is_refused(server: ServerThread) -> None:
    """§4.2, §9.27: kube answers 500 with structured-merge-diff's text (kubernetes#139253);
    kubewire answers the same text with 400, as it does for built-in kinds: the mistake is
    the client's. Nothing is stored. The namespace is the configuration's own (none here), as
    structuredmerge.go ``objectGVKNN`` prints the patch object."""
    install(server)
    body = gadget("g1", foo=1)
    reply = apply(server, "g1", body, "alice")
    assert reply.status == 400
    assert reply.status_object()["message"] == (
        "failed to create typed patch object (/g1; example.com/v1, Kind=Gadget): "
        ".spec.foo: field not declared in schema")
    dup = gadget("g1", ports=[{"name": "a", "port": 1}, {"name": "a", "port": 2}])
    reply = apply(server, "g1", dup, "alice")
    assert reply.status == 400
    assert reply.status_object()["message"] == (
        "failed to create typed patch object (/g1; example.com/v1, Kind=Gadget): "
        '.spec.ports: duplicate entries for key [name="a"]')
    assert call(server, "GET", f"{GADGETS}/g1").status == 404
    # an ordinary write with a duplicate key: the list-type check (§9.26)
    bad = call(server, "POST", GADGETS, dup)
    assert bad.status == 422
    assert bad.status_object()["message"] == (
        'Gadget.example.com "g1" is invalid: spec.ports[1]: Duplicate value: '
        'map[string]interface {}{"name":"a"}')


def test_apply_to_status_and_main_resource_keep_to_their_part(server: ServerThread) -> None:
    """§5.1: the main endpoint's apply ignores ``status``, the status endpoint's ``spec``."""
    install(server)
    body = gadget("g1")
    body["status"] = {"phase": "ignored"}
    created = ok(apply(server, "g1", body, "alice"), 201)
    assert "status" not in created
    status_body = gadget("g1", replicas=9)
    status_body["status"] = {"phase": "Ready"}
    done = ok(call(server, "PATCH", f"{GADGETS}/g1/status", json.dumps(status_body), APPLY,
                   params={"fieldManager": "ctl"}), 200)
    assert done["status"] == {"phase": "Ready"} and done["spec"]["replicas"] == 1
    assert "f:spec" not in owned(done, "ctl")


# --- /status and the main resource (§5.1, §9.28-29) -----------------------------------------

def test_status_writes_validate_only_status_rooted_at_its_schema(server: ServerThread) -> None:
    """§4.5 note: the status validator is rooted at the status schema, so kube-openapi's text
    lacks the prefix; spec errors already stored do not stop a status write."""
    install(server)
    created = create(server, GADGETS, gadget("g1"))
    bad = call(server, "PUT", f"{GADGETS}/g1/status", {**created, "status": {"replicas": -1}})
    assert bad.status == 422
    assert bad.status_object()["message"] == (  # then ValidateScaleStatus's own
        'Gadget.example.com "g1" is invalid: [status.replicas: Invalid value: -1: '
        "replicas in body should be greater than or equal to 0, .status.replicas: Invalid "
        "value: -1: should be a non-negative integer]")
    # the status endpoint ignores everything but status, labels included
    sent = copy.deepcopy(created)
    sent["metadata"]["labels"] = {"x": "y"}
    sent["spec"]["replicas"] = 5
    sent["status"] = {"replicas": 2}
    done = ok(call(server, "PUT", f"{GADGETS}/g1/status", sent), 200)
    assert done["status"] == {"replicas": 2}
    assert done["spec"]["replicas"] == 1 and "labels" not in done["metadata"]
    assert done["metadata"]["generation"] == 1
    # the main resource ignores status
    main = copy.deepcopy(done)
    main["status"] = {"replicas": 7}
    main["spec"]["replicas"] = 3
    updated = ok(call(server, "PUT", f"{GADGETS}/g1", main), 200)
    assert updated["status"] == {"replicas": 2} and updated["metadata"]["generation"] == 2


def test_status_write_passes_with_a_spec_the_schema_now_refuses(server: ServerThread) -> None:
    """§5.1: ``/status`` validates ``status`` against ``properties.status`` only."""
    install(server)
    create(server, GADGETS, gadget("g1", replicas=3))

    def tighten(crd: dict[str, Any]) -> None:
        schema_of(crd)["properties"]["spec"]["properties"]["replicas"]["maximum"] = 2
    update_crd(server, tighten)

    def status_ok() -> bool:
        live = get(server, f"{GADGETS}/g1")
        return call(server, "PUT", f"{GADGETS}/g1/status",
                    {**live, "status": {"replicas": 1}}).status == 200
    wait_for(status_ok, 10, "the status write")
    # a spec write that keeps the refused value unchanged ratchets; one that changes it fails
    live = get(server, f"{GADGETS}/g1")
    live["spec"]["color"] = "red"
    ok(call(server, "PUT", f"{GADGETS}/g1", live), 200)
    live = get(server, f"{GADGETS}/g1")
    live["spec"]["replicas"] = 4
    bad = call(server, "PUT", f"{GADGETS}/g1", live)
    assert bad.status == 422
    assert bad.status_object()["message"] == (
        'Gadget.example.com "g1" is invalid: spec.replicas: Invalid value: 4: '
        "spec.replicas in body should be less than or equal to 2")


# --- ratcheting (§4.4 step 4, §4.6) -----------------------------------------------------------

def test_a_failing_rule_on_an_unchanged_value_is_a_warning(server: ServerThread) -> None:
    """§4.6: a non-transition rule that fails on a value equal to the old one warns."""
    install(server)
    create(server, GADGETS, gadget("g1", name="gx"))

    def stricter(crd: dict[str, Any]) -> None:
        schema_of(crd)["properties"]["spec"]["properties"]["name"]["x-kubernetes-validations"] = [
            {"rule": "self.startsWith('gy')", "message": "must start with gy"}]
    update_crd(server, stricter)

    def warned() -> Any:
        live = get(server, f"{GADGETS}/g1")
        live["spec"]["color"] = "c" + live["metadata"]["resourceVersion"]
        reply = call(server, "PUT", f"{GADGETS}/g1", live)
        assert reply.status == 200, reply.body
        return reply.headers.get("warning")
    warning = wait_for(warned, 10, "the ratcheting warning")
    assert warning == '299 - "spec.name: Invalid value: \\"string\\": must start with gy"'
    live = get(server, f"{GADGETS}/g1")
    live["spec"]["name"] = "gz"
    bad = call(server, "PUT", f"{GADGETS}/g1", live)
    assert bad.status == 422
    assert bad.status_object()["message"] == (
        'Gadget.example.com "g1" is invalid: spec.name: Invalid value: "string": '
        "must start with gy")


def test_list_uniqueness_is_checked_on_update_only_when_the_old_object_was_clean(
        server: ServerThread) -> None:
    """§4.4 step 7: duplicates stored before the list became a set do not block updates."""
    crd = copy.deepcopy(GADGET_CRD)
    schema_of(crd)["properties"]["spec"]["properties"]["args"]["x-kubernetes-list-type"] = \
        "atomic"
    install(server, crd)
    create(server, GADGETS, gadget("g1", args=["a", "a"]))

    def to_set(crd: dict[str, Any]) -> None:
        schema_of(crd)["properties"]["spec"]["properties"]["args"]["x-kubernetes-list-type"] = \
            "set"
    update_crd(server, to_set)

    def updated() -> bool:
        live = get(server, f"{GADGETS}/g1")
        live["spec"]["color"] = "c" + live["metadata"]["resourceVersion"]
        return call(server, "PUT", f"{GADGETS}/g1", live).status == 200
    wait_for(updated, 10, "an update of the object with duplicates")
    bad = call(server, "POST", GADGETS, gadget("g2", args=["a", "a"]))
    assert bad.status == 422
    assert bad.status_object()["message"] == \
        'Gadget.example.com "g2" is invalid: spec.args[1]: Duplicate value: "a"'


# --- scale (§5.2) -----------------------------------------------------------------------------

def test_scale_accepts_json_and_merge_patches_only(server: ServerThread) -> None:
    """§5.2: a CR's Scale is not validated itself; its replicas go through the CR's main
    validation (the schema's minimum, then ``ValidateScaleSpec``)."""
    install(server)
    create(server, GADGETS, gadget("g1"))
    smp = call(server, "PATCH", f"{GADGETS}/g1/scale", {"spec": {"replicas": 2}},
               headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert smp.status == 415
    assert smp.status_object()["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/apply-patch+yaml")
    negative = call(server, "PATCH", f"{GADGETS}/g1/scale", {"spec": {"replicas": -1}})
    assert negative.status == 422
    assert negative.status_object()["message"] == (
        'Gadget.example.com "g1" is invalid: [spec.replicas: Invalid value: -1: '
        "spec.replicas in body should be greater than or equal to 0, .spec.replicas: Invalid "
        "value: -1: should be a non-negative integer]")
    jp = ok(call(server, "PATCH", f"{GADGETS}/g1/scale",
                 [{"op": "replace", "path": "/spec/replicas", "value": 3}]), 200)
    assert jp["spec"] == {"replicas": 3} and jp["status"] == {"replicas": 0}  # selector omitempty
    # a custom resource without spec replicas: an update leaving them unset is refused
    bare = gadget("g2")
    del bare["spec"]["replicas"]
    create(server, GADGETS, bare)
    empty = call(server, "PATCH", f"{GADGETS}/g2/scale", {"metadata": {"labels": {"a": "b"}}})
    assert empty.status == 400
    assert empty.status_object()["message"] == \
        'the spec replicas field ".spec.replicas" cannot be empty'
    set_ = ok(call(server, "PATCH", f"{GADGETS}/g2/scale", {"spec": {"replicas": 2}}), 200)
    assert set_["spec"] == {"replicas": 2}


def test_scale_of_a_cluster_scoped_custom_resource(server: ServerThread) -> None:
    crd = copy.deepcopy(GADGET_CRD)
    crd["metadata"]["name"] = "knobs.example.com"
    crd["spec"]["scope"] = "Cluster"
    crd["spec"]["names"] = {"plural": "knobs", "singular": "knob", "kind": "Knob"}
    install(server, crd)
    knobs = "/apis/example.com/v1/knobs"
    create(server, knobs, {**gadget("k1"), "kind": "Knob"})
    scale = get(server, f"{knobs}/k1/scale")
    assert scale["metadata"]["name"] == "k1" and "namespace" not in scale["metadata"]
    assert scale["spec"] == {"replicas": 1}
    scale["spec"]["replicas"] = 4
    ok(call(server, "PUT", f"{knobs}/k1/scale", scale), 200)
    assert get(server, f"{knobs}/k1")["spec"]["replicas"] == 4
    # §9.14: a namespaced path for a cluster-scoped kind is not found
    assert call(server, "GET", "/apis/example.com/v1/namespaces/default/knobs/k1").status == 404


# --- lifecycle --------------------------------------------------------------------------------

def test_a_schema_change_applies_to_the_next_writes_and_reads(server: ServerThread) -> None:
    """§9.19: a default added later shows on reads of old objects (stored bytes unchanged) and
    is written on the next write; a narrowed schema prunes the next write."""
    install(server)
    before = create(server, GADGETS, gadget("g1"))

    def add_default(crd: dict[str, Any]) -> None:
        schema_of(crd)["properties"]["spec"]["properties"]["color"]["default"] = "teal"
    update_crd(server, add_default)
    wait_for(lambda: get(server, f"{GADGETS}/g1")["spec"].get("color") == "teal", 10,
             "the new default on reads")
    read = get(server, f"{GADGETS}/g1")  # defaulted on read, not written
    assert read["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    listed = get(server, GADGETS)["items"][0]
    assert listed["spec"]["color"] == "teal"
    fresh = create(server, GADGETS, gadget("g2"))
    assert fresh["spec"]["color"] == "teal"


def test_a_crd_spec_change_ends_open_watches_a_condition_change_does_not(
        server: ServerThread) -> None:
    """§3.4, §9.35."""
    install(server)
    create(server, GADGETS, gadget("g1"))
    stream = watch(server, GADGETS)
    assert types_and_names([stream.next_event(10)]) == [("ADDED", "g1")]
    crd = get(server, f"{CRDS}/{CRD_NAME}")
    crd["status"]["conditions"].append({"type": "Custom", "status": "True", "reason": "R",
                                        "message": "m",
                                        "lastTransitionTime": "2024-01-01T00:00:00Z"})
    ok(call(server, "PUT", f"{CRDS}/{CRD_NAME}/status", crd), 200)
    assert not stream.ended(1.5)

    def add_default(crd: dict[str, Any]) -> None:
        schema_of(crd)["properties"]["spec"]["properties"]["color"]["default"] = "teal"
    update_crd(server, add_default)
    assert stream.ended(10)
    stream.close()


def test_field_selectors_on_selectable_fields(server: ServerThread) -> None:
    """§3.5, §9.37."""
    install(server)
    create(server, GADGETS, gadget("g1", color="red"))
    create(server, GADGETS, gadget("g2", color="blue"))
    found = get(server, GADGETS, fieldSelector="spec.color=red")
    assert [i["metadata"]["name"] for i in found["items"]] == ["g1"]
    found = get(server, GADGETS, fieldSelector="spec.color!=red,metadata.name=g2")
    assert [i["metadata"]["name"] for i in found["items"]] == ["g2"]
    bad = call(server, "GET", GADGETS, params={"fieldSelector": "spec.replicas=1"})
    assert bad.status == 400
    assert bad.status_object()["message"] == "field label not supported: spec.replicas"


def test_kind_and_api_version_mismatches_and_unserved_versions(server: ServerThread) -> None:
    """§9.38, §9.14."""
    crd = copy.deepcopy(GADGET_CRD)
    v2 = copy.deepcopy(crd["spec"]["versions"][0])
    v2.update(name="v2", served=False, storage=False)
    crd["spec"]["versions"].append(v2)
    install(server, crd)
    wrong_kind = {**gadget("g1"), "kind": "Widget"}
    reply = call(server, "POST", GADGETS, wrong_kind)
    assert reply.status == 422
    assert reply.status_object()["message"] == \
        'Widget.example.com "g1" is invalid: kind: Invalid value: "Widget": must be Gadget'
    wrong_version = {**gadget("g1"), "apiVersion": "example.com/v2"}
    reply = call(server, "POST", GADGETS, wrong_version)
    assert reply.status == 400
    assert reply.status_object()["message"] == (
        "the API version in the data (example.com/v2) does not match the expected API "
        "version (example.com/v1)")
    assert call(server, "GET", "/apis/example.com/v2/namespaces/default/gadgets").status == 404


# --- kubectl ----------------------------------------------------------------------------------

def test_kubectl_explain_apply_with_client_validation_and_edit(server: ServerThread,
                                                               tmp_path: Path) -> None:
    """kubectl reads the CRD's OpenAPI for ``explain`` and client-side validation; ``edit``
    round-trips through ``KUBE_EDITOR``."""
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(yaml.safe_dump(GADGET_CRD))
    kubectl.ok(server, "apply", "-f", str(crd_file))
    kubectl.ok(server, "wait", "--for", "condition=established", "--timeout=20s",
               f"crd/{CRD_NAME}")
    explained = kubectl.ok(server, "explain", "gadget.spec")
    assert "ports" in explained and "<[]Object>" in explained
    good = tmp_path / "g.yaml"
    good.write_text(yaml.safe_dump(gadget("g1", ports=[{"name": "a", "port": 1}])))
    kubectl.ok(server, "apply", "--validate=strict", "-f", str(good))
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(gadget("g2", nope=1)))
    result = kubectl.run(server, "apply", "--validate=strict", "-f", str(bad))
    assert result.returncode != 0
    assert 'unknown field "spec.nope"' in result.stderr
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/replicas: 1/replicas: 6/' \"$1\"\n")
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    assert kubectl.KUBECTL is not None
    done = subprocess.run([kubectl.KUBECTL, "edit", "gadget", "g1"],
                          env={**kubectl.kubectl_env(server), "KUBE_EDITOR": str(editor)},
                          capture_output=True, text=True, timeout=kubectl.TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "gadget.example.com/g1 edited"
    assert get(server, f"{GADGETS}/g1")["spec"]["replicas"] == 6


def test_kubectl_with_a_disk_cache_sees_a_crd_added_later(server: ServerThread,
                                                          tmp_path: Path) -> None:
    """kubectl caches discovery on disk; a kind it has not seen makes it invalidate and
    re-read (its cache answers a miss by refreshing)."""
    cache = tmp_path / "cache"
    assert kubectl.run(server, "get", "pods", f"--cache-dir={cache}").returncode == 0
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(yaml.safe_dump(GADGET_CRD))
    kubectl.ok(server, "apply", "-f", str(crd_file), f"--cache-dir={cache}")
    kubectl.ok(server, "wait", "--for", "condition=established", "--timeout=20s",
               f"crd/{CRD_NAME}", f"--cache-dir={cache}")
    out = kubectl.run(server, "get", "gadgets", f"--cache-dir={cache}")
    assert out.returncode == 0, out.stderr
    kubectl.ok(server, "delete", "crd", CRD_NAME, "--wait=true", "--timeout=30s",
               f"--cache-dir={cache}")
    gone = kubectl.run(server, "get", "gadgets", f"--cache-dir={cache}")
    assert gone.returncode != 0  # (the cache still maps the name: NotFound, as from kube)


def test_aggregated_discovery_revalidates_with_its_etag(server: ServerThread) -> None:
    """``aggregated/etag.go``: ETag, ``Vary: Accept``, ``Cache-Control: public``; 304 for the
    same ETag; a new CRD gives a new ETag, so a caching client sees it at once."""
    accept = {"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}
    first = call(server, "GET", "/apis", headers=accept)
    assert first.status == 200
    etag = first.headers["etag"]
    assert etag.startswith('"') and len(etag) == 130
    assert first.headers["cache-control"] == "public" and first.headers["vary"] == "Accept"
    same = call(server, "GET", "/apis", headers={**accept, "If-None-Match": etag})
    assert same.status == 304 and same.body == b""
    legacy = call(server, "GET", "/apis")
    assert "etag" not in legacy.headers
    assert legacy.headers["cache-control"] == "no-cache, private"
    install(server)
    after = call(server, "GET", "/apis", headers={**accept, "If-None-Match": etag})
    assert after.status == 200 and after.headers["etag"] != etag
    assert "example.com" in [g["metadata"]["name"] for g in after.json["items"]]
