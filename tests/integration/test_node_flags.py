"""The simulated nodes as the command line sets them (``kubewire serve --nodes N --node-cpu ...
--node-labels ... --node-stages FILE``), seen with kubectl against a ``kubewire serve``
subprocess; kwok's own Stage files (``kwok_stages/``, unchanged) drive the pods; bad flags are
refused with one line and exit code 2 on ``serve`` and ``controller-manager``; the same
settings as ``ServerConfig`` fields (``kubewire.Server``'s keywords)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import kubewire
from tests.integration import kubectl
from tests.integration.kubectl import needs_kubectl
from tests.integration.test_cli import KUBEWIRE, Server, one_line_error, run

KWOK_STAGES = Path(__file__).parent / "kwok_stages"
GENERAL = ("pod-create", "pod-init-container-running", "pod-init-container-completed",
           "pod-ready", "pod-complete", "pod-delete")
WAIT = "45s"  # under kubectl.TIMEOUT_S, so kubectl says why


class Cluster(Server):
    """``kubewire serve`` with the cluster's components on (no ``API_ONLY``)."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*KUBEWIRE, "serve", "--storage", "memory", "--data-dir", str(data_dir),
             "--log-level", "WARNING", "--port", "0", "--insecure-http", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.ready = self._ready_line()
        self.kubeconfig = data_dir / "kubeconfig"


@pytest.fixture
def clusters() -> Iterator[list[Cluster]]:
    started: list[Cluster] = []
    yield started
    for cluster in started:
        cluster.stop()


def pod(name: str, labels: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}],
                 "restartPolicy": "Never",
                 **({"nodeSelector": node_selector} if node_selector else {})}})


@needs_kubectl
def test_nodes_get_the_flags_names_size_and_labels(tmp_path: Path,
                                                   clusters: list[Cluster]) -> None:
    cluster = Cluster(tmp_path / "data", "--nodes", "2", "--node-cpu", "4", "--node-memory",
                      "8Gi", "--node-labels", "tier=gold,example.com/zone=a",
                      "--node-name-prefix", "w-")
    clusters.append(cluster)
    kubectl.ok(cluster, "wait", "--for=condition=Ready", "node", "--all", f"--timeout={WAIT}")
    table = kubectl.ok(cluster, "get", "nodes", "-L", "tier").splitlines()
    assert table[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "TIER"]
    rows = [line.split() for line in table[1:]]
    assert [(r[0], r[1], r[-1]) for r in rows] == [("w-0", "Ready", "gold"),
                                                   ("w-1", "Ready", "gold")]
    nodes = json.loads(kubectl.ok(cluster, "get", "nodes", "-o", "json"))["items"]
    for node in nodes:
        assert node["status"]["allocatable"]["cpu"] == "4"
        assert node["status"]["capacity"]["memory"] == "8Gi"
        assert node["metadata"]["labels"]["example.com/zone"] == "a"
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == node["metadata"]["name"]

    kubectl.ok(cluster, "apply", "-f", "-", stdin=pod("gold", node_selector={"tier": "gold"}))
    kubectl.ok(cluster, "apply", "-f", "-", stdin=pod("silver", node_selector={"tier": "silver"}))
    kubectl.ok(cluster, "wait", "--for=condition=Ready", "pod/gold", f"--timeout={WAIT}")
    placed = json.loads(kubectl.ok(cluster, "get", "pod", "gold", "-o", "json"))
    assert placed["spec"]["nodeName"] in ("w-0", "w-1")
    assert placed["status"]["phase"] == "Running"
    # no node has tier=silver: the scheduler says so
    kubectl.ok(cluster, "wait", "--for=condition=PodScheduled=false", "pod/silver",
               f"--timeout={WAIT}")


@needs_kubectl
def test_kwok_stage_files_drive_pods_and_make_them_fail(tmp_path: Path,
                                                        clusters: list[Cluster]) -> None:
    stages = tmp_path / "stages.yaml"  # one multi-document file, as kwok's kustomize output
    stages.write_text("\n---\n".join(
        (KWOK_STAGES / f"{name}.yaml").read_text()
        for name in (*GENERAL, "pod-container-running-failed")))
    cluster = Cluster(tmp_path / "data", "--nodes", "1", "--node-stages", str(stages))
    clusters.append(cluster)
    kubectl.ok(cluster, "wait", "--for=condition=Ready", "node", "--all", f"--timeout={WAIT}")
    kubectl.ok(cluster, "apply", "-f", "-", stdin=pod("fine"))
    kubectl.ok(cluster, "apply", "-f", "-", stdin=pod(
        "doomed", labels={"pod-container-running-failed.stage.kwok.x-k8s.io": "true"}))
    kubectl.ok(cluster, "wait", "--for=jsonpath={.status.phase}=Running", "pod/fine",
               f"--timeout={WAIT}")
    kubectl.ok(cluster, "wait", "--for=jsonpath={.status.phase}=Failed", "pod/doomed",
               f"--timeout={WAIT}")
    doomed = json.loads(kubectl.ok(cluster, "get", "pod", "doomed", "-o", "json"))
    state = doomed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (state["exitCode"], state["reason"]) == (1, "containerFailed")
    fine = json.loads(kubectl.ok(cluster, "get", "pod", "fine", "-o", "json"))
    assert fine["status"]["containerStatuses"][0]["ready"] is True  # kwok's pod-ready template


