"""The resource metrics API (``metrics.k8s.io/v1beta1``) a cluster server serves as kind with
metrics-server does: ``kubectl top pod/node`` on simulated usage, discovery, selectors, the
errors and the read-only answers, RBAC as for any resource; an API-only server has no such
group, as kube without metrics-server."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import kubernetes
import pytest

from kubewire.server.context import ServerConfig
from tests.integration import kubectl
from tests.integration.harness import ServerThread

pytestmark = kubectl.needs_kubectl
WAIT = "60s"
BASE = "/apis/metrics.k8s.io/v1beta1"

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: shop, tier: {tier}}}
  annotations: {annotations}
spec:
  containers:
  - name: web
    image: nginx
    resources: {{requests: {{cpu: 300m, memory: 64Mi}}}}
  - name: sidecar
    image: busybox
    resources: {{requests: {{cpu: 100m, memory: 32Mi}}}}
"""


def _pod(server: ServerThread, name: str, tier: str, annotations: str = "{}",
         namespace: str = "default") -> None:
    kubectl.ok(server, "apply", "-n", namespace, "-f", "-",
               stdin=POD.format(name=name, tier=tier, annotations=annotations))


def _running(server: ServerThread, *names: str, namespace: str = "default") -> None:
    kubectl.ok(server, "wait", "-n", namespace, "--for=jsonpath={.status.phase}=Running",
               *(f"pod/{n}" for n in names), f"--timeout={WAIT}")


def _get(server: ServerThread, path: str, **params: str) -> httpx.Response:
    return httpx.get(server.url + path, params=params, timeout=30)


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    server = ServerThread(ServerConfig(data_dir=tmp_path_factory.mktemp("metrics"),
                                       host="127.0.0.1", port=0, insecure_http=True,
                                       cluster=True)).start()
    try:
        _pod(server, "busy", "front", "{kubewire.io/cpu-usage: 800m, "
             "kubewire.io/memory-usage: 200Mi}")
        _pod(server, "calm", "back")
        kubectl.ok(server, "create", "namespace", "other")
        _pod(server, "far", "front", namespace="other")
        _running(server, "busy", "calm")
        _running(server, "far", namespace="other")
        yield server
    finally:
        server.stop()


def test_kubectl_top_pod(cluster: ServerThread) -> None:
    rows = _rows(kubectl.ok(cluster, "top", "pod"))
    assert rows[0] == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    # busy: its annotations; calm: half its requests (200m, 48Mi)
    assert sorted(rows[1:]) == [["busy", "800m", "200Mi"], ["calm", "200m", "48Mi"]]


def test_kubectl_top_pod_all_namespaces_and_selector(cluster: ServerThread) -> None:
    rows = _rows(kubectl.ok(cluster, "top", "pod", "-A", "-l", "tier=front"))
    assert rows[0] == ["NAMESPACE", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert sorted(rows[1:]) == [["default", "busy", "800m", "200Mi"],
                                ["other", "far", "200m", "48Mi"]]


def test_kubectl_top_pod_containers(cluster: ServerThread) -> None:
    rows = _rows(kubectl.ok(cluster, "top", "pod", "busy", "--containers"))
    assert rows[0] == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    # the pod's usage split by the containers' requests (3:1 cpu, 2:1 memory)
    assert sorted(rows[1:]) == [["busy", "sidecar", "200m", "66Mi"],
                                ["busy", "web", "600m", "133Mi"]]


def test_kubectl_top_node(cluster: ServerThread) -> None:
    rows = _rows(kubectl.ok(cluster, "top", "node"))
    assert rows[0][:2] == ["NAME", "CPU(cores)"]
    name, cpu, _cpu_pct, memory = rows[1][:4]
    assert name == "kubewire-node-0"
    # every Running pod on the node (800m + 200m + 200m and the system's pods) plus the base
    assert int(cpu.rstrip("m")) >= 1250
    assert memory.endswith("Mi") and int(memory[:-2]) >= 200 + 48 + 48 + 128


def test_a_node_without_a_kubelet_has_no_metrics(cluster: ServerThread) -> None:
    kubectl.ok(cluster, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}}))
    try:
        answer = _get(cluster, f"{BASE}/nodes/bare")
        assert answer.status_code == 404
        assert answer.json()["message"] == 'nodemetrics.metrics.k8s.io "bare" not found'
        rows = {row[0]: row for row in _rows(kubectl.ok(cluster, "top", "node"))[1:]}
        assert rows["bare"][1:] == ["<unknown>"] * 4
        assert rows["kubewire-node-0"][1].endswith("m")
    finally:
        kubectl.ok(cluster, "delete", "node", "bare")


