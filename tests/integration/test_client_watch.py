"""``api.watch()`` against the real server: every parameter, typed events and bookmarks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, TypeVar

import pytest

from kubewire.client.api import Api
from kubewire.client.client import Client, create_client
from kubewire.client.events import Bookmark, EventType, WatchEvent
from kubewire.models import ConfigMap, Namespace, ObjectMeta, Pod
from kubewire.models.core_v1 import Container, PodSpec
from tests.integration.harness import ServerThread
from tests.integration.wire import call

T = TypeVar("T")
EVENT_WAIT_S = 30.0  # a bound so a broken watch fails the test instead of hanging it


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


def new_pod(name: str, namespace: str | None = None, **labels: str) -> Pod:
    return Pod(metadata=ObjectMeta(name=name, namespace=namespace, labels=labels or None),
               spec=PodSpec(containers=[Container(name="c", image="nginx:1.27")]))


async def next_event(stream: AsyncIterator[WatchEvent[T]]) -> WatchEvent[T]:
    return await asyncio.wait_for(anext(stream), EVENT_WAIT_S)


def summary(event: WatchEvent[Pod] | WatchEvent[ConfigMap]) -> tuple[str, str]:
    obj = event.object
    assert not isinstance(obj, Bookmark) and obj.metadata is not None
    return event.type.value, obj.metadata.name or ""


async def test_added_modified_deleted_are_typed(client: Client) -> None:
    pods = Api(Pod, client=client)
    maps = Api(ConfigMap, client=client)
    since = (await pods.list()).resource_version
    async with aclosing(pods.watch(resource_version=since)) as stream, \
            aclosing(maps.watch(resource_version=since)) as map_stream:
        await pods.create(new_pod("w", app="x"))
        await pods.patch("w", {"metadata": {"labels": {"app": "y"}}})
        await maps.create(ConfigMap(metadata=ObjectMeta(name="m")))
        await maps.delete("m")
        events = [await next_event(stream) for _ in range(2)]
        map_events = [await next_event(map_stream) for _ in range(2)]
    assert [summary(e) for e in events] == [("ADDED", "w"), ("MODIFIED", "w")]
    assert [summary(e) for e in map_events] == [("ADDED", "m"), ("DELETED", "m")]
    modified = events[1].object
    assert isinstance(modified, Pod) and modified.metadata is not None
    assert modified.metadata.labels == {"app": "y"}
    assert modified.spec is not None and modified.spec.containers is not None


async def test_label_and_field_selectors(client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    since = (await maps.list()).resource_version
    by_label = maps.watch(resource_version=since, label_selector={"team": "a"})
    by_string = maps.watch(resource_version=since, label_selector="team in (b)")
    by_field = maps.watch(resource_version=since, field_selector={"metadata.name": "three"})
    async with aclosing(by_label), aclosing(by_string), aclosing(by_field):
        for name, team in (("one", "a"), ("two", "b"), ("three", "c")):
            await maps.create(ConfigMap(metadata=ObjectMeta(name=name, labels={"team": team})))
        assert summary(await next_event(by_label)) == ("ADDED", "one")
        assert summary(await next_event(by_string)) == ("ADDED", "two")
        assert summary(await next_event(by_field)) == ("ADDED", "three")
        await maps.delete("one")  # the next event each sees proves nothing else got through
        await maps.delete("two")
        await maps.delete("three")
        assert summary(await next_event(by_label)) == ("DELETED", "one")
        assert summary(await next_event(by_string)) == ("DELETED", "two")
        assert summary(await next_event(by_field)) == ("DELETED", "three")


async def test_all_namespaces(client: Client) -> None:
    await Api(Namespace, client=client).create(Namespace(metadata=ObjectMeta(name="other")))
    pods = Api(Pod, client=client, namespace="default")
    since = (await pods.list(namespace=None)).resource_version
    async with aclosing(pods.watch(namespace=None, resource_version=since)) as stream:
        await pods.create(new_pod("here"))
        await pods.create(new_pod("there", namespace="other"))
        seen = []
        for _ in range(2):
            event = await next_event(stream)
            assert isinstance(event.object, Pod) and event.object.metadata is not None
            seen.append((event.object.metadata.namespace, event.object.metadata.name))
    assert seen == [("default", "here"), ("other", "there")]


async def test_initial_events_then_the_end_bookmark_then_live(client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    for name in ("b", "a"):
        await maps.create(ConfigMap(metadata=ObjectMeta(name=name)))
    stream = maps.watch(send_initial_events=True, allow_bookmarks=True)
    async with aclosing(stream):
        initial = [summary(await next_event(stream)) for _ in range(2)]
        end = await next_event(stream)
        await maps.create(ConfigMap(metadata=ObjectMeta(name="c")))
        live = await next_event(stream)
    assert sorted(initial) == [("ADDED", "a"), ("ADDED", "b")]
    assert end.type is EventType.BOOKMARK
    assert isinstance(end.object, Bookmark) and end.object.is_initial_events_end
    assert end.object.metadata.resource_version
    assert summary(live) == ("ADDED", "c")


async def test_watch_from_a_list_revision_sends_no_initial_events(client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    await maps.create(ConfigMap(metadata=ObjectMeta(name="old")))
    since = (await maps.list()).resource_version
    async with aclosing(maps.watch(resource_version=since)) as stream:
        await maps.create(ConfigMap(metadata=ObjectMeta(name="new")))
        assert summary(await next_event(stream)) == ("ADDED", "new")


async def test_no_initial_events_starts_now_and_misses_nothing(
        server: ServerThread, client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    await maps.create(ConfigMap(metadata=ObjectMeta(name="before")))
    stream = maps.watch(send_initial_events=False)
    async with aclosing(stream):
        first = asyncio.ensure_future(next_event(stream))
        # The watch has connected (so it knows "now") before the next write is made.
        await _until(lambda: _registered_watchers(server, "ConfigMap") == 1)
        await maps.create(ConfigMap(metadata=ObjectMeta(name="after")))
        assert summary(await first) == ("ADDED", "after")


def _registered_watchers(server: ServerThread, kind: str) -> int:
    text = call(server, "GET", "/metrics").body.decode()
    for line in text.splitlines():
        if line.startswith("apiserver_registered_watchers{") and f'kind="{kind}"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


async def _until(predicate: Callable[[], bool], timeout: float = EVENT_WAIT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await asyncio.to_thread(predicate):
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_periodic_bookmarks_are_typed_and_optional(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(bookmark_interval_s=0.2)
    async with await create_client(server.kubeconfig) as client:
        maps = Api(ConfigMap, client=client)
        since = (await maps.list()).resource_version
        async with aclosing(maps.watch(resource_version=since, allow_bookmarks=True)) as stream:
            await maps.create(ConfigMap(metadata=ObjectMeta(name="tick")))
            added = await next_event(stream)
            # Bookmarks only report progress: a write to another kind moves the revision on.
            await Api(Pod, client=client).create(new_pod("elsewhere"))
            mark = await next_event(stream)
        assert summary(added) == ("ADDED", "tick")
        assert mark.type is EventType.BOOKMARK and isinstance(mark.object, Bookmark)
        assert isinstance(added.object, ConfigMap) and added.object.metadata is not None
        assert int(mark.object.metadata.resource_version) >= int(
            added.object.metadata.resource_version or 0)
        assert not mark.object.is_initial_events_end
        # Without allow_bookmarks they are used for resuming but never shown.
        async with aclosing(maps.watch(resource_version=since)) as quiet:
            first = await next_event(quiet)
            await maps.delete("tick")
            second = await next_event(quiet)
        assert [first.type, second.type] == [EventType.ADDED, EventType.DELETED]


async def test_timeout_seconds_ends_the_stream(client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    since = (await maps.list()).resource_version
    events = await asyncio.wait_for(
        _collect(maps.watch(resource_version=since, timeout_seconds=1)), EVENT_WAIT_S)
    assert events == []


async def _collect(stream: AsyncIterator[WatchEvent[Any]]) -> list[WatchEvent[Any]]:
    return [event async for event in stream]


async def test_dict_mode_watch(client: Client) -> None:
    maps = Api(dict, client=client, api_version="v1", kind="ConfigMap")
    since = (await maps.list()).resource_version
    async with aclosing(maps.watch(resource_version=since)) as stream:
        await maps.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"},
                           "data": {"k": "v"}})
        event = await next_event(stream)
    assert event.type is EventType.ADDED
    assert isinstance(event.object, dict) and event.object["data"] == {"k": "v"}
