"""The Service allocator bound to the store: reserve before a write, release after a commit.

kube's service registry allocates in ``BeginCreate``/``BeginUpdate`` and releases in the finish
hooks (``pkg/registry/core/service/storage/storage.go``); its repair loops rebuild the bitmaps
from stored Services. Here the same shape, with the change feed as the single release point:

- ``allocate_on_create`` / ``allocate_on_update`` reserve what a write needs (dry runs keep
  nothing) and return the object to store;
- ``abandon`` frees what an attempted write reserved when it did not commit;
- every committed change releases what it let go of: a DELETED Service all it held, a MODIFIED
  one what the old object held and the new one does not. However a Service goes (DELETE,
  namespace deletion, last finalizer removed), the feed sees it.

The state is rebuilt from the watch cache on first use, so a restart on the same data keeps
allocations unique. Kinds that allocate are listed by ``Resource.id`` in ``ALLOCATING_KINDS``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kubewire.json_types import JSON
from kubewire.resources import Registry, Resource
from kubewire.server.allocation.rules import ServiceAllocator
from kubewire.storage.base import Change, ChangeType, Store
from kubewire.storage.cache import WatchCaches

ALLOCATING_KINDS = frozenset({"core/services"})  # Resource.id: clusterIPs and nodePorts

_decode = msgspec.json.Decoder(dict[str, Any]).decode


class AllocationState:
    """One ``ServiceAllocator`` for the server, kept in step with the stored Services.

    Not thread-safe: every call comes from the event loop. ``bind`` must come before the first
    allocation (handlers call ``ServerContext.allocations``, which binds lazily).
    """

    def __init__(self, cidr: str, port_range: tuple[int, int], rng: random.Random) -> None:
        self._allocator = ServiceAllocator(cidr, port_range, rng)  # raises early on a bad CIDR
        self._cidr, self._port_range, self._rng = cidr, port_range, rng
        self._prefixes: tuple[str, ...] = ()
        self.is_bound = False

    def bind(self, store: Store, caches: WatchCaches, registry: Registry) -> None:
        """Rebuild from the cached objects and follow the change feed (once)."""
        if self.is_bound:
            return
        kinds = [r for r in registry if r.id in ALLOCATING_KINDS]
        stored = [_decode(obj.value) for r in kinds
                  for obj in caches.for_resource(r).scan(r.storage_prefix())]
        self._allocator = ServiceAllocator.from_services(stored, self._cidr, self._port_range,
                                                         self._rng)
        self._prefixes = tuple(r.storage_prefix() for r in kinds)
        store.subscribe(self._on_changes)
        self.is_bound = True

    @property
    def allocator(self) -> ServiceAllocator:
        return self._allocator

    def allocate_on_create(self, resource: Resource, obj: dict[str, JSON], *,
                           dry_run: bool) -> dict[str, JSON]:
        """The object to create, with its allocations reserved (unchanged for other kinds)."""
        if resource.id not in ALLOCATING_KINDS:
            return obj
        return self._allocator.allocate_on_create(obj, dry_run=dry_run)

    def allocate_on_update(self, resource: Resource, old: dict[str, JSON], new: dict[str, JSON],
                           *, dry_run: bool) -> dict[str, JSON]:
        """The object to store over ``old``; new allocations reserved, none released yet."""
        if resource.id not in ALLOCATING_KINDS:
            return new
        return self._allocator.reconcile_on_update(old, new, dry_run=dry_run)

    def abandon(self, resource: Resource, attempted: Mapping[str, JSON],
                kept: Mapping[str, JSON] | None = None) -> None:
        """The write of ``attempted`` did not commit: free what it holds and ``kept`` does not."""
        if resource.id in ALLOCATING_KINDS:
            self._allocator.release(attempted, keep=kept)

    def _on_changes(self, changes: Sequence[Change]) -> None:
        for change in changes:
            if change.type == ChangeType.ADDED or not change.key.startswith(self._prefixes):
                continue
            before = _decode(change.prev_value or change.value)
            if change.type == ChangeType.DELETED:
                self._allocator.release(before)
            else:
                self._allocator.release(before, keep=_decode(change.value))


__all__ = ["ALLOCATING_KINDS", "AllocationState"]
