"""``kubewire serve`` runs the cluster's components against itself: the garbage collector
(as ``system:serviceaccount:kube-system:generic-garbage-collector``, allowed by kube's default
RBAC roles) finishes ``kubectl delete --cascade=...`` with no client of the test's own, on a
thread's loop or the server's, under ``--authorization-mode RBAC`` too; ``--controllers``
turns it off (and DELETE then adds no GC finalizers)."""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.harness import ServerThread
from tests.integration.wire import Reply, ok
from tests.integration.wire import call as plain_call

NS = "/api/v1/namespaces/default"


def call(server: ServerThread, method: str, path: str, body: Any = None) -> Reply:
    """Plain HTTP, or HTTPS as the admin (the data directory's certificate)."""
    if not server.url.startswith("https://"):
        return plain_call(server, method, path, body)
    pki = server.config.data_dir / "pki"
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(pki / "admin.crt", pki / "admin.key")
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
    data = json.dumps(body).encode() if body is not None else None
    try:
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return Reply(resp.status, dict(resp.getheaders()), resp.read())
    finally:
        conn.close()


def create(server: ServerThread, collection: str, obj: Any) -> Any:
    return ok(call(server, "POST", collection, obj), 201)


def kubectl(server: ServerThread, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(server.kubeconfig), *args],
                          capture_output=True, text=True, timeout=60)


