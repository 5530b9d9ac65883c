"""The watch readers count events and chunks (sends) however the stream is cut into reads."""

from __future__ import annotations

import asyncio
import itertools

from bench.readers import ReaderSet, WatchReader
from bench.wire import event_line

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(lines: list[bytes]) -> bytes:
    data = b"".join(lines)
    return b"%x\r\n%b\r\n" % (len(data), data)


def counted(stream: bytes, cuts: list[int]) -> tuple[int, int]:
    async def feed() -> tuple[int, int]:
        reader = WatchReader(ReaderSet(), b"")
        bounds = [0, *cuts, len(stream)]
        for start, end in itertools.pairwise(bounds):
            reader.data_received(stream[start:end])
        return reader.events, reader.chunks

    return asyncio.run(feed())


def test_events_and_chunks_are_counted_across_every_cut() -> None:
    line = event_line("p", size=120)
    stream = HEAD + chunk([line]) + chunk([line] * 3) + chunk([line] * 2)
    body_at = len(HEAD)
    assert counted(stream, []) == (6, 3)
    for cut in range(body_at + 1, len(stream)):
        assert counted(stream, [cut]) == (6, 3), cut
    for cut in range(body_at + 1, len(stream) - 3):
        assert counted(stream, [cut, cut + 1, cut + 3]) == (6, 3), cut
