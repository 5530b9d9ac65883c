"""Watch faults against the real server: restart mid-stream, compaction, a stalled connection,
429 with Retry-After, and closing.

Stalls and canned 429s come from ``FaultProxy``, a loopback TCP proxy in front of the real
server: test infrastructure that only stops forwarding bytes or answers one connection itself,
never a stand-in for kubewire code.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

import pytest

from kubewire.client.api import Api
from kubewire.client.backoff import Backoff
from kubewire.client.client import Client, create_client
from kubewire.client.config import ClientConfig
from kubewire.client.errors import Gone
from kubewire.client.events import Bookmark, WatchEvent
from kubewire.client.watch import WatchSettings
from kubewire.models import ConfigMap, ObjectMeta
from kubewire.storage.base import Retention
from tests.integration.harness import ServerThread

EVENT_WAIT_S = 30.0  # bound on each wait: a broken watch fails instead of hanging
FAST = dict(backoff=Backoff(initial_s=0.05, max_s=0.5, rng=random.Random(3)))


async def next_event(stream: AsyncIterator[WatchEvent[ConfigMap]]) -> WatchEvent[ConfigMap]:
    return await asyncio.wait_for(anext(stream), EVENT_WAIT_S)


def name_of(event: WatchEvent[ConfigMap]) -> tuple[str, str]:
    assert not isinstance(event.object, Bookmark) and event.object.metadata is not None
    return event.type.value, event.object.metadata.name or ""


async def wait_until(predicate: Callable[[], bool], what: str) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)
    try:
        await asyncio.wait_for(poll(), EVENT_WAIT_S)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


class FaultProxy:
    """Forwards loopback TCP connections to ``upstream``; can freeze the open ones (they stay
    open but pass no bytes) or answer the next connection with canned bytes."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.open_connections = 0
        self.connections_made = 0
        self.canned_answers = 0
        self.is_down = False
        self._frozen: list[asyncio.Event] = []
        self._canned: list[bytes] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.url = ""

    async def __aenter__(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def go_down(self) -> None:
        """Reset every open connection and refuse new ones until ``come_up()``."""
        self.is_down = True
        for task in list(self._tasks):
            task.cancel()

    def come_up(self) -> None:
        self.is_down = False

    def freeze_open_connections(self) -> None:
        for gate in self._frozen:
            gate.clear()

    def answer_next_with(self, response: bytes) -> None:
        self._canned.append(response)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections_made += 1
        if self.is_down:
            writer.close()
            return
        if self._canned:
            await reader.read(65536)  # the request
            writer.write(self._canned.pop(0))
            self.canned_answers += 1
            await writer.drain()
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        gate = asyncio.Event()
        gate.set()
        self._frozen.append(gate)
        self.open_connections += 1
        pumps = [asyncio.ensure_future(self._pump(reader, up_writer, gate)),
                 asyncio.ensure_future(self._pump(up_reader, writer, gate))]
        for task in pumps:
            self._tasks.add(task)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
                self._tasks.discard(task)
            self.open_connections -= 1
            self._frozen.remove(gate)
            for w in (writer, up_writer):
                w.close()

    @staticmethod
    async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                    gate: asyncio.Event) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await src.read(65536):
                await gate.wait()  # frozen: hold the bytes, keep the socket open
                dst.write(data)
                await dst.drain()


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


async def test_restart_mid_stream_resumes_with_nothing_missing_or_repeated(
        server: ServerThread, client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    since = (await maps.list()).resource_version
    stream = maps.watch(resource_version=since, settings=WatchSettings(**FAST))
    async with aclosing(stream):
        for name in ("a", "b"):
            await maps.create(ConfigMap(metadata=ObjectMeta(name=name)))
        seen = [name_of(await next_event(stream)) for _ in range(2)]
        await asyncio.to_thread(server.restart)  # same port, same data
        # Written while the watch has no connection: it must come after the resume.
        for name in ("c", "d"):
            await maps.create(ConfigMap(metadata=ObjectMeta(name=name)))
        await maps.delete("a")
        seen += [name_of(await next_event(stream)) for _ in range(3)]
        await maps.create(ConfigMap(metadata=ObjectMeta(name="e")))
        seen.append(name_of(await next_event(stream)))
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c"), ("ADDED", "d"),
                    ("DELETED", "a"), ("ADDED", "e")]


