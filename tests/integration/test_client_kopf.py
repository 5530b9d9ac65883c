"""A kopf (1.45.x) operator against the real server, unchanged: pod create and delete handlers
with kopf's finalizer, every step checked over plain HTTP.

What kopf does is in objects-and-clients.md §7.6: legacy discovery of every group-version, a
list then a watch from its resourceVersion (with bookmarks), merge patches of the object (its
finalizer, the ``last-handled-configuration`` annotation) and of ``/status`` (handler results,
because discovery lists ``pods/status``), and core/v1 Events (``generateName: kopf-event-``) for
``kopf.info()``. The operator runs standalone (no peering) in its own thread and event loop, as
``kopf run --standalone -n default`` would, logging in with kopf's own kubeconfig reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import kopf
import kubernetes
import pytest

from tests.integration.harness import ServerThread
from tests.integration.kinds import NAMESPACE, NS, POD
from tests.integration.wire import call, create, get, list_rv, ok, rv_of, wait_for, watch

FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
LAST_HANDLED = "kopf.zalando.org/last-handled-configuration"
OPERATOR_START_TIMEOUT_S = 30.0  # discovery and the first list; generous on a busy 2-core box
HANDLER_TIMEOUT_S = 15.0  # kopf's own retry backoffs are seconds long


@dataclass
class Operator:
    """What the handlers saw, in order, as (handler, pod name, pod uid)."""

    calls: list[tuple[str, str, str]] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)

    def called(self, handler: str, name: str) -> bool:
        return any(h == handler and n == name for h, n, _ in self.calls)


def build_registry(seen: Operator) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(kopf.login_with_kubeconfig)

    @kopf.on.create("pods", registry=registry)
    def pod_created(name: str, uid: str, body: kopf.Body, **_: Any) -> dict[str, Any]:
        seen.calls.append(("create", name, uid))
        kopf.info(body, reason="Seen", message=f"pod {name} created")
        return {"seen": True}

    @kopf.on.delete("pods", registry=registry)
    def pod_deleted(name: str, uid: str, **_: Any) -> None:
        seen.calls.append(("delete", name, uid))

    return registry


def settings_for_tests() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.posting.enabled = True  # the default, stated: Events are part of what is tested
    return settings


@contextlib.contextmanager
def running_operator(server: ServerThread, monkeypatch: pytest.MonkeyPatch,
                     **scope: Any) -> Iterator[Operator]:
    """kopf in its own thread and loop, as ``kopf run --standalone`` with ``scope`` (``-n``
    or ``-A``); kopf's kubeconfig login reads ``KUBECONFIG``."""
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig))
    seen = Operator()
    registry = build_registry(seen)
    ready, stop = threading.Event(), threading.Event()

    def run() -> None:
        try:
            asyncio.run(kopf.operator(
                registry=registry, settings=settings_for_tests(), standalone=True,
                ready_flag=ready, stop_flag=stop, **scope))
        except BaseException as exc:  # surfaced by the test, not lost in the thread
            seen.errors.append(exc)
            ready.set()

    thread = threading.Thread(target=run, name="kopf-operator", daemon=True)
    thread.start()
    try:
        assert ready.wait(OPERATOR_START_TIMEOUT_S), "kopf did not become ready"
        assert not seen.errors, seen.errors
        yield seen
    finally:
        stop.set()
        thread.join(OPERATOR_START_TIMEOUT_S)
    assert not thread.is_alive(), "kopf did not stop"
    assert not seen.errors, seen.errors


@pytest.fixture
def operator(server: ServerThread, monkeypatch: pytest.MonkeyPatch) -> Iterator[Operator]:
    with running_operator(server, monkeypatch, namespaces=[NS]) as seen:
        yield seen


def pod_or_none(server: ServerThread, name: str) -> dict[str, Any] | None:
    reply = call(server, "GET", POD.item(name))
    if reply.status == 404:
        return None
    pod: dict[str, Any] = ok(reply, 200)
    return pod