def owned_pair(server: ServerThread, name: str) -> None:
    owner = create(server, f"{NS}/configmaps", {"metadata": {"name": name}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": name,
           "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}
    create(server, f"{NS}/configmaps", {"metadata": {"name": f"{name}-child",
                                                     "ownerReferences": [ref]}})
    create(server, f"{NS}/secrets", {"metadata": {"name": f"{name}-secret",
                                                  "ownerReferences": [ref]}})


def wait_gone(server: ServerThread, path: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if call(server, "GET", path).status == 404:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} still there")


def cascade_story(server: ServerThread) -> None:
    for cascade in ("background", "foreground", "orphan"):
        owned_pair(server, f"cm-{cascade}")
        done = kubectl(server, "delete", "configmap", f"cm-{cascade}", f"--cascade={cascade}",
                       "--timeout=20s")
        assert done.returncode == 0, done.stderr
        wait_gone(server, f"{NS}/configmaps/cm-{cascade}")
        if cascade == "orphan":
            time.sleep(0.3)
            for path in (f"{NS}/configmaps/cm-orphan-child", f"{NS}/secrets/cm-orphan-secret"):
                kept = ok(call(server, "GET", path), 200)
                assert not kept["metadata"].get("ownerReferences")
        else:
            wait_gone(server, f"{NS}/configmaps/cm-{cascade}-child")
            wait_gone(server, f"{NS}/secrets/cm-{cascade}-secret")


@pytest.mark.parametrize("loop", ["thread", "loop"])
def test_serve_collects_garbage(make_server: Callable[..., ServerThread], loop: str) -> None:
    server = make_server(components_loop=loop, cluster=True)
    assert server.server is not None
    assert "garbage-collector-controller" in server.server.controllers.components.names
    cascade_story(server)


def test_components_work_under_rbac(make_server: Callable[..., ServerThread]) -> None:
    server = make_server(insecure_http=False, authorization_mode="RBAC", cluster=True)
    cascade_story(server)
    # the collector's identity is bound by kube's default role, and nothing more
    allowed = kubectl(server, "auth", "can-i", "delete", "configmaps", "--as",
                      "system:serviceaccount:kube-system:generic-garbage-collector")
    assert allowed.stdout.strip() == "yes"
    scheduler = kubectl(server, "auth", "can-i", "create", "pods", "--subresource=binding", "--as",
                        "system:kube-scheduler")
    assert scheduler.stdout.strip() == "yes"
    kcm = kubectl(server, "auth", "can-i", "delete", "configmaps", "--as",
                  "system:kube-controller-manager")
    assert kcm.stdout.strip() == "no"


def test_controllers_flag_turns_it_off(make_server: Callable[..., ServerThread]) -> None:
    server = make_server(controllers=("*", "-garbage-collector-controller"))
    assert server.server is not None
    assert "garbage-collector-controller" not in server.server.controllers.components.names
    owned_pair(server, "kept")
    body: Any = ok(call(server, "DELETE", f"{NS}/configmaps/kept",
                        {"propagationPolicy": "Foreground"}), 200)
    assert not body["metadata"].get("finalizers")  # no collector: no GC finalizers
    wait_gone(server, f"{NS}/configmaps/kept")
    time.sleep(0.3)
    ok(call(server, "GET", f"{NS}/configmaps/kept-child"), 200)
    envtest = make_server(controllers=())
    assert envtest.server is not None and envtest.server.controllers.components.names == []


def test_controller_manager_process_against_kubewire(
        make_server: Callable[..., ServerThread]) -> None:
    """``kubewire controller-manager --kubeconfig`` runs the collector against a server that
    runs none itself (``--enable-garbage-collector`` keeps DELETE's finalizers), holding the
    controller-manager Lease with ``--leader-elect``."""
    import os
    import signal
    import sys

    server = make_server(controllers=("*", "-garbage-collector-controller"),
                         enable_garbage_collector=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    process = subprocess.Popen(
        [sys.executable, "-m", "kubewire.cli", "controller-manager", "--kubeconfig",
         str(server.kubeconfig), "--controllers", "garbage-collector-controller",
         "--leader-elect", "--log-level", "warning"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        lease: Any = None
        while time.monotonic() < deadline:
            reply = call(server, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/"
                                        "leases/kube-controller-manager")
            if reply.status == 200:
                lease = json.loads(reply.body)
                if lease["spec"].get("holderIdentity"):
                    break
            time.sleep(0.1)
        assert lease is not None and lease["spec"]["holderIdentity"], process.poll()
        cascade_story(server)
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err


def test_components_run_only_while_leading(make_server: Callable[..., ServerThread]) -> None:
    """With ``--leader-elect`` the collector runs once this server holds the
    controller-manager Lease, and stops when it steps down."""
    import asyncio

    server = make_server(leader_elect=True, cluster=True)
    assert server.server is not None and server._loop is not None
    manager = server.server.controllers
    part = manager.components.parts["kube-controller-manager"]
    deadline = time.monotonic() + 10
    while not part.tasks and time.monotonic() < deadline:
        time.sleep(0.05)
    assert manager.leadership is not None and manager.leadership.leading
    assert part.tasks
    cascade_story(server)
    asyncio.run_coroutine_threadsafe(manager._step_down(), server._loop).result(10)
    assert not part.tasks and not part.wanted
    owned_pair(server, "unled")
    ok(call(server, "DELETE", f"{NS}/configmaps/unled", {"propagationPolicy": "Background"}),
       200)
    time.sleep(0.5)
    ok(call(server, "GET", f"{NS}/configmaps/unled-child"), 200)  # nobody collects it now


def test_a_scheduler_part_runs_on_its_own_lease_as_kube_scheduler(
        make_server: Callable[..., ServerThread], monkeypatch: pytest.MonkeyPatch) -> None:
    """A component registered in the ``kube-scheduler`` part (as the scheduler will be) runs
    once this server holds the Lease ``kube-system/kube-scheduler``, as
    ``system:kube-scheduler``, which kube's default role lets list pods and nodes."""
    import asyncio

    from kubewire.cluster import components
    from kubewire.cluster.runtime import ClusterContext
    from kubewire.server.controllers import components as server_components

    seen: list[tuple[int, int]] = []

    class Probe:
        name = "probe-scheduler"

        def __init__(self, ctx: ClusterContext) -> None:
            self.ctx = ctx

        async def run(self) -> None:
            pods = await self.ctx.api("v1", "Pod").list(namespace=None)
            nodes = await self.ctx.api("v1", "Node").list()
            seen.append((len(pods.items), len(nodes.items)))
            await asyncio.get_running_loop().create_future()

    registration = components.Registration(
        "probe-scheduler", lambda ctx, _options: Probe(ctx), part=components.KUBE_SCHEDULER,
        identity=components.SCHEDULER_USER)
    monkeypatch.setitem(components.COMPONENTS, registration.name, registration)
    monkeypatch.setattr(server_components, "CLUSTER_COMPONENTS",
                        (*server_components.CLUSTER_COMPONENTS, registration.name))
    server = make_server(insecure_http=False, authorization_mode="RBAC", leader_elect=True,
                         cluster=True)
    deadline = time.monotonic() + 15
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(seen) == 1 and seen[0][0] == 0  # listed once; the simulated node may be there
    lease = ok(call(server, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/"
                                   "leases/kube-scheduler"), 200)
    assert lease["spec"]["holderIdentity"]