async def test_revision_below_compaction_raises_gone(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(ring_capacity=8, retention=Retention(max_changes=10, max_age_s=None))
    async with await create_client(server.kubeconfig) as client:
        maps = Api(ConfigMap, client=client)
        early = (await maps.list()).resource_version
        for round_ in range(30):  # compaction runs after enough writes
            for i in range(50):
                name = f"churn-{round_}-{i}"
                await maps.create(ConfigMap(metadata=ObjectMeta(name=name)))
                await maps.delete(name)
            try:
                async with aclosing(maps.watch(resource_version=early)) as stream:
                    await next_event(stream)
            except Gone as gone:
                assert gone.code == 410
                assert gone.reason == "Expired"
                assert "too old resource version" in gone.message
                return
        pytest.fail("the change log was never compacted past the watch revision")


async def test_stalled_connection_is_dropped_by_the_watchdog(server: ServerThread) -> None:
    async with FaultProxy(server.port) as proxy, \
            Client(ClientConfig(server=proxy.url)) as client:
        maps = Api(ConfigMap, client=client)
        since = (await maps.list()).resource_version
        settings = WatchSettings(idle_timeout_s=0.5, **FAST)
        async with aclosing(maps.watch(resource_version=since, settings=settings)) as stream:
            await maps.create(ConfigMap(metadata=ObjectMeta(name="before")))
            assert name_of(await next_event(stream)) == ("ADDED", "before")
            made = proxy.connections_made
            proxy.freeze_open_connections()  # the socket stays open, no byte gets through
            await maps.create(ConfigMap(metadata=ObjectMeta(name="during")))
            assert name_of(await next_event(stream)) == ("ADDED", "during")
            assert proxy.connections_made > made  # it came over a new connection


async def test_429_waits_retry_after_and_then_watches(server: ServerThread,
                                                      client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    since = (await maps.list()).resource_version
    body = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            b'"message":"storage is (re)initializing","reason":"TooManyRequests",'
            b'"details":{"retryAfterSeconds":1},"code":429}')
    async with FaultProxy(server.port) as proxy, \
            Client(ClientConfig(server=proxy.url)) as watch_client:
        proxy.answer_next_with(
            b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
            b"Retry-After: 1\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        watched = Api(ConfigMap, client=watch_client)
        async with aclosing(watched.watch(resource_version=since,
                                          settings=WatchSettings(**FAST))) as stream:
            pending = asyncio.ensure_future(next_event(stream))
            await wait_until(lambda: proxy.canned_answers == 1, "the watch to get the 429")
            await maps.create(ConfigMap(metadata=ObjectMeta(name="late")))
            assert name_of(await pending) == ("ADDED", "late")
        assert proxy.connections_made == 2  # the 429, then the watch after Retry-After


async def test_aclose_and_cancellation_close_the_connection(server: ServerThread) -> None:
    async with FaultProxy(server.port) as proxy, \
            Client(ClientConfig(server=proxy.url)) as client:
        maps = Api(ConfigMap, client=client)
        since = (await maps.list()).resource_version
        stream = maps.watch(resource_version=since)
        await maps.create(ConfigMap(metadata=ObjectMeta(name="x")))
        await next_event(stream)
        await wait_until(lambda: proxy.open_connections == 1, "the watch connection")
        await stream.aclose()
        await wait_until(lambda: proxy.open_connections == 0, "aclose to close it")

        async def consume() -> None:
            async for _ in maps.watch(resource_version=since):
                pass

        task = asyncio.ensure_future(consume())
        await wait_until(lambda: proxy.open_connections == 1, "the second watch")
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await wait_until(lambda: proxy.open_connections == 0, "cancellation to close it")


async def test_http_410_raises_gone(server: ServerThread) -> None:
    body = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            b'"message":"too old resource version: 1 (9)","reason":"Expired","code":410}')
    async with FaultProxy(server.port) as proxy, \
            Client(ClientConfig(server=proxy.url)) as client:
        proxy.answer_next_with(
            b"HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        with pytest.raises(Gone) as gone:
            async with aclosing(Api(ConfigMap, client=client).watch(resource_version="1")) \
                    as stream:
                await next_event(stream)
        assert gone.value.message == "too old resource version: 1 (9)"
