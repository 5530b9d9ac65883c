"""Reset (``POST /kubewire/reset``, ``APIServer.reset()``): the server back to its state right
after start, on both stores, with real clients watching (the ``kubernetes`` package, kubectl).

What a test made is deleted (watchers see DELETED), what it changed or deleted of the start-up
objects is put back, resourceVersions keep growing, a CRD it made is no longer served, and a
controller timer left from before the reset does not fire on a later object of the same name.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import kubernetes
import pytest
import yaml
from kubernetes import client, watch

from kubewire.server.admin.reset import ResetReport
from kubewire.storage.base import Retention
from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.test_access import https, issue
from tests.integration.wire import call, create, get, list_rv, ok, wait_for
from tests.integration.wire import watch as watch_stream

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GATEWAY_CRD = "gateways.gateway.networking.k8s.io"
# The start-up objects a test may touch, compared whole (resourceVersion aside) after a reset.
START_UP_COLLECTIONS = ("/api/v1/namespaces", "/api/v1/serviceaccounts", "/api/v1/configmaps",
                        "/api/v1/services", "/apis/discovery.k8s.io/v1/endpointslices", CRDS)

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.reset.example.com"},
    "spec": {"group": "reset.example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}
WIDGETS = "/apis/reset.example.com/v1/namespaces/default/widgets"

T = TypeVar("T")
STORES = pytest.mark.parametrize("storage", ["memory", "sqlite"])


def reset(server: ServerThread) -> dict[str, Any]:
    reply = call(server, "POST", "/kubewire/reset")
    answer: dict[str, Any] = ok(reply, 200)
    return answer


def state(server: ServerThread) -> dict[str, Any]:
    """The start-up collections, each object without its resourceVersion, by kind and key."""
    found: dict[str, Any] = {}
    for path in START_UP_COLLECTIONS:
        for item in get(server, path)["items"]:
            meta = dict(item["metadata"])
            meta.pop("resourceVersion")
            found[f"{path} {meta.get('namespace', '')}/{meta['name']}"] = {**item,
                                                                          "metadata": meta}
    return found


@pytest.fixture
def api(request: pytest.FixtureRequest) -> Iterator[Callable[[ServerThread], client.ApiClient]]:
    made: list[client.ApiClient] = []

    def make(server: ServerThread) -> client.ApiClient:
        made.append(client.ApiClient(client.Configuration(host=server.url)))
        return made[-1]

    yield make
    for one in made:
        one.close()


@STORES
def test_reset_deletes_what_a_test_made_and_watchers_see_it(
        make_server: Callable[..., ServerThread],
        api: Callable[[ServerThread], client.ApiClient], storage: str) -> None:
    server = make_server(storage=storage)
    core = client.CoreV1Api(api(server))
    before = state(server)
    listed = core.list_config_map_for_all_namespaces()
    events: list[tuple[str, str, str]] = []
    deleted = threading.Event()
    made = {("team", f"cm{i}") for i in range(8)} | {("default", "extra")}

    def follow() -> None:
        stream = watch.Watch()
        for event in stream.stream(core.list_config_map_for_all_namespaces,
                                   resource_version=listed.metadata.resource_version,
                                   timeout_seconds=20):
            obj: Any = event["object"]
            events.append((event["type"], obj.metadata.namespace, obj.metadata.name))
            if {(ns, name) for kind, ns, name in events if kind == "DELETED"} >= made:
                deleted.set()
                stream.stop()

    watcher = threading.Thread(target=follow)
    watcher.start()
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team")))
    for ns, name in sorted(made):
        core.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name), data={"k": name}))
    core.create_namespaced_secret("team", client.V1Secret(
        metadata=client.V1ObjectMeta(name="s"), string_data={"a": "b"}))
    last = core.create_namespaced_service("team", client.V1Service(
        metadata=client.V1ObjectMeta(name="svc"),
        spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)])))
    last_rv = int(last.metadata.resource_version)

    answer = reset(server)
    assert answer["deleted"] >= len(made) + 3 and answer["revision"] > last_rv
    assert deleted.wait(15), events
    watcher.join(5)
    assert {("DELETED", ns, name) for ns, name in made} <= set(events)
    assert call(server, "GET", "/api/v1/namespaces/team").status == 404
    assert state(server) == before
    # resourceVersions are never reused: what comes next is newer than anything before
    again = core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="extra")))
    assert int(again.metadata.resource_version) > answer["revision"] > last_rv
    assert reset(server)["deleted"] == 1


@STORES
def test_reset_puts_back_start_up_objects_a_test_changed_or_deleted(
        make_server: Callable[..., ServerThread], storage: str) -> None:
    server = make_server(storage=storage, namespace_deletion_delay_s=0.2)
    before = state(server)
    ok(call(server, "PATCH", "/api/v1/namespaces/default/serviceaccounts/default",
            {"metadata": {"labels": {"touched": "yes"}}}))
    ok(call(server, "DELETE", "/api/v1/namespaces/kube-public/serviceaccounts/default"))
    ok(call(server, "PATCH", "/api/v1/namespaces/default/services/kubernetes",
            {"metadata": {"annotations": {"touched": "yes"}}}))
    ok(call(server, "DELETE", f"{CRDS}/{GATEWAY_CRD}"))
    ok(call(server, "DELETE", "/api/v1/namespaces/kube-node-lease"))
    wait_for(lambda: call(server, "GET", "/api/v1/namespaces/kube-node-lease").status == 404,
             10, "kube-node-lease to be removed")
    wait_for(lambda: call(server, "GET", f"{CRDS}/{GATEWAY_CRD}").status == 404, 10,
             "the Gateway CRD to be removed")
    assert state(server) != before

    reset(server)
    assert state(server) == before
    # the put-back CRD is served again, and the put-back namespace holds still
    ok(call(server, "GET", "/apis/gateway.networking.k8s.io/v1/namespaces/default/gateways"))
    time.sleep(0.5)  # past the namespace deletion delay of the namespace that was Terminating
    assert state(server) == before


@kubectl.needs_kubectl
@STORES
def test_a_crd_made_by_a_test_is_not_served_after_reset(
        make_server: Callable[..., ServerThread], storage: str) -> None:
    server = make_server(storage=storage)
    create(server, CRDS, WIDGET_CRD)
    wait_for(lambda: call(server, "GET", WIDGETS).status == 200, 10, "widgets to be served")
    create(server, WIDGETS, {"apiVersion": "reset.example.com/v1", "kind": "Widget",
                             "metadata": {"name": "w"}, "spec": {"n": 1}})
    assert "widget.reset.example.com/w" in kubectl.ok(server, "get", "widgets", "-o", "name")
    stream = watch_stream(server, WIDGETS, resourceVersion=list_rv(server, WIDGETS))

    reset(server)
    # the watcher gets the custom resource's DELETED, then its stream ends with the kind
    assert stream.ended(10)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in stream.remaining()] == [
        ("DELETED", "w")]
    stream.close()
    done = kubectl.run(server, "get", "widgets.reset.example.com")
    assert done.returncode != 0
    assert "the server doesn't have a resource type" in done.stderr
    assert call(server, "GET", WIDGETS).status == 404
    assert call(server, "GET", f"{CRDS}/widgets.reset.example.com").status == 404
    assert "reset.example.com" not in json.dumps(get(server, "/apis"))


@STORES
def test_an_old_deletion_timer_leaves_a_later_object_of_the_same_name_alone(
        make_server: Callable[..., ServerThread], storage: str) -> None:
    delay = 0.3
    server = make_server(storage=storage, namespace_deletion_delay_s=delay)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    kept = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept"}}
    create(server, "/api/v1/namespaces", {"metadata": {"name": "old"}})
    create(server, "/api/v1/namespaces/old/configmaps", kept)
    ok(call(server, "DELETE", "/api/v1/namespaces/old"))  # Terminating: emptied after ``delay``
    create(server, "/api/v1/namespaces/default/pods", pod)
    ok(call(server, "DELETE", "/api/v1/namespaces/default/pods/p",
            {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 1}))

    reset(server)
    create(server, "/api/v1/namespaces", {"metadata": {"name": "old"}})
    create(server, "/api/v1/namespaces/old/configmaps", kept)
    create(server, "/api/v1/namespaces/default/pods", pod)
    time.sleep(max(delay, 1.0) + 0.5)  # past both timers of the objects before the reset
    namespace = get(server, "/api/v1/namespaces/old")
    assert namespace["status"]["phase"] == "Active"
    assert "deletionTimestamp" not in namespace["metadata"]
    get(server, "/api/v1/namespaces/old/configmaps/kept")
    assert "deletionTimestamp" not in get(server, "/api/v1/namespaces/default/pods/p")["metadata"]


def test_reset_is_for_admins_only(make_server: Callable[..., ServerThread]) -> None:
    server = make_server(insecure_http=False, storage="memory")
    token = str(yaml.safe_load(issue(server, "bob", token=True).read_text())
                ["users"][0]["user"]["token"])
    refused = https(server, "POST", "/kubewire/reset", token=token)
    assert refused.status == 403, refused.body
    assert json.loads(refused.body)["reason"] == "Forbidden"
    data_dir: Path = server.config.data_dir
    admin = (data_dir / "pki/admin.crt", data_dir / "pki/admin.key")
    # the admin's kubeconfig works for the same request, from the kubernetes package too
    assert https(server, "POST", "/kubewire/reset", cert=admin).status == 200
    api = kubernetes.config.new_client_from_config(str(server.kubeconfig))
    try:
        method, url, headers, body, _ = api.param_serialize(
            "POST", "/kubewire/reset", auth_settings=["BearerToken"])
        answer = api.call_api(method, url, headers, body)
        answer.read()
    finally:
        api.close()
    assert answer.status == 200
    assert set(json.loads(answer.data)) == {"deleted", "restored", "revision", "rounds"}
    assert https(server, "GET", "/kubewire/reset", cert=admin).status == 405


def on_server_loop(server: ServerThread, make: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``make()`` on the server's loop and wait for its result."""
    result: concurrent.futures.Future[T] = concurrent.futures.Future()

    def begin() -> None:
        task = asyncio.ensure_future(make())
        task.add_done_callback(lambda done: result.set_result(done.result()))

    server.call(begin)
    return result.result(10)


