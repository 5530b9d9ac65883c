"""``pods/ephemeralcontainers``: ``kubectl debug`` adds a container through it; only
``spec.ephemeralContainers`` changes, with kube's validation (``lifecycle`` strategy,
``validation/pods/spec.py``)."""

from __future__ import annotations

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
SUB = f"{PODS}/web/ephemeralcontainers"
SMP = {"Content-Type": "application/strategic-merge-patch+json"}


def _web(server: ServerThread) -> dict[str, Any]:
    return create(server, PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}})


def _debugger(name: str = "dbg", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", **extra}


def _invalid(reply: Any) -> str:
    assert reply.status == 422, (reply.status, reply.body)
    assert reply.json["details"]["kind"] == "Pod"
    message: str = reply.json["message"]
    return message


def test_get_and_patch_change_only_ephemeral_containers(server: ServerThread) -> None:
    created = _web(server)
    assert get(server, SUB)["metadata"]["uid"] == created["metadata"]["uid"]
    body = {"metadata": {"labels": {"app": "changed"}},
            "spec": {"ephemeralContainers": [_debugger(targetContainerName="app")],
                     "containers": [{"name": "app", "image": "evil"}]}}
    reply = call(server, "PATCH", SUB, body, SMP)
    assert reply.status == 200, reply.body
    pod = get(server, f"{PODS}/web")
    assert pod["metadata"]["labels"] == {"app": "web"}
    assert pod["spec"]["containers"][0]["image"] == "nginx"
    [added] = pod["spec"]["ephemeralContainers"]
    assert (added["name"], added["targetContainerName"]) == ("dbg", "app")
    assert added["terminationMessagePolicy"] == "File"  # defaulted like any container
    owners = [(m["manager"], m.get("subresource")) for m in pod["metadata"]["managedFields"]]
    assert owners[-1][1] == "ephemeralcontainers"
    # a second one is added; the first may be neither removed nor changed
    second = call(server, "PATCH", SUB, {"spec": {"ephemeralContainers": [_debugger("two")]}},
                  SMP)
    names = [c["name"] for c in second.json["spec"]["ephemeralContainers"]]
    assert sorted(names) == ["dbg", "two"]  # in the strategic merge's order
    first = names.index("dbg")
    removed = call(server, "PATCH", SUB,
                   [{"op": "remove", "path": f"/spec/ephemeralContainers/{first}"}])
    assert _invalid(removed) == ('Pod "web" is invalid: spec.ephemeralContainers: Forbidden: '
                                 'existing ephemeral containers "dbg" may not be removed\n')
    changed = call(server, "PATCH", SUB, [{"op": "replace", "path":
                                           f"/spec/ephemeralContainers/{first}/image",
                                           "value": "alpine"}])
    assert _invalid(changed).startswith(
        'Pod "web" is invalid: spec.ephemeralContainers[dbg]: Forbidden: existing ephemeral '
        'containers "dbg" may not be changed\n')


@pytest.mark.parametrize(("container", "message"), [
    (_debugger("app"), "spec.ephemeralContainers[0].name: Duplicate value: \"app\""),
    (_debugger(targetContainerName="nope"),
     'spec.ephemeralContainers[0].targetContainerName: Not found: "nope"'),
    (_debugger(ports=[{"containerPort": 80}]),
     "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container"),
    (_debugger(readinessProbe={"exec": {"command": ["true"]}}),
     "spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral "
     "Container"),
    ({"name": "dbg"}, "spec.ephemeralContainers[0].image: Required value"),
])
def test_ephemeral_containers_are_validated_as_kube_does(server: ServerThread,
                                                         container: dict[str, Any],
                                                         message: str) -> None:
    _web(server)
    reply = call(server, "PATCH", SUB, {"spec": {"ephemeralContainers": [container]}}, SMP)
    assert _invalid(reply) == f'Pod "web" is invalid: {message}'
    assert "ephemeralContainers" not in get(server, f"{PODS}/web")["spec"]


def test_missing_pod_and_methods(server: ServerThread) -> None:
    reply = call(server, "PATCH", f"{PODS}/ghost/ephemeralcontainers",
                 {"spec": {"ephemeralContainers": [_debugger()]}}, SMP)
    assert (reply.status, reply.json["message"]) == (404, 'pods "ghost" not found')
    _web(server)
    assert call(server, "POST", SUB, {}).status == 405
    assert call(server, "DELETE", SUB).status == 405


def test_kubernetes_package_replaces_ephemeral_containers(server: ServerThread) -> None:
    _web(server)
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(server.kubeconfig)))
    pod = api.read_namespaced_pod_ephemeralcontainers("web", "default")
    pod.spec.ephemeral_containers = [k8s.V1EphemeralContainer(name="dbg", image="busybox")]
    pod.metadata.labels = {"ignored": "yes"}
    done = api.replace_namespaced_pod_ephemeralcontainers("web", "default", pod)
    assert [c.name for c in done.spec.ephemeral_containers] == ["dbg"]
    assert done.metadata.labels == {"app": "web"}
    pod = api.read_namespaced_pod("web", "default")
    pod.spec.ephemeral_containers = []
    with pytest.raises(ApiException) as caught:
        api.replace_namespaced_pod_ephemeralcontainers("web", "default", pod)
    assert caught.value.status == 422


@needs_kubectl
def test_kubectl_debug_adds_an_ephemeral_container(server: ServerThread) -> None:
    _web(server)
    done = kubectl.run(server, "debug", "web", "--image=busybox", "--container=dbg",
                       "--profile=general")
    assert done.returncode == 0, done.stderr
    names = kubectl.ok(server, "get", "pod", "web", "-o",
                       "jsonpath={.spec.ephemeralContainers[*].name}")
    assert names == "dbg"
    done = kubectl.run(server, "debug", "web", "--image=busybox", "--container=app",
                       "--profile=general")
    assert done.returncode == 1
    assert 'The Pod "web" is invalid: spec.ephemeralContainers[1].name: Duplicate value: "app"' \
        in done.stderr
