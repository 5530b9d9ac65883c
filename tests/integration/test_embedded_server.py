"""``kubewire.Server``: the public embedding API, in both modes, with real clients."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
import yaml

import kubewire
from kubewire.client import Api
from kubewire.models import ConfigMap, ObjectMeta

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kubewire-server"]


def test_with_runs_on_a_thread_kubectl_and_kubernetes_read_the_kubeconfig() -> None:
    with kubewire.Server() as server:
        data_dir = server.data_dir
        assert server_threads()
        out = subprocess.run(["kubectl", "--kubeconfig", str(server.kubeconfig), "get", "ns",
                              "-o", "name"], capture_output=True, text=True, check=True).stdout
        assert "namespace/default" in out.split()
        api = kubernetes.client.CoreV1Api(
            kubernetes.config.new_client_from_config(config_file=str(server.kubeconfig)))
        api.create_namespaced_config_map("default", {"metadata": {"name": "cm"}})
        try:
            assert api.read_namespaced_config_map("cm", "default").metadata.name == "cm"
        finally:
            api.api_client.close()
        assert [e.name for e in server.requests(verb="create", resource="configmaps")] == [""]
        assert server.requests(verb="get", resource="configmaps", name="cm")[0].code == 200
    assert not data_dir.exists()
    assert not server_threads()
    with pytest.raises(httpx.TransportError):
        httpx.get(server.url + "/version", timeout=2)


async def test_async_with_serves_on_the_callers_loop_and_client_works() -> None:
    async with kubewire.Server() as server:
        assert not server_threads()
        async with server.client() as client:
            maps = Api(ConfigMap, client=client, namespace="default")
            await maps.create(ConfigMap(metadata=ObjectMeta(name="x"), data={"a": "1"}))
            assert (await maps.get("x")).data == {"a": "1"}
        entry = server.requests(verb="create", resource="configmaps")[0]
        assert (entry.code, entry.namespace, entry.group, entry.version) == (201, "default",
                                                                              "", "v1")
        assert len(entry.body_sha256) == 64
        server.clear_requests()
        assert server.requests() == []


async def test_crds_are_established_before_the_block_starts(tmp_path: Path) -> None:
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(WIDGET_CRD))
    async with kubewire.Server(crds=[path]) as server:
        applied = await server.apply({"apiVersion": "example.com/v1", "kind": "Widget",
                                      "metadata": {"name": "w", "namespace": "default"},
                                      "spec": {"size": 1}})
        assert applied[0]["spec"] == {"size": 1}  # type: ignore[index,call-overload]


async def test_wait_for_returns_on_the_change_and_times_out_with_the_last_object() -> None:
    async with kubewire.Server() as server:
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "c", "namespace": "default"}, "data": {"phase": "new"}}
        await server.apply(cm)

        async def later() -> None:
            await asyncio.sleep(0.05)
            await server.apply({**cm, "data": {"phase": "done"}})

        task = asyncio.create_task(later())
        done = await server.wait_for("configmaps", "c", namespace="default",
                                     condition=lambda o: o["data"]["phase"] == "done",
                                     timeout=5)
        await task
        assert done is not None and done["data"] == {"phase": "done"}
        with pytest.raises(TimeoutError, match="'phase': 'done'"):
            await server.wait_for("configmaps", "c", namespace="default", deleted=True,
                                  timeout=0.2)
        with pytest.raises(TimeoutError):
            await server.wait_for("configmaps", "c", namespace="default",
                                  condition=("Ready", "True"), timeout=0.1)
        async with server.client() as client:
            await Api(ConfigMap, client=client, namespace="default").delete("c")
        assert await server.wait_for("configmaps", "c", namespace="default", deleted=True,
                                     timeout=5) is None


def test_the_sync_twins_and_a_status_condition() -> None:
    with kubewire.Server(crds=[WIDGET_CRD]) as server:
        server.apply_sync({"apiVersion": "example.com/v1", "kind": "Widget",
                           "metadata": {"name": "w", "namespace": "default"}})
        crd = server.wait_for_sync("customresourcedefinitions.apiextensions.k8s.io",
                                   "widgets.example.com", condition=("Established", "True"))
        assert crd is not None
        assert server.wait_for_sync("widgets.example.com", "w", namespace="default")


async def test_wait_for_a_with_server_from_an_async_test() -> None:
    with kubewire.Server() as server:
        await server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
        assert await server.wait_for("namespaces", "n", timeout=5)


def test_admin_endpoint_lists_and_clears_the_record() -> None:
    with kubewire.Server() as server:
        server.apply_sync({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
        url = server.url + "/kubewire/requests"
        items = httpx.get(url, params={"verb": "patch"}).json()["items"]
        assert [(i["resource"], i["name"], i["code"]) for i in items] == [("namespaces", "n",
                                                                            201)]
        assert httpx.get(url, params={"colour": "red"}).status_code == 400
        assert httpx.delete(url).status_code == 200
        assert [e.path for e in server.requests()] == ["/kubewire/requests"] * 1


def test_users_authenticate_with_tokens_and_anonymous_is_refused() -> None:
    with kubewire.Server(users={"alice": ["dev"]}) as server:
        assert server.url.startswith("https://")
        ca = ssl.create_default_context(cafile=server.data_dir / "pki" / "ca.crt")
        assert httpx.get(server.url + "/api/v1/namespaces", verify=ca).status_code == 401
        headers = {"Authorization": f"Bearer {server.token('alice')}"}
        assert httpx.get(server.url + "/api/v1/namespaces", headers=headers,
                         verify=ca).status_code == 200
        server.clear_requests()
        subprocess.run(["kubectl", "--kubeconfig", str(server.kubeconfig_for("alice")), "get",
                        "ns", "default"], capture_output=True, check=True)
        assert [e.code for e in server.requests(user="alice", name="default")] == [200]
        server.apply_sync({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
        assert server.requests(verb="patch")[0].user == "kubewire-admin"


def test_users_over_plain_http_give_the_admin_a_token() -> None:
    with kubewire.Server(users={"bob": []}, tls=False) as server:
        assert server.url.startswith("http://")
        assert httpx.get(server.url + "/api/v1/namespaces").status_code == 401
        token = yaml.safe_load(server.kubeconfig.read_text())["users"][0]["user"]["token"]
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.get(server.url + "/api/v1/namespaces", headers=headers).status_code == 200
        server.apply_sync({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})


def test_tls_serves_https_with_the_admin_certificate() -> None:
    with kubewire.Server(tls=True) as server:
        assert server.url.startswith("https://")
        out = subprocess.run(["kubectl", "--kubeconfig", str(server.kubeconfig), "get", "ns",
                              "default", "-o", "name"], capture_output=True, text=True,
                             check=True).stdout
        assert out.strip() == "namespace/default"


def test_a_given_data_dir_stays_and_config_fields_pass_through(tmp_path: Path) -> None:
    with kubewire.Server(data_dir=tmp_path / "d", request_record_capacity=2) as server:
        for _ in range(3):
            httpx.get(server.url + "/api/v1/namespaces")
        assert len(server.requests()) == 2
    assert (tmp_path / "d" / "kubeconfig").exists()
    with pytest.raises(TypeError, match="no_such_field"):
        kubewire.Server(no_such_field=1)


def test_a_failed_start_leaves_no_thread_or_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError), kubewire.Server(crds=[{"kind": "CustomResourceDefinition"}]):
        pass
    assert not server_threads()


@pytest.mark.parametrize("storage", ["memory", "sqlite"])
def test_both_stores(storage: str, tmp_path: Path) -> None:
    with kubewire.Server(storage=storage, data_dir=tmp_path) as server:  # type: ignore[arg-type]
        server.apply_sync({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
        assert server.wait_for_sync("namespaces", "n")
    assert (tmp_path / "kubewire.db").exists() == (storage == "sqlite")
    with pytest.raises(ValueError, match="storage"):
        kubewire.Server(storage="etcd")  # type: ignore[arg-type]


def test_faults_run_on_the_server_loop_and_show_in_the_record() -> None:
    with kubewire.Server() as server:
        fault_id = server.faults.inject_error(503, count=1, verb="list", resource="configmaps")
        url = server.url + "/api/v1/namespaces/default/configmaps"
        assert httpx.get(url).status_code == 503
        assert httpx.get(url).status_code == 200
        first, second = server.requests(verb="list", resource="configmaps")
        assert (first.code, first.fault) == (503, "error-503")
        assert (second.code, second.fault) == (200, None)
        assert isinstance(fault_id, str)
        assert server.faults.list_faults() == []  # used up


async def test_reset_returns_to_the_state_after_start() -> None:
    async with kubewire.Server() as server:
        await server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
        before = await server.wait_for("namespaces", "n")
        assert before is not None
        server.faults.inject_error(500, resource="configmaps")
        await server.reset()
        assert server.requests() == []
        assert server.faults.list_faults() == []
        await server.wait_for("namespaces", "n", deleted=True, timeout=5)
        after = (await server.apply({"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": "n"}}))[0]
        revision = after["metadata"]["resourceVersion"]  # type: ignore[index,call-overload]
        assert int(revision) > int(before["metadata"]["resourceVersion"])


def test_advance_clock_moves_a_manual_clock_and_finishes_a_graceful_deletion() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]}}
    with kubewire.Server(manual_clock=True) as server:
        server.apply_sync(pod)
        server.delete_sync("v1", "Pod", "p", namespace="default")  # 30 s of grace, on a node
        assert server.advance_clock(29) == 0
        held = server.wait_for_sync("pods", "p", namespace="default", timeout=1)
        assert held is not None and held["metadata"]["deletionTimestamp"]
        assert server.advance_clock(1) == 1
        assert server.wait_for_sync("pods", "p", namespace="default", deleted=True,
                                    timeout=5) is None
        with pytest.raises(ValueError, match="seconds must be in"):
            server.advance_clock(-1)
    with kubewire.Server() as server, pytest.raises(ValueError, match="real time"):
        server.advance_clock(1)


def test_a_stop_that_does_not_finish_says_where_the_thread_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    server = kubewire.Server().start()
    loop = server._loop
    assert loop is not None
    release = threading.Event()
    loop.call_soon_threadsafe(release.wait, 30)  # the server's loop, stuck in a callback
    monkeypatch.setattr("kubewire.testing.server.START_TIMEOUT_S", 0.5)
    with pytest.raises(RuntimeError, match="did not stop; it is at:") as stuck:
        server.stop()
    assert "_run_once" in str(stuck.value)  # the loop's frames, down to its callback
    release.set()
    server.stop()  # and a second stop finishes the job
    assert server._thread is None