def test_pod_metrics_objects(cluster: ServerThread) -> None:
    found = _get(cluster, f"{BASE}/namespaces/default/pods/busy").json()
    assert found["kind"] == "PodMetrics" and found["apiVersion"] == "metrics.k8s.io/v1beta1"
    assert found["metadata"]["name"] == "busy" and found["metadata"]["namespace"] == "default"
    assert found["metadata"]["labels"] == {"app": "shop", "tier": "front"}
    assert found["window"] == "15s" and found["timestamp"].endswith("Z")
    assert found["containers"] == [
        {"name": "web", "usage": {"cpu": "600m", "memory": "139810133"}},
        {"name": "sidecar", "usage": {"cpu": "200m", "memory": "69905067"}}]
    listed = _get(cluster, f"{BASE}/pods", labelSelector="app=shop",
                  fieldSelector="metadata.namespace=default").json()
    assert listed["kind"] == "PodMetricsList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["busy", "calm"]
    named = _get(cluster, f"{BASE}/namespaces/default/pods",
                 fieldSelector="metadata.name=calm").json()
    assert [i["metadata"]["name"] for i in named["items"]] == ["calm"]
    nodes = _get(cluster, f"{BASE}/nodes").json()
    assert nodes["kind"] == "NodeMetricsList"
    assert [i["metadata"]["name"] for i in nodes["items"]] == ["kubewire-node-0"]


def test_the_kubernetes_package_reads_them(cluster: ServerThread) -> None:
    """As metrics clients in Python read them: CustomObjectsApi on the group."""
    with kubernetes.config.new_client_from_config(str(cluster.kubeconfig)) as api:
        custom = kubernetes.client.CustomObjectsApi(api)
        listed = custom.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", "default",
                                                      "pods", label_selector="tier=back")
        assert [i["metadata"]["name"] for i in listed["items"]] == ["calm"]
        node = custom.get_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes",
                                                "kubewire-node-0")
        assert node["kind"] == "NodeMetrics" and set(node["usage"]) == {"cpu", "memory"}


def test_a_changed_pod_reports_its_new_usage(cluster: ServerThread) -> None:
    _pod(cluster, "shift", "side", "{kubewire.io/cpu-usage: 100m}")
    _running(cluster, "shift")
    try:
        path = f"{BASE}/namespaces/default/pods/shift"
        assert _get(cluster, path).json()["containers"][0]["usage"]["cpu"] == "75m"
        kubectl.ok(cluster, "annotate", "pod", "shift", "--overwrite",
                   "kubewire.io/cpu-usage=1")
        assert _get(cluster, path).json()["containers"][0]["usage"]["cpu"] == "750m"
    finally:
        kubectl.ok(cluster, "delete", "pod", "shift", "--wait=false")


