"""Initial-sync clients: the kubewire ``Informer`` (timed), and raw-protocol syncs in bulk.

``time_informer`` syncs one real ``Informer`` (decoding every Pod) with a streaming list or with
a paginated list and a watch. ``sync_many`` makes the same requests an informer makes, from
``count`` concurrent connections that read and discard the bytes, so 100 syncs load the server
without 100 clients decoding 10 000 Pods each on a 2-core machine.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec

from bench.wire import get_request, pods_path

PAGE_SIZE = 500  # client-go's pager and kubewire.client's list
INITIAL_END = b'"k8s.io/initial-events-end":"true"'


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""  # wire name
    # kube's name; the client follows it until it is empty
    continue_: str = msgspec.field(default="", name="continue")


class _Page(msgspec.Struct):
    metadata: _ListMeta


_page = msgspec.json.Decoder(_Page)


async def _read_response(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    return await reader.readexactly(length)


async def stream_sync(port: int, namespace: str) -> None:
    """A streaming list: read until the ``initial-events-end`` bookmark."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(get_request(pods_path(namespace) + "?watch=1&sendInitialEvents=true"
                                 "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"))
        tail = b""
        while True:
            data = await reader.read(1 << 18)
            if not data:
                raise ConnectionError("stream ended before the initial-events-end bookmark")
            if INITIAL_END in tail + data:
                return
            tail = data[-len(INITIAL_END):]
    finally:
        writer.close()
        await writer.wait_closed()


async def list_watch_sync(port: int, namespace: str) -> None:
    """Pages of ``PAGE_SIZE``, then a watch from the list's revision (until its head)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        path = pods_path(namespace)
        query = f"?limit={PAGE_SIZE}"
        revision = ""
        while True:
            writer.write(get_request(path + query))
            page = _page.decode(await _read_response(reader))
            revision = revision or page.metadata.resourceVersion
            if not page.metadata.continue_:
                break
            query = f"?limit={PAGE_SIZE}&continue={page.metadata.continue_}"
        writer.write(get_request(f"{path}?watch=1&allowWatchBookmarks=true"
                                 f"&resourceVersion={revision}"))
        await reader.readuntil(b"\r\n\r\n")
    finally:
        writer.close()
        await writer.wait_closed()


class SyncClients:
    async def sync_many(self, port: int, namespace: str, count: int, streaming: bool,
                        timeout_s: float) -> float:
        """Seconds until ``count`` concurrent syncs all finished."""
        started = time.monotonic()
        one = stream_sync if streaming else list_watch_sync
        async with asyncio.timeout(timeout_s):
            await asyncio.gather(*(one(port, namespace) for _ in range(count)))
        return time.monotonic() - started

    async def time_informer(self, kubeconfig: str, namespace: str, streaming: bool,
                            timeout_s: float) -> dict[str, Any]:
        """Seconds for one kubewire ``Informer`` to sync, and how many Pods it holds."""
        from kubewire.client import Api, Informer, create_client
        from kubewire.models.core_v1 import Pod

        async with await create_client(kubeconfig) as client:
            informer = Informer(Api(Pod, client=client, namespace=namespace))
            informer.use_streaming_list = streaming
            started = time.perf_counter()
            async with informer, asyncio.timeout(timeout_s):
                await informer.wait_for_sync()
                seconds = time.perf_counter() - started
                held = len(informer.cache)
            return {"seconds": seconds, "objects": held}

    async def aclose(self) -> None:
        return None
