"""The kubernetes_asyncio-style ``Watch`` over our ``Api``, against the real server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubewire.client.api import Api
from kubewire.client.client import Client, create_client
from kubewire.client.compat_watch import Watch
from kubewire.models import ConfigMap, ObjectMeta, Pod
from tests.integration.harness import ServerThread

WAIT_S = 30.0  # bound: a broken stream fails the test instead of hanging it


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


async def test_stream_yields_event_dicts_until_stop(client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    rv = (await maps.list()).resource_version
    w = Watch()
    assert w.get_return_type(maps.list) is ConfigMap
    assert w.get_watch_argument_name(maps.list) == "watch"
    for name in ("one", "two", "three"):
        await maps.create(ConfigMap(metadata=ObjectMeta(name=name), data={"n": name}))
    seen: list[tuple[str, str]] = []

    async def consume() -> None:
        async for event in w.stream(maps.list, namespace="default", resource_version=rv):
            obj = event["object"]
            assert isinstance(obj, ConfigMap) and obj.metadata is not None
            assert event["raw_object"]["data"] == obj.data
            seen.append((event["type"], obj.metadata.name or ""))
            if obj.metadata.name == "two":
                w.stop()

    await asyncio.wait_for(consume(), WAIT_S)
    assert seen == [("ADDED", "one"), ("ADDED", "two")]


async def test_positional_namespace_timeout_and_dict_mode(client: Client) -> None:
    pods: Api[dict[str, Any]] = Api(dict, client=client, api_version="v1", kind="Pod")
    rv = (await pods.list()).resource_version
    w = Watch()
    assert w.get_return_type(pods.list) is None
    events = await asyncio.wait_for(
        _collect(w.stream(pods.list, "default", resource_version=rv, timeout_seconds=1)), WAIT_S)
    assert events == []  # the server's timeout ended the stream


async def _collect(stream: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event async for event in stream]


def test_unmarshal_event_decodes_to_the_return_type() -> None:
    w = Watch()
    line = ('{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"Pod",'
            '"metadata":{"name":"p","resourceVersion":"5"}}}')
    event = w.unmarshal_event(line, Pod)
    assert event["type"] == "MODIFIED"
    assert isinstance(event["object"], Pod) and event["object"].metadata is not None
    assert event["object"].metadata.resource_version == "5"
    assert event["raw_object"]["metadata"]["name"] == "p"
    error = w.unmarshal_event('{"type":"ERROR","object":{"kind":"Status","code":410}}', Pod)
    assert error["object"] == {"kind": "Status", "code": 410}
    with pytest.raises(TypeError):
        w.get_return_type(print)


async def test_seed_pattern_list_metadata_and_async_with(client: Client) -> None:
    """kubernetes_asyncio's 'watch from the list's resourceVersion', as seed 004 writes it."""
    maps = Api(ConfigMap, client=client)
    listed = await maps.list()
    resource_version = listed.metadata.resource_version
    assert resource_version == listed.resource_version and resource_version
    await maps.create(ConfigMap(metadata=ObjectMeta(name="seen")))
    async with Watch() as w:
        async for event in w.stream(maps.list, namespace="default",
                                    resource_version=resource_version, timeout_seconds=5):
            assert event["type"] == "ADDED"
            assert w.resource_version == event["object"].metadata.resource_version
            w.stop()
    assert w.resource_version is not None
    assert int(w.resource_version) > int(resource_version)
