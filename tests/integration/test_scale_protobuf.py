"""The Deployment ``scale`` subresource and protobuf request bodies, over the real wire.

Scale: GET/PUT/PATCH of an autoscaling/v1 Scale write the Deployment's ``spec.replicas`` (one
MODIFIED for its watchers, generation +1) with kube's 404/409/422 (objects-and-clients.md §2.4).
Protobuf: kubectl's typed commands (``create namespace|deployment|service``) send
``application/vnd.kubernetes.protobuf`` bodies and accept JSON answers; the last tests run them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kinds import DEPLOYMENT, GATEWAY, NAMESPACE, POD, SERVICE
from tests.integration.kubectl import needs_kubectl
from tests.integration.wire import call, create, get, ok, watch
from tests.unit.test_protobuf import encode_body

JSON = dict[str, Any]
PROTOBUF = "application/vnd.kubernetes.protobuf"
KUBECTL_ACCEPT = "application/vnd.kubernetes.protobuf,application/json"  # what kubectl sends
SCALE = DEPLOYMENT.item("web") + "/scale"
STALE = ("Operation cannot be fulfilled on deployments.apps \"web\": the object has been "
         "modified; please apply your changes to the latest version and try again")


def status(code: int, reason: str, message: str, details: JSON | None = None) -> JSON:
    out: JSON = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": message, "reason": reason}
    if details is not None:
        out["details"] = details
    out["code"] = code
    return out


def make_web(server: ServerThread, replicas: int = 2) -> JSON:
    body = DEPLOYMENT.obj("web", labels={"app": "web"})
    body["spec"]["replicas"] = replicas
    created: JSON = create(server, DEPLOYMENT.collection(), body)
    return created


def scale_body(replicas: Any, **meta: Any) -> JSON:
    return {"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "web", "namespace": "default", **meta},
            "spec": {"replicas": replicas}}


# --- scale: reads -------------------------------------------------------------------------------

def test_get_scale_converts_the_deployment(server: ServerThread) -> None:
    web = make_web(server)
    meta = web["metadata"]
    assert get(server, SCALE) == {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "web", "namespace": "default", "uid": meta["uid"],
                     "resourceVersion": meta["resourceVersion"],
                     "creationTimestamp": meta["creationTimestamp"]},
        "spec": {"replicas": 2}, "status": {"replicas": 0, "selector": "app=web"}}


def test_scale_of_a_missing_deployment_is_404_and_never_creates(server: ServerThread) -> None:
    missing = status(404, "NotFound", 'deployments.apps "web" not found',
                     {"name": "web", "group": "apps", "kind": "deployments"})
    assert call(server, "GET", SCALE).json == missing
    assert call(server, "PUT", SCALE, scale_body(3)).json == missing
    assert call(server, "PATCH", SCALE, {"spec": {"replicas": 3}}).json == missing
    assert call(server, "GET", DEPLOYMENT.item("web")).status == 404


def test_scale_allows_only_get_put_and_patch(server: ServerThread) -> None:
    make_web(server)
    not_allowed = status(405, "MethodNotAllowed",
                         "the server does not allow this method on the requested resource", {})
    assert call(server, "DELETE", SCALE).json == not_allowed
    assert call(server, "POST", SCALE, scale_body(3)).json == not_allowed


# --- scale: writes ------------------------------------------------------------------------------

def test_merge_patch_scales_and_watchers_see_one_modified_deployment(
        server: ServerThread) -> None:
    web = make_web(server)
    since = web["metadata"]["resourceVersion"]
    with watch(server, DEPLOYMENT.collection(), resourceVersion=since) as events:
        scaled = ok(call(server, "PATCH", SCALE, {"spec": {"replicas": 5}},
                         params={"fieldManager": "scaler"}), 200)
        event = events.next_event()
        events.expect_no_event(0.3)
    stored = get(server, DEPLOYMENT.item("web"))
    assert event == {"type": "MODIFIED", "object": stored}
    assert stored["spec"]["replicas"] == 5
    assert stored["metadata"]["generation"] == 2  # a spec change
    # The parent's managedFields name the subresource; ScaleHandler.ToParent gives a new
    # entry the time the parent had for it: none (kube's entries from /scale have no time).
    scaler = [e for e in stored["metadata"]["managedFields"] if e["manager"] == "scaler"]
    assert scaler == [{"manager": "scaler", "operation": "Update", "apiVersion": "apps/v1",
                       "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}},
                       "subresource": "scale"}]
    assert scaled["spec"] == {"replicas": 5}
    assert scaled["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


@pytest.mark.parametrize(("content_type", "patch"), [
    ("application/json-patch+json", b'[{"op":"replace","path":"/spec/replicas","value":4}]'),
    ("application/strategic-merge-patch+json", b'{"spec":{"replicas":4}}'),
])
def test_json_and_strategic_patches_apply_to_the_scale(server: ServerThread, content_type: str,
                                                       patch: bytes) -> None:
    make_web(server)
    scaled = ok(call(server, "PATCH", SCALE, patch, {"Content-Type": content_type}), 200)
    assert scaled["spec"] == {"replicas": 4}
    assert get(server, DEPLOYMENT.item("web"))["spec"]["replicas"] == 4


def test_put_scale_with_current_and_stale_resource_versions(server: ServerThread) -> None:
    web = make_web(server)
    current = web["metadata"]["resourceVersion"]
    scaled = ok(call(server, "PUT", SCALE, scale_body(3, resourceVersion=current)), 200)
    assert scaled["spec"] == {"replicas": 3}
    stale = call(server, "PUT", SCALE, scale_body(7, resourceVersion=current))
    assert stale.json == status(409, "Conflict", STALE,
                                {"name": "web", "group": "apps", "kind": "deployments"})
    assert get(server, DEPLOYMENT.item("web"))["spec"]["replicas"] == 3
    # Without a resourceVersion the write is unconditional.
    assert ok(call(server, "PUT", SCALE, scale_body(0)), 200)["spec"] == {}


def test_negative_replicas_are_invalid_and_change_nothing(server: ServerThread) -> None:
    web = make_web(server)
    message = "Invalid value: -1: must be greater than or equal to 0"
    expected = status(422, "Invalid",
                      f'Scale.autoscaling "web" is invalid: spec.replicas: {message}',
                      {"name": "web", "group": "autoscaling", "kind": "Scale",
                       "causes": [{"reason": "FieldValueInvalid", "message": message,
                                   "field": "spec.replicas"}]})
    assert call(server, "PUT", SCALE, scale_body(-1)).json == expected
    assert call(server, "PATCH", SCALE, {"spec": {"replicas": -1}}).json == expected
    assert get(server, DEPLOYMENT.item("web")) == web


def test_bad_scale_bodies_are_400(server: ServerThread) -> None:
    make_web(server)
    wrong_name = call(server, "PUT", SCALE, {**scale_body(3), "metadata": {"name": "other"}})
    assert wrong_name.json == status(
        400, "BadRequest", "the name of the object (other) does not match the name on the URL "
        "(web)")
    wrong_kind = call(server, "PUT", SCALE, DEPLOYMENT.obj("web"))
    assert wrong_kind.json == status(
        400, "BadRequest", "the API version in the data (apps/v1) does not match the expected "
        "API version (autoscaling/v1)")
    text = call(server, "PUT", SCALE, scale_body("three"))
    assert text.json == status(
        400, "BadRequest", 'Scale in version "v1" cannot be handled as a Scale: json: cannot '
        "unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32")
    assert get(server, DEPLOYMENT.item("web"))["spec"]["replicas"] == 2


def test_put_scale_accepts_a_protobuf_body(server: ServerThread) -> None:
    make_web(server)
    body = encode_body({**scale_body(6), "status": {"replicas": 0}})
    scaled = ok(call(server, "PUT", SCALE, body, {"Content-Type": PROTOBUF,
                                                  "Accept": KUBECTL_ACCEPT}), 200)
    assert scaled["spec"] == {"replicas": 6}


# --- protobuf request bodies --------------------------------------------------------------------

def protobuf_call(server: ServerThread, method: str, path: str, obj: JSON) -> Any:
    return call(server, method, path, encode_body(obj),
                {"Content-Type": PROTOBUF, "Accept": KUBECTL_ACCEPT})


def test_protobuf_creates_answer_json_with_defaults(server: ServerThread) -> None:
    namespace = {"kind": "Namespace", "apiVersion": "v1",
                 "metadata": {"name": "demo", "creationTimestamp": None}, "spec": {},
                 "status": {}}
    reply = protobuf_call(server, "POST", NAMESPACE.collection(), namespace)
    assert reply.headers["content-type"] == "application/json"
    created_ns = ok(reply, 201)
    assert created_ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "demo"}
    assert created_ns["status"] == {"phase": "Active"}
    deployment = {  # kubectl create deployment web --image=nginx, as kubectl encodes it
        "kind": "Deployment", "apiVersion": "apps/v1",
        "metadata": {"name": "web", "creationTimestamp": None, "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx",
                                                       "resources": {}}]}},
                 "strategy": {}},
        "status": {}}
    created = ok(protobuf_call(server, "POST", DEPLOYMENT.collection("demo"), deployment), 201)
    assert created == get(server, DEPLOYMENT.item("web", "demo"))
    assert created["spec"]["replicas"] == 2
    assert created["spec"]["strategy"]["type"] == "RollingUpdate"
    assert created["spec"]["template"]["spec"]["containers"][0] == {
        "name": "nginx", "image": "nginx", "resources": {}, "imagePullPolicy": "Always",
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    svc = {"kind": "Service", "apiVersion": "v1",
           "metadata": {"name": "web", "creationTimestamp": None, "labels": {"app": "web"}},
           "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80,
                               "targetPort": 8080}],
                    "selector": {"app": "web"}, "type": "ClusterIP"},
           "status": {"loadBalancer": {}}}
    created_svc = ok(protobuf_call(server, "POST", SERVICE.collection("demo"), svc), 201)
    assert created_svc["spec"]["clusterIPs"] == [created_svc["spec"]["clusterIP"]]
    assert created_svc["spec"]["ports"][0]["targetPort"] == 8080


def test_protobuf_put_updates_with_optimistic_concurrency(server: ServerThread) -> None:
    web = make_web(server)
    changed = {**web, "spec": {**web["spec"], "replicas": 4}}
    updated = ok(protobuf_call(server, "PUT", DEPLOYMENT.item("web"), changed), 200)
    assert updated["spec"]["replicas"] == 4
    assert updated["metadata"]["generation"] == 2
    stale = protobuf_call(server, "PUT", DEPLOYMENT.item("web"), changed)
    assert stale.json == status(409, "Conflict", STALE,
                                {"name": "web", "group": "apps", "kind": "deployments"})


def test_undecodable_protobuf_is_400_and_changes_nothing(server: ServerThread) -> None:
    before = get(server, DEPLOYMENT.collection())
    empty = call(server, "POST", DEPLOYMENT.collection(), b"k8s\x00",
                 {"Content-Type": PROTOBUF})
    assert empty.json == status(400, "BadRequest", "the object provided is unrecognized (must be "
                                "of type Deployment): empty body (6b387300)")
    json_as_protobuf = call(server, "POST", DEPLOYMENT.collection(), b'{"kind":"Deployment"}',
                            {"Content-Type": PROTOBUF})
    assert json_as_protobuf.json == status(
        400, "BadRequest", "the object provided is unrecognized (must be of type Deployment): "
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] "
        '({"kind":"Deployment"})')
    assert get(server, DEPLOYMENT.collection()) == before


def test_custom_resources_have_no_protobuf_form(server: ServerThread) -> None:
    reply = call(server, "POST", GATEWAY.collection(), encode_body(
        {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "x"}}),
        {"Content-Type": PROTOBUF})
    assert reply.json == status(415, "UnsupportedMediaType",
                                "the body of the request was in an unknown format - accepted "
                                "media types include: application/json, application/yaml")


# --- kubectl's typed commands (protobuf bodies, JSON answers) -----------------------------------

@needs_kubectl
def test_kubectl_typed_create_and_scale(server: ServerThread) -> None:
    def run(*args: str) -> str:
        done = kubectl.run(server, *args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    assert run("create", "namespace", "demo") == "namespace/demo created\n"
    assert run("create", "deployment", "web", "--image=nginx", "--replicas=2",
               "-n", "demo") == "deployment.apps/web created\n"
    assert run("create", "service", "clusterip", "web", "--tcp=80:8080",
               "-n", "demo") == "service/web created\n"
    assert run("create", "service", "nodeport", "edge", "--tcp=443:8443",
               "-n", "demo") == "service/edge created\n"
    since = get(server, DEPLOYMENT.item("web", "demo"))["metadata"]["resourceVersion"]
    with watch(server, DEPLOYMENT.collection("demo"), resourceVersion=since) as events:
        assert run("scale", "deployment", "web", "--replicas=5",
                   "-n", "demo") == "deployment.apps/web scaled\n"
        event = events.next_event()
    assert (event["type"], event["object"]["spec"]["replicas"]) == ("MODIFIED", 5)
    deployment = get(server, DEPLOYMENT.item("web", "demo"))
    assert deployment["metadata"]["generation"] == 2
    scalers = [(e["manager"], e["fieldsV1"]) for e in deployment["metadata"]["managedFields"]
               if e.get("subresource") == "scale"]
    assert scalers == [("kubectl", {"f:spec": {"f:replicas": {}}})], scalers
    assert deployment["spec"]["revisionHistoryLimit"] == 10
    pod_spec = deployment["spec"]["template"]["spec"]
    assert (pod_spec["dnsPolicy"], pod_spec["containers"][0]["imagePullPolicy"]) == (
        "ClusterFirst", "Always")
    services = {s["metadata"]["name"]: s["spec"]
                for s in get(server, SERVICE.collection("demo"))["items"]}
    assert services["web"]["ports"] == [{"name": "80-8080", "protocol": "TCP", "port": 80,
                                         "targetPort": 8080}]
    assert services["web"]["clusterIP"] != services["edge"]["clusterIP"]
    assert 30000 <= services["edge"]["ports"][0]["nodePort"] <= 32767
    assert run("get", "deployment", "web", "-n", "demo", "-o",
               "jsonpath={.spec.replicas}") == "5"


@needs_kubectl
def test_kubectl_scale_checks_the_scale_resource_version(server: ServerThread) -> None:
    web = make_web(server)
    current = ok(call(server, "PATCH", SCALE, {"spec": {"replicas": 3}}), 200)
    base = ["scale", "deployment", "web"]
    stale = kubectl.run(
        server, *base, "--replicas=4", f"--resource-version={web['metadata']['resourceVersion']}")
    # kubectl compares the Scale's resourceVersion (the Deployment's) before it patches.
    assert (stale.returncode, stale.stderr) == (
        1, f"error: Expected resource version to be {web['metadata']['resourceVersion']}, "
           f"was {current['metadata']['resourceVersion']}\n")
    assert get(server, DEPLOYMENT.item("web"))["spec"]["replicas"] == 3
    fresh = kubectl.run(
        server, *base, "--replicas=4",
        f"--resource-version={current['metadata']['resourceVersion']}")
    assert (fresh.returncode, fresh.stdout) == (0, "deployment.apps/web scaled\n"), fresh.stderr
    assert get(server, DEPLOYMENT.item("web"))["spec"]["replicas"] == 4


def test_a_merge_patch_giving_a_bad_type_is_kubes_patch_422(server: ServerThread) -> None:
    web = make_web(server)
    current = get(server, SCALE)
    reply = call(server, "PATCH", SCALE, {"spec": {"replicas": "three"}})
    # handlers/patch.go jsonPatcher: the patched Scale, as Go marshals a map, quoted. The Scale
    # it patched carries the owners of the replicas, converted for it (ScaleHandler).
    creator = web["metadata"]["managedFields"][0]
    assert creator["fieldsV1"]["f:spec"]["f:replicas"] == {}
    owners = [{**creator, "apiVersion": "autoscaling/v1",
               "fieldsV1": {"f:spec": {"f:replicas": {}}}}]
    patched = {**current, "metadata": {**current["metadata"], "managedFields": owners},
               "spec": {"replicas": "three"}}
    text = json.dumps(patched, sort_keys=True, separators=(",", ":")).replace('"', '\\"')
    cause = (f'Invalid value: "{text}": json: cannot unmarshal string into Go struct field '
             "ScaleSpec.spec.replicas of type int32")
    assert reply.json == status(422, "Invalid", f' "" is invalid: patch: {cause}',
                                {"causes": [{"reason": "FieldValueInvalid", "message": cause,
                                             "field": "patch"}]})
    assert get(server, DEPLOYMENT.item("web"))["spec"]["replicas"] == 2


def test_delete_options_may_come_as_protobuf(server: ServerThread) -> None:
    body = POD.obj("bound")
    body["spec"]["nodeName"] = "node-1"
    create(server, POD.collection(), body)
    options = encode_body({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                           "propagationPolicy": "Background"})
    # Grace 0 from the body: a scheduled pod is removed at once instead of waiting 30s.
    gone = call(server, "DELETE", POD.item("bound"), options, {"Content-Type": PROTOBUF})
    assert ok(gone, 200)["metadata"]["deletionGracePeriodSeconds"] == 0
    assert call(server, "GET", POD.item("bound")).status == 404
    bad = call(server, "DELETE", POD.item("bound"), b"k8s\x00",
               {"Content-Type": PROTOBUF})
    assert bad.json == status(400, "BadRequest", "the object provided is unrecognized (must be "
                              "of type DeleteOptions): empty body (6b387300)")
