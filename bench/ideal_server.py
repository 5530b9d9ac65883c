"""The ideal-server reference: kubewire's HTTP stack, no storage, each write answered after its
flush to the watchers.

What a perfect implementation of kubewire's fan-out contract could do, to tell the cost of the
contract from the cost of kubewire's code. It runs ``kubewire.server.wire.http.HTTPServer``
(kubewire's own HTTP/1.1 stack, limits and back-pressure) on the loop ``kubewire serve`` uses:

- ``GET <any path>?watch...`` answers a chunked 200 as kubewire's watch does and subscribes the
  stream;
- any other write (``PATCH``, ``POST``, ``PUT``) stores nothing: it queues the event line given
  with ``--event-file`` (a line kubewire itself sent, so the watchers get the same bytes) and
  waits for the next flush. One flush per loop turn (``call_soon``, as kubewire's watch cache
  schedules its own) writes every line queued since the last one to each caught-up watcher as
  one chunk, then answers the writes with the event's object, as kubewire answers after its
  flush;
- anything else answers 200 ``ok`` (so ``/readyz`` is ready at once).

A watcher over the stream's high-water mark is skipped and catches up on resume in writes of at
most ``CATCH_UP_EVENTS`` lines, as in ``bench.raw_server``: kubewire's policy without its work.

    python -m bench.ideal_server --port 0 --event-file LINE.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path

import msgspec

from bench.raw_server import CATCH_UP_EVENTS
from bench.worker import new_event_loop, ready_until_signalled
from kubewire.server.wire.http import HTTPServer
from kubewire.server.wire.http_messages import ChunkedStream, Handler, Request, Response

WATCH_HEADERS = [("Content-Type", "application/json")]  # as kubewire's watch answers
OK = Response(200, b"ok", "text/plain; charset=utf-8")
TRIM_LINES = 4096


class Subscriber:
    """One watch: its stream and its cursor into the feed."""

    __slots__ = ("cursor", "stream")

    def __init__(self, stream: ChunkedStream, cursor: int) -> None:
        self.stream = stream
        self.cursor = cursor


class Feed:
    """Lines queued by writes, the flush that sends them, and the writes waiting for it."""

    def __init__(self, line: bytes) -> None:
        self.line = line
        self.answer = Response(200, object_of(line), tail=b"\n")
        self.base = 0  # sequence number of lines[0]
        self.lines: list[bytes] = []
        self.pending = 0  # lines queued since the last flush
        self.waiting: list[asyncio.Future[None]] = []
        self.subscribers: set[Subscriber] = set()
        self.flush_handle: asyncio.Handle | None = None

    @property
    def end(self) -> int:
        return self.base + len(self.lines)

    def subscribe(self, stream: ChunkedStream) -> None:
        sub = Subscriber(stream, self.end - self.pending)
        self.subscribers.add(sub)
        stream.on_resume = lambda: self.catch_up(sub)
        stream.on_close = lambda: self.subscribers.discard(sub)

    async def write(self) -> Response:
        """Queue one event; answer once the flush that carries it has written it."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self.lines.append(self.line)
        self.pending += 1
        self.waiting.append(done)
        if self.flush_handle is None:
            self.flush_handle = loop.call_soon(self.flush)
        await done
        return self.answer

    def flush(self) -> None:
        self.flush_handle = None
        start = self.end - self.pending
        framed = ChunkedStream.frame(self.lines[start - self.base:])
        self.pending = 0
        for sub in list(self.subscribers):
            if sub.stream.is_paused:
                continue
            if sub.cursor == start:
                sub.cursor = self.end
                sub.stream.write_framed(framed)
            else:
                self.catch_up(sub)
        waiting, self.waiting = self.waiting, []
        for done in waiting:
            done.set_result(None)
        self._trim()

    def catch_up(self, sub: Subscriber) -> None:
        while sub.cursor < self.end - self.pending and not sub.stream.is_paused:
            stop = min(self.end - self.pending, sub.cursor + CATCH_UP_EVENTS)
            chunk = self.lines[sub.cursor - self.base:stop - self.base]
            sub.cursor = stop
            sub.stream.write_framed(ChunkedStream.frame(chunk))

    def _trim(self) -> None:
        oldest = min((s.cursor for s in self.subscribers), default=self.end - self.pending)
        if oldest > self.base + TRIM_LINES:
            del self.lines[:oldest - self.base]
            self.base = oldest


def object_of(line: bytes) -> bytes:
    """The object of a watch event line: what kubewire answers the write with."""
    return msgspec.json.encode(msgspec.json.decode(line)["object"])


def handler(feed: Feed) -> Handler:
    async def handle(request: Request) -> Response | None:
        if request.method == "GET":
            if "watch" in request.query:
                feed.subscribe(request.start_stream(200, WATCH_HEADERS))
                return None
            return OK
        if request.method in ("PATCH", "POST", "PUT"):
            return await feed.write()
        return OK

    return handle


async def serve(port: int, line: bytes) -> None:
    http = HTTPServer(handler(Feed(line)))
    _, bound = await http.listen("127.0.0.1", port)
    await ready_until_signalled(bound)
    await http.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--event-file", type=Path, required=True,
                        help="one watch event line (JSON) every write publishes")
    args = parser.parse_args()
    line = args.event_file.read_bytes().strip() + b"\n"
    loop = new_event_loop()
    with contextlib.closing(loop):
        loop.run_until_complete(serve(args.port, line))


if __name__ == "__main__":
    main()
