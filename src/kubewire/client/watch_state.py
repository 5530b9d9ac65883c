"""The pure part of a resuming watch: which query to send next, which events to deliver.

Rules (watch-protocol.md §2.2, §6; client-go ``reflector.go``):
- A watch from revision N gets exactly the changes after N, so once a revision is known the
  next connection resumes from the last one delivered and nothing repeats.
- Objects of an initial batch (RV unset or ``"0"``, or ``sendInitialEvents``) carry their own,
  non-monotonic revisions: none of them is a resume point. A BOOKMARK is ("after BOOKMARK B no
  event with RV <= B follows"), so the initial phase ends at the first bookmark — the
  ``initial-events-end`` one, or any periodic one from servers that do not send it.
- Broken during the initial phase, the watch starts over and skips the (object, revision) pairs
  it already delivered, so the caller sees no duplicates (an object changed meanwhile comes
  again as ADDED with its new revision). An object delivered before the break that the new
  snapshot lacks was deleted meanwhile: when the initial phase ends it is reported DELETED
  (``vanished()``), so the caller never keeps an object the server no longer has.
- ``allowWatchBookmarks`` is always sent: bookmarks are resume points and feed the watchdog.
  They are passed on only when the caller asked for them.
- Without a caller ``timeout_seconds`` the server timeout is randomized (client-go: minimum
  watch timeout times [1, 2)), so many clients do not reconnect in step.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from kubewire.client.events import Bookmark
from kubewire.client.resource import Selector, format_selector, query

MIN_WATCH_TIMEOUT_S = 300  # client-go reflector minWatchTimeout (5 min), randomized up to twice
RETRIABLE_CODES = frozenset({429, 500, 502, 503, 504})  # client-go isWatchErrorRetriable-ish

ObjectKey = tuple[str | None, str, str]  # namespace, name, resourceVersion
ObjectName = tuple[str | None, str]  # namespace, name


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """What the caller asked for (Python spellings of the watch query)."""

    label_selector: Selector | None = None
    field_selector: Selector | None = None
    resource_version: str | None = None
    allow_bookmarks: bool = False
    send_initial_events: bool | None = None
    timeout_seconds: int | None = None

    @property
    def has_start_revision(self) -> bool:
        """Whether the caller named a revision to watch after (not ``""``/``"0"``)."""
        return self.resource_version not in (None, "", "0")


@dataclass(slots=True)
class WatchState:
    """Tracks the resume point across connections of one ``watch()``."""

    options: WatchOptions
    rng: random.Random = field(default_factory=random.Random)
    resume_rv: str | None = None
    initial_phase: bool = True
    _seen_initial: set[ObjectKey] = field(default_factory=set)
    _initial_names: set[ObjectName] = field(default_factory=set)  # delivered, not deleted
    _connection_names: set[ObjectName] = field(default_factory=set)  # sent on this connection

    def __post_init__(self) -> None:
        if self.options.has_start_revision and not self.options.send_initial_events:
            self.resume_rv = self.options.resource_version
            self.initial_phase = False

    def params(self, remaining_s: float | None = None) -> dict[str, str]:
        """The query of the next connection; ``remaining_s`` is what is left of the
        caller's ``timeout_seconds`` after earlier connections."""
        opts = self.options
        timeout = opts.timeout_seconds
        if timeout is None:
            timeout = int(MIN_WATCH_TIMEOUT_S * (1 + self.rng.random()))
        elif remaining_s is not None:
            timeout = max(1, math.ceil(remaining_s))
        base = query(watch=True, allowWatchBookmarks=True, timeoutSeconds=timeout,
                     labelSelector=format_selector(opts.label_selector),
                     fieldSelector=format_selector(opts.field_selector))
        if self.resume_rv is not None:
            return {**base, "resourceVersion": self.resume_rv}
        extra = query(resourceVersion=opts.resource_version or None)
        if opts.send_initial_events is not None:
            extra |= query(sendInitialEvents=opts.send_initial_events,
                           resourceVersionMatch="NotOlderThan")
        return {**base, **extra}

    def start_from(self, resource_version: str) -> None:
        """Start after ``resource_version`` (learned from a list) with no initial phase."""
        self.resume_rv = resource_version
        self.initial_phase = False

    def on_connect(self) -> None:
        """A connection is about to be opened (during the initial phase: a new snapshot)."""
        self._connection_names.clear()

    def on_object(self, key: ObjectKey, deleted: bool = False) -> bool:
        """An ADDED/MODIFIED (or, with ``deleted``, DELETED) with ``key``; returns whether
        to deliver it."""
        if self.initial_phase:
            name = key[:2]
            if deleted:
                self._initial_names.discard(name)
                self._connection_names.discard(name)
            else:
                self._initial_names.add(name)
                self._connection_names.add(name)
            if key in self._seen_initial:
                return False
            self._seen_initial.add(key)
            return True
        if key[2]:
            self.resume_rv = key[2]
        return True

    def vanished(self) -> list[ObjectName]:
        """Objects delivered in the initial phase that the current connection's snapshot
        lacks (deleted while the watch started over); meaningful just before the bookmark
        that ends the initial phase."""
        return sorted(self._initial_names - self._connection_names,
                      key=lambda name: (name[0] or "", name[1]))

    def ends_initial_phase(self, bookmark: Bookmark) -> bool:
        return self.initial_phase and bool(bookmark.metadata.resource_version)

    def on_bookmark(self, bookmark: Bookmark) -> bool:
        """A BOOKMARK; returns whether to deliver it."""
        if bookmark.metadata.resource_version:
            self.resume_rv = bookmark.metadata.resource_version
            self.initial_phase = False
            self._seen_initial.clear()
            self._initial_names.clear()
            self._connection_names.clear()
        return self.options.allow_bookmarks

    @property
    def needs_start_revision(self) -> bool:
        """``send_initial_events=False`` without a revision means "from now": learn "now"
        first, so that a reconnect before the first event still misses nothing."""
        return self.resume_rv is None and self.options.send_initial_events is False
