"""The toolkit's acceptance test (issue 17), written against the documented API only: the
plugin installs a CRD, a small controller runs (kubewire.client's informer and work queue:
every Widget gets ``status.phase: Ready``), and the server drops its watch, forces a 410 Gone
and stalls its stream. Each time the controller must converge, and the request record must
show how: exactly one status patch per Widget, never a delete, the watch opened again. No
test sleeps: ``wait_for`` returns when the server holds what was waited for.

    pytest examples/testing/test_acceptance.py
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import suppress
from typing import Any

import httpx
import pytest

from kubewire import Server
from kubewire.client import (
    Api,
    Backoff,
    Client,
    Conflict,
    Informer,
    NotFound,
    QueueShutDown,
    WatchSettings,
    WorkQueue,
)

WIDGETS = "widgets.example.com"
WATCHDOG_S = 1.0  # the controller's watch gives up on a connection silent this long
BOOKMARK_S = 0.2  # how often the server sends a bookmark on an idle watch (kube: 60 s)
STALL_S = 3.0


@pytest.fixture(scope="module")
def kubewire_server() -> Iterator[Server]:
    """The plugin's server, with bookmarks often enough that a healthy idle watch is never
    WATCHDOG_S silent (the watchdog then trips only on a stall). Overriding the fixture is how
    a test module configures its server."""
    with Server(bookmark_interval_s=BOOKMARK_S) as server:
        yield server


class WidgetController:
    """Informer -> work queue -> reconcile: each Widget without ``status.phase: Ready`` gets it,
    by a merge patch of ``/status`` that carries the cached resourceVersion (a stale cache gets
    409 Conflict rather than patching twice)."""

    def __init__(self, client: Client, namespace: str) -> None:
        self.widgets = Api(dict, client=client, api_version="example.com/v1", kind="Widget",
                           namespace=namespace)
        settings = WatchSettings(idle_timeout_s=WATCHDOG_S,
                                 backoff=Backoff(initial_s=0.05, max_s=0.5,
                                                 rng=random.Random(1)))
        self.informer = Informer(self.widgets, settings=settings)
        self.queue: WorkQueue[str] = WorkQueue()
        self.informer.add_handlers(on_add=self.enqueue,
                                   on_update=lambda old, new: self.enqueue(new))

    async def enqueue(self, widget: dict[str, Any]) -> None:
        await self.queue.add(self.informer.key_of(widget))

    async def work(self) -> None:
        """Reconcile what the queue holds until it is shut down."""
        with suppress(QueueShutDown):
            while True:
                key = await self.queue.get()
                try:
                    await self.reconcile(key)
                finally:
                    await self.queue.done(key)

    async def reconcile(self, key: str) -> None:
        namespace, name = key.split("/")
        widget: dict[str, Any] | None = self.informer.get(name, namespace)
        if widget is None or (widget.get("status") or {}).get("phase") == "Ready":
            return
        version = widget["metadata"]["resourceVersion"]
        with suppress(Conflict, NotFound):  # a newer version is on its way to the cache
            await self.widgets.patch_status(name, {"metadata": {"resourceVersion": version},
                                                   "status": {"phase": "Ready"}})


@pytest.fixture
async def controller(kubewire_client: Client,
                     kubewire_namespace: str) -> AsyncIterator[WidgetController]:
    running = WidgetController(kubewire_client, kubewire_namespace)
    async with running.informer:
        worker = asyncio.create_task(running.work())
        await running.informer.wait_for_sync()
        yield running
        await running.queue.shut_down()
        await worker


def widget(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": 1},
            "metadata": {"name": name, "namespace": namespace}}


def ready(obj: dict[str, Any]) -> bool:
    return bool((obj.get("status") or {}).get("phase") == "Ready")


async def create_and_converge(server: Server, namespace: str, *names: str) -> None:
    for name in names:
        await server.apply(widget(name, namespace))
    for name in names:
        await server.wait_for(WIDGETS, name, namespace=namespace, condition=ready, timeout=20)


def assert_patched_once_never_deleted(server: Server, names: set[str]) -> None:
    patched = Counter(entry.name for entry in server.requests(
        verb="patch", resource="widgets", subresource="status", code=200))
    assert patched == dict.fromkeys(names, 1)
    assert server.requests(verb="delete", resource="widgets") == []


def injected(server: Server, fault: str) -> float:
    """``kubewire_faults_injected_total{fault=...}`` from the server's /metrics."""
    prefix = f'kubewire_faults_injected_total{{fault="{fault}"}} '
    lines = httpx.get(server.url + "/metrics").text.splitlines()
    return next((float(line[len(prefix):]) for line in lines if line.startswith(prefix)), 0.0)


def watches(server: Server) -> int:
    """The controller's watches that have ended (an entry is recorded once answered)."""
    return len(server.requests(verb="watch", resource="widgets"))


pytestmark = pytest.mark.kubewire(crds=["widget-crd.yaml"])


async def test_a_dropped_watch(kubewire_server: Server, kubewire_namespace: str,
                               controller: WidgetController) -> None:
    server, namespace = kubewire_server, kubewire_namespace
    await create_and_converge(server, namespace, "before")
    ended = watches(server)
    assert server.faults.drop_watches(resource="widgets", namespace=namespace) == 1
    await create_and_converge(server, namespace, "after")
    assert watches(server) == ended + 1  # the dropped one; the controller watches again
    assert controller.informer.relists == 0  # resumed where it was: no 410, no new list
    assert_patched_once_never_deleted(server, {"before", "after"})


async def test_a_forced_410(kubewire_server: Server, kubewire_namespace: str,
                            controller: WidgetController) -> None:
    server, namespace = kubewire_server, kubewire_namespace
    await create_and_converge(server, namespace, "before")
    # Hold the stream, change something it does not see, make the history older than that
    # change unreachable, and end the stream: its resume point is gone.
    stall = server.faults.stall_streams(resource="widgets", namespace=namespace)
    await server.apply(widget("missed", namespace))
    server.faults.expire_history()
    server.faults.drop_watches(resource="widgets", namespace=namespace)
    server.faults.clear(stall)
    await server.wait_for(WIDGETS, "missed", namespace=namespace, condition=ready, timeout=20)
    assert controller.informer.relists == 1  # 410 Gone: it listed again, as it must
    await create_and_converge(server, namespace, "after")
    assert_patched_once_never_deleted(server, {"before", "missed", "after"})


async def test_a_stalled_stream(kubewire_server: Server, kubewire_namespace: str,
                                controller: WidgetController) -> None:
    server, namespace = kubewire_server, kubewire_namespace
    await create_and_converge(server, namespace, "before")
    ended, stalled = watches(server), injected(server, "stall")
    # The connection stays open and nothing comes, not even bookmarks, for STALL_S (on the
    # server's clock); the controller's watchdog gives up on it after WATCHDOG_S.
    server.faults.stall_streams(STALL_S, resource="widgets", namespace=namespace)
    await server.apply(widget("during", namespace))
    await server.wait_for(WIDGETS, "during", namespace=namespace, condition=ready, timeout=20)
    # the stalled stream ended by the watchdog, and its successor stalled too until the end
    assert watches(server) >= ended + 1
    assert injected(server, "stall") >= stalled + 2
    assert controller.informer.relists == 0
    await create_and_converge(server, namespace, "after")
    assert_patched_once_never_deleted(server, {"before", "during", "after"})
