"""Another served version of a cached resource: the stored kind's cache, seen in that version.

kube serves one stored resource at several group/versions (core/v1 and events.k8s.io/v1 Events)
by converting each object on its way out. ``VersionView`` gives a registry entry with
``stored_as`` the read and watch surface of a ``WatchCache``: ``get`` and ``scan`` answer the
stored objects converted to the view's version (each object once per version, kept with it), and
a watch is the stored cache's watch with the version in its filter, so its watchers share the
stored kind's ring, order, once-only delivery and slow-consumer rules, and its lines are encoded
once per version for every watcher of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Protocol

from kubewire.resources import Resource
from kubewire.storage.cached import CachedObject, WatchFilter, WatchStart
from kubewire.storage.past_view import PastView
from kubewire.storage.watcher import Sink, Watcher


class StoredCache(Protocol):
    """What a view reads of the stored kind's cache (``WatchCache``), declared here so that the
    view depends on this, not on the cache module that builds views."""

    resource: Resource
    last_change_rev: int

    def get(self, key: str) -> CachedObject | None: ...

    def scan(self, prefix: str, start: str = "") -> list[CachedObject]: ...

    def range(self, prefix: str, start: str = "") -> Iterator[CachedObject]: ...

    def count(self, prefix: str, start: str = "") -> int: ...

    def named(self, prefix: str, name: str, start: str = "") -> list[CachedObject]: ...

    def at(self, revision: int, version: Resource | None = None) -> PastView | None: ...

    async def watch(self, sink: Sink, watch_filter: WatchFilter, start: WatchStart) -> Watcher: ...


class VersionView:
    """The stored kind's cache as ``resource`` (another version of it) serves it."""

    __slots__ = ("cache", "resource")

    def __init__(self, cache: StoredCache, resource: Resource) -> None:
        if resource.is_stored_version or resource.id != cache.resource.id:
            raise ValueError(f"{resource.api_version} {resource.kind} is not another version "
                             f"of {cache.resource.api_version} {cache.resource.kind}")
        self.cache = cache
        self.resource = resource

    @property
    def last_change_rev(self) -> int:
        return self.cache.last_change_rev

    def get(self, key: str) -> CachedObject | None:
        obj = self.cache.get(key)
        return None if obj is None else obj.as_version(self.resource)

    def scan(self, prefix: str, start: str = "") -> list[CachedObject]:
        """Objects under ``prefix`` (from ``start``) in key order, in this view's version."""
        return [obj.as_version(self.resource) for obj in self.cache.scan(prefix, start)]

    def range(self, prefix: str, start: str = "") -> Iterator[CachedObject]:
        """``scan``, lazily (each object converted only when read)."""
        return (obj.as_version(self.resource) for obj in self.cache.range(prefix, start))

    def count(self, prefix: str, start: str = "") -> int:
        return self.cache.count(prefix, start)

    def named(self, prefix: str, name: str, start: str = "") -> list[CachedObject]:
        return [obj.as_version(self.resource) for obj in self.cache.named(prefix, name, start)]

    def at(self, revision: int) -> PastView | None:
        """The stored kind at ``revision``, in this view's version (``WatchCache.at``)."""
        return self.cache.at(revision, self.resource)

    def label_count(self, label: str, value: str) -> int:
        return 0

    def labelled(self, prefix: str, start: str, label: str,
                 value: str) -> Iterator[CachedObject] | None:
        """No label index here: the stored kind's labels are matched in this version (a
        conversion could change them), so a list of this version scans."""
        return None

    async def watch(self, sink: Sink, watch_filter: WatchFilter, start: WatchStart) -> Watcher:
        """A watcher of the stored kind that matches and receives this view's version."""
        return await self.cache.watch(sink, replace(watch_filter, version=self.resource), start)
