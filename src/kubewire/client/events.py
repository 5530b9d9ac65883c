"""Watch events and the pure decoding of a watch body (bytes in, events out).

Wire shapes: watch-protocol.md §3.2 (one JSON object per line) and §5 (event types; a BOOKMARK
object is an empty shell of the kind of which only ``metadata`` counts; an ERROR object is a
``Status``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Generic, TypeVar

import msgspec

from kubewire.client.errors import StatusError
from kubewire.json_types import JSON

T = TypeVar("T")
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
    """Chunks in, complete lines out; a partial line waits for the next chunk.

    Lines are found with ``bytes.find`` in the chunk as received and handed out as spans of
    it, so a line is copied only by whoever keeps it; only a line split across chunks is
    joined (from a list of pieces, so a long one costs linear time).
    """

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._pieces: list[bytes] = []  # the unterminated line so far
        self._pending_bytes = 0
        self._max = max_line_bytes

    def spans(self, chunk: bytes) -> list[tuple[bytes, int, int]]:
        """The complete lines that ``chunk`` ends, as ``(buffer, start, end)`` with the
        newline excluded; blank lines included (callers skip them). Raises ``ValueError``
        once the unterminated line is longer than the bound (after the lines before it
        were handed out)."""
        self._check()
        out: list[tuple[bytes, int, int]] = []
        newline = chunk.find(b"\n")
        if newline < 0:
            self._keep(chunk)
            self._check()
            return out
        start = 0
        if self._pieces:
            self._pieces.append(chunk[:newline])
            line = b"".join(self._pieces)
            self._pieces.clear()
            self._pending_bytes = 0
            out.append((line, 0, len(line)))
            start = newline + 1
            newline = chunk.find(b"\n", start)
        find = chunk.find
        while newline >= 0:
            out.append((chunk, start, newline))
            start = newline + 1
            newline = find(b"\n", start)
        if start < len(chunk):
            self._keep(chunk[start:] if start else chunk)
        return out

    def _keep(self, piece: bytes) -> None:
        self._pieces.append(piece)
        self._pending_bytes += len(piece)

    def _check(self) -> None:
        if self._pending_bytes > self._max:
            raise ValueError(f"watch line longer than {self._max} bytes")

    def feed(self, chunk: bytes) -> list[bytes]:
        """The complete non-blank lines that ``chunk`` ends, as bytes."""
        lines = (buffer[start:end] for buffer, start, end in self.spans(chunk))
        return [line for line in lines if line.strip()]

    @property
    def pending(self) -> bytes:
        """An unterminated last line (a stream may end without a final newline)."""
        return b"".join(self._pieces)


# The object events as kube-apiserver and kubewire write them: '{"type":"ADDED","object":'
# + the object + '}' (Go's encoding/json: struct field order, no spaces). Keyed by the byte
# after '{"type":"', which tells the types apart.
_OBJECT_PREFIXES: dict[int, tuple[bytes, EventType]] = {
    ord(t.value[0]): (b'{"type":"%b","object":' % t.value.encode(), t)
    for t in (EventType.ADDED, EventType.MODIFIED, EventType.DELETED)}
_TYPE_AT = len(b'{"type":"')
_CLOSE = ord("}")


def object_span(buffer: bytes, start: int, end: int) -> tuple[EventType, int, int] | None:
    """For a line ``buffer[start:end]`` in the canonical form of an object event, its type
    and where its object is; None for any other line (bookmarks, errors, other spellings).

    Only a shape check: the object's decode proves the rest. If ``buffer[obj_start:obj_end]``
    decodes as one JSON value, the line is exactly ``{"type":T,"object":<that value>}``.
    """
    if end - start <= _TYPE_AT or buffer[end - 1] != _CLOSE:
        return None
    found = _OBJECT_PREFIXES.get(buffer[start + _TYPE_AT])
    if found is None or not buffer.startswith(found[0], start, end):
        return None
    return found[1], start + len(found[0]), end - 1


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
