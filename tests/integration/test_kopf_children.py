"""kopf's ``examples/02-children`` operator on a server that runs as a cluster (controllers,
scheduler, one simulated node, as ``kubewire serve`` runs by default): the operator creates a
Pod for its custom resource, and the Pod goes Running and Ready as on kind.

The example is kopf's, unchanged (``tests/external/kopf_examples/02-children``): its create
handler renders a Pod, ``kopf.adopt``s it (namespace, ``generateName``, the parent's labels, a
controller ownerReference) and creates it with pykube (``pykube.KubeConfig.from_env()``, which
reads ``KUBECONFIG``), returning the Pod's uid into the parent's status. It runs as ``kopf run
--standalone -n default example.py`` through kopf's ``KopfRunner`` (see test_crd_kopf.py); beside
it the operator's registry holds one handler of the test's, a ``@kopf.on.field`` on the
children's ``status.phase``, so the operator itself is shown their status moving. Deleting the
parent with kubectl leaves the Pod to the garbage collector, as the example's README says.

The server is HTTPS with the admin's client certificate in its kubeconfig, as ``kubewire
serve`` writes it (kopf, pykube and kubectl all read it). The CRD is created as the cluster's
components start: this found the garbage collector missing the new kind until its 30 s
resync, and then never noticing the deleted owner (test_garbage_collector_late_kinds.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kopf
import kubernetes
import pytest
from kopf.testing import KopfRunner

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kinds import NS
from tests.integration.test_crd_kopf import (
    CRD_YAML,
    EXAMPLES,
    ITEM,
    NAME,
    OBJ,
    OBJ_YAML,
    STOP_TIMEOUT_S,
    kopf_state_restored,
    with_crd,
)
from tests.integration.wire import wait_for

STEP_TIMEOUT_S = 30.0  # a Pod scheduled, started and Ready on a busy 2-core box
CHILDREN = f"/api/v1/namespaces/{NS}/pods"
SELECTOR = ",".join(f"{k}={v}" for k, v in OBJ["metadata"]["labels"].items())


class PhasesSeen:
    """What the operator's field handler saw: (pod name, old phase, new phase), in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changes: list[tuple[str, str | None, str | None]] = []

    def add(self, name: str, old: str | None, new: str | None) -> None:
        with self.lock:
            self.changes.append((name, old, new))

    def of(self, name: str) -> list[tuple[str | None, str | None]]:
        with self.lock:
            return [(old, new) for n, old, new in self.changes if n == name]


@pytest.fixture
def cluster(make_server: Callable[..., ServerThread],
            monkeypatch: pytest.MonkeyPatch) -> ServerThread:
    """``kubewire serve``'s default cluster (every component, one node, HTTPS), kopf's CRD
    established, ``KUBECONFIG`` pointing kopf and pykube at it."""
    return with_crd(make_server(cluster=True, insecure_http=False), monkeypatch)


def registry_watching_children(seen: PhasesSeen) -> kopf.OperatorRegistry:
    """The registry ``kopf run`` loads the example into, with the test's handler on the
    children's phase (kopf keeps ``status.phase`` in its diff base for it)."""
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(kopf.login_with_kubeconfig)

    @kopf.on.field("v1", "pods", field="status.phase", labels=OBJ["metadata"]["labels"],
                   registry=registry)
    def child_phase(name: str, old: str | None, new: str | None, **_: Any) -> None:
        seen.add(name, old, new)

    return registry


@pytest.fixture
def seen() -> PhasesSeen:
    return PhasesSeen()


@contextlib.contextmanager
def running_operator(seen: PhasesSeen) -> Iterator[KopfRunner]:
    """``kopf run --standalone -n default 02-children/example.py`` until the block ends (its
    output is there once it stopped); fails if the operator failed or did not stop."""
    args = ["run", "--standalone", "--verbose", "-n", NS,
            str(EXAMPLES / "02-children" / "example.py")]
    with kopf_state_restored(), KopfRunner(args, registry=registry_watching_children(seen),
                                           timeout=STOP_TIMEOUT_S) as runner:
        yield runner
    assert runner.exception is None, runner.output
    assert runner.exit_code == 0, runner.output


