"""A server on the in-memory store (``storage="memory"``, ``kubewire serve --storage memory``),
driven by kubectl and the ``kubernetes`` package: create, list, watch, delete, with no database
file in the data dir."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client, watch

from kubewire.cli import build_parser, config_from_args
from kubewire.server.context import DATABASE_NAME
from kubewire.storage.memory import MemoryStore
from tests.api_only import API_ONLY
from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.test_crds import CRD_NAME, CRDS, WIDGETS, install, widget
from tests.integration.wire import call, create, list_rv, ok, types_and_names
from tests.integration.wire import watch as watch_stream

CONFIG_MAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: default
data:
  k: v
"""


@kubectl.needs_kubectl
def test_memory_server_serves_kubectl_and_the_kubernetes_client(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(storage="memory")
    running = server.server
    assert running is not None
    assert isinstance(server.call(lambda: running.ctx.store.store), MemoryStore)
    assert not (server.config.data_dir / DATABASE_NAME).exists()
    assert (server.config.data_dir / "kubeconfig").exists()

    api = client.ApiClient(client.Configuration(host=server.url))
    core = client.CoreV1Api(api)
    events: list[tuple[str, str]] = []
    started = threading.Event()
    listed = core.list_namespaced_config_map("default")
    rv = listed.metadata.resource_version

    def follow() -> None:
        stream = watch.Watch()
        started.set()
        for event in stream.stream(core.list_namespaced_config_map, "default",
                                   resource_version=rv, timeout_seconds=10):
            obj: Any = event["object"]
            events.append((event["type"], obj.metadata.name))
            if event["type"] == "DELETED" and obj.metadata.name == "from-client":
                stream.stop()

    watcher = threading.Thread(target=follow)
    watcher.start()
    started.wait(5)

    kubectl.ok(server, "apply", "-f", "-", stdin=CONFIG_MAP.format(name="from-kubectl"))
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="from-client"), data={"a": "b"}))
    names = kubectl.ok(server, "get", "configmaps", "-n", "default", "-o", "name").split()
    assert {"configmap/from-kubectl", "configmap/from-client"} <= set(names)
    listed_names = {cm.metadata.name for cm in core.list_namespaced_config_map("default").items}
    assert {"from-kubectl", "from-client"} <= listed_names
    kubectl.ok(server, "delete", "configmap", "from-kubectl", "-n", "default")
    core.delete_namespaced_config_map("from-client", "default")
    watcher.join(15)
    assert not watcher.is_alive()
    assert events == [("ADDED", "from-kubectl"), ("ADDED", "from-client"),
                      ("DELETED", "from-kubectl"), ("DELETED", "from-client")]
    assert kubectl.run(server, "get", "configmap", "from-client", "-n", "default").returncode
    assert not (server.config.data_dir / DATABASE_NAME).exists()


def test_serve_storage_flag_selects_the_store(tmp_path: Any) -> None:
    parser = build_parser()
    default = config_from_args(parser.parse_args(["serve", *API_ONLY, "--data-dir", str(tmp_path)]))
    memory = config_from_args(parser.parse_args(["serve", *API_ONLY, "--data-dir", str(tmp_path),
                                                 "--storage", "memory"]))
    assert (default.storage, memory.storage) == ("sqlite", "memory")


def test_deleting_a_crd_on_memory_storage_sends_each_deleted_before_the_stream_ends(
        make_server: Callable[..., ServerThread]) -> None:
    """The CRD's cleanup deletes its resources and then the CRD without waiting on a writer:
    the watchers still get each DELETED before their kind's streams end."""
    server = make_server(storage="memory")
    install(server)
    create(server, WIDGETS, widget("w1"))
    create(server, WIDGETS, widget("w2"))
    stream = watch_stream(server, WIDGETS, resourceVersion=list_rv(server, WIDGETS))
    ok(call(server, "DELETE", f"{CRDS}/{CRD_NAME}"), 200)
    assert stream.ended(10)
    assert sorted(types_and_names(stream.remaining())) == [("DELETED", "w1"),
                                                           ("DELETED", "w2")]
    stream.close()
