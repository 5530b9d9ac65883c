"""A kind's objects as they were at an older revision, read from the watch cache.

A list at an older exact revision (``resourceVersionMatch=Exact``, legacy ``limit`` + RV, and
every continue token, which carries the first page's revision) used to be rebuilt from the
store's change log from the page's start to the end of the collection, so a page cost what the
rest of the collection costs. When every change of the kind after that revision is still in the
cache's history ring (``HistoryRing.floor_rev``), the state at the revision is the current
state with those changes undone: for each key a change touched, its state before the first such
change (the ring keeps each event's previous object; None when the change created the key).
``PastView`` holds that overlay (``changed`` keys, sorted, and their states) beside the cache's
current sorted keys, so a page merges the two key runs from its start and stops after
``limit + 1`` matches, and the count of what remains is two bisections plus one correction per
changed key: a page costs what a page at the current revision costs, plus the changes since.

The overlay of a revision is kept by its cache (a few revisions, ``WatchCache.at``) and only
extended by later changes, so the pages of one walk pay for each change once. Older revisions
than the ring holds are still read from the store (``server/reads/get_list``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator

from kubewire.resources import Resource
from kubewire.storage.cached import CachedEvent, CachedObject


def after_prefix(prefix: str) -> str:
    """The least string greater than every string starting with ``prefix``: the collection
    and namespace prefixes lists pass all end with "/", so this is "0" in its place."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class PastOverlay:
    """The states at ``revision`` of the keys changed after it, as far as ``seq_end`` (the
    ring sequence up to which the changes were read)."""

    __slots__ = ("changed", "revision", "seq_end", "states")

    def __init__(self, revision: int, seq_end: int) -> None:
        self.revision = revision
        self.seq_end = seq_end
        self.states: dict[str, CachedObject | None] = {}
        self.changed: list[str] = []  # the keys of ``states``, sorted

    def extend(self, events: Iterable[CachedEvent], seq_end: int) -> None:
        """Fold in later changes: only a key's first change after ``revision`` says what it
        was at ``revision``."""
        states, added = self.states, []
        for event in events:
            key = event.obj.key
            if key not in states:
                states[key] = event.prev
                added.append(key)
        if added:
            self.changed.extend(added)
            self.changed.sort()
        self.seq_end = seq_end


class PastView:
    """One kind at ``overlay.revision`` as a list source (``server/reads/get_list.ListSource``):
    the cache's current ``keys``/``objects`` with ``overlay`` applied, served as ``version``
    (None: as stored). Read each result before the cache changes (no await between)."""

    __slots__ = ("_named", "keys", "objects", "overlay", "version")

    def __init__(self, overlay: PastOverlay, keys: list[str], objects: dict[str, CachedObject],
                 named: Callable[[str, str, str], list[CachedObject]],
                 version: Resource | None = None) -> None:
        self.overlay = overlay
        self.keys = keys
        self.objects = objects
        self._named = named  # the cache's current objects of one name (``WatchCache.named``)
        self.version = version

    def _bounds(self, keys: list[str], prefix: str, start: str) -> tuple[int, int]:
        return bisect.bisect_left(keys, max(prefix, start)), bisect.bisect_left(
            keys, after_prefix(prefix))

    def range(self, prefix: str, start: str = "") -> Iterator[CachedObject]:
        """Objects under ``prefix`` (keys >= ``start``) at the revision, in key order,
        lazily: the current keys and the changed ones merged."""
        keys, objects = self.keys, self.objects
        changed, states, version = self.overlay.changed, self.overlay.states, self.version
        i, i_end = self._bounds(keys, prefix, start)
        j, j_end = self._bounds(changed, prefix, start)
        while i < i_end or j < j_end:
            if j == j_end or (i < i_end and keys[i] < changed[j]):
                obj: CachedObject | None = objects[keys[i]]
                i += 1
            else:
                key = changed[j]
                j += 1
                if i < i_end and keys[i] == key:
                    i += 1
                obj = states[key]
            if obj is not None:
                yield obj.as_version(version)

    def count(self, prefix: str, start: str = "") -> int:
        """How many objects under ``prefix`` with keys >= ``start`` existed at the revision."""
        lo, hi = self._bounds(self.keys, prefix, start)
        j, j_end = self._bounds(self.overlay.changed, prefix, start)
        changed, states, objects = self.overlay.changed, self.overlay.states, self.objects
        n = hi - lo
        for k in range(j, j_end):
            key = changed[k]
            n += (states[key] is not None) - (key in objects)
        return n

    def named(self, prefix: str, name: str, start: str = "") -> list[CachedObject]:
        """The objects named ``name`` under ``prefix`` (keys >= ``start``) at the revision:
        the cache's current ones, with the changed keys of that name as they were."""
        found = {obj.key: obj for obj in self._named(prefix, name, start)}
        changed, states = self.overlay.changed, self.overlay.states
        j, j_end = self._bounds(changed, prefix, start)
        for k in range(j, j_end):
            key = changed[k]
            if key.rsplit("/", 1)[-1] != name:
                continue
            state = states[key]
            if state is None:
                found.pop(key, None)
            else:
                found[key] = state
        return [found[key].as_version(self.version) for key in sorted(found)]

    def label_count(self, label: str, value: str) -> int:
        return 0

    def labelled(self, prefix: str, start: str, label: str,
                 value: str) -> Iterator[CachedObject] | None:
        """No label index at a past revision: the page scans and matches."""
        return None
