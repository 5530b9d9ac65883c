"""Values held by the watch cache, and the pure rules that turn them into watch lines.

No I/O here: objects and events in, bytes and decisions out.

- ``CachedObject``: one stored object's encoded bytes plus the label and field sets a watch
  filter needs: labels when the object enters the cache, fields (a dozen extractions for a Pod)
  on first use, from the bytes, since most objects never meet a field selector.
- ``CachedEvent``: one committed change with its new and previous object; its watch lines are
  encoded lazily, once per event type variant, and shared by every watcher that gets them.
- Versions: a resource served at two versions (``Resource.stored_as``) is cached once, in its
  stored version; ``CachedObject.as_version`` converts an object once per other version and
  keeps the result, and an event's lines are encoded once per (event type, version).
- ``WatchFilter.convert``: kube's ``convertToWatchEvent`` (apiserver pkg/storage/cacher/
  cache_watcher.go): an update that moves an object out of a filter is DELETED with the previous
  content at the event's revision, one that moves it in is ADDED with the new content.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, cast

import msgspec

from kubewire.conversions import convert_object, needs_conversion
from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.resources import Resource
from kubewire.selectors import FieldSelector, LabelSelector, field_set
from kubewire.storage.base import Change, ChangeType

_decode = msgspec.json.Decoder(dict[str, Any]).decode
_encode = GoJSONEncoder().encode

ADDED = b"ADDED"
MODIFIED = b"MODIFIED"
DELETED = b"DELETED"
_TYPE_NAMES = {ChangeType.ADDED: ADDED, ChangeType.MODIFIED: MODIFIED, ChangeType.DELETED: DELETED}


class CachedObject:
    """An object as the cache holds it: bytes for the wire, sets for filtering."""

    __slots__ = ("_fields", "_resource", "_versions", "api_version", "key", "labels", "name",
                 "namespace", "revision", "stored", "value")

    def __init__(self, key: str, revision: int, value: bytes, obj: dict[str, Any],
                 resource: Resource) -> None:
        meta = obj.get("metadata") or {}
        self.key = key
        self.revision = revision
        self.value = value
        self.api_version = resource.api_version  # the version ``value`` is written in
        self.name: str = meta.get("name", "")
        self.namespace: str = meta.get("namespace", "") if resource.namespaced else ""
        labels = meta.get("labels")
        self.labels: dict[str, str] = labels if isinstance(labels, dict) else {}
        self._resource = resource
        self._fields: dict[str, str] | None = None
        self._versions: dict[str, CachedObject] | None = None
        # A custom resource whose stored bytes are not ``value`` (stored in another version, or
        # defaulted on read): the stored bytes, which every other version is read from (kube's
        # storage of each version decodes them itself, so a field the storage version lacks
        # still reaches a version with it), and which tell an update that its object, though
        # unchanged as read, is not stored as it would store it now.
        self.stored: bytes | None = None

    @property
    def fields(self) -> dict[str, str]:
        """The field set (``field_set``) of the object ``value`` encodes; computed once."""
        fields = self._fields
        if fields is None:
            fields = self._fields = field_set(self._resource, _decode(self.value))
        return fields

    @classmethod
    def decode(cls, key: str, revision: int, value: bytes, resource: Resource) -> CachedObject:
        """The stored ``value`` as ``resource`` serves it (converted when another version;
        a custom resource through its CRD's storage codec, ``Resource.conversion``, which
        defaults it as kube defaults what it reads from storage)."""
        obj = _decode(value)
        conversion = resource.conversion
        if conversion is not None:  # a custom resource: its CRD's storage codec
            stored_in = obj.get("apiVersion")
            obj = conversion.read(obj, resource.api_version)
            encoded = _encode(obj)
            cached = cls(key, revision, encoded, obj, resource)
            source = obj.get("apiVersion")  # another one only when a webhook converts
            cached.api_version = source if isinstance(source, str) else resource.api_version
            if stored_in != resource.api_version or encoded != value:
                cached.stored = value
            return cached
        if needs_conversion(obj, resource.version_kind):
            obj = convert_object(obj, resource.version_kind)
            value = _encode(obj)
        return cls(key, revision, value, obj, resource)

    @classmethod
    def of_change(cls, change: Change, resource: Resource) -> CachedObject:
        """``decode``, unless the change came with its decoded object (``Change.obj``, the
        writer's in-process hint): then its sets are read from that object, which is not kept
        (the labels are copied), so the writer's object is never decoded a second time.

        A custom resource's object is read through its CRD's codec, unless the writer says it
        is already as this codec reads it (``coerced`` is ``resource.conversion``, and the
        object is in ``resource``'s version): the read would give it back unchanged, its bytes
        ``value`` included."""
        key, revision, value, obj = change.key, change.revision, change.value, change.obj
        coerced = change.coerced
        if obj is not None and coerced is not None and coerced is resource.conversion \
                and obj.get("apiVersion") == resource.api_version:
            cached = cls(key, revision, value, obj, resource)
            if cached.labels:
                cached.labels = dict(cached.labels)
            return cached
        if obj is None or resource.conversion is not None \
                or needs_conversion(obj, resource.version_kind):
            # a custom resource is read through its CRD's codec (defaulted with the schema of
            # the version it is stored in, which the writer's version may not have applied)
            return cls.decode(key, revision, value, resource)
        cached = cls(key, revision, value, obj, resource)
        if cached.labels:
            cached.labels = dict(cached.labels)
        return cached

    def as_version(self, resource: Resource | None) -> CachedObject:
        """This object as ``resource``'s version serves it: itself when already so (or None),
        else converted on first use and kept, so each version is converted and encoded once."""
        if resource is None or resource.api_version == self.api_version:
            return self
        if self._versions is None:
            self._versions = {}
        converted = self._versions.get(resource.api_version)
        if converted is None:
            converted = CachedObject.decode(self.key, self.revision, self.stored or self.value,
                                            resource)
            self._versions[resource.api_version] = converted
        return converted


def event_line(event_type: bytes, value: bytes) -> bytes:
    """One watch event, kube's framing: compact JSON, ``type`` then ``object``, then ``\\n``."""
    return b'{"type":"%b","object":%b}\n' % (event_type, value)


def with_resource_version(value: bytes, revision: int) -> bytes:
    """Re-encode an object with another ``metadata.resourceVersion`` (DELETED on filter exit)."""
    obj = _decode(value)
    meta = obj.setdefault("metadata", {})
    meta["resourceVersion"] = str(revision)
    return _encode(obj)


class CachedEvent:
    """One change in a kind's history. Lines are built on first use and then shared."""

    __slots__ = ("_lines", "obj", "prev", "revision", "type")

    def __init__(self, revision: int, change_type: ChangeType, obj: CachedObject,
                 prev: CachedObject | None) -> None:
        self.revision = revision
        self.type = change_type
        self.obj = obj  # new state; for DELETED the last state at the delete's revision
        self.prev = prev
        self._lines: dict[tuple[bytes, str], bytes] = {}

    def forget_lines(self) -> None:
        """Drop encoded lines once dispatched (kube does too); replays re-encode."""
        self._lines.clear()

    def line(self, event_type: bytes, version: Resource | None = None) -> bytes:
        """The event's line as ``version`` serves it (None: the stored version)."""
        memo_key = (event_type, "" if version is None else version.api_version)
        cached = self._lines.get(memo_key)
        if cached is None:
            cached = event_line(event_type, self._payload(event_type, version))
            self._lines[memo_key] = cached
        return cached

    def _payload(self, event_type: bytes, version: Resource | None) -> bytes:
        if event_type is DELETED and self.type != ChangeType.DELETED:
            assert self.prev is not None  # an update leaving the filter
            return with_resource_version(self.prev.as_version(version).value, self.revision)
        return self.obj.as_version(version).value

    @property
    def natural_type(self) -> bytes:
        return _TYPE_NAMES[self.type]


@dataclass(frozen=True, slots=True)
class WatchFilter:
    """What one watcher wants: a namespace, maybe one name, label and field selectors."""

    namespace: str
    name: str
    labels: LabelSelector
    fields: FieldSelector
    # The served version when it is not the stored one: objects are matched and sent in it.
    version: Resource | None = None

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """Watchers with equal keys get equal bytes for the same events."""
        version = "" if self.version is None else self.version.api_version
        return (self.namespace, self.name, str(self.labels), str(self.fields), version)

    @property
    def is_trivial(self) -> bool:
        return not self.name and self.labels.is_empty and self.fields.is_empty

    def matches(self, obj: CachedObject) -> bool:
        if self.namespace and obj.namespace != self.namespace:
            return False
        if self.name and obj.name != self.name:
            return False
        if not self.labels.is_empty and not self.labels.matches(obj.labels):
            return False
        # Field labels are the served version's (kube converts them per version too).
        return self.fields.is_empty or self.fields.matches(obj.as_version(self.version).fields)

    def convert(self, event: CachedEvent) -> bytes | None:
        """The event type this watcher sees for ``event``, or None when it sees nothing."""
        if event.type == ChangeType.ADDED:
            return ADDED if self.matches(event.obj) else None
        if event.type == ChangeType.DELETED:
            return DELETED if self.matches(event.obj) else None
        now = self.matches(event.obj)
        before = event.prev is not None and self.matches(event.prev)
        if now:
            return MODIFIED if before else ADDED
        return DELETED if before else None

    def lines(self, events: list[CachedEvent]) -> list[bytes]:
        """The encoded lines this watcher gets for a run of events."""
        out: list[bytes] = []
        for event in events:
            event_type = self.convert(event)
            if event_type is not None:
                out.append(event.line(event_type, self.version))
        return out


def bookmark_line(resource: Resource, revision: int, *, initial_events_end: bool = False) -> bytes:
    """A BOOKMARK: an empty object of the watched kind carrying only the revision (§5.3, §6.2)."""
    meta: dict[str, Any] = {"resourceVersion": str(revision)}
    if not resource.is_custom:
        meta["creationTimestamp"] = None  # a built-in kind's zero value; CRDs are unstructured
    if initial_events_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true",
                               "kubernetes.io/initial-events-list-blueprint":
                                   list_blueprint(resource)}
    obj = {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": meta,
           **resource.zero_fields}
    return event_line(b"BOOKMARK", _encode(obj))


def list_blueprint(resource: Resource) -> str:
    """Base64 of the empty versioned list (kube 1.32's initial-events-end annotation).

    A built-in list is a typed struct (``items`` null). A custom resource's is the
    UnstructuredList of the CRD store's NewListFunc (apiVersion and kind only), which
    unstructuredJSONScheme encodes as a map with sorted keys and ``"items": []``
    (apimachinery ``unstructured/helpers.go`` doEncode).
    """
    if resource.is_custom:
        empty = b'{"apiVersion":"%b","items":[],"kind":"%b"}\n' % (
            resource.api_version.encode(), resource.list_kind.encode())
    else:
        empty = b'{"kind":"%b","apiVersion":"%b","metadata":{},"items":null}\n' % (
            resource.list_kind.encode(), resource.api_version.encode())
    return base64.b64encode(empty).decode()


# --- the cache's history and where a watch starts (shared by cache and watcher) -------

class WatchStart(msgspec.Struct, frozen=True, kw_only=True):
    """Where a watch begins: after ``revision``, optionally with a synthetic initial state."""

    revision: int
    initial_events: bool = False
    bookmarks: bool = False
    timeout_s: float | None = None


class HistoryRing:
    """Fixed-capacity ring of events; ``start``/``end`` are ever-growing sequence numbers."""

    __slots__ = ("_buf", "capacity", "end", "floor_rev", "start")

    def __init__(self, capacity: int, floor_rev: int) -> None:
        self.capacity = capacity
        self._buf: list[CachedEvent | None] = [None] * capacity
        self.start = 0
        self.end = 0
        # Every change of this kind with revision > floor_rev is in the ring.
        self.floor_rev = floor_rev

    def append(self, event: CachedEvent) -> None:
        if self.end - self.start == self.capacity:
            evicted = self._buf[self.start % self.capacity]
            assert evicted is not None
            self.floor_rev = evicted.revision
            self.start += 1
        self._buf[self.end % self.capacity] = event
        self.end += 1

    def get(self, seq: int) -> CachedEvent:
        event = self._buf[seq % self.capacity]
        assert event is not None
        return event

    def slice(self, begin: int, stop: int) -> list[CachedEvent]:
        begin, stop = max(begin, self.start), min(stop, self.end)
        if begin >= stop:
            return []
        first = begin % self.capacity
        last = first + (stop - begin)
        # every slot between start and end holds an event
        buf = cast(list[CachedEvent], self._buf)
        if last <= self.capacity:
            return buf[first:last]
        return buf[first:] + buf[:last - self.capacity]

    def seq_after(self, revision: int) -> int:
        """The first sequence number whose event revision is > ``revision``."""
        lo, hi = self.start, self.end
        while lo < hi:
            mid = (lo + hi) // 2
            if self.get(mid).revision <= revision:
                lo = mid + 1
            else:
                hi = mid
        return lo
