"""A keyed object store with named indexes (client-go ``tools/cache`` ``Indexer``), pure.

Each index is a function from an object to the values it is filed under; the index maps each
value to the set of keys filed there. Sets that become empty are dropped, so churn cannot leak
memory (client-go ``thread_safe_store.go`` ``deleteKeyFromIndex``). One asyncio thread: no locks.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")
IndexFunc = Callable[[T], Iterable[str]]


class Indexer(Generic[T]):
    """Objects by key, plus ``by_index(name, value)`` lookups."""

    def __init__(self, indexers: Mapping[str, IndexFunc[T]] | None = None) -> None:
        self._items: dict[str, T] = {}
        self._funcs: dict[str, IndexFunc[T]] = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._funcs}

    def add_indexer(self, name: str, func: IndexFunc[T]) -> None:
        """Add an index (filled from the objects already stored)."""
        if name in self._funcs:
            raise ValueError(f"index {name!r} already exists")
        self._funcs[name] = func
        self._indices[name] = {}
        for key, obj in self._items.items():
            self._file(name, key, obj)

    def upsert(self, key: str, obj: T) -> T | None:
        """Store ``obj`` under ``key``; returns the object it replaced."""
        old = self._items.get(key)
        if old is not None:
            self._unfile_all(key, old)
        self._items[key] = obj
        for name in self._funcs:
            self._file(name, key, obj)
        return old

    def delete(self, key: str) -> T | None:
        """Remove ``key``; returns the object it held."""
        old = self._items.pop(key, None)
        if old is not None:
            self._unfile_all(key, old)
        return old

    def get(self, key: str) -> T | None:
        return self._items.get(key)

    def keys(self) -> list[str]:
        return list(self._items)

    def list(self) -> list[T]:
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def by_index(self, name: str, value: str) -> builtins.list[T]:
        """Objects filed under ``value`` in index ``name``. Raises KeyError for an unknown
        index."""
        keys = self._indices[name].get(value, ())
        return [self._items[k] for k in sorted(keys)]

    def index_values(self, name: str) -> builtins.list[str]:
        """The values index ``name`` currently holds."""
        return sorted(self._indices[name])

    def _file(self, name: str, key: str, obj: T) -> None:
        index = self._indices[name]
        for value in self._funcs[name](obj):
            index.setdefault(value, set()).add(key)

    def _unfile_all(self, key: str, obj: T) -> None:
        for name, func in self._funcs.items():
            index = self._indices[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is None:
                    continue
                keys.discard(key)
                if not keys:
                    del index[value]
