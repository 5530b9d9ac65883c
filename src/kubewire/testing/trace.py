"""The trace file of ``kubewire record`` / ``kubewire replay`` (and of ``kubewire snapshot``):
JSON lines, written and read here. Pure: no I/O beyond the lines given.

A trace is, one JSON object a line:

- a header: ``{"kubewireTrace": 1, "source": "record"|"snapshot", "serverVersion": ...,
  "kinds": [...], "namespaces": [...] | null, "started": RFC 3339, "redacted": {...}}``;
- the initial state, one line per object the lists held:
  ``{"initial": true, "type": "ADDED", "resourceVersion": RV, "object": {...}}``;
- every watch event after it, in one global order: ``{"type": ADDED|MODIFIED|DELETED,
  "resourceVersion": RV, "time": RFC 3339 wall time, "offset": seconds since the start,
  "object": {...}}``.

Objects always carry ``apiVersion`` and ``kind`` (list items of built-in kinds do not on the
wire; the recorder adds them). Redaction (``redact``) replaces values, never keys, so a
replayed object keeps its shape.
"""

from __future__ import annotations

import base64
import heapq
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

FORMAT_VERSION = 1
EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
REDACTED = "<redacted>"
REDACTED_B64 = base64.b64encode(REDACTED.encode()).decode()
# kubectl apply keeps the whole applied object (a Secret's data too) in this annotation.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(dict[str, Any]).decode


class TraceError(ValueError):
    """A trace line that is not what this format says (its line number in the message)."""


@dataclass(frozen=True, slots=True)
class Redaction:
    """What the recorder blanks out: Secret values, and annotation values (``annotations``:
    None for none, an empty set for all of them, else the keys to blank)."""

    secrets: bool = False
    annotations: frozenset[str] | None = None

    def describe(self) -> dict[str, Any]:
        annotations: Any = (None if self.annotations is None
                            else sorted(self.annotations) or "all")
        return {"secrets": self.secrets, "annotations": annotations}


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One line after the header: an object of the initial state, or a watch event."""

    type: str
    object: dict[str, Any]
    resource_version: str
    initial: bool = False
    time: str | None = None
    offset: float | None = None

    def line(self) -> bytes:
        out: dict[str, Any] = {"type": self.type, "resourceVersion": self.resource_version}
        if self.initial:
            out["initial"] = True
        if self.time is not None:
            out["time"] = self.time
        if self.offset is not None:
            out["offset"] = round(self.offset, 6)
        out["object"] = self.object
        return _encode(out) + b"\n"

    @property
    def key(self) -> tuple[str, str, str, str]:
        """(apiVersion, kind, namespace, name): which object the event is of."""
        meta = self.object.get("metadata") or {}
        return (str(self.object.get("apiVersion", "")), str(self.object.get("kind", "")),
                str(meta.get("namespace") or ""), str(meta.get("name") or ""))


NO_REDACTION = Redaction()


@dataclass(frozen=True, slots=True)
class Header:
    """A trace's first line."""

    source: str  # "record" or "snapshot"
    server_version: Any  # the source's /version document
    kinds: list[str]
    namespaces: list[str] | None
    started: str
    redaction: Redaction = NO_REDACTION

    def line(self, **extra: Any) -> bytes:
        head = {"kubewireTrace": FORMAT_VERSION, "source": self.source,
                "serverVersion": self.server_version, "kinds": self.kinds,
                "namespaces": self.namespaces, "started": self.started,
                "redacted": self.redaction.describe(), **extra}
        return _encode(head) + b"\n"


def parse_header(line: bytes) -> dict[str, Any]:
    try:
        head = _decode(line)
    except msgspec.DecodeError as err:
        raise TraceError(f"line 1: not a trace header (not JSON: {err})") from err
    version = head.get("kubewireTrace")
    if version != FORMAT_VERSION:
        raise TraceError(f"line 1: not a kubewire trace of format {FORMAT_VERSION} "
                         f"(kubewireTrace: {version!r})")
    return head


def parse_event(line: bytes, number: int) -> TraceEvent:
    """One line after the header, checked: a known type and an object with a name."""
    try:
        raw = _decode(line)
    except msgspec.DecodeError as err:
        raise TraceError(f"line {number}: not JSON ({err})") from err
    kind = raw.get("type")
    obj = raw.get("object")
    if kind not in EVENT_TYPES:
        raise TraceError(f"line {number}: type {kind!r} is not ADDED, MODIFIED or DELETED")
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict) \
            or not obj.get("apiVersion") or not obj.get("kind"):
        raise TraceError(f"line {number}: the object needs apiVersion, kind and metadata")
    offset = raw.get("offset")
    return TraceEvent(kind, obj, str(raw.get("resourceVersion", "")),
                      bool(raw.get("initial", False)), raw.get("time"),
                      float(offset) if isinstance(offset, int | float) else None)


def read_trace(lines: Iterable[bytes]) -> tuple[dict[str, Any], Iterator[TraceEvent]]:
    """The header, and the events after it, parsed one by one as they are iterated (a trace
    is never held whole). Blank lines are skipped."""
    it = iter(lines)
    first = b""
    for first in it:
        if first.strip():
            break
    if not first.strip():
        raise TraceError("the trace is empty (no header line)")
    head = parse_header(first)

    def events() -> Iterator[TraceEvent]:
        for number, line in enumerate(it, start=2):
            if line.strip():
                yield parse_event(line, number)

    return head, events()