def test_create_and_delete_with_finalizer(server: ServerThread, operator: Operator) -> None:
    created = create(server, POD.collection(), POD.obj("web", labels={"app": "web"}))
    uid = created["metadata"]["uid"]

    # kopf adds its finalizer first, runs the create handler, then records what it handled.
    def handled_pod() -> dict[str, Any] | None:
        pod = get(server, POD.item("web"))
        return pod if LAST_HANDLED in (pod["metadata"].get("annotations") or {}) else None

    handled = wait_for(handled_pod, HANDLER_TIMEOUT_S, "the create handler to be recorded")
    assert operator.calls == [("create", "web", uid)]
    assert handled["metadata"]["finalizers"] == [FINALIZER]
    assert handled["metadata"]["labels"] == {"app": "web"}
    assert "deletionTimestamp" not in handled["metadata"]
    # The handler's result went to /status; not being a PodStatus field, it was dropped.
    assert handled["status"] == {"phase": "Pending", "qosClass": "BestEffort"}

    # The finalizer holds the pod (marked, grace 0) until the delete handler ran and kopf
    # removed it.
    marked = ok(call(server, "DELETE", POD.item("web")), 200)
    assert marked["metadata"]["finalizers"] == [FINALIZER]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    assert "deletionTimestamp" in marked["metadata"]
    wait_for(lambda: pod_or_none(server, "web") is None, HANDLER_TIMEOUT_S,
             "the pod to go away")
    assert operator.calls == [("create", "web", uid), ("delete", "web", uid)]
    listed = get(server, POD.collection())
    assert listed["items"] == []


def step(event: dict[str, Any]) -> tuple[str, tuple[str, ...], bool, bool]:
    """(type, finalizers, handled by kopf, marked for deletion) of one watch event."""
    meta = event["object"]["metadata"]
    return (event["type"], tuple(meta.get("finalizers") or ()),
            LAST_HANDLED in (meta.get("annotations") or {}), "deletionTimestamp" in meta)


def test_watch_sees_each_operator_step(server: ServerThread, operator: Operator) -> None:
    """Every write kopf makes is one event, in order. The handler result it patches into
    ``/status`` is not a PodStatus field, so the server drops it and writes nothing (no event);
    emptying the finalizers of a marked pod deletes it at once, and the DELETED object is the
    last stored state, finalizer included (etcd3 watcher: a delete carries the previous value)."""
    start = list_rv(server, POD.collection())
    with watch(server, POD.collection(), resourceVersion=start) as stream:
        create(server, POD.collection(), POD.obj("web"))
        stream.events_until(lambda e: step(e)[2], HANDLER_TIMEOUT_S)
        wait_for(lambda: operator.called("create", "web"), HANDLER_TIMEOUT_S, "create handler")
        ok(call(server, "DELETE", POD.item("web")), 200)
        stream.events_until(lambda e: e["type"] == "DELETED", HANDLER_TIMEOUT_S)
        stream.expect_no_event()
        events = stream.received

    assert [step(e) for e in events] == [
        ("ADDED", (), False, False),
        ("MODIFIED", (FINALIZER,), False, False),
        ("MODIFIED", (FINALIZER,), True, False),
        ("MODIFIED", (FINALIZER,), True, True),
        ("DELETED", (FINALIZER,), True, True),
    ]
    rvs = [rv_of(e) for e in events]
    assert rvs == sorted(set(rvs))
    assert {e["object"]["metadata"]["name"] for e in events} == {"web"}
    assert [h for h, _, _ in operator.calls] == ["create", "delete"]
    assert get(server, POD.collection())["items"] == []


