"""A watch sink that converts a webhook CRD's objects before they reach the client.

Why a sink: the watch cache frames and writes each flush synchronously, for every watcher at
once, while a conversion is an HTTPS call. ``ConvertingSink`` takes each frame as the cache
writes it (its ``framing`` is unique, so it never shares bytes with watchers of other versions),
queues it, and a task of its own sends the objects of the oldest queued frame that are not in
the watched version to the webhook in one review, then writes the converted events to the
stream — in order, one frame at a time. Bookmarks and ERROR events pass unchanged.

Bounds: while more than ``MAX_BACKLOG_BYTES`` wait to be converted (or the stream itself is
over its high-water mark) the sink reports itself paused, so the watcher keeps a cursor in the
ring and catches up later, as for a slow client. A failed conversion ends the stream with an
ERROR event carrying kube's 500 Status (the webhook's text).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.conversion.objects import convert_or_fail
from kubewire.status import StatusError
from kubewire.storage.cached import event_line
from kubewire.storage.watcher import Sink, WrappingSink

MAX_BACKLOG_BYTES = 1024 * 1024

_encode = GoJSONEncoder().encode
_decode = msgspec.json.Decoder(dict[str, Any]).decode


class ConvertingSink(WrappingSink):
    """``Sink`` over ``inner`` whose events carry objects in ``resource``'s version."""

    __slots__ = ("_closing", "_ctx", "_queue", "_queued_bytes", "_resource", "_task",
                 "_watcher_resume")

    def __init__(self, inner: Sink, ctx: ServerContext, resource: Resource) -> None:
        super().__init__(inner, "convert")
        self._ctx = ctx
        self._resource = resource
        self._queue: deque[bytes] = deque()
        self._queued_bytes = 0
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._watcher_resume: Callable[[], None] | None = None
        inner.on_resume = self._resume_watcher

    @property
    def closed(self) -> bool:
        return self.inner.closed or self._closing

    @closed.setter
    def closed(self, value: bool) -> None:
        self.inner.closed = value

    @property
    def on_resume(self) -> Callable[[], None] | None:
        return self._watcher_resume

    @on_resume.setter
    def on_resume(self, callback: Callable[[], None] | None) -> None:
        self._watcher_resume = callback

    @property
    def is_paused(self) -> bool:
        return self.inner.is_paused or self._queued_bytes > MAX_BACKLOG_BYTES

    def frame(self, lines: list[bytes]) -> bytes:
        """The lines as they are (each ends with ``\\n``): framed by ``inner`` once converted."""
        return b"".join(lines)

    def write_framed(self, framed: bytes) -> None:
        if self.closed or not framed:
            return
        self._queue.append(framed)
        self._queued_bytes += len(framed)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def close(self) -> None:
        """End the stream once what is queued is sent (an ERROR event the watcher wrote last
        still reaches the client)."""
        if self._task is None:
            self.inner.close()
        else:
            self._closing = True

    def _resume_watcher(self) -> None:
        callback = self._watcher_resume
        if callback is not None and not self.is_paused:
            callback()

    async def _drain(self) -> None:
        try:
            while self._queue and not self.inner.closed:
                lines = await self._converted(self._queue[0].splitlines(keepends=True))
                done = self._queue.popleft()
                self._queued_bytes -= len(done)
                if lines is None:  # failed: the ERROR event was written, the stream ends
                    self._queue.clear()
                    self._queued_bytes = 0
                    self._closing = True
                    break
                if not self.inner.closed:
                    self.inner.write_framed(self.inner.frame(lines))
                self._resume_watcher()
        finally:
            self._task = None
            if self._closing:
                self.inner.close()

    async def _converted(self, lines: list[bytes]) -> list[bytes] | None:
        """The lines with their objects converted; None after writing the ERROR event of a
        failed conversion."""
        resource = self._resource
        events = [_decode(line) for line in lines]
        todo = [i for i, event in enumerate(events)
                if isinstance(obj := event.get("object"), dict)
                and obj.get("kind") == resource.kind
                and obj.get("apiVersion") != resource.api_version]
        if not todo:
            return lines
        try:
            converted = await convert_or_fail(self._ctx, resource,
                                              [events[i]["object"] for i in todo],
                                              resource.api_version)
        except StatusError as err:
            if not self.inner.closed:
                error = event_line(b"ERROR", _encode(err.to_status()))
                self.inner.write_framed(self.inner.frame([error]))
            return None
        out = list(lines)
        for index, obj in zip(todo, converted, strict=True):
            out[index] = event_line(str(events[index]["type"]).encode(), _encode(obj))
        return out
