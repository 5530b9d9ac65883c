"""Load generators: HTTP/1.1 keep-alive connections sending requests from one client process.

A ``LoadGenerator`` lives in a ``Worker`` process. ``closed_loop`` keeps ``concurrency``
requests in flight (throughput), ``get_loop`` the same with a GET; ``patch_loop`` does the same
with merge PATCHes that each change an object; ``paced`` sends request ``i`` at ``start + i /
rate`` (latency at a given rate) and records when each was sent and answered. All are bounded
in request count and in time.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from bench.wire import USER_AGENT, get_request, merge_patch_request, post_request


class ClientConnection(asyncio.Protocol):
    """One keep-alive connection with at most one request in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.need = -1
        self.status = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("connection closed"))

    def send(self, data: bytes) -> asyncio.Future[tuple[int, bytes]]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.need = -1
        self.transport.write(data)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.need < 0:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end]
            self.status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            self.buffer = self.buffer[end + 4:]
            self.need = length
        if len(self.buffer) >= self.need and self.waiter is not None:
            body, self.buffer = self.buffer[:self.need], self.buffer[self.need:]
            self.need = -1
            if not self.waiter.done():
                self.waiter.set_result((self.status, body))


class LoadGenerator:
    def __init__(self) -> None:
        self.connections: list[ClientConnection] = []
        self.seq = 0  # PATCH values sent so far: each PATCH sets a new one

    async def connect(self, port: int, count: int) -> int:
        loop = asyncio.get_running_loop()
        await self.close()
        for _ in range(count):
            _, conn = await loop.create_connection(ClientConnection, "127.0.0.1", port)
            self.connections.append(conn)
        return len(self.connections)

    async def closed_loop(self, path: str, body: bytes, max_requests: int,
                          duration_s: float) -> dict[str, Any]:
        """Each connection sends the same POST back to back until either bound is reached."""
        request = post_request(path, body)
        return await self._closed(lambda _conn, _seq: request, max_requests, duration_s)

    async def get_loop(self, path: str, max_requests: int, duration_s: float) -> dict[str, Any]:
        """Each connection sends the same GET back to back until either bound is reached."""
        request = get_request(path)
        return await self._closed(lambda _conn, _seq: request, max_requests, duration_s)

    async def patch_loop(self, paths: list[str], max_requests: int, duration_s: float,
                         user_agent: str = USER_AGENT) -> dict[str, Any]:
        """Each connection merge-PATCHes its own object (connection i: ``paths[i % len]``) back
        to back until either bound is reached, each PATCH setting a value never sent before;
        ``user_agent`` names the PATCHes' field manager."""
        return await self._closed(
            lambda conn, seq: merge_patch_request(paths[conn % len(paths)], seq, user_agent),
            max_requests, duration_s)

    async def _closed(self, make: Callable[[int, int], bytes], max_requests: int,
                      duration_s: float) -> dict[str, Any]:
        """Keep one request per connection in flight; ``make(connection index, sequence)``."""
        statuses: Counter[int] = Counter()
        sent = 0
        started = time.monotonic()
        deadline = started + duration_s

        async def run(index: int, conn: ClientConnection) -> None:
            nonlocal sent
            while sent < max_requests and time.monotonic() < deadline:
                sent += 1
                self.seq += 1
                status, _ = await conn.send(make(index, self.seq))
                statuses[status] += 1

        await asyncio.wait_for(asyncio.gather(*(run(i, c) for i, c in
                                                enumerate(self.connections))), duration_s + 30)
        elapsed = time.monotonic() - started
        return {"completed": sum(statuses.values()), "elapsed": elapsed,
                "statuses": dict(statuses)}

    async def paced(self, requests: list[tuple[int, str, bytes]], rate: float,
                    duration_s: float) -> dict[str, Any]:
        """Send ``requests`` (id, path, body) at ``rate`` per second over the connections.

        Returns per request: id, when it was sent, when answered, status. A request whose
        time has come while every connection is busy goes out as soon as one frees up.
        """
        free: asyncio.Queue[ClientConnection] = asyncio.Queue()
        for conn in self.connections:
            free.put_nowait(conn)
        records: list[tuple[int, float, float, int]] = []
        tasks: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        deadline = started + duration_s

        async def one(conn: ClientConnection, ident: int, data: bytes) -> None:
            sent_at = time.monotonic()
            status, _ = await conn.send(data)
            records.append((ident, sent_at, time.monotonic(), status))
            free.put_nowait(conn)

        for i, (ident, path, body) in enumerate(requests):
            due = started + i / rate
            now = time.monotonic()
            if now >= deadline:
                break
            if due > now:
                await asyncio.sleep(due - now)
            try:
                conn = await asyncio.wait_for(free.get(), max(0.01, deadline - time.monotonic()))
            except TimeoutError:
                break
            task = loop.create_task(one(conn, ident, post_request(path, body)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.wait_for(asyncio.gather(*tasks), 30)
        return {"records": records, "elapsed": time.monotonic() - started}

    async def close(self) -> int:
        n = len(self.connections)
        for conn in self.connections:
            if conn.transport is not None:
                conn.transport.close()
        self.connections = []
        await asyncio.sleep(0)
        return n

    async def aclose(self) -> None:
        await self.close()