def test_reset_takes_milliseconds_on_the_memory_store(
        make_server: Callable[..., ServerThread]) -> None:
    """A typical test's leftovers (a namespace with ten objects) are gone in a few ms (the
    target is 5 ms; the bound here is loose, for a busy machine)."""
    server = make_server(storage="memory")
    running = server.server
    assert running is not None

    async def timed() -> tuple[float, ResetReport]:
        started = time.perf_counter()
        report = await running.reset()
        return time.perf_counter() - started, report

    timings = []
    for round_ in range(5):
        create(server, "/api/v1/namespaces", {"metadata": {"name": f"t{round_}"}})
        for i in range(10):
            create(server, f"/api/v1/namespaces/t{round_}/configmaps",
                   {"metadata": {"name": f"c{i}"}, "data": {"k": "v"}})
        seconds, report = on_server_loop(server, timed)
        assert report.deleted == 12  # the namespace, its 10 and its ServiceAccount
        timings.append(seconds)
    print("reset timings (ms):", [round(t * 1000, 2) for t in timings])
    assert min(timings) < 0.05, timings


@STORES
def test_reset_after_the_history_since_start_is_compacted(
        make_server: Callable[..., ServerThread], storage: str) -> None:
    """The memory store's baseline is read at start; a SQLite server's from its history at the
    first reset (no copy of the database held until then), which compaction may have taken:
    then the reset is refused with a 409 that says why, and nothing changes."""
    server = make_server(storage=storage, retention=Retention(max_changes=5, max_age_s=None))
    running = server.server
    assert running is not None
    for i in range(10):
        create(server, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": f"c{i}"}})
    on_server_loop(server, running.ctx.store.compact)
    reply = call(server, "POST", "/kubewire/reset")
    if storage == "memory":
        assert ok(reply, 200)["deleted"] == 10
        assert get(server, "/api/v1/namespaces/default/configmaps")["items"] == []
    else:
        assert reply.status == 409, reply.body
        assert "compacted" in reply.json["message"]
        assert len(get(server, "/api/v1/namespaces/default/configmaps")["items"]) == 10
