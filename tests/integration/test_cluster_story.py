"""Issue 20's story on a server as ``kubewire serve`` runs by default: every cluster component
on (controllers, scheduler, one simulated node), driven by kubectl alone, as on kind.

A Deployment rolls out, rolls to a new image and back, scales, its pods become Ready, a Service
gets endpoints, and deleting the Deployment garbage-collects its ReplicaSets and Pods; a Job
completes; under ``--authorization-mode RBAC`` the same works, each loop as its own service
account."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from tests.integration import kubectl
from tests.integration.harness import ServerThread

WAIT = "60s"


def _until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _names(server: ServerThread, *args: str) -> list[str]:
    out = kubectl.ok(server, "get", *args, "-o", "json")
    return sorted(item["metadata"]["name"] for item in json.loads(out)["items"])


@pytest.mark.parametrize("mode", ["AlwaysAllow", "RBAC"])
def test_a_deployment_behaves_as_on_kind(make_server: Callable[..., ServerThread],
                                         mode: str) -> None:
    server = make_server(cluster=True, insecure_http=False, authorization_mode=mode)
    kubectl.ok(server, "create", "deployment", "web", "--image=nginx", "--replicas=3")
    kubectl.ok(server, "rollout", "status", "deploy/web", f"--timeout={WAIT}")
    kubectl.ok(server, "wait", "--for=condition=Ready", "pod", "-l", "app=web",
               f"--timeout={WAIT}")
    nodes = _names(server, "nodes")
    assert nodes == ["kubewire-node-0"]
    pods = json.loads(kubectl.ok(server, "get", "pods", "-l", "app=web", "-o", "json"))["items"]
    assert len(pods) == 3
    assert {p["spec"]["nodeName"] for p in pods} == {"kubewire-node-0"}
    assert all(p["status"]["phase"] == "Running" and p["status"].get("podIP") for p in pods)

    kubectl.ok(server, "set", "image", "deploy/web", "nginx=nginx:1.27")
    kubectl.ok(server, "rollout", "status", "deploy/web", f"--timeout={WAIT}")
    assert len(_names(server, "rs", "-l", "app=web")) == 2
    kubectl.ok(server, "rollout", "undo", "deploy/web")
    kubectl.ok(server, "rollout", "status", "deploy/web", f"--timeout={WAIT}")
    image = kubectl.ok(server, "get", "deploy/web", "-o",
                       "jsonpath={.spec.template.spec.containers[0].image}")
    assert image == "nginx"

    kubectl.ok(server, "scale", "deploy/web", "--replicas=5")
    kubectl.ok(server, "rollout", "status", "deploy/web", f"--timeout={WAIT}")
    kubectl.ok(server, "expose", "deploy/web", "--port=80")

    def five_endpoints() -> bool:
        out = kubectl.ok(server, "get", "endpointslices", "-l",
                         "kubernetes.io/service-name=web", "-o", "json")
        ready = [e for s in json.loads(out)["items"] for e in s.get("endpoints") or []
                 if (e.get("conditions") or {}).get("ready")]
        return len(ready) == 5

    _until(five_endpoints, "five ready endpoints")

    kubectl.ok(server, "delete", "deploy/web")
    _until(lambda: not _names(server, "rs", "-l", "app=web")
           and not _names(server, "pods", "-l", "app=web"), "the dependents' collection")

    kubectl.ok(server, "create", "job", "once", "--image=busybox")
    kubectl.ok(server, "wait", "--for=condition=complete", "job/once", f"--timeout={WAIT}")


def test_envtest_mode_runs_nothing(make_server: Callable[..., ServerThread]) -> None:
    """``--controllers=`` with ``--nodes 0``: the API alone, nothing acts on objects."""
    server = make_server(controllers=(), nodes=0)
    assert server.server is not None and server.server.controllers.components.names == []
    kubectl.ok(server, "create", "deployment", "web", "--image=nginx", "--replicas=2")
    time.sleep(1.0)
    assert _names(server, "nodes") == []
    assert _names(server, "rs") == []
