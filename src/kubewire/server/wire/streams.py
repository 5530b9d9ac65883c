"""What every event stream over one HTTP connection shares: flow control and one-time close.

``write`` never blocks; ``is_paused`` says the transport buffer is over the high-water mark and
the writer should stop until ``on_resume`` fires. ``on_close`` fires once when the stream ends
for any reason (``close()``, peer gone, server shutdown). Subclasses frame the bytes: HTTP
chunks (``http.ChunkedStream``) or WebSocket messages (``websocket.WebSocketStream``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)


class Connection(Protocol):
    """What a stream needs from its HTTP connection."""

    write_paused: bool

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def set_write_high_water(self, high: int | None) -> None: ...


class EventStream:
    __slots__ = ("_conn", "closed", "on_close", "on_resume")
    framing = ""  # watchers with equal filters and framing share encoded payloads

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.closed = False
        self.on_resume: Callable[[], None] | None = None
        self.on_close: Callable[[], None] | None = None

    @property
    def is_paused(self) -> bool:
        return self._conn.write_paused

    def write_framed(self, framed: bytes) -> None:
        """Write bytes already framed by ``frame`` (shared by many streams)."""
        if not self.closed:
            self._conn.write(framed)

    def set_write_high_water(self, high: int | None) -> None:
        """Be paused once about ``high`` bytes wait unsent, and resumed when a quarter of that
        is left (1: whenever any wait, until none do); None: the connection's usual mark.
        A watcher streaming its initial snapshot uses 1, so it holds no more than one write.
        (Not 0: TLS transports pause at ``size >= high``, so 0 would pause an empty buffer.)"""
        self._conn.set_write_high_water(high)

    def abort(self) -> None:
        """Drop the connection without ending the stream properly (the client sees a break)."""
        if not self.closed:
            self._finish()
            self._conn.close()

    def _finish(self) -> None:
        self.closed = True
        callback, self.on_close, self.on_resume = self.on_close, None, None
        if callback is not None:
            try:
                callback()
            except Exception:
                log.exception("stream close callback failed")