class Reader:
    """GETs over the server's kubeconfig (HTTPS, the admin's client certificate), through the
    ``kubernetes`` package's REST client: status and JSON body."""

    def __init__(self, server: ServerThread) -> None:
        self.api = kubernetes.config.new_client_from_config(config_file=str(server.kubeconfig))

    def status(self, path: str) -> int:
        return int(self.api.rest_client.request(
            "GET", self.api.configuration.host + path).status)

    def get(self, path: str) -> dict[str, Any]:
        reply = self.api.rest_client.request("GET", self.api.configuration.host + path)
        assert reply.status == 200, (path, reply.status, reply.read())
        found: dict[str, Any] = json.loads(reply.read())
        return found

    def children(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.get(
            f"{CHILDREN}?labelSelector={SELECTOR}")["items"]
        return found


@pytest.fixture
def reader(cluster: ServerThread) -> Iterator[Reader]:
    reading = Reader(cluster)
    yield reading
    reading.api.close()


def test_02_children_pods_go_running_and_are_collected(
        cluster: ServerThread, reader: Reader, seen: PhasesSeen) -> None:
    with running_operator(seen) as operator:
        a_child_runs_and_goes(cluster, reader, seen)
    assert operator.output.count("Handler 'create_fn' succeeded.") == 1
    assert "Handler 'create_fn' failed" not in operator.output


def a_child_runs_and_goes(cluster: ServerThread, reader: Reader, seen: PhasesSeen) -> None:
    kubectl.ok(cluster, "apply", "-n", NS, "-f", str(OBJ_YAML))
    parent_uid = reader.get(ITEM)["metadata"]["uid"]

    def recorded_children() -> list[str] | None:
        status = reader.get(ITEM).get("status") or {}
        uids: list[str] | None = (status.get("create_fn") or {}).get("children")
        return uids

    [child_uid] = wait_for(recorded_children, STEP_TIMEOUT_S, "the child's uid in the status")
    [pod] = reader.children()
    meta = pod["metadata"]
    assert meta["uid"] == child_uid
    assert meta["generateName"] == f"{NAME}-"
    assert meta["namespace"] == NS
    assert meta["labels"] == OBJ["metadata"]["labels"]
    assert meta["ownerReferences"] == [{
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": NAME, "uid": parent_uid,
        "controller": True, "blockOwnerDeletion": True}]
    container = pod["spec"]["containers"][0]
    assert (container["name"], container["image"]) == ("the-only-one", "busybox")
    assert container["env"] == [{"name": "FIELD", "value": OBJ["spec"]["field"]}]

    # kubectl, as the README shows it: the pod Ready and Running on the simulated node.
    kubectl.ok(cluster, "wait", "--for=condition=Ready", "pod", "-l", SELECTOR,
               "-n", NS, f"--timeout={int(STEP_TIMEOUT_S)}s")
    running = reader.get(f"{CHILDREN}/{meta['name']}")
    assert running["status"]["phase"] == "Running"
    assert running["spec"]["nodeName"] == "kubewire-node-0"
    table = kubectl.ok(cluster, "get", "pod", "-l", SELECTOR, "-n", NS, "--no-headers")
    assert table.split()[:4] == [meta["name"], "1/1", "Running", "0"]
    listed = kubectl.ok(cluster, "get", "kex", NAME, "-n", NS, "-o",
                        "jsonpath={.status.create_fn.children}")
    assert json.loads(listed) == [child_uid]

    # The operator's own handler saw the child's phase become Running.
    wait_for(lambda: seen.of(meta["name"]) and seen.of(meta["name"])[-1][1] == "Running",
             STEP_TIMEOUT_S, "the field handler to see Running")
    phases = seen.of(meta["name"])
    assert phases[0][0] is None  # kopf's first sight of the field: created or already set
    assert all(old != new for old, new in phases)
    assert [new for _, new in phases][-1] == "Running"
    assert set(new for _, new in phases) <= {"Pending", "Running"}

    # Deleting the parent: the garbage collector deletes the child (background cascade).
    kubectl.ok(cluster, "delete", "-n", NS, "-f", str(OBJ_YAML),
               f"--timeout={int(STEP_TIMEOUT_S)}s")
    assert reader.status(ITEM) == 404
    wait_for(lambda: not reader.children(), STEP_TIMEOUT_S, "the child to be collected")


# --- the same, as a user types it: two processes -------------------------------------------------

KUBEWIRE = (sys.executable, "-m", "kubewire.cli")
PROCESS_WAIT_S = 60.0


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Path]:
    """``kubewire serve --detach`` as it runs by default (every component, one node, HTTPS);
    its kubeconfig, and ``kubewire stop`` at the end."""
    data = tmp_path / "data"
    env = {**os.environ, "HOME": str(tmp_path)}
    started = subprocess.run([*KUBEWIRE, "serve", "--detach", "--data-dir", str(data),
                              "--port", "0"], capture_output=True, text=True, env=env,
                             timeout=PROCESS_WAIT_S, check=False)
    assert started.returncode == 0, started.stderr
    try:
        yield data.absolute() / "kubeconfig"
    finally:
        stopped = subprocess.run([*KUBEWIRE, "stop", "--data-dir", str(data)],
                                 capture_output=True, text=True, env=env,
                                 timeout=PROCESS_WAIT_S, check=False)
        assert stopped.returncode == 0, stopped.stderr