@pytest.mark.parametrize(("flags", "error"), [
    (("--node-cpu", "4x"), "kubewire: error: node cpu '4x': quantities must match"),
    (("--node-memory=-1Gi",), "kubewire: error: node memory '-1Gi': must not be negative"),
    (("--node-labels", "tier"), "error: argument --node-labels: node label 'tier': want "
                                "key=value"),
    (("--node-labels", "a b=c"), "kubewire: error: node label a b=c: name part must consist"),
    (("--node-labels", "tier=no good"), "kubewire: error: node label tier=no good: a valid "
                                        "label must be"),
    (("--node-naming", "fancy"), "error: argument --node-naming: invalid choice: 'fancy'"),
    (("--node-pod-cidr", "10.0.0.0/30"), "kubewire: error: node CIDR mask /24 does not fit "
                                         "10.0.0.0/30"),
    (("--nodes", "300", "--node-pod-cidr", "10.1.0.0/16"),
     "kubewire: error: pod CIDR 10.1.0.0/16 holds 256 /24 node CIDRs; 300 nodes need a wider "
     "one"),
])
@pytest.mark.parametrize("command", ["serve", "controller-manager"])
def test_bad_node_flags_are_refused_in_one_line(command: str, flags: tuple[str, ...],
                                                error: str, tmp_path: Path) -> None:
    done = run(command, *(("--data-dir", str(tmp_path), "--insecure-http")
                          if command == "serve" else ()), *flags)
    assert done.returncode == 2
    assert error in one_line_error(done)
    assert not (tmp_path / "kubeconfig").exists()  # refused before anything started


@pytest.mark.parametrize(("content", "error"), [
    (None, "No such file or directory"),
    ("a: [", "stage file is not YAML"),
    ("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: n}\nspec:\n"
     "  resourceRef: {kind: Node}\n", "no kwok.x-k8s.io/v1alpha1 Stage for Pods"),
    ("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\nspec:\n"
     "  resourceRef: {kind: Pod}\n  next: {statusTemplate: '{{ if }}'}\n",
     "stage 's': statusTemplate:"),
    ("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\nspec:\n"
     "  resourceRef: {kind: Pod}\n  selector:\n    matchExpressions:\n"
     "    - {key: .status.phase, operator: Maybe}\n",
     "unsupported operator 'Maybe'"),
])
def test_unreadable_stage_files_are_refused(content: str | None, error: str,
                                            tmp_path: Path) -> None:
    path = tmp_path / "stages.yaml"
    if content is not None:
        path.write_text(content)
    for command in ("serve", "controller-manager"):
        done = run(command, *(("--data-dir", str(tmp_path / "data"), "--insecure-http")
                              if command == "serve" else ()), "--node-stages", str(path))
        assert done.returncode == 2
        line = one_line_error(done)
        assert line.startswith(f"kubewire: error: node stages file {path}: "), line
        assert error in line


@needs_kubectl
def test_the_toolkit_takes_the_same_settings() -> None:
    with kubewire.Server(cluster=True, controllers=("kubelet",), nodes=2,
                         node_name_prefix="worker", node_naming="kind", node_pods="20",
                         node_labels={"tier": "gold"}, node_pod_cidr="10.50.0.0/16") as server:
        kubectl.ok(server, "wait", "--for=condition=Ready", "node", "worker", "worker2",
                   f"--timeout={WAIT}")
        nodes = {n["metadata"]["name"]: n for n in json.loads(
            kubectl.ok(server, "get", "nodes", "-o", "json"))["items"]}
    assert sorted(nodes) == ["worker", "worker2"]
    assert [nodes[n]["spec"]["podCIDR"] for n in ("worker", "worker2")] == \
        ["10.50.0.0/24", "10.50.1.0/24"]
    assert {n["status"]["allocatable"]["pods"] for n in nodes.values()} == {"20"}
    assert {n["metadata"]["labels"]["tier"] for n in nodes.values()} == {"gold"}


def test_the_toolkit_refuses_what_cannot_make_a_fleet() -> None:
    with pytest.raises(ValueError, match="node cpu 'lots'"), \
            kubewire.Server(cluster=True, node_cpu="lots"):
        pass


@needs_kubectl
def test_controller_manager_nodes_take_the_flags(tmp_path: Path) -> None:
    """``kubewire controller-manager --controllers kubelet`` against a server that runs no
    nodes itself registers the nodes the flags describe."""
    stages = tmp_path / "stages.yaml"
    stages.write_text("\n---\n".join((KWOK_STAGES / f"{n}.yaml").read_text() for n in GENERAL))
    with kubewire.Server() as server:
        process = subprocess.Popen(
            [*KUBEWIRE, "controller-manager", "--kubeconfig", str(server.kubeconfig),
             "--controllers", "kubelet", "--nodes", "1", "--node-name-prefix", "cm-",
             "--node-cpu", "2", "--node-labels", "tier=gold", "--node-stages", str(stages),
             "--log-level", "warning"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            kubectl.ok(server, "wait", "--for=create", "node/cm-0", f"--timeout={WAIT}")
            kubectl.ok(server, "wait", "--for=condition=Ready", "node/cm-0",
                       f"--timeout={WAIT}")
            node = json.loads(kubectl.ok(server, "get", "node", "cm-0", "-o", "json"))
            assert node["status"]["allocatable"]["cpu"] == "2"
            assert node["metadata"]["labels"]["tier"] == "gold"
            # no scheduler here: bound by hand, the pod runs through kwok's stages
            body = json.loads(pod("bound"))
            body["spec"]["nodeName"] = "cm-0"
            kubectl.ok(server, "apply", "-f", "-", stdin=json.dumps(body))
            kubectl.ok(server, "wait", "--for=jsonpath={.status.phase}=Running", "pod/bound",
                       f"--timeout={WAIT}")
        finally:
            process.terminate()
            _, err = process.communicate(timeout=20)
    assert "Traceback" not in err, err
