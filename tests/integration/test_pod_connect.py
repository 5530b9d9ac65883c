"""``pods/log``, ``pods/exec``, ``pods/attach``, ``pods/portforward`` without kubelets: kube's
answers before the kubelet (pod, container, node, options), then what kube says when no kubelet
can be reached (``server/reads/pod_connect.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl
from tests.integration.wire import call, create, with_query

PODS = "/api/v1/namespaces/default/pods"


def _pod(name: str, containers: tuple[str, ...] = ("app",), node: str = "",
         status: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": c, "image": "busybox"} for c in containers]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _node(name: str, addresses: list[dict[str, str]], port: int = 0) -> dict[str, Any]:
    status: dict[str, Any] = {"addresses": addresses}
    if port:
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}


def _set_status(server: ServerThread, name: str, status: dict[str, Any]) -> None:
    pod = call(server, "GET", f"{PODS}/{name}").json
    pod["status"] = status
    assert call(server, "PUT", f"{PODS}/{name}/status", pod).status == 200


def _failure(server: ServerThread, method: str, path: str,
             headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    reply = call(server, method, path, headers=headers)
    body = reply.json
    assert body["kind"] == "Status" and body["status"] == "Failure", body
    assert body["code"] == reply.status
    return reply.status, body.get("reason", ""), body["message"]


def test_log_of_an_unscheduled_pod_is_204_and_errors_come_first(server: ServerThread) -> None:
    create(server, PODS, _pod("one"))
    create(server, PODS, _pod("two", ("a", "b")))
    reply = call(server, "GET", f"{PODS}/one/log")
    assert (reply.status, reply.body) == (204, b"")  # StreamObject: no location, no content
    assert "content-length" not in reply.headers
    assert _failure(server, "GET", f"{PODS}/ghost/log") == (
        404, "NotFound", 'pods "ghost" not found')
    assert _failure(server, "GET", f"{PODS}/one/log?container=nope") == (
        400, "BadRequest", "container nope is not valid for pod one")
    assert _failure(server, "GET", f"{PODS}/two/log") == (
        400, "BadRequest", "a container name must be specified for pod two, choose one of: [a b]")
    assert call(server, "GET", f"{PODS}/two/log?container=b").status == 204
    assert _failure(server, "POST", f"{PODS}/one/log")[0] == 405


@pytest.mark.parametrize(("query", "message", "causes"), [
    ({"tailLines": "-1"}, "tailLines: Invalid value: -1: must be greater than or equal to 0",
     [("FieldValueInvalid", "tailLines")]),
    ({"limitBytes": "0"}, "limitBytes: Invalid value: 0: must be greater than 0",
     [("FieldValueInvalid", "limitBytes")]),
    ({"sinceSeconds": "0"}, "sinceSeconds: Invalid value: 0: must be greater than 0",
     [("FieldValueInvalid", "sinceSeconds")]),
    ({"sinceSeconds": "5", "sinceTime": "2024-01-01T00:00:00Z"},
     "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified",
     [("FieldValueForbidden", "")]),
])
def test_log_options_are_validated_as_kube_does(server: ServerThread, query: dict[str, str],
                                                message: str,
                                                causes: list[tuple[str, str]]) -> None:
    create(server, PODS, _pod("one"))
    reply = call(server, "GET", with_query(f"{PODS}/one/log", query))
    assert reply.status == 422
    body = reply.json
    assert body["message"] == f'PodLogOptions "one" is invalid: {message}'
    assert body["details"]["kind"] == "PodLogOptions"
    assert [(c["reason"], c["field"]) for c in body["details"]["causes"]] == causes
    # the options are checked before the pod is looked up
    assert call(server, "GET", with_query(f"{PODS}/ghost/log", query)).status == 422


def test_log_options_that_do_not_decode_are_400(server: ServerThread) -> None:
    create(server, PODS, _pod("one"))
    assert _failure(server, "GET", f"{PODS}/one/log?tailLines=ten") == (
        400, "BadRequest", 'strconv.ParseInt: parsing "ten": invalid syntax')
    assert _failure(server, "GET", f"{PODS}/one/log?sinceTime=yesterday") == (
        400, "BadRequest", 'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot '
        'parse "yesterday" as "2006"')
    assert call(server, "GET", f"{PODS}/one/log?sinceTime=2024-01-01T00:00:00Z").status == 204


def test_log_with_a_node_follows_the_kubelet_on_the_recorded_status(
        server: ServerThread) -> None:
    create(server, "/api/v1/nodes", _node("n1", [{"type": "InternalIP", "address": "10.0.0.7"}]))
    create(server, PODS, _pod("web", node="n1"))
    assert _failure(server, "GET", f"{PODS}/web/log") == (
        400, "BadRequest", 'container "app" in pod "web" is not available')
    waiting = {"name": "app", "image": "busybox", "imageID": "", "ready": False,
               "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
    _set_status(server, "web", {"phase": "Pending", "containerStatuses": [waiting]})
    assert _failure(server, "GET", f"{PODS}/web/log") == (
        400, "BadRequest", 'container "app" in pod "web" is waiting to start: ContainerCreating')
    running = {**waiting, "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}},
               "containerID": "containerd://abc"}
    _set_status(server, "web", {"phase": "Running", "containerStatuses": [running]})
    reply = call(server, "GET", f"{PODS}/web/log")
    assert (reply.status, reply.body) == (200, b"")
    assert reply.headers["content-type"] == "text/plain"
    assert _failure(server, "GET", f"{PODS}/web/log?previous=true") == (
        400, "BadRequest", 'previous terminated container "app" in pod "web" not found')


@pytest.mark.parametrize("sub", ["exec", "attach", "portforward"])
def test_streams_need_a_host_then_a_kubelet(server: ServerThread, sub: str) -> None:
    create(server, PODS, _pod("idle"))
    query = "?command=ls&stdout=true" if sub == "exec" else ""
    for method in ("GET", "POST"):
        assert _failure(server, method, f"{PODS}/idle/{sub}{query}") == (
            400, "BadRequest", "pod idle does not have a host assigned")
        assert _failure(server, method, f"{PODS}/ghost/{sub}{query}") == (
            404, "NotFound", 'pods "ghost" not found')
    assert _failure(server, "PUT", f"{PODS}/idle/{sub}")[0] == 405
    if sub != "portforward":  # port forwarding names no container
        assert _failure(server, "POST", f"{PODS}/idle/{sub}?container=nope") == (
            400, "BadRequest", "container nope is not valid for pod idle")
    create(server, "/api/v1/nodes", _node("n6", [{"type": "ExternalIP", "address": "fd00::6"},
                                                 {"type": "InternalIP", "address": "10.0.0.6"}],
                                          port=10260))
    create(server, "/api/v1/nodes", _node("bare", []))
    create(server, PODS, _pod("placed", node="n6"))
    create(server, PODS, _pod("lost", node="gone"))
    create(server, PODS, _pod("bare", node="bare"))
    upgrade = {"Connection": "Upgrade", "Upgrade": "SPDY/3.1",
               "X-Stream-Protocol-Version": "v4.channel.k8s.io"}
    assert _failure(server, "POST", f"{PODS}/lost/{sub}", upgrade) == (
        404, "NotFound", 'nodes "gone" not found')
    assert _failure(server, "POST", f"{PODS}/bare/{sub}", upgrade) == (
        500, "", "no preferred addresses found; known addresses: []")
    assert _failure(server, "POST", f"{PODS}/placed/{sub}") == (
        400, "BadRequest", "Upgrade request required")
    assert _failure(server, "POST", f"{PODS}/placed/{sub}", upgrade) == (
        500, "", "error dialing backend: dial tcp 10.0.0.6:10260: connect: connection refused")


@needs_kubectl
def test_kubectl_logs_and_exec_print_kubes_messages(server: ServerThread) -> None:
    create(server, PODS, _pod("x"))
    done = kubectl.run(server, "logs", "x")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = kubectl.run(server, "exec", "x", "--", "ls")
    assert done.returncode == 1
    assert done.stderr == "Error from server (BadRequest): pod x does not have a host assigned\n"
    done = kubectl.run(server, "exec", "nope", "--", "ls")
    assert done.stderr == 'Error from server (NotFound): pods "nope" not found\n'
    create(server, "/api/v1/nodes", _node("n1", [{"type": "InternalIP", "address": "10.0.0.7"}]))
    create(server, PODS, _pod("z", node="n1"))
    done = kubectl.run(server, "exec", "z", "--", "ls")  # WebSocket first, then SPDY
    assert done.returncode == 1
    assert done.stderr == ("Error from server: error dialing backend: dial tcp 10.0.0.7:10250: "
                           "connect: connection refused\n")
    done = kubectl.run(server, "logs", "z")
    assert done.stderr == ('Error from server (BadRequest): container "app" in pod "z" is not '
                           "available\n")


def test_kubernetes_package_reads_logs_and_gets_kubes_errors(server: ServerThread) -> None:
    create(server, PODS, _pod("one"))
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(server.kubeconfig)))
    # a 204 has no body: the package returns None, as it does against kube for a pending pod
    assert api.read_namespaced_pod_log("one", "default") is None
    with pytest.raises(ApiException) as caught:
        api.read_namespaced_pod_log("one", "default", tail_lines=-1)
    assert caught.value.status == 422
    with pytest.raises(ApiException) as caught:
        api.connect_post_namespaced_pod_exec("one", "default", command=["ls"], stdout=True)
    assert caught.value.status == 400
    assert "pod one does not have a host assigned" in str(caught.value.body)
