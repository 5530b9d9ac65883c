"""The ``Store`` protocol: a revisioned key-value store with an ordered change log.

Shaped after etcd so that an etcd backend can implement it: one global revision counter across
all keys; every write gets the next revision; the object and its change-log entry commit
atomically; changes are published to subscribers in strictly increasing revision order.

Keys are ``<group>/<plural>/<namespace>/<name>`` (cluster-scoped: ``<group>/<plural>/<name>``),
so a lexicographic range over a prefix is a collection in kube's storage-key order.

Values are Kubernetes objects. The store owns ``metadata.resourceVersion``: it writes the
revision it assigns into the object before encoding it (etcd-backed kube-apiserver does the same
on read from ``mod_revision``). Encoded values are compact JSON bytes.

Guarantees every backend gives (tested by one contract suite, tests/unit/test_store_contract.py):
- ``write`` returns only after the change is durable per the configured durability mode; its
  ``Change`` has ``revision == previous current_revision + k`` for some k >= 1.
- subscribers receive every committed change exactly once, in revision order, on the event loop,
  before ``write`` returns to its caller;
- ``changes_since(r, prefix)`` yields every retained change with revision > r for keys under
  ``prefix``, in order; it raises ``CompactedError`` if r < ``compacted_revision``;
- a failed precondition raises and changes nothing.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

JSONObject = dict[str, Any]


class ChangeType(enum.IntEnum):
    ADDED = 0
    MODIFIED = 1
    DELETED = 2


@dataclass(frozen=True, slots=True)
class Record:
    """The current (or historical) value of one key."""

    key: str
    revision: int  # revision of the last write to this key (= metadata.resourceVersion)
    value: bytes  # compact JSON of the object, resourceVersion included


@dataclass(frozen=True, slots=True)
class Change:
    """One committed write, as the change log and the subscribers see it.

    ``value`` is the object after the write; for DELETED it is the last state of the object with
    ``metadata.resourceVersion`` set to the delete's revision (what a DELETED watch event
    carries). ``prev_value`` is the object before the write (None for ADDED).

    ``obj`` is an optional in-process hint: ``value`` decoded (the object the store encoded,
    resourceVersion included), when the change was made by this process's store; None for
    changes read back from the log or made elsewhere. It is not part of the change (equality
    ignores it, the log does not keep it); whoever reads it must not modify it nor keep
    references into it, and must decode ``value`` when it is None.
    """

    revision: int
    type: ChangeType
    key: str
    value: bytes
    prev_value: bytes | None
    timestamp: float  # wall-clock seconds of the commit (for age-based retention)
    obj: JSONObject | None = field(default=None, compare=False, repr=False)
    # the write's ``coerced`` when ``obj`` is its object (another in-process hint)
    coerced: object | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Create:
    """``coerced``: an in-process hint for the watch cache, the storage codec of a custom
    resource (its ``Resource.conversion``) when ``obj`` is already as that codec reads it back
    (pruned and defaulted with the schema of its version, the stored one); a store that keeps
    ``obj`` as its change's hint passes it on (``Change.coerced``), others may drop it."""

    key: str
    obj: JSONObject
    coerced: object | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Update:
    """Replace the value; with ``expected_revision`` only if the key is still at it."""

    key: str
    obj: JSONObject
    expected_revision: int | None = None
    coerced: object | None = field(default=None, compare=False, repr=False)  # as Create's


@dataclass(frozen=True, slots=True)
class Delete:
    key: str
    expected_revision: int | None = None


Op = Create | Update | Delete


class StorageError(Exception):
    """Base of what a store raises; the server maps these to Status errors."""


class StorageTimeoutError(StorageError):
    """The store's backend did not answer within the store's own deadline (etcd without quorum
    or unreachable): the operation may or may not have happened."""


class KeyExistsError(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key exists: {key}")
        self.key = key


class KeyNotFoundError(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key not found: {key}")
        self.key = key


class RevisionMismatchError(StorageError):
    """The key is no longer at the expected revision (optimistic concurrency)."""

    def __init__(self, key: str, expected: int, actual: int) -> None:
        super().__init__(f"revision mismatch on {key}: expected {expected}, actual {actual}")
        self.key = key
        self.expected = expected
        self.actual = actual


class ValueTooLargeError(StorageError):
    """The encoded object is over the store's size limit (etcd: "request is too large")."""

    def __init__(self, key: str, size: int, limit: int) -> None:
        super().__init__(f"value of {key} is {size} bytes, over the limit of {limit}")
        self.key = key
        self.size = size
        self.limit = limit


class CompactedError(StorageError):
    """The requested revision is older than what the change log retains."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"revision {requested} is compacted (oldest retained after {compacted})")
        self.requested = requested
        self.compacted = compacted


ChangeListener = Callable[[Sequence[Change]], None]


@dataclass(frozen=True, slots=True)
class Retention:
    """How much change history the store keeps; older changes are compacted away.

    A change is dropped once it is outside either bound: older than the newest ``max_changes``
    changes, or older than ``max_age_s`` seconds. ``None`` disables that bound. The newest
    change is never dropped, so a store always knows its current revision.
    """

    max_changes: int | None = 1_000_000
    max_age_s: float | None = 7 * 24 * 3600.0


class Store(Protocol):
    """A revisioned key-value store with a durable, ordered change log."""

    @property
    def current_revision(self) -> int:
        """The revision of the last committed write (0 for an empty store)."""
        ...

    @property
    def compacted_revision(self) -> int:
        """Changes with revision > this are all retained; ``changes_since`` below it fails."""
        ...

    @property
    def writes_in_flight(self) -> int:
        """This process's writes handed to the store whose batch was not published yet (0 when
        the store cannot tell): more changes are on their way (the watch cache's flush waits
        a bounded time for them, storage/cache.py)."""
        ...

    async def open(self) -> None:
        """Open or create the store; afterwards the current state is readable."""
        ...

    async def close(self) -> None:
        """Finish pending writes and release resources."""
        ...

    def subscribe(self, listener: ChangeListener) -> None:
        """Call ``listener`` on the event loop with each batch of committed changes, in order."""
        ...

    async def write(self, op: Op) -> Change:
        """Apply one operation atomically; raise a StorageError if its precondition fails."""
        ...

    async def get(self, key: str) -> Record | None:
        ...

    async def consistent_revision(self) -> int:
        """A revision that includes every write acknowledged so far, by anyone (a reader waits
        for its change feed to reach it): ``current_revision`` for a store written by one
        process, a quorum read's revision for a shared one (etcd)."""
        ...

    async def list(self, prefix: str, *, revision: int = 0, start: str = "",
                   limit: int = 0) -> tuple[builtins.list[Record], int]:
        """Records under ``prefix`` in key order, at ``revision`` (0 = current).

        ``start`` is an inclusive lower bound on keys; ``limit`` 0 means no limit. Returns the
        records and the revision they reflect. A historical ``revision`` below
        ``compacted_revision`` raises ``CompactedError``.
        """
        ...

    async def changes_since(self, revision: int, prefix: str = "",
                            limit: int = 0) -> builtins.list[Change]:
        """Retained changes with revision > ``revision`` under ``prefix``, in revision order."""
        ...

    async def compact(self) -> int:
        """Drop changes outside the retention policy; return the new ``compacted_revision``."""
        ...