def test_kopf_info_posts_a_core_v1_event(server: ServerThread, operator: Operator) -> None:
    created = create(server, POD.collection(), POD.obj("web"))
    wait_for(lambda: operator.called("create", "web"), HANDLER_TIMEOUT_S, "the create handler")
    events = wait_for(lambda: get(server, f"/api/v1/namespaces/{NS}/events")["items"],
                      HANDLER_TIMEOUT_S, "kopf's event")
    [event] = events
    assert event["metadata"]["name"].startswith("kopf-event-")
    assert (event["type"], event["reason"], event["message"]) == (
        "Normal", "Seen", "pod web created")
    assert event["involvedObject"] == {
        "apiVersion": "v1", "kind": "Pod", "name": "web", "namespace": NS,
        "uid": created["metadata"]["uid"]}
    assert event["source"] == {"component": "kopf"}
    assert (event["action"], event["reportingComponent"]) == ("Action?", "kopf")


def test_kopf_event_times_are_re_encoded(server: ServerThread, operator: Operator) -> None:
    """kopf sends ``…+00:00`` microsecond times (§1.3). kube decodes them and encodes
    metav1.Time as RFC 3339 seconds in UTC and MicroTime with six decimals and ``Z``."""
    create(server, POD.collection(), POD.obj("web"))
    [event] = wait_for(lambda: get(server, f"/api/v1/namespaces/{NS}/events")["items"],
                       HANDLER_TIMEOUT_S, "kopf's event")
    sent = event["eventTime"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", sent), sent
    assert event["firstTimestamp"] == event["lastTimestamp"] == sent[:19] + "Z"



def test_clusterwide_operator_and_namespace_deletion(
        server: ServerThread, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cluster-wide (``-A``: list and watch ``/api/v1/pods``): deleting a namespace deletes its
    pod, which kopf's finalizer holds until the delete handler ran; then the namespace goes."""
    create(server, NAMESPACE.collection(), NAMESPACE.obj("team-a"))
    with running_operator(server, monkeypatch, clusterwide=True) as operator:
        created = create(server, POD.collection("team-a"), POD.obj("web"))
        wait_for(lambda: LAST_HANDLED in (
            get(server, POD.item("web", "team-a"))["metadata"].get("annotations") or {}),
            HANDLER_TIMEOUT_S, "the create handler to be recorded")
        ok(call(server, "DELETE", NAMESPACE.item("team-a")), 200)
        wait_for(lambda: call(server, "GET", NAMESPACE.item("team-a")).status == 404,
                 HANDLER_TIMEOUT_S, "the namespace to go away")
        assert operator.calls == [("create", "web", created["metadata"]["uid"]),
                                  ("delete", "web", created["metadata"]["uid"])]


def test_default_https_server_with_its_kubeconfig(
        make_server: Callable[..., ServerThread], monkeypatch: pytest.MonkeyPatch) -> None:
    """The server as ``kubewire serve`` runs it (HTTPS, its own CA, an admin client
    certificate in the kubeconfig): kopf's kubeconfig login needs nothing more."""
    tls = make_server(insecure_http=False)
    assert tls.url.startswith("https://")
    with kubernetes.config.new_client_from_config(config_file=str(tls.kubeconfig)) as api, \
            running_operator(tls, monkeypatch, namespaces=[NS]) as operator:
        core = kubernetes.client.CoreV1Api(api)
        created = core.create_namespaced_pod(NS, POD.obj("web"))
        wait_for(lambda: operator.called("create", "web"), HANDLER_TIMEOUT_S, "create handler")
        assert wait_for(lambda: core.read_namespaced_pod("web", NS).metadata.finalizers,
                        HANDLER_TIMEOUT_S, "kopf's finalizer") == [FINALIZER]
        core.delete_namespaced_pod("web", NS)
        wait_for(lambda: not core.list_namespaced_pod(NS).items, HANDLER_TIMEOUT_S,
                 "the pod to go away")
    assert operator.calls == [("create", "web", created.metadata.uid),
                              ("delete", "web", created.metadata.uid)]
