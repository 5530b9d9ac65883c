"""The Service allocator bound to the store: every allocation is a compare-and-swap on kube's
range objects, so any number of servers writing to one store hand out each IP and port once.

kube's service registry allocates in ``BeginCreate``/``BeginUpdate`` and releases after the
write (``pkg/registry/core/service/storage/storage.go``); each allocator keeps a bitmap and
persists it in one object per range with ``GuaranteedUpdate``
(``allocator/storage/storage.go``): when the stored resourceVersion is not the last one it saw,
it reloads the bitmap from the stored ``data`` and applies its change again. Here the same:

- ``allocate_on_create`` / ``allocate_on_update`` plan the object to store on the local
  ``ServiceAllocator`` (pure, ``rules``), then reserve what the plan takes: one
  ``Update(key, bitmap, expected_revision)`` per range that changes (IPs, then node ports). A
  conflict re-reads the range and re-applies the reservation; if another server took a value the
  plan picked, what was reserved is given back and the plan is made again on the fresh bitmap
  (a requested value then gets kube's "provided IP is already allocated"). Dry runs reserve
  nothing.
- ``abandon`` gives back what a write that did not commit reserved.
- ``after_write`` (the server's store calls it after each committed write) gives back what a
  committed Service change let go of: all of a deleted Service's values, the old values a
  modified one no longer holds. Only the server that made a change releases for it: a release
  seen late on another server's change feed could free a value reallocated meanwhile.
- The change feed keeps the local bitmaps in step with what other servers write, so the next
  compare-and-swap usually succeeds at once.
- ``repair`` (at start, then every ``repair_interval_s``, on every server as kube runs its
  repair controllers) reconciles the stored ranges with the stored Services (``ranges.repair``)
  and creates them when they are absent (another server's racing create is fine).

One asyncio lock orders this server's allocations (kube's allocator holds a mutex around its
update). Kinds that allocate are listed by ``Resource.id`` in ``ALLOCATING_KINDS``.

With ``persist=False`` (a store only this process writes: SQLite, memory; see
``ServerConfig.service_ranges_stored``) the same code keeps the mirror alone: nothing is
written, the start rebuilds it from the Services and the repair reconciles it with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kubewire.json_types import JSON
from kubewire.resources import Registry, Resource
from kubewire.server.allocation.ranges import (
    IPS_KEY,
    PORTS_KEY,
    Repair,
    range_object,
    read_range,
    repair,
)
from kubewire.server.allocation.rules import IPS, PORTS, ServiceAllocator, holdings
from kubewire.status import internal_error
from kubewire.storage.base import (
    Change,
    ChangeType,
    Create,
    KeyExistsError,
    KeyNotFoundError,
    Record,
    RevisionMismatchError,
    StorageError,
    Store,
    Update,
)
from kubewire.storage.cache import WatchCaches

ALLOCATING_KINDS = frozenset({"core/services"})  # Resource.id: clusterIPs and nodePorts
KEYS = {IPS: IPS_KEY, PORTS: PORTS_KEY}
REPAIR_INTERVAL_S = 180.0  # kube's repair controllers run every 3 minutes
CAS_RETRIES = 32  # compare-and-swap attempts on one range before giving up
PLAN_RETRIES = 8  # plans made again because another server took a value a plan picked
_WHAT = {IPS: "serviceIP", PORTS: "nodePort"}
_CONFLICTS = (RevisionMismatchError, KeyExistsError, KeyNotFoundError)

log = logging.getLogger(__name__)
_decode = msgspec.json.Decoder(dict[str, Any]).decode


class _Taken(Exception):
    """A value a plan picked is held in the stored range (another server reserved it)."""


class AllocationState:
    """One ``ServiceAllocator`` for the server, a mirror of the stored ranges.

    ``start`` binds it to the store (the server calls it once its caches are filled); every
    other call comes from the event loop. Unbound (no server), it allocates in memory only.
    """

    def __init__(self, cidr: str, port_range: tuple[int, int], rng: random.Random,
                 repair_interval_s: float = REPAIR_INTERVAL_S, *, persist: bool = True) -> None:
        self._allocator = ServiceAllocator(cidr, port_range, rng)  # raises early on a bad CIDR
        self._persist = persist
        self._repair_interval_s = repair_interval_s
        self._store: Store | None = None
        self._caches: WatchCaches | None = None
        self._registry: Registry | None = None
        self._prefixes: tuple[str, ...] = ()
        self._seen = {IPS: 0, PORTS: 0}  # revision of the stored range the mirror holds; 0: none
        self._meta: dict[str, dict[str, Any]] = {}  # each stored range's metadata
        # the ``data`` the mirror holds (read or written): a change that carries it again
        # needs no decoding. Whatever changes the mirror otherwise drops it.
        self._data: dict[str, str] = {}
        self._stale: set[str] = set()  # ranges to read again before the next change
        self._leaks: dict[str, dict[int, int]] = {IPS: {}, PORTS: {}}
        self._lock = asyncio.Lock()
        self._repairing: asyncio.Task[None] | None = None
        self.last_repair: dict[str, Repair] = {}
        self.is_bound = False

    @property
    def allocator(self) -> ServiceAllocator:
        return self._allocator

    # --- life -----------------------------------------------------------------------------------

    async def start(self, store: Store, caches: WatchCaches, registry: Registry) -> None:
        """Follow the store, make or reconcile the stored ranges, and repair them from now on."""
        if self.is_bound:
            return
        self._store, self._caches, self._registry = store, caches, registry
        self._prefixes = tuple(r.storage_prefix() for r in registry if r.id in ALLOCATING_KINDS)
        if self._persist:
            store.subscribe(self._on_changes)
        self.is_bound = True
        # a mirror only (the ranges are not stored) starts from the Services, quietly
        await self.repair(quiet=not self._persist)
        if self._repair_interval_s > 0:
            self._repairing = asyncio.create_task(self._repair_loop(), name="service-repair")

    async def stop(self) -> None:
        task, self._repairing = self._repairing, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _repair_loop(self) -> None:
        while True:
            await asyncio.sleep(self._repair_interval_s)
            try:
                await self.repair()
            except (StorageError, OSError) as err:  # the next run tries again
                log.warning("service allocation repair failed: %s", err)

    # --- what the write path calls --------------------------------------------------------------

    async def allocate_on_create(self, resource: Resource, obj: dict[str, JSON], *,
                                 dry_run: bool) -> dict[str, JSON]:
        """The object to create, with its allocations reserved (unchanged for other kinds)."""
        if resource.id not in ALLOCATING_KINDS:
            return obj
        if dry_run or not self.is_bound:
            return self._allocator.allocate_on_create(obj, dry_run=dry_run)
        async with self._lock:
            for _ in range(PLAN_RETRIES):
                await self._refresh()
                out = self._allocator.allocate_on_create(obj, dry_run=True)
                if await self._reserve(holdings(out)):
                    return out
        raise _too_busy()

    async def allocate_on_update(self, resource: Resource, old: dict[str, JSON],
                                 new: dict[str, JSON], *, dry_run: bool) -> dict[str, JSON]:
        """The object to store over ``old``; new allocations reserved, none released yet."""
        if resource.id not in ALLOCATING_KINDS:
            return new
        if dry_run or not self.is_bound:
            return self._allocator.reconcile_on_update(old, new, dry_run=dry_run)
        held_ips, held_ports = holdings(old)
        async with self._lock:
            for _ in range(PLAN_RETRIES):
                await self._refresh()
                out = self._allocator.reconcile_on_update(old, new, dry_run=True)
                ips, ports = holdings(out)
                if await self._reserve((ips - held_ips, ports - held_ports)):
                    return out
        raise _too_busy()

    async def abandon(self, resource: Resource, attempted: Mapping[str, JSON],
                      kept: Mapping[str, JSON] | None = None) -> None:
        """The write of ``attempted`` did not commit: free what it holds and ``kept`` does not."""
        if resource.id in ALLOCATING_KINDS:
            await self._release_held(attempted, kept)

    async def after_write(self, change: Change) -> None:
        """A write this server made committed: free what the Service no longer holds."""
        if change.type == ChangeType.ADDED or not self._prefixes \
                or not change.key.startswith(self._prefixes):
            return
        try:
            before = _decode(change.prev_value or change.value)
            kept = None if change.type == ChangeType.DELETED else _decode(change.value)
            await self._release_held(before, kept)
        except Exception:  # the write has committed: a failed release is a leak the repair frees
            log.exception("releasing what %s let go of failed", change.key)

    async def _release_held(self, svc: Mapping[str, JSON],
                            kept: Mapping[str, JSON] | None) -> None:
        ips, ports = holdings(svc)
        if kept is not None:
            kept_ips, kept_ports = holdings(kept)
            ips, ports = ips - kept_ips, ports - kept_ports
        if not self.is_bound:
            self._allocator.release_values(IPS, ips)
            self._allocator.release_values(PORTS, ports)
            return
        async with self._lock:
            for which, values in ((IPS, ips), (PORTS, ports)):
                if values:
                    await self._release(which, values)

    # --- reserving and releasing in the stored ranges (the lock held) ----------------------------

    async def _reserve(self, claims: tuple[set[int], set[int]]) -> bool:
        """Reserve the values of a plan, IPs then ports; False (nothing kept) when another
        server holds one of them."""
        done: list[tuple[str, set[int]]] = []
        try:
            for which, values in zip((IPS, PORTS), claims, strict=True):
                if values:
                    await self._claim(which, values)
                    done.append((which, values))
        except _Taken:
            for which, values in done:
                await self._release(which, values)
            return False
        except Exception:
            for which, values in done:  # e.g. the store failed: give back what is kept
                await self._release(which, values)
            raise
        return True

    async def _claim(self, which: str, values: set[int]) -> None:
        """One range's values reserved in the store (storage.go ``tryUpdate``)."""
        for _ in range(CAS_RETRIES):
            if not self._allocator.claim_values(which, values):
                raise _Taken
            try:
                await self._write_range(which)
                return
            except _CONFLICTS:  # read it again (what it holds replaces the mirror)
                self._data.pop(which, None)
                await self._reload(which)
                if not self._seen[which]:  # gone: nothing replaced the mirror, drop ours
                    self._allocator.release_values(which, values)
            except BaseException:
                self._stale.add(which)  # the write may or may not have happened
                raise
        raise _too_busy(which)

    async def _release(self, which: str, values: set[int]) -> None:
        """Give values back to one range; never raises for the store (a leak the repair
        frees)."""
        for _ in range(CAS_RETRIES):
            try:
                if which in self._stale:
                    await self._reload(which)
                before = self._allocator.used(which)
                self._allocator.release_values(which, values)
                if self._allocator.used(which) == before and self._seen[which]:
                    return
                await self._write_range(which)
                return
            except _CONFLICTS:
                self._data.pop(which, None)
                await self._reload(which)
            except (StorageError, OSError) as err:
                self._stale.add(which)
                log.warning("could not release %s %s: %s", _WHAT[which], sorted(values), err)
                return
        log.warning("could not release %s %s: too many conflicts", _WHAT[which], sorted(values))

    async def _write_range(self, which: str) -> None:
        """Store the mirror of one range over the revision it was read at (or create it)."""
        if not self._persist:
            return
        assert self._store is not None
        base, _ = self._allocator.bounds(which)
        offsets = (value - base for value in self._allocator.used(which))
        obj = range_object(self._allocator.range_spec(which), offsets, self._meta.get(which))
        key, seen = KEYS[which], self._seen[which]
        self._data[which] = obj["data"]  # its change on the feed needs no decoding
        change = await self._store.write(Update(key, obj, seen) if seen else Create(key, obj))
        self._seen[which] = max(self._seen[which], change.revision)
        self._stale.discard(which)

    async def _refresh(self) -> None:
        for which in sorted(self._stale):
            await self._reload(which)

    async def _reload(self, which: str) -> None:
        if not self._persist:
            self._stale.discard(which)
            return
        assert self._store is not None
        record = await self._store.get(KEYS[which])
        self._stale.discard(which)
        if record is None:
            self._seen[which] = 0  # the next write creates it
            self._meta.pop(which, None)
            return
        self._load(which, record.revision, _decode(record.value))

    def _load(self, which: str, revision: int, obj: Mapping[str, Any]) -> None:
        """Take the stored range as the mirror (a range of another size is left to the repair,
        which rebuilds it: the mirror is kept and will overwrite it)."""
        self._seen[which] = revision
        meta = obj.get("metadata")
        self._meta[which] = dict(meta) if isinstance(meta, dict) else {}
        data = obj.get("data")
        if data == self._data.get(which) and obj.get("range") == self._allocator.range_spec(
                which):
            return  # what the mirror holds (this server's own write)
        self._data.pop(which, None)
        stored = read_range(obj)
        if stored is None or stored[0] != self._allocator.range_spec(which):
            log.warning("the stored %s range is %r, not %r: it will be rebuilt", _WHAT[which],
                        stored and stored[0], self._allocator.range_spec(which))
            return
        base, _ = self._allocator.bounds(which)
        self._allocator.restore(which, (base + offset for offset in stored[1]))
        if isinstance(data, str):
            self._data[which] = data

    def _on_changes(self, changes: Sequence[Change]) -> None:
        """Other servers' (and our own) writes to the ranges, as they commit."""
        for change in changes:
            which = IPS if change.key == IPS_KEY else PORTS if change.key == PORTS_KEY else None
            if which is None or change.revision <= self._seen[which]:
                continue
            if change.type == ChangeType.DELETED:
                self._seen[which] = 0
                self._meta.pop(which, None)
            else:
                self._load(which, change.revision, change.obj or _decode(change.value))

    # --- repair ---------------------------------------------------------------------------------

    async def repair(self, *, quiet: bool = False) -> dict[str, Repair]:
        """Reconcile both ranges with the stored Services (repair.go ``runOnce``); ``quiet``:
        log nothing (a mirror rebuilt at start)."""
        assert self._store is not None and self._caches is not None
        store, caches = self._store, self._caches
        async with self._lock:
            snapshots = {which: await store.get(KEYS[which]) if self._persist else None
                         for which in (IPS, PORTS)}
            # the Services as they are now, at least as new as the snapshots
            await caches.wait_for_revision(await store.consistent_revision())
            held = [holdings(_decode(found.value)) for found in self._services()]
            outcome: dict[str, Repair] = {}
            for index, which in enumerate((IPS, PORTS)):
                outcome[which] = await self._repair_range(which, snapshots[which],
                                                          [h[index] for h in held], quiet)
            self.last_repair = outcome
            return outcome

    def _services(self) -> list[Any]:
        assert self._caches is not None and self._registry is not None
        return [found for r in self._registry if r.id in ALLOCATING_KINDS
                for found in self._caches.for_resource(r).scan(r.storage_prefix())]

    async def _repair_range(self, which: str, snapshot: Record | None, held: list[set[int]],
                            quiet: bool) -> Repair:
        assert self._store is not None
        base, size = self._allocator.bounds(which)
        stored: set[int] = set()
        usable, meta = False, None
        if not self._persist:
            stored, usable = set(self._allocator.used(which)), True
        elif snapshot is not None:
            obj = _decode(snapshot.value)
            meta = obj.get("metadata")
            parsed = read_range(obj)
            usable = parsed is not None and parsed[0] == self._allocator.range_spec(which)
            if parsed is not None and usable:
                stored = {base + offset for offset in parsed[1]}
        outcome = repair(stored, held, lambda v: 0 <= v - base < size, self._leaks[which],
                         reserved=(base,) if which == IPS else ())
        if not quiet:
            _report(which, outcome, new=self._persist and snapshot is None)
        if not self._persist:
            self._allocator.restore(which, outcome.rebuilt)
            return outcome
        if snapshot is not None and usable and stored == outcome.rebuilt:
            if snapshot.revision > self._seen[which]:
                self._load(which, snapshot.revision, _decode(snapshot.value))
            return outcome
        obj = range_object(self._allocator.range_spec(which),
                           (value - base for value in outcome.rebuilt),
                           meta if isinstance(meta, dict) else None)
        key = KEYS[which]
        try:
            if snapshot is None:
                change = await self._store.write(Create(key, obj))
            else:
                change = await self._store.write(Update(key, obj, snapshot.revision))
        except _CONFLICTS:  # another server wrote it meanwhile: the next run looks again
            await self._reload(which)
            return outcome
        self._load(which, change.revision, _decode(change.value))
        return outcome


def _report(which: str, outcome: Repair, *, new: bool) -> None:
    """Log what a repair found, as kube's repair controllers record events."""
    shown = str if which == PORTS else lambda value: str(ipaddress.ip_address(value))
    for name, values in (("not allocated, allocating", [] if new else outcome.not_allocated),
                         ("allocated to two Services", outcome.duplicates),
                         ("out of range", outcome.out_of_range),
                         ("possibly leaked, flagged for clean up", outcome.suspected),
                         ("leaked, released", outcome.freed)):
        if values:
            log.warning("service %s repair: %s: %s", _WHAT[which], name,
                        ", ".join(map(shown, values[:20])))


def _too_busy(which: str = IPS) -> Exception:
    return internal_error(f"failed to allocate a {_WHAT[which]}: too many concurrent "
                          "allocations, please try again")


__all__ = ["ALLOCATING_KINDS", "REPAIR_INTERVAL_S", "AllocationState"]