def test_errors_and_read_only(cluster: ServerThread) -> None:
    missing = _get(cluster, f"{BASE}/namespaces/default/pods/nope")
    assert missing.status_code == 404
    assert missing.json()["message"] == 'pods "nope" not found'
    bad = _get(cluster, f"{BASE}/pods", fieldSelector="spec.nodeName=x")
    assert bad.status_code == 400
    assert "is not a known field selector" in bad.json()["message"]
    watch = _get(cluster, f"{BASE}/pods", watch="1")
    assert watch.status_code == 405
    assert watch.json()["message"] == \
        'watch is not supported on resources of kind "pods.metrics.k8s.io"'
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        path = f"{BASE}/namespaces/default/pods" + ("" if method == "POST" else "/busy")
        answer = httpx.request(method, cluster.url + path, content=b"{}",
                               headers={"Content-Type": "application/json"}, timeout=30)
        assert answer.status_code == 405, method
        assert answer.json()["reason"] == "MethodNotAllowed"
    assert _get(cluster, "/api/v1/namespaces/default/pods/busy").json()["metadata"]["name"]


def test_pending_pod_has_no_metrics(cluster: ServerThread) -> None:
    kubectl.ok(cluster, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stuck"},
        "spec": {"nodeSelector": {"nowhere": "x"},
                 "containers": [{"name": "c", "image": "nginx"}]}}))
    answer = _get(cluster, f"{BASE}/namespaces/default/pods/stuck")
    assert answer.status_code == 404
    assert answer.json()["message"] == 'podmetrics.metrics.k8s.io "default/stuck" not found'
    assert answer.json()["details"] == {"name": "default/stuck", "group": "metrics.k8s.io",
                                        "kind": "podmetrics"}
    kubectl.ok(cluster, "delete", "pod", "stuck", "--wait=false")


def test_discovery(cluster: ServerThread) -> None:
    resources = json.loads(kubectl.ok(cluster, "get", "--raw", BASE))["resources"]
    assert resources == [
        {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics",
         "verbs": ["get", "list"]},
        {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics",
         "verbs": ["get", "list"]}]
    groups = json.loads(kubectl.ok(cluster, "get", "--raw", "/apis"))["groups"]
    assert groups[-1]["name"] == "metrics.k8s.io"
    out = kubectl.ok(cluster, "api-resources", "--api-group=metrics.k8s.io")
    assert "PodMetrics" in out and "NodeMetrics" in out
    table = kubectl.ok(cluster, "get", "podmetrics", "busy")
    assert _rows(table) == [["NAME", "CPU", "MEMORY", "WINDOW"], ["busy", "800m", "200Mi", "15s"]]


def test_rbac_as_for_any_resource(make_server: Callable[..., ServerThread]) -> None:
    server = make_server(cluster=True, insecure_http=False, authorization_mode="RBAC")
    _pod(server, "one", "front")
    _running(server, "one")
    viewer = "--as=system:serviceaccount:default:viewer"
    kubectl.ok(server, "create", "serviceaccount", "viewer")
    denied = kubectl.run(server, "top", "pod", viewer)
    assert denied.returncode != 0
    assert 'cannot list resource "pods" in API group "metrics.k8s.io" in the namespace ' \
        '"default"' in denied.stderr
    kubectl.ok(server, "create", "role", "metrics", "--verb=get,list",
               "--resource=pods.metrics.k8s.io")
    kubectl.ok(server, "create", "rolebinding", "metrics", "--role=metrics",
               "--serviceaccount=default:viewer")
    deadline = time.monotonic() + 10
    while (allowed := kubectl.run(server, "top", "pod", viewer)).returncode != 0:
        assert time.monotonic() < deadline, allowed.stderr
        time.sleep(0.1)
    assert _rows(allowed.stdout)[1] == ["one", "200m", "48Mi"]


def test_api_only_server_has_no_metrics_group(make_server: Callable[..., ServerThread],
                                              ) -> None:
    server = make_server()
    groups = json.loads(kubectl.ok(server, "get", "--raw", "/apis"))["groups"]
    assert "metrics.k8s.io" not in [g["name"] for g in groups]
    assert _get(server, f"{BASE}/pods").status_code == 404
    failed = kubectl.run(server, "top", "pod")
    assert failed.returncode != 0 and "Metrics API not available" in failed.stderr
