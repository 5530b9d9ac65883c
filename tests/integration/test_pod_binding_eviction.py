"""``pods/binding``, ``bindings`` and ``pods/eviction`` (``server/writes/pod_binding.py``,
``server/writes/eviction.py``) with raw HTTP, the ``kubernetes`` package and ``kubectl drain``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl
from tests.integration.wire import call, create, get

PODS = "/api/v1/namespaces/default/pods"
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
           "code": 201}


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "busybox"}], **spec}}


def _binding(name: str, node: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, **meta},
            "target": {"kind": "Node", "name": node}}


def test_binding_assigns_the_pod_once(server: ServerThread) -> None:
    created = create(server, PODS, _pod("web"))
    reply = call(server, "POST", f"{PODS}/web/binding",
                 _binding("web", "n1", annotations={"scheduled-by": "test"}))
    assert (reply.status, reply.json) == (201, SUCCESS)
    pod = get(server, f"{PODS}/web")
    assert pod["spec"]["nodeName"] == "n1"
    assert pod["metadata"]["annotations"] == {"scheduled-by": "test"}
    assert [(c["type"], c["status"]) for c in pod["status"]["conditions"]] == [
        ("PodScheduled", "True")]
    assert pod["status"]["conditions"][0]["lastProbeTime"] is None
    assert pod["metadata"].get("managedFields") == created["metadata"].get("managedFields")
    again = call(server, "POST", f"{PODS}/web/binding", _binding("web", "n2"))
    assert again.status == 409
    assert again.json["reason"] == "Conflict"
    assert again.json["message"] == ('Operation cannot be fulfilled on pods/binding "web": '
                                     'pod web is already assigned to node "n1"')
    assert again.json["details"] == {"name": "web", "kind": "pods/binding"}
    assert get(server, f"{PODS}/web")["spec"]["nodeName"] == "n1"


def test_bindings_collection_and_refusals(server: ServerThread) -> None:
    create(server, PODS, _pod("one"))
    create(server, PODS, _pod("gated", schedulingGates=[{"name": "wait"}]))
    collection = "/api/v1/namespaces/default/bindings"
    assert call(server, "POST", collection, _binding("one", "n1")).json == SUCCESS
    assert get(server, f"{PODS}/one")["spec"]["nodeName"] == "n1"
    missing = call(server, "POST", collection, _binding("ghost", "n1"))
    assert (missing.status, missing.json["message"]) == (404, 'pods "ghost" not found')
    gated = call(server, "POST", collection, _binding("gated", "n1"))
    assert (gated.status, gated.json["message"]) == (
        409, 'Operation cannot be fulfilled on pods/binding "gated": pod gated has non-empty '
        ".spec.schedulingGates")
    mismatch = call(server, "POST", f"{PODS}/gated/binding", _binding("one", "n1"))
    assert (mismatch.status, mismatch.json["message"]) == (
        400, "name in URL does not match name in Binding object")
    # ValidatePodBinding's aggregate is a plain error: kube answers 500 with no reason
    no_target = call(server, "POST", collection, {**_binding("gated", ""), "target": {}})
    assert (no_target.status, no_target.json.get("reason"), no_target.json["message"]) == (
        500, None, "target.name: Required value")
    stale = call(server, "POST", collection, _binding("gated", "n1", uid="not-its-uid"))
    assert stale.status == 409
    assert "Precondition failed: UID in precondition: not-its-uid" in stale.json["message"]
    for method in ("GET", "DELETE"):
        assert call(server, method, collection).status == 405
    assert call(server, "GET", f"{PODS}/one/binding").status == 405
    dry = call(server, "POST", f"{collection}?dryRun=All",
               _binding("gated", "n1"))
    assert dry.status == 409  # the gate refuses even a dry run
    assert "nodeName" not in get(server, f"{PODS}/gated")["spec"]


def test_kubernetes_package_binds_with_the_scheduler_call(server: ServerThread) -> None:
    create(server, PODS, _pod("sched"))
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(server.kubeconfig)))
    body = k8s.V1Binding(metadata=k8s.V1ObjectMeta(name="sched"),
                         target=k8s.V1ObjectReference(kind="Node", name="n3"))
    answer = api.create_namespaced_pod_binding("sched", "default", body,
                                               _preload_content=False)
    assert (answer.status, json.loads(answer.data)) == (201, SUCCESS)
    assert api.read_namespaced_pod("sched", "default").spec.node_name == "n3"


def test_eviction_deletes_the_pod(server: ServerThread) -> None:
    create(server, PODS, _pod("gone"))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "gone"}}
    dry = call(server, "POST", f"{PODS}/gone/eviction?dryRun=All", eviction)
    assert (dry.status, dry.json) == (201, SUCCESS)
    assert call(server, "GET", f"{PODS}/gone").status == 200
    reply = call(server, "POST", f"{PODS}/gone/eviction", eviction)
    assert (reply.status, reply.json) == (201, SUCCESS)
    assert call(server, "GET", f"{PODS}/gone").status == 404
    missing = call(server, "POST", f"{PODS}/gone/eviction", eviction)
    assert (missing.status, missing.json["message"]) == (404, 'pods "gone" not found')
    create(server, PODS, _pod("other"))
    wrong = call(server, "POST", f"{PODS}/other/eviction",
                 {**eviction, "metadata": {"name": "gone"}})
    assert (wrong.status, wrong.json["message"]) == (
        400, "name in URL does not match name in Eviction object")
    assert call(server, "GET", f"{PODS}/other/eviction").status == 405


def test_eviction_of_a_scheduled_pod_marks_it_with_its_delete_options(
        server: ServerThread) -> None:
    create(server, PODS, _pod("slow", nodeName="n1", terminationGracePeriodSeconds=30))
    uid = get(server, f"{PODS}/slow")["metadata"]["uid"]
    wrong_uid = {"apiVersion": "policy/v1beta1", "kind": "Eviction",
                 "metadata": {"name": "slow"},
                 "deleteOptions": {"preconditions": {"uid": "someone-else"}}}
    refused = call(server, "POST", f"{PODS}/slow/eviction", wrong_uid)
    assert refused.status == 409
    assert "conditions" not in get(server, f"{PODS}/slow").get("status", {})
    eviction = {**wrong_uid, "deleteOptions": {"gracePeriodSeconds": 10,
                                               "preconditions": {"uid": uid}}}
    assert call(server, "POST", f"{PODS}/slow/eviction", eviction).status == 201
    pod = get(server, f"{PODS}/slow")
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 10
    target = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert [(c["status"], c["reason"], c["message"]) for c in target] == [
        ("True", "EvictionByEvictionAPI", "Eviction API: evicting")]


def test_kubernetes_package_evicts(server: ServerThread) -> None:
    create(server, PODS, _pod("py"))
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(server.kubeconfig)))
    body = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="py", namespace="default"))
    api.create_namespaced_pod_eviction("py", "default", body)
    with pytest.raises(ApiException) as caught:
        api.read_namespaced_pod("py", "default")
    assert caught.value.status == 404


@needs_kubectl
def test_kubectl_drain_evicts_through_the_subresource(server: ServerThread) -> None:
    create(server, "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                     "metadata": {"name": "n1"}})
    create(server, PODS, _pod("x", nodeName="n1", terminationGracePeriodSeconds=0))
    done = kubectl.run(server, "drain", "n1", "--force", "--timeout=30s")
    assert done.returncode == 0, done.stderr
    assert "evicting pod default/x" in done.stdout
    assert "pod/x evicted" in done.stdout
    assert call(server, "GET", f"{PODS}/x").status == 404


def test_a_payloads_namespace_defaults_to_the_urls_and_must_match_it(
        server: ServerThread) -> None:
    """handlers/create.go (rest.EnsureObjectNamespaceMatchesRequestNamespace) for the bodies of
    eviction and binding, and for a Deployment's ``/scale``: one rule with the object writes."""
    create(server, PODS, _pod("here"))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "here", "namespace": "elsewhere"}}
    mismatch = (400, "the namespace of the provided object does not match the namespace sent "
                     "on the request")
    reply = call(server, "POST", f"{PODS}/here/eviction", eviction)
    assert (reply.status, reply.json["message"]) == mismatch
    reply = call(server, "POST", f"{PODS}/here/binding",
                 _binding("here", "n1", namespace="elsewhere"))
    assert (reply.status, reply.json["message"]) == mismatch
    assert call(server, "GET", f"{PODS}/here").json["spec"].get("nodeName") is None
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    create(server, deployments, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}})
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale",
             "metadata": {"name": "web", "namespace": "elsewhere"}, "spec": {"replicas": 3}}
    reply = call(server, "PUT", f"{deployments}/web/scale", scale)
    assert (reply.status, reply.json["message"]) == mismatch
    scale["metadata"] = {"name": "web"}  # no namespace: the URL's
    reply = call(server, "PUT", f"{deployments}/web/scale", scale)
    assert reply.status == 200 and reply.json["metadata"]["namespace"] == "default"
    assert reply.json["spec"]["replicas"] == 3
