"""Watch events and the pure decoding of a watch body (bytes in, events out).

Wire shapes: watch-protocol.md §3.2 (one JSON object per line) and §5 (event types; a BOOKMARK
object is an empty shell of the kind of which only ``metadata`` counts; an ERROR object is a
``Status``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from kubewire.client.errors import StatusError

T = TypeVar("T")
JSON = Any
MAX_LINE_BYTES = 64 * 1024 * 1024  # far above kube's 3 MiB request limit; bounds a broken peer
INITIAL_EVENTS_END = "k8s.io/initial-events-end"  # KEP-3157 annotation (watch-protocol §6.2)


class EventType(enum.Enum):
    """The ``type`` of a watch event (watch-protocol.md §5)."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"


class BookmarkMeta(msgspec.Struct, kw_only=True, omit_defaults=True):
    resource_version: str = msgspec.field(default="", name="resourceVersion")
    annotations: dict[str, str] | None = None


class Bookmark(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A BOOKMARK's object: a resume point (``metadata.resource_version``), no data."""

    metadata: BookmarkMeta = msgspec.field(default_factory=BookmarkMeta)

    @property
    def is_initial_events_end(self) -> bool:
        """The bookmark that closes the initial events of a ``send_initial_events`` watch."""
        return (self.metadata.annotations or {}).get(INITIAL_EVENTS_END) == "true"


@dataclass(frozen=True, slots=True)
class WatchEvent(Generic[T]):
    """One event: ``object`` is the kind's object, or a ``Bookmark`` for BOOKMARK."""

    type: EventType
    object: T | Bookmark


class RawEvent(msgspec.Struct):
    """A line before its object is decoded."""

    type: str
    object: msgspec.Raw


_raw_event = msgspec.json.Decoder(RawEvent)
_bookmark = msgspec.json.Decoder(Bookmark)


class LineSplitter:
    """Chunks in, complete lines out; a partial line waits for the next chunk."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buffer = bytearray()
        self._max = max_line_bytes

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        if b"\n" not in chunk:
            if len(self._buffer) > self._max:
                raise ValueError(f"watch line longer than {self._max} bytes")
            return []
        *lines, rest = self._buffer.split(b"\n")
        self._buffer = bytearray(rest)
        return [bytes(line) for line in lines if line.strip()]

    @property
    def pending(self) -> bytes:
        """An unterminated last line (a stream may end without a final newline)."""
        return bytes(self._buffer)


def parse_line(line: bytes) -> RawEvent:
    """One line → its type and undecoded object. Raises ``msgspec.DecodeError``."""
    return _raw_event.decode(line)


def decode_bookmark(raw: msgspec.Raw) -> Bookmark:
    return _bookmark.decode(raw)


def error_from(raw: msgspec.Raw) -> StatusError:
    """An ERROR event's Status as the matching exception (``Expired`` for 410, ...)."""
    status: JSON = msgspec.json.decode(raw)
    if not isinstance(status, dict):
        status = {"code": 500, "message": f"malformed ERROR event: {status!r}"}
    return StatusError.from_status(status)