# --- redaction -----------------------------------------------------------------------------

def redact(obj: dict[str, Any], redaction: Redaction) -> dict[str, Any]:
    """``obj`` with the values ``redaction`` names replaced (a copy where anything changed)."""
    if not redaction.secrets and redaction.annotations is None:
        return obj
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    is_secret = out.get("kind") == "Secret" and out.get("apiVersion") == "v1"
    if redaction.secrets and is_secret:
        if isinstance(out.get("data"), dict):
            out["data"] = dict.fromkeys(out["data"], REDACTED_B64)
        if isinstance(out.get("stringData"), dict):
            out["stringData"] = dict.fromkeys(out["stringData"], REDACTED)
        if LAST_APPLIED in annotations:
            annotations[LAST_APPLIED] = REDACTED
    if redaction.annotations is not None:
        for key in annotations:
            if not redaction.annotations or key in redaction.annotations:
                annotations[key] = REDACTED
    if annotations:
        meta["annotations"] = annotations
        out["metadata"] = meta
    return out


def parse_annotation_keys(text: str) -> frozenset[str]:
    """``--redact-annotations`` value: ``*`` (or empty) for all, else comma-separated keys."""
    if text.strip() in ("", "*"):
        return frozenset()
    return frozenset(key.strip() for key in text.split(",") if key.strip())


# --- ordering ------------------------------------------------------------------------------

def revision_number(resource_version: str) -> int | None:
    """A resourceVersion as a number, when it is one (kube's are opaque; etcd's and kubewire's
    are the global revision, which orders events of different kinds)."""
    return int(resource_version) if resource_version.isdigit() else None


@dataclass(slots=True)
class Reorder:
    """Events of several watches into one global order.

    Each watch delivers its kind in order; across kinds, arrival order can differ from the
    server's. Events wait here ``window_s`` and leave in resourceVersion order when their
    resourceVersions are numbers (arrival order otherwise, or once one is not a number). An
    event that arrives more than ``window_s`` after one with a higher revision left is still
    written (never lost), after it. Holds at most what arrives within one window."""

    window_s: float = 0.25
    _heap: list[tuple[int, int, TraceEvent]] = field(default_factory=list)
    # (sequence, arrival) in arrival order; sequences already written are in ``_gone``
    _arrivals: deque[tuple[int, float]] = field(default_factory=deque)
    _gone: set[int] = field(default_factory=set)
    _seq: int = 0
    _numeric: bool = True

    def push(self, event: TraceEvent, now: float) -> None:
        number = revision_number(event.resource_version)
        if number is None and self._numeric:  # from now on arrival order, for all waiting
            self._numeric = False
            self._heap = [(0, seq, ev) for _, seq, ev in self._heap]
            heapq.heapify(self._heap)
        self._seq += 1
        order = number if self._numeric and number is not None else 0
        heapq.heappush(self._heap, (order, self._seq, event))
        self._arrivals.append((self._seq, now))

    def ready(self, now: float) -> list[TraceEvent]:
        """Events whose window has passed, in order, each with every waiting event of a lower
        revision ahead of it."""
        out: list[TraceEvent] = []
        while self._arrivals:
            seq, at = self._arrivals[0]
            if seq in self._gone:  # written ahead of its window
                self._gone.discard(seq)
                self._arrivals.popleft()
                continue
            if now - at < self.window_s:
                break
            while True:  # up to and including the expired event
                _, popped, event = heapq.heappop(self._heap)
                out.append(event)
                if popped == seq:
                    self._arrivals.popleft()
                    break
                self._gone.add(popped)
        return out

    def drain(self) -> list[TraceEvent]:
        out = [entry[2] for entry in sorted(self._heap)]
        self._heap.clear()
        self._arrivals.clear()
        self._gone.clear()
        return out

    def __len__(self) -> int:
        return len(self._heap)


# --- replay pacing -------------------------------------------------------------------------

def parse_speed(text: str) -> float | None:
    """``--speed``: ``fast`` (None: no waiting), ``recorded`` (1.0) or a factor > 0."""
    if text == "fast":
        return None
    if text == "recorded":
        return 1.0
    try:
        factor = float(text)
    except ValueError:
        raise ValueError(f"speed {text!r} is not fast, recorded or a number") from None
    if not factor > 0 or factor == float("inf"):
        raise ValueError(f"speed {text!r} must be a number above 0")
    return factor


def due_at(event: TraceEvent, speed: float | None) -> float | None:
    """Seconds after the replay's start the event is due (None: at once)."""
    if speed is None or event.initial or event.offset is None:
        return None
    return event.offset / speed


def import_line(event: TraceEvent) -> bytes:
    """The event as the import endpoint takes it (one JSON line)."""
    return _encode({"type": event.type, "object": event.object}) + b"\n"


def kinds_of(events: Iterable[TraceEvent]) -> dict[str, list[tuple[str, str, str]]]:
    """(kind apiVersion) -> the (type, namespace, name) sequence: what replay must repeat."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for event in events:
        api_version, kind, namespace, name = event.key
        out.setdefault(f"{kind} {api_version}", []).append((event.type, namespace, name))
    return out


def object_key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name")))
