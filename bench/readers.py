"""Watch readers: many watch connections held by one client process.

A ``ReaderSet`` lives in a ``Worker`` process. It opens watches, then either counts events
(fan-out), records when each named event arrived (latency) or just holds them (idle memory).
Counting looks for ``EVENT_MARKER`` (a newline then ``{"type":"``), which starts every event
line in both kubewire's and the reference's chunked streams; nothing is decoded. It also counts
the chunks (sends): the first event of a chunk follows the chunk-size line's CRLF, every other
event the previous line's bare newline (JSON never holds a raw CR), so ``CHUNK_MARKER`` occurs
once per chunk. Every server here writes each send to a watcher as one chunk.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import Any

from bench.wire import EVENT_MARKER, get_request

_MARK = len(EVENT_MARKER)
CHUNK_MARKER = b"\r" + EVENT_MARKER  # once per chunk of events
_CHUNK = len(CHUNK_MARKER)
_NAME = b'"name":"lat-'  # latency mode: Pods named lat-<i>
OPEN_BATCH = 100  # connections opened at once: stays under the server's listen backlog


class WatchReader(asyncio.Protocol):
    def __init__(self, owner: ReaderSet, request: bytes) -> None:
        self.owner = owner
        self.request = request
        self.transport: asyncio.Transport | None = None
        self.head = asyncio.get_running_loop().create_future()
        self.buffer = b""
        self.status = 0
        self.events = 0
        self.chunks = 0
        self.bytes = 0
        self.tail = b""
        self.done_at = 0.0
        self.closed = False
        self.arrivals: list[tuple[int, float]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.head.done():
            self.head.set_exception(ConnectionError("closed before the response head"))
        self.owner.reader_finished(self)

    def data_received(self, data: bytes) -> None:
        if self.status == 0:
            self.buffer += data
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            self.status = int(self.buffer[9:12])
            data = self.buffer[end + 2:]  # keep the CRLF: the first marker needs its newline
            self.buffer = b""
            self.head.set_result(self.status)
        self.bytes += len(data)
        self.owner.last_data_at = time.monotonic()
        if self.owner.record_names:
            self._record(data)
        else:
            # a marker split over two reads: the tail's end and the data's start hold it
            tail = self.tail
            self.events += (data.count(EVENT_MARKER)
                            + (tail[1 - _MARK:] + data[:_MARK - 1]).count(EVENT_MARKER))
            self.chunks += (data.count(CHUNK_MARKER)
                            + (tail + data[:_CHUNK - 1]).count(CHUNK_MARKER))
            self.tail = (tail + data)[1 - _CHUNK:] if len(data) < _CHUNK else data[1 - _CHUNK:]
        if not self.done_at and self.events >= self.owner.expected > 0:
            self.done_at = time.monotonic()
            self.owner.reader_finished(self)

    def _record(self, data: bytes) -> None:
        """Note the arrival time of every ``"name":"lat-<i>"`` (a name may span two reads)."""
        now = time.monotonic()
        if self.tail:
            data = self.tail + data
        start = 0
        while (found := data.find(_NAME, start)) >= 0:
            end = data.find(b'"', found + len(_NAME))
            if end < 0:
                start = found
                break
            self.arrivals.append((int(data[found + len(_NAME):end]), now))
            self.events += 1
            start = end
        self.tail = data[max(start, len(data) - len(_NAME) - 12):]


def _factory(reader: WatchReader) -> Callable[[], WatchReader]:
    return lambda: reader


class ReaderSet:
    """Watch connections to one server, opened and read in this process."""

    def __init__(self) -> None:
        self.readers: list[WatchReader] = []
        self.expected = 0
        self.record_names = False
        self.last_data_at = 0.0
        self._all_done: asyncio.Event | None = None
        self.context: ssl.SSLContext | None = None  # TLS connections when set (tls_readers.py)

    async def open(self, port: int, path: str, count: int, timeout_s: float) -> int:
        """Open ``count`` watches of ``path`` and wait for every response head."""
        loop = asyncio.get_running_loop()
        request = get_request(path)
        self.expected = 0
        self._all_done = asyncio.Event()
        async with asyncio.timeout(timeout_s):
            for start in range(0, count, OPEN_BATCH):
                batch = []
                for _ in range(min(OPEN_BATCH, count - start)):
                    reader = WatchReader(self, request)
                    await loop.create_connection(_factory(reader), "127.0.0.1", port,
                                                 ssl=self.context)
                    batch.append(reader)
                self.readers.extend(batch)
                statuses = await asyncio.gather(*(r.head for r in batch))
                bad = [s for s in statuses if s != 200]
                if bad:
                    raise RuntimeError(f"watch answered {bad[0]} ({len(bad)} of {len(batch)})")
        return len(self.readers)

    def reader_finished(self, reader: WatchReader) -> None:
        self._check_done()

    def _check_done(self) -> None:
        if self._all_done is not None and all(r.done_at or r.closed for r in self.readers):
            self._all_done.set()

    async def count(self, expected: int, timeout_s: float, record_names: bool = False,
                    quiet_s: float = 0.0) -> dict[str, Any]:
        """Read until every watch saw ``expected`` events, or closed, or ``timeout_s`` passed,
        or (with ``quiet_s``) no data came for ``quiet_s`` after the first event."""
        self._all_done = asyncio.Event()
        self.expected = expected
        self.record_names = record_names
        for reader in self.readers:
            reader.events, reader.chunks, reader.bytes, reader.done_at = 0, 0, 0, 0.0
            reader.arrivals = []
        self._check_done()
        started = time.monotonic()
        self.last_data_at = 0.0
        timed_out = await self._wait_done(started + timeout_s, quiet_s)
        done = [r.done_at for r in self.readers if r.done_at]
        return {"started": started, "done_at": max(done, default=0.0),
                "complete": len(done), "closed": sum(r.closed for r in self.readers),
                "events": sum(r.events for r in self.readers),
                "chunks": sum(r.chunks for r in self.readers),
                "bytes": sum(r.bytes for r in self.readers), "timed_out": timed_out,
                "arrivals": [r.arrivals for r in self.readers] if record_names else []}

    async def _wait_done(self, deadline: float, quiet_s: float) -> bool:
        """Wait for ``_all_done``; True if the deadline or the quiet time ended the wait."""
        assert self._all_done is not None
        step = min(0.25, quiet_s) if quiet_s else deadline - time.monotonic()
        while (now := time.monotonic()) < deadline:
            try:
                await asyncio.wait_for(self._all_done.wait(), max(0.0, min(step, deadline - now)))
                return False
            except TimeoutError:
                if quiet_s and self.last_data_at and now - self.last_data_at >= quiet_s:
                    return True
        return True

    async def close(self) -> int:
        """Close every watch; returns how many were open."""
        n = len(self.readers)
        for reader in self.readers:
            if reader.transport is not None:
                reader.transport.close()
        self.readers = []
        await asyncio.sleep(0)
        return n

    async def aclose(self) -> None:
        await self.close()
