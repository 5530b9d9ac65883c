"""A watch sink that sends Tables: it wraps the stream and rewrites each frame's lines.

Why a wrapper: the watch cache shares framed bytes between watchers whose filter and
``framing`` are equal, and a Table stream's bytes differ from the JSON stream's and depend on
its own history (column definitions on its first event only). Each ``TableSink`` therefore has
a ``framing`` of its own, so it never shares a payload and the JSON watchers' path is untouched.
Flow control, closing and callbacks are the wrapped stream's.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from kubewire.resources import Resource
from kubewire.server.tables.bodies import TableEventLines
from kubewire.server.tables.output import TableRequest
from kubewire.storage.watcher import Sink, WrappingSink


class TableSink(WrappingSink):
    """``Sink`` over ``inner`` whose data events carry one-row Tables."""

    __slots__ = ("_lines", "_now")

    def __init__(self, inner: Sink, resource: Resource, request: TableRequest,
                 now: Callable[[], datetime]) -> None:
        super().__init__(inner, "table")
        self._lines = TableEventLines(resource, request)
        self._now = now

    def frame(self, lines: list[bytes]) -> bytes:
        """The inner framing of the rewritten lines. The cache writes each frame of this sink
        right after building it (its ``framing`` is unique), so the headers-once state holds."""
        return self.inner.frame(self._lines.rewrite(lines, self._now()))
