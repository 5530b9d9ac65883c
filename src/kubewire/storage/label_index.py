"""Label indexes of one kind's cache: for a label key, the keys of the objects carrying each value.

kube's cacher offers indexers (``IndexerFuncs``) so that a list selecting on an indexed value
reads only the matching objects. Here a list whose label selector has an equality requirement
(``app=web``, ``app==web``, ``app in (web)``) reads the keys of that label's index instead of
scanning the collection, and stops once it has a page.

Indexes are built on demand, the first time a list selects on a label key, and then kept up to
date by every change (one dict lookup per indexed label key per change; none while no index
exists, so writes pay nothing until someone lists by a label). At most ``MAX_INDEXED_LABELS``
label keys are indexed per kind; the least recently used index is dropped past that, so memory
stays bounded whatever selectors clients send.

Cost per object, per indexed label key that the object carries: one pointer (8 bytes, plus a
list's spare capacity) to the key string the cache already holds; per distinct value, one dict
entry and one list (about 120 bytes). A label with a value per object (``pod-template-hash``
is shared, ``controller-uid`` is not) costs about 130 bytes per object; a shared one ~9 bytes.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

MAX_INDEXED_LABELS = 8  # label keys indexed per kind, at most


class LabelIndexes:
    """label key -> value -> the keys of the objects with that value, sorted."""

    __slots__ = ("_indexes",)

    def __init__(self) -> None:
        # Insertion order is recency of use (``keys_for`` moves an index to the end).
        self._indexes: dict[str, dict[str, list[str]]] = {}

    def __bool__(self) -> bool:
        return bool(self._indexes)

    def __len__(self) -> int:
        return len(self._indexes)

    def keys_for(self, label: str, value: str,
                 objects: Iterable[tuple[str, Mapping[str, str]]]) -> list[str]:
        """The sorted keys of the objects whose ``label`` is ``value``; the index of ``label``
        is built from ``objects`` (key, labels) when there is none yet. The list is the
        index's own: read it before the next change."""
        index = self._indexes.pop(label, None)
        if index is None:
            index = _build(label, objects)
            if len(self._indexes) >= MAX_INDEXED_LABELS:
                del self._indexes[next(iter(self._indexes))]  # the least recently used
        self._indexes[label] = index
        return index.get(value) or []

    def update(self, key: str, old: Mapping[str, str] | None,
               new: Mapping[str, str] | None) -> None:
        """``key``'s labels changed from ``old`` to ``new`` (None: absent)."""
        for label, index in self._indexes.items():
            before = old.get(label) if old else None
            after = new.get(label) if new else None
            if before == after:
                continue
            if isinstance(before, str):
                keys = index.get(before)
                if keys is not None:
                    i = bisect.bisect_left(keys, key)
                    if i < len(keys) and keys[i] == key:
                        del keys[i]
                    if not keys:
                        del index[before]
            if isinstance(after, str):
                keys = index.setdefault(after, [])
                if not keys or keys[-1] < key:
                    keys.append(key)  # names created in order land at the end
                else:
                    bisect.insort(keys, key)


def _build(label: str, objects: Iterable[tuple[str, Mapping[str, str]]]) -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for key, labels in objects:
        value = labels.get(label)
        if isinstance(value, str):  # only strings can equal a selector's value
            index.setdefault(value, []).append(key)
    for keys in index.values():
        keys.sort()
    return index