def test_kopf_run_against_kubewire_serve(serve: Path, tmp_path: Path) -> None:
    """``kubewire serve --detach``; ``kubectl apply -f crd.yaml``; ``kopf run --standalone
    example.py`` in its own process; then the README's session: the object applied, its Pod
    listed Running, the object deleted and the Pod with it."""
    kubeconfig = serve
    kubectl.ok(kubeconfig, "apply", "-f", str(CRD_YAML))
    kubectl.ok(kubeconfig, "wait", "--for", "condition=established", "--timeout=30s",
               "crd/kopfexamples.kopf.dev")
    log = tmp_path / "kopf.log"
    with log.open("w") as out:
        operator = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--standalone", "-n", NS,
             str(EXAMPLES / "02-children" / "example.py")],
            env={**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)},
            stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        kubectl.ok(kubeconfig, "apply", "-n", NS, "-f", str(OBJ_YAML))
        kubectl.ok(kubeconfig, "wait", "-n", NS, "--for=jsonpath={.status.create_fn}",
                   f"kex/{NAME}", f"--timeout={int(PROCESS_WAIT_S)}s")
        kubectl.ok(kubeconfig, "wait", "-n", NS, "--for=condition=Ready", "pod", "-l",
                   SELECTOR, f"--timeout={int(PROCESS_WAIT_S)}s")
        rows = kubectl.ok(kubeconfig, "get", "pod", "-n", NS, "-l", SELECTOR,
                          "--no-headers").splitlines()
        [row] = rows
        assert row.split()[1:4] == ["1/1", "Running", "0"], rows
        listed = kubectl.ok(kubeconfig, "get", "kex", NAME, "-n", NS, "-o",
                            "jsonpath={.status.create_fn.children}")
        [child_uid] = json.loads(listed)
        pod_uid = kubectl.ok(kubeconfig, "get", "pod", "-n", NS, "-l", SELECTOR, "-o",
                             "jsonpath={.items[0].metadata.uid}")
        assert pod_uid == child_uid
        kubectl.ok(kubeconfig, "delete", "-n", NS, "-f", str(OBJ_YAML))
        kubectl.ok(kubeconfig, "wait", "-n", NS, "--for=delete", "pod", "-l", SELECTOR,
                   f"--timeout={int(PROCESS_WAIT_S)}s")
        assert kubectl.ok(kubeconfig, "get", "pod", "-n", NS, "-l", SELECTOR, "-o",
                          "name") == ""
    finally:
        operator.send_signal(signal.SIGINT)
        operator.wait(PROCESS_WAIT_S)
    output = log.read_text()
    assert "Handler 'create_fn' succeeded." in output, output
    assert "Traceback" not in output, output
