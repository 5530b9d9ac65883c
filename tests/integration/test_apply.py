"""Server-side apply and managedFields on the wire (objects-and-clients.md §1.5, §2.6):
raw HTTP with exact bodies and Status objects, then real kubectl (``apply --server-side``,
conflicts and ``--force-conflicts``, client-side ``apply``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import ServerThread
from tests.integration.kinds import ALL_KINDS, DEPLOYMENT, GATEWAY, POD, Kind, kind_id
from tests.integration.kubectl import needs_kubectl
from tests.integration.kubectl import run as run_kubectl
from tests.integration.wire import Reply, call, create, get, ok

APPLY = {"Content-Type": "application/apply-patch+yaml"}
WEB = DEPLOYMENT.item("web")


def deployment(replicas: int = 2, labels: dict[str, str] | None = None,
               image: str = "nginx:1.27") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"} if labels is None else labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": image}]}}},
    }


def apply(server: ServerThread, path: str, body: Any, manager: str | None = "alice",
          **params: Any) -> Reply:
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    return call(server, "PATCH", path, payload, APPLY,
                params={"fieldManager": manager, **params})


def entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = obj["metadata"]["managedFields"]
    return result


def owners(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["manager"], e["operation"]) for e in entries(obj)]


ALICE_FIELDS = {
    "f:metadata": {"f:labels": {"f:app": {}}},
    "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {"f:containers": {'k:{"name":"nginx"}': {
            ".": {}, "f:image": {}, "f:name": {}}}}}},
}


# --- raw HTTP ------------------------------------------------------------------------------------

def test_apply_creates_then_merges(server: ServerThread) -> None:
    created = ok(apply(server, WEB, deployment()), 201)
    [entry] = entries(created)
    assert entry == {"manager": "alice", "operation": "Apply", "apiVersion": "apps/v1",
                     "time": created["metadata"]["creationTimestamp"],
                     "fieldsType": "FieldsV1", "fieldsV1": ALICE_FIELDS}
    assert get(server, WEB)["metadata"]["managedFields"] == [entry]
    merged = ok(apply(server, WEB, deployment(replicas=4)), 200)
    assert merged["spec"]["replicas"] == 4
    assert merged["metadata"]["uid"] == created["metadata"]["uid"]
    assert merged["metadata"]["generation"] == 2


def test_a_field_dropped_from_the_configuration_is_removed(server: ServerThread) -> None:
    ok(apply(server, WEB, deployment(labels={"app": "web", "tier": "front"})), 201)
    applied = ok(apply(server, WEB, deployment()), 200)
    assert applied["metadata"]["labels"] == {"app": "web"}
    assert entries(applied)[0]["fieldsV1"] == ALICE_FIELDS


def test_a_field_set_by_another_writer_survives_the_applier(server: ServerThread) -> None:
    ok(apply(server, WEB, deployment()), 201)
    labeled = ok(call(server, "PATCH", WEB, {"metadata": {"labels": {"team": "x"}}},
                      params={"fieldManager": "kubectl-label"}))
    assert owners(labeled) == [("alice", "Apply"), ("kubectl-label", "Update")]
    assert entries(labeled)[1]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:team": {}}}}
    again = ok(apply(server, WEB, deployment()), 200)
    assert again["metadata"]["labels"] == {"app": "web", "team": "x"}


def test_the_same_apply_again_writes_nothing(server: ServerThread) -> None:
    first = ok(apply(server, WEB, deployment()), 201)
    second = ok(apply(server, WEB, deployment()), 200)
    assert second == first


def test_conflict_with_another_manager_is_409_and_changes_nothing(server: ServerThread) -> None:
    ok(apply(server, WEB, deployment()), 201)
    scaled = ok(call(server, "PATCH", WEB, {"spec": {"replicas": 5}},
                     params={"fieldManager": "scaler"}))
    reply = apply(server, WEB, deployment(replicas=3))
    assert reply.status == 409
    assert reply.json == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "scaler" using apps/v1: '
                   ".spec.replicas",
        "reason": "Conflict",
        "details": {"causes": [{"reason": "FieldManagerConflict",
                                "message": 'conflict with "scaler" using apps/v1',
                                "field": ".spec.replicas"}]},
        "code": 409}
    assert get(server, WEB) == scaled


def test_force_takes_the_conflicting_field(server: ServerThread) -> None:
    ok(apply(server, WEB, deployment()), 201)
    ok(call(server, "PATCH", WEB, {"spec": {"replicas": 5}}, params={"fieldManager": "scaler"}))
    forced = ok(apply(server, WEB, deployment(replicas=3), force="true"), 200)
    assert forced["spec"]["replicas"] == 3
    assert owners(forced) == [("alice", "Apply")]
    assert entries(forced)[0]["fieldsV1"] == ALICE_FIELDS


def test_update_entries_name_the_field_manager_or_the_user_agent(server: ServerThread) -> None:
    created = ok(call(server, "POST", POD.collection(), POD.obj("p"),
                      {"User-Agent": "tester/1.0 (linux/amd64) kubewire"}), 201)
    [entry] = entries(created)
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == (
        "tester", "Update", "v1")
    containers = entry["fieldsV1"]["f:spec"]["f:containers"]
    assert containers['k:{"name":"c"}']["f:image"] == {}
    assert "f:status" not in entry["fieldsV1"]  # status belongs to the status endpoint
    replaced = dict(created, metadata={**created["metadata"], "labels": {"a": "b"}})
    updated = ok(call(server, "PUT", POD.item("p"), replaced,
                      params={"fieldManager": "kubectl-replace"}))
    # Sorted by operation, time (seconds), then manager: both wrote within the test.
    assert sorted(owners(updated)) == [("kubectl-replace", "Update"), ("tester", "Update")]
    [replacer] = [e for e in entries(updated) if e["manager"] == "kubectl-replace"]
    assert replacer["fieldsV1"] == {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}


@pytest.mark.parametrize(("manager", "body", "status", "message"), [
    (None, deployment(), 422,
     'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for '
     "apply patch"),
    ("alice", b"[1, 2]", 400,
     "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot "
     "unmarshal array into Go value of type map[string]interface {}"),
    ("alice", {**POD.obj("web")}, 400, "invalid object type: /v1, Kind=Pod"),
    ("alice", {**deployment(), "metadata": {"name": "other"}}, 400,
     "the name of the object (other) does not match the name on the URL (web)"),
    ("alice", {**deployment(), "spec": {**deployment()["spec"], "bogus": 1}}, 400,
     "failed to create typed patch object (/web; apps/v1, Kind=Deployment): .spec.bogus: "
     "field not declared in schema"),
    ("alice", {**deployment(), "metadata": {"name": "web", "managedFields": [{"manager": "x"}]}},
     400, "metadata.managedFields must be nil"),
])
def test_bad_applies_get_kube_status_and_create_nothing(
        server: ServerThread, manager: str | None, body: Any, status: int,
        message: str) -> None:
    reply = apply(server, WEB, body, manager)
    assert (reply.status, reply.json["message"]) == (status, message)
    assert call(server, "GET", WEB).status == 404


def test_strict_field_validation_refuses_repeated_keys(server: ServerThread) -> None:
    body = json.dumps(deployment()).replace('"replicas": 2', '"replicas": 2, "replicas": 3')
    reply = apply(server, WEB, body.encode(), fieldValidation="Strict")
    assert (reply.status, reply.json["message"]) == (400, (
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n"
        '  line 1: key "replicas" already set in map'))
    assert call(server, "GET", WEB).status == 404
    assert ok(apply(server, WEB, body.encode()), 201)["spec"]["replicas"] == 3


def test_a_resource_version_in_the_configuration_is_a_precondition(
        server: ServerThread) -> None:
    created = ok(apply(server, WEB, deployment()), 201)
    stale = deployment(replicas=3)
    stale["metadata"]["resourceVersion"] = "1"
    reply = apply(server, WEB, stale)
    assert (reply.status, reply.json["reason"], reply.json["message"]) == (
        409, "Conflict", 'Operation cannot be fulfilled on deployments.apps "web": the object '
        "has been modified; please apply your changes to the latest version and try again")
    current = deployment(replicas=3)
    current["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    assert ok(apply(server, WEB, current), 200)["spec"]["replicas"] == 3


def test_force_on_a_merge_patch_is_refused(server: ServerThread) -> None:
    ok(apply(server, WEB, deployment()), 201)
    reply = call(server, "PATCH", WEB, {"spec": {"replicas": 2}}, params={"force": "true"})
    assert reply.status == 422
    assert reply.json["message"] == ('PatchOptions.meta.k8s.io "" is invalid: force: '
                                     "Forbidden: may not be specified for non-apply patch")


def test_apply_through_status_owns_only_status(server: ServerThread) -> None:
    ok(apply(server, WEB, deployment()), 201)
    config = {**deployment(replicas=9), "status": {"replicas": 2, "readyReplicas": 1}}
    applied = ok(apply(server, WEB + "/status", config, manager="controller"), 200)
    assert applied["spec"]["replicas"] == 2  # spec is not the status endpoint's: no conflict
    assert applied["status"] == {"replicas": 2, "readyReplicas": 1}
    assert entries(applied)[1] == {
        "manager": "controller", "operation": "Apply", "apiVersion": "apps/v1",
        "time": entries(applied)[1]["time"], "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:readyReplicas": {}, "f:replicas": {}}},
        "subresource": "status"}


def test_apply_through_status_never_creates(server: ServerThread) -> None:
    reply = apply(server, WEB + "/status", deployment())
    assert reply.status == 404
    assert reply.json["message"] == 'deployments.apps "web" not found'


@pytest.mark.parametrize("kind", ALL_KINDS, ids=kind_id)
def test_every_kind_accepts_apply(server: ServerThread, kind: Kind) -> None:
    path = kind.item("applied")
    created = ok(apply(server, path, kind.obj("applied", {"a": "1"})), 201)
    assert owners(created) == [("alice", "Apply")]
    again = ok(apply(server, path, kind.obj("applied", {"b": "2"})), 200)
    labels = again["metadata"]["labels"]
    labels.pop("kubernetes.io/metadata.name", None)  # the Namespace defaulter's own label
    assert labels == {"b": "2"}  # "a" was this applier's and it dropped it


def test_custom_resource_lists_follow_their_list_type(server: ServerThread) -> None:
    created = ok(apply(server, GATEWAY.item("gw"), GATEWAY.obj("gw")), 201)
    listeners = entries(created)[0]["fieldsV1"]["f:spec"]["f:listeners"]
    assert listeners == {'k:{"name":"http"}': {".": {}, "f:name": {}, "f:port": {},
                                               "f:protocol": {}}}
    other = GATEWAY.obj("gw")
    other["spec"]["listeners"] = [{"name": "https", "port": 443, "protocol": "HTTPS"}]
    merged = ok(apply(server, GATEWAY.item("gw"), other, manager="bob"), 200)
    assert [item["name"] for item in merged["spec"]["listeners"]] == ["http", "https"]


# --- kubectl -------------------------------------------------------------------------------------

def kubectl(server: ServerThread, *args: str) -> str:
    done = run_kubectl(server, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def manifest(tmp_path: Path, obj: dict[str, Any]) -> str:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(obj))
    return str(path)


@needs_kubectl
def test_kubectl_server_side_apply_creates_changes_and_prunes(
        server: ServerThread, tmp_path: Path) -> None:
    first = deployment(labels={"app": "web", "tier": "front"})
    out = kubectl(server, "apply", "--server-side", "-f", manifest(tmp_path, first))
    assert out == "deployment.apps/web serverside-applied\n"
    out = kubectl(server, "apply", "--server-side", "-f",
                  manifest(tmp_path, deployment(replicas=3, image="nginx:1.28")))
    assert out == "deployment.apps/web serverside-applied\n"
    live = get(server, WEB)
    assert live["metadata"]["labels"] == {"app": "web"}
    assert live["spec"]["replicas"] == 3
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
    assert owners(live) == [("kubectl", "Apply")]


@needs_kubectl
def test_kubectl_conflict_then_force_conflicts(server: ServerThread, tmp_path: Path) -> None:
    kubectl(server, "apply", "--server-side", "-f", manifest(tmp_path, deployment()))
    kubectl(server, "patch", "deployment", "web", "--type=merge",
            "-p", '{"spec":{"replicas":5}}')
    changed = manifest(tmp_path, deployment(replicas=3))
    done = run_kubectl(server, "apply", "--server-side", "-f", changed)
    assert done.returncode == 1
    assert ('Apply failed with 1 conflict: conflict with "kubectl-patch" using apps/v1: '
            ".spec.replicas") in done.stderr
    assert get(server, WEB)["spec"]["replicas"] == 5
    out = kubectl(server, "apply", "--server-side", "--force-conflicts", "-f", changed)
    assert out == "deployment.apps/web serverside-applied\n"
    live = get(server, WEB)
    assert live["spec"]["replicas"] == 3
    assert owners(live) == [("kubectl", "Apply")]


@needs_kubectl
def test_kubectl_client_side_apply_twice(server: ServerThread, tmp_path: Path) -> None:
    out = kubectl(server, "apply", "-f", manifest(tmp_path, deployment()))
    assert out == "deployment.apps/web created\n"
    out = kubectl(server, "apply", "-f", manifest(tmp_path, deployment(image="nginx:1.28")))
    assert out == "deployment.apps/web configured\n"
    live = get(server, WEB)
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
    assert owners(live) == [("kubectl-client-side-apply", "Update")]
    out = kubectl(server, "apply", "-f", manifest(tmp_path, deployment(image="nginx:1.28")))
    assert out == "deployment.apps/web unchanged\n"


@needs_kubectl
def test_kubectl_moves_from_client_side_to_server_side_apply(
        server: ServerThread, tmp_path: Path) -> None:
    kubectl(server, "apply", "-f", manifest(tmp_path, deployment()))
    out = kubectl(server, "apply", "--server-side", "-f",
                  manifest(tmp_path, deployment(replicas=3)))
    assert out == "deployment.apps/web serverside-applied\n"
    live = get(server, WEB)
    assert live["spec"]["replicas"] == 3
    last = json.loads(live["metadata"]["annotations"][
        "kubectl.kubernetes.io/last-applied-configuration"])
    assert last["spec"]["replicas"] == 3  # kept in step for a later client-side apply
    # kubectl migrated kubectl-client-side-apply's fields to its own apply entry.
    assert "kubectl-client-side-apply" not in {m for m, _ in owners(live)}


def test_created_objects_carry_their_creator(server: ServerThread) -> None:
    created = create(server, DEPLOYMENT.collection(), DEPLOYMENT.obj("made"))
    assert owners(created) == [("unknown", "Update")]
