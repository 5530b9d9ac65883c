"""How ``Api.watch()`` decodes a stream: the same events whatever the spelling of a line and
wherever the chunks break, unknown fields kept, and an ERROR in the middle of a chunk raised
only after the events before it.

Streams come from ``CannedWatch``, a loopback HTTP server that answers a watch with chunks of
bytes the test chose (test infrastructure, never a stand-in for kubewire code); one test reads
the real server to check that its events have the shape the one-pass decode expects.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from contextlib import aclosing
from typing import Any

import msgspec
import pytest

from kubewire.client.api import Api
from kubewire.client.client import Client, create_client
from kubewire.client.config import ClientConfig
from kubewire.client.errors import Gone
from kubewire.client.events import Bookmark, WatchEvent, object_span
from kubewire.client.transport import Request
from kubewire.models import ConfigMap, ObjectMeta, Pod, encode, to_dict
from tests.integration.harness import ServerThread

EVENT_WAIT_S = 30.0  # bound on each wait: a broken watch fails instead of hanging


def pod(name: str, rv: int, **unknown: Any) -> dict[str, Any]:
    """A Pod as a newer server might send it: fields the models do not know, at several
    depths."""
    return {"apiVersion": "v1", "kind": "Pod", "futureTop": {"n": rv},
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv),
                         "futureMeta": "m"},
            "spec": {"futureSpec": True,
                     "containers": [{"name": "c", "image": "i", "futureContainer": rv}]},
            **unknown}


EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("ADDED", pod("a", 2)), ("ADDED", pod("b", 3)), ("MODIFIED", pod("a", 4)),
    ("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "5"}}),
    ("DELETED", pod("b", 6)), ("MODIFIED", pod("a", 7, status={"phase": "Running"}))]


def canonical(event_type: str, obj: dict[str, Any]) -> bytes:
    """As kube-apiserver and kubewire write a line."""
    return msgspec.json.encode({"type": event_type, "object": obj}) + b"\n"


def other_spellings(event_type: str, obj: dict[str, Any], i: int) -> bytes:
    """The same event as other encoders may write it (all valid JSON, same meaning)."""
    body = msgspec.json.encode(obj)
    return [b'{"type": "%b", "object": %b}\n' % (event_type.encode(), body),
            b'{"object":%b,"type":"%b"}\n' % (body, event_type.encode()),
            b'{"type":"%b","object":%b}\r\n' % (event_type.encode(), body),
            b'\n{"type":"%b","object":%b }\n' % (event_type.encode(), body)][i % 4]


def cut(body: bytes, rng: random.Random) -> list[bytes]:
    """``body`` in HTTP chunks broken at random places (inside lines too)."""
    cuts = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randint(1, 20))))
    return [body[lo:hi] for lo, hi in zip([0, *cuts], [*cuts, len(body)], strict=True)]


class CannedWatch:
    """Answers every request with a 200 chunked stream of the given chunks, then holds it
    open (``end=False``) or ends it."""

    def __init__(self, chunks: list[bytes], end: bool = False) -> None:
        self.chunks = chunks
        self.end = end
        self.url = ""
        self.requests = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> CannedWatch:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            for chunk in self.chunks:
                writer.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                await writer.drain()
                await asyncio.sleep(0)  # let some chunks arrive on their own
            if self.end:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            else:
                await reader.read()  # until the client closes
        writer.close()


async def read_events(url: str, count: int) -> list[WatchEvent[Pod]]:
    async with Client(ClientConfig(server=url)) as client:
        stream = Api(Pod, client=client, namespace="ns").watch(resource_version="1",
                                                               allow_bookmarks=True)
        out: list[WatchEvent[Pod]] = []
        async with aclosing(stream):
            while len(out) < count:
                out.append(await asyncio.wait_for(anext(stream), EVENT_WAIT_S))
        return out


def as_wire(event: WatchEvent[Pod]) -> tuple[str, Any]:
    obj = event.object
    return (event.type.value,
            msgspec.to_builtins(obj) if isinstance(obj, Bookmark) else to_dict(obj))


@pytest.mark.parametrize("seed", range(4))
async def test_every_spelling_and_chunking_gives_the_same_events(seed: int) -> None:
    rng = random.Random(seed)
    bodies = [b"".join(canonical(t, o) for t, o in EVENTS),
              b"".join(other_spellings(t, o, i + seed) for i, (t, o) in enumerate(EVENTS))]
    expected = [(t, o if t != "BOOKMARK" else {"metadata": o["metadata"]}) for t, o in EVENTS]
    for body in bodies:
        async with CannedWatch(cut(body, rng)) as server:
            events = await read_events(server.url, len(EVENTS))
        assert [as_wire(e) for e in events] == expected


async def test_unknown_fields_survive_a_change_written_back() -> None:
    async with CannedWatch([canonical(*EVENTS[0])]) as server:
        [event] = await read_events(server.url, 1)
    obj = event.object
    assert isinstance(obj, Pod) and obj.metadata is not None
    changed = msgspec.structs.replace(
        obj, metadata=msgspec.structs.replace(obj.metadata, labels={"x": "y"}))
    out = msgspec.json.decode(encode(changed))
    assert out["futureTop"] == {"n": 2}
    assert out["metadata"] == {"name": "a", "namespace": "ns", "resourceVersion": "2",
                               "futureMeta": "m", "labels": {"x": "y"}}
    assert out["spec"]["futureSpec"] is True
    assert out["spec"]["containers"][0]["futureContainer"] == 2


async def test_a_line_with_a_repeated_key_reads_as_the_envelope_parse_reads_it() -> None:
    line = (b'{"type":"ADDED","object":%b,"object":%b}\n'
            % (msgspec.json.encode(pod("first", 2)), msgspec.json.encode(pod("second", 3))))
    async with CannedWatch([line]) as server:
        [event] = await read_events(server.url, 1)
    assert as_wire(event) == ("ADDED", pod("second", 3))


async def test_an_error_inside_a_chunk_comes_after_the_events_before_it() -> None:
    gone = (b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",'
            b'"message":"too old resource version: 1 (5)","reason":"Expired","code":410}}\n')
    chunk = (canonical(*EVENTS[0]) + canonical(*EVENTS[1]) + gone + canonical(*EVENTS[2]))
    async with CannedWatch([chunk]) as server, Client(ClientConfig(server=server.url)) as client:
        stream = Api(Pod, client=client, namespace="ns").watch(resource_version="1")
        names: list[str] = []
        async with aclosing(stream):
            with pytest.raises(Gone):
                async for event in stream:
                    assert isinstance(event.object, Pod) and event.object.metadata is not None
                    names.append(event.object.metadata.name or "")
        assert names == ["a", "b"]
        assert server.requests == 1  # 410 is raised, not resumed


async def test_a_malformed_object_fails_the_watch_after_the_events_before_it() -> None:
    chunk = canonical(*EVENTS[0]) + b'{"type":"ADDED","object":{"metadata":7}}\n'
    async with CannedWatch([chunk]) as server, Client(ClientConfig(server=server.url)) as client:
        stream = Api(Pod, client=client, namespace="ns").watch(resource_version="1")
        seen = 0
        async with aclosing(stream):
            with pytest.raises(msgspec.ValidationError, match=r"\$\.metadata"):
                async for _ in stream:
                    seen += 1
        assert seen == 1


async def test_the_real_server_writes_object_events_in_the_one_pass_shape(
        server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        api = Api(ConfigMap, client=client, namespace="default")
        before = (await api.list(limit=1)).resource_version
        created = await api.create(ConfigMap(metadata=ObjectMeta(name="shape"),
                                             data={"k": "v"}))
        assert created.metadata is not None
        await api.replace(msgspec.structs.replace(created, data={"k": "w"}))
        await api.delete("shape")
        path = "/api/v1/namespaces/default/configmaps"
        params = {"watch": "true", "resourceVersion": before, "timeoutSeconds": "1"}
        body = await client.request(Request("GET", path, params))
    lines = [line for line in body.split(b"\n") if line]
    assert [line[:12] for line in lines] == [b'{"type":"ADD', b'{"type":"MOD', b'{"type":"DEL']
    for line in lines:
        assert object_span(line, 0, len(line)) is not None, line


async def test_dict_mode_reads_every_spelling_the_same() -> None:
    bodies = [b"".join(canonical(t, o) for t, o in EVENTS),
              b"".join(other_spellings(t, o, i) for i, (t, o) in enumerate(EVENTS))]
    seen = []
    for body in bodies:
        async with CannedWatch(cut(body, random.Random(9))) as server, \
                Client(ClientConfig(server=server.url)) as client:
            api = Api(dict, client=client, namespace="ns", api_version="v1", kind="Pod")
            stream = api.watch(resource_version="1", allow_bookmarks=True)
            async with aclosing(stream):
                seen.append([(e.type.value, e.object if isinstance(e.object, dict)
                              else msgspec.to_builtins(e.object))
                             for e in [await asyncio.wait_for(anext(stream), EVENT_WAIT_S)
                                       for _ in EVENTS]])
    assert seen[0] == seen[1]
    assert [obj for t, obj in seen[0] if t != "BOOKMARK"] == [o for t, o in EVENTS
                                                            if t != "BOOKMARK"]
