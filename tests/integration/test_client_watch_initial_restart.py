"""A watch broken during its initial events starts over; what vanished meanwhile is DELETED.

The first connection is answered with the initial events the server would have sent (two
ConfigMaps) but is cut before the initial-events-end bookmark; one of the two is then
deleted. The watch starts over and the new snapshot lacks it: the caller, which was told it
was ADDED, must be told it is gone, and an informer must not keep it in its cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing

from kubewire.client.api import Api
from kubewire.client.client import Client, create_client
from kubewire.client.config import ClientConfig
from kubewire.client.events import Bookmark, WatchEvent
from kubewire.client.informers.informer import Informer
from kubewire.client.transport import Request
from kubewire.client.watch import WatchSettings
from kubewire.models import ConfigMap, ObjectMeta
from tests.integration.harness import ServerThread
from tests.integration.test_client_watch_faults import FAST, FaultProxy

WAIT_S = 30.0


async def cut_initial_events(client: Client, proxy: FaultProxy) -> None:
    """Make ``kept`` and ``vanished``; answer the next connection with their initial events
    and no bookmark; then delete ``vanished``."""
    maps = Api(ConfigMap, client=client)
    lines = b""
    for name in ("kept", "vanished"):
        await maps.create(ConfigMap(metadata=ObjectMeta(name=name)))
        body = await client.request(Request("GET", f"/api/v1/namespaces/default/configmaps/{name}"))
        # a GET body ends with json.Encoder's newline; an event line holds the object without it
        lines += b'{"type":"ADDED","object":' + body.rstrip(b"\n") + b"}\n"
    proxy.answer_next_with(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           b"Connection: close\r\n\r\n" + lines)
    await maps.delete("vanished")


async def test_watch_reports_what_vanished_while_the_initial_events_restarted(
        server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as direct, \
            FaultProxy(server.port) as proxy, \
            Client(ClientConfig(server=proxy.url)) as proxied:
        await cut_initial_events(direct, proxy)
        seen: list[tuple[str, str]] = []
        watch = Api(ConfigMap, client=proxied).watch(
            send_initial_events=True, allow_bookmarks=True, settings=WatchSettings(**FAST))

        async def until_initial_events_end(stream: AsyncIterator[WatchEvent[ConfigMap]],
                                           ) -> None:
            async for event in stream:
                if isinstance(event.object, Bookmark):
                    assert event.object.is_initial_events_end
                    return
                assert event.object.metadata is not None
                seen.append((event.type.value, event.object.metadata.name or ""))

        async with aclosing(watch) as stream:
            await asyncio.wait_for(until_initial_events_end(stream), WAIT_S)
        assert proxy.canned_answers == 1
        assert seen == [("ADDED", "kept"), ("ADDED", "vanished"), ("DELETED", "vanished")]


async def test_informer_does_not_cache_what_vanished_while_its_streaming_list_restarted(
        server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as direct, \
            FaultProxy(server.port) as proxy, \
            Client(ClientConfig(server=proxy.url)) as proxied:
        await cut_initial_events(direct, proxy)
        informer = Informer(Api(ConfigMap, client=proxied), settings=WatchSettings(**FAST))
        added: list[str] = []
        informer.add_handlers(on_add=lambda obj: added.append(obj.metadata.name))
        async with informer:
            await asyncio.wait_for(informer.wait_for_sync(), WAIT_S)
            assert proxy.canned_answers == 1
            assert informer.cache.keys() == ["default/kept"]
            assert added == ["kept"]
            assert informer.use_streaming_list
