"""kubex (async, pydantic models) against the real server, unchanged: its watch page's patterns.

The seed document ``002`` is kubex's watch page: ``Api(Pod, client=..., namespace=...)`` from
``create_client()`` (the kubeconfig ``KUBECONFIG`` names: here the admin's client certificate
over TLS), ``api.watch()`` with selectors, ``allow_bookmarks``, ``namespace=None``,
``send_initial_events``, restart on ``Gone`` and ``timeout_seconds``, and its example that
creates and deletes a Pod while a task watches. Each runs on both of kubex's HTTP clients
(aiohttp and httpx). The page's imports name kubex's models for Kubernetes 1.35
(``kubex.k8s.v1_35``) and ``kubex_core.models.watch_event``; the release installed here has
1.32's models (kubewire's version) and ``EventType`` in ``kubex.core.watch_event``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import suppress
from typing import Any, cast

import pytest
from kubex.api import Api
from kubex.client import BaseClient, ClientChoice, create_client
from kubex.core.exceptions import Gone
from kubex.core.patch import MergePatch
from kubex.core.watch_event import EventType
from kubex.k8s.v1_32.core.v1.container import Container
from kubex.k8s.v1_32.core.v1.pod import Pod
from kubex.k8s.v1_32.core.v1.pod_spec import PodSpec
from kubex_core.models.metadata import ObjectMetadata

import kubewire
from kubewire.storage.base import Retention

NS = "default"
WAIT_S = 10.0  # bound on every wait for the stream: a hung watch fails the test


def new_pod(name: str = "", labels: dict[str, str] | None = None) -> Pod:
    metadata = ObjectMetadata(name=name, labels=labels) if name else ObjectMetadata(
        generate_name="example-pod-", labels=labels)
    return Pod(metadata=metadata, spec=PodSpec(containers=[Container(name="example",
                                                                     image="nginx")]))


@pytest.fixture
def server() -> Iterator[kubewire.Server]:
    with kubewire.Server(tls=True, bookmark_interval_s=0.5) as running:
        yield running


@pytest.fixture(params=[ClientChoice.AIOHTTP, ClientChoice.HTTPX], ids=["aiohttp", "httpx"])
async def client(request: pytest.FixtureRequest, server: kubewire.Server,
                 monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[BaseClient]:
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig))
    made = await create_client(client_class=request.param)
    async with made:
        yield made


async def events_until(stream: AsyncGenerator[Any, None], done: Any, *,
                       close: bool = True) -> list[Any]:
    """The stream's events up to and including the first for which ``done`` holds; the
    stream (its connection) is closed then, unless ``close`` is False."""
    seen: list[Any] = []

    async def read() -> None:
        async for event in stream:
            seen.append(event)
            if done(event):
                return

    try:
        await asyncio.wait_for(read(), WAIT_S)
    finally:
        if close:
            await stream.aclose()
    return seen


async def test_the_pages_example_watches_a_pod_created_and_deleted(client: BaseClient) -> None:
    api: Api[Pod] = Api(Pod, client=client, namespace=NS)
    seen: list[tuple[EventType, str | None]] = []
    opened = asyncio.Event()

    async def watcher(pod_api: Api[Pod]) -> None:
        async for event in pod_api.watch(allow_bookmarks=True, namespace=None):
            opened.set()
            seen.append((event.type, event.object.metadata.name))

    task = asyncio.create_task(watcher(api))
    pod_name: str | None = None
    try:
        # the watch is open once its first event (a bookmark, every 0.5 s here) arrives
        await asyncio.wait_for(opened.wait(), WAIT_S)
        created = await api.create(new_pod())
        pod_name = cast(str, created.metadata.name)
        assert pod_name.startswith("example-pod-")
    finally:
        if pod_name is not None:
            await api.delete(pod_name)
    for _ in range(int(WAIT_S / 0.05)):
        if (EventType.DELETED, pod_name) in seen:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with suppress(asyncio.CancelledError):
        await task
    mine = [kind for kind, name in seen if name == pod_name]
    # created, marked for deletion (grace period 0: never scheduled), deleted
    assert mine == [EventType.ADDED, EventType.MODIFIED, EventType.DELETED]


async def test_selectors_narrow_the_stream(client: BaseClient) -> None:
    api: Api[Pod] = Api(Pod, client=client, namespace=NS)
    await api.create(new_pod("other", {"app": "db"}))
    await api.create(new_pod("web-1", {"app": "web"}))
    by_label = await events_until(api.watch(label_selector="app=web"),
                                  lambda e: e.object.metadata.name == "web-1")
    assert [(e.type, e.object.metadata.name) for e in by_label] == [(EventType.ADDED, "web-1")]
    by_field = await events_until(api.watch(field_selector="metadata.name=other"),
                                  lambda e: e.object.metadata.name == "other")
    assert [(e.type, e.object.metadata.name) for e in by_field] == [(EventType.ADDED, "other")]
    assert by_field[0].object.metadata.labels == {"app": "db"}


async def test_bookmarks_carry_the_current_resource_version(client: BaseClient) -> None:
    api: Api[Pod] = Api(Pod, client=client, namespace=NS)
    created = await api.create(new_pod("quiet"))
    written = int(cast(str, created.metadata.resource_version))
    events = await events_until(api.watch(allow_bookmarks=True, namespace=None),
                                lambda e: e.type == EventType.BOOKMARK)
    assert [e.type for e in events] == [EventType.ADDED, EventType.BOOKMARK]
    bookmark = events[-1].object
    assert int(bookmark.metadata.resource_version) >= written


async def test_send_initial_events_replays_the_state_then_goes_live(client: BaseClient) -> None:
    api: Api[Pod] = Api(Pod, client=client, namespace=NS)
    for name in ("a", "b"):
        await api.create(new_pod(name))
    stream = api.watch(send_initial_events=True, allow_bookmarks=True)
    initial = await events_until(stream, lambda e: e.type == EventType.BOOKMARK, close=False)
    assert sorted(e.object.metadata.name for e in initial[:-1]) == ["a", "b"]
    assert all(e.type == EventType.ADDED for e in initial[:-1])
    await api.create(new_pod("c"))
    live = await events_until(stream, lambda e: e.type == EventType.ADDED)
    assert live[-1].object.metadata.name == "c"


async def test_timeout_seconds_ends_the_stream(client: BaseClient) -> None:
    api: Api[Pod] = Api(Pod, client=client, namespace=NS)
    await api.create(new_pod("one"))
    seen = [e async for e in api.watch(namespace=None, timeout_seconds=1)]
    assert [(e.type, e.object.metadata.name) for e in seen] == [(EventType.ADDED, "one")]


@pytest.mark.parametrize("choice", [ClientChoice.AIOHTTP, ClientChoice.HTTPX],
                         ids=["aiohttp", "httpx"])
async def test_restart_on_gone_with_send_initial_events(choice: ClientChoice,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    compacting = kubewire.Server(tls=True, ring_capacity=8,
                                 retention=Retention(max_changes=10, max_age_s=None))
    async with compacting:
        monkeypatch.setenv("KUBECONFIG", str(compacting.kubeconfig))
        async with await create_client(client_class=choice) as client:
            api: Api[Pod] = Api(Pod, client=client, namespace=NS)
            busy = await api.create(new_pod("busy"))
            early = cast(str, busy.metadata.resource_version)
            gone = False
            for n in range(60):  # writes make the change log compact past ``early``
                for i in range(20):
                    await api.patch("busy", MergePatch(Pod(metadata=ObjectMetadata(
                        annotations={"n": f"{n}-{i}"}))))
                try:
                    await events_until(api.watch(resource_version=early), lambda e: True)
                except Gone:
                    gone = True
                    break
            assert gone, "the change log was never compacted past the first write"
            # the page's pattern: on Gone, watch again with send_initial_events
            events = await events_until(
                api.watch(allow_bookmarks=True, send_initial_events=True),
                lambda e: e.type == EventType.BOOKMARK)
            assert [(e.type, e.object.metadata.name) for e in events[:-1]] == [
                (EventType.ADDED, "busy")]
