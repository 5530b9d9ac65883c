"""The CustomResourceDefinition controllers of apiextensions-apiserver, and the serving of the
kinds they establish (crds.md §2.2-2.5, §3.4).

- naming (``pkg/controller/status/naming_controller.go``): ``status.acceptedNames`` and the
  ``NamesAccepted`` condition, names checked against the other CRDs of the group and the
  built-in kinds; a deleted CRD frees its names, so its group's other CRDs are looked at again;
- establishing (``pkg/controller/establish``): ``Established=True InitialNamesAccepted`` once the
  names are accepted (at once: kubewire is a single apiserver);
- serving (``customresource_handler.go``): an established CRD's served versions become registry
  entries (``Registry.with_custom``) with a watch cache, without a restart; a change of ``spec``,
  the accepted names or the uid rebuilds them (open watch streams end, as kube destroys the
  storage), a condition-only change just refreshes the entries;
- finalizer (``pkg/controller/finalizer/crd_finalizer.go``): a deleted CRD's custom resources are
  deleted (watchers see DELETED for each), then ``Terminating=False InstanceDeletionCompleted``
  and the cleanup finalizer removed through ``/status``, which deletes the CRD.

The decisions are pure (``server.apiextensions``); this module reads the watch cache, writes
through the ordinary update and delete paths, and swaps the served registry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kubewire.resources import Registry, Resource
from kubewire.server.apiextensions.crd import crd_strategy, naming
from kubewire.server.apiextensions.crd.crd_internal import find_condition, is_condition_true
from kubewire.server.apiextensions.crd.crd_resources import resources_for
from kubewire.server.context import ServerContext
from kubewire.server.controllers.work_queue import WorkQueue
from kubewire.server.request.options import DeleteOptions, WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import guaranteed_update
from kubewire.server.writes.deletes import delete_object
from kubewire.status import StatusError
from kubewire.storage.base import Change, Store
from kubewire.times import format_time

log = logging.getLogger(__name__)

APIEXTENSIONS = WriteOptions(field_manager="kube-apiserver")
# How often the finalizer looks again while custom resources wait for their own finalizers
# (kube polls every 5 s for a minute, then retries the whole sync).
CLEANUP_POLL_S = 1.0
# A deleted CRD's kinds stop being served at once, but their open watch streams end this much
# later: kube's ``tearDown`` gives in-flight requests a second before it destroys the storage
# (crds.md §3.4), so a client hears of the CRD's deletion on its CRD watch before its custom
# resources' stream ends (kopf stops that watch itself, rather than resuming it into a 404).
TEARDOWN_DELAY_S = 1.0

_decode = msgspec.json.Decoder(dict[str, Any]).decode


class _NamingMeta(msgspec.Struct):
    name: Any = None


class _NamingSpec(msgspec.Struct):
    group: Any = None


class _NamingStatus(msgspec.Struct):
    acceptedNames: Any = None  # the JSON field's name


class _NamingView(msgspec.Struct):
    """What the naming controller reads of the other CRDs: decoding only these fields skips
    their schemas, which a full decode of every CRD of the group on each sync spent most of a
    server's start-up on (five Gateway API CRDs, ~20 ms)."""

    metadata: _NamingMeta = msgspec.field(default_factory=_NamingMeta)
    spec: _NamingSpec = msgspec.field(default_factory=_NamingSpec)
    status: _NamingStatus = msgspec.field(default_factory=_NamingStatus)


_decode_naming = msgspec.json.Decoder(_NamingView).decode


def naming_view(value: bytes) -> dict[str, Any]:
    """A stored CRD's ``metadata.name``, ``spec.group`` and ``status.acceptedNames`` (all that
    ``naming`` reads of the others), as JSON; the whole object if it has an unexpected shape."""
    try:
        view = _decode_naming(value)
    except msgspec.ValidationError:  # a field of another JSON type: read it as a dict does
        return _decode(value)
    return {"metadata": {"name": view.metadata.name}, "spec": {"group": view.spec.group},
            "status": {"acceptedNames": view.status.acceptedNames}}


def serving_facts(crd: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a CRD's serving state is built from: a change here rebuilds it (kube compares the
    spec, the accepted names and the uid)."""
    meta = crd.get("metadata") or {}
    status = crd.get("status") or {}
    return (meta.get("uid"), msgspec.json.encode(crd.get("spec")),
            msgspec.json.encode(status.get("acceptedNames")))


def entries_for(crd: Mapping[str, Any]) -> tuple[Resource, ...]:
    """The entries an established CRD serves; none before it is established."""
    if not is_condition_true(crd, "Established"):
        return ()
    return resources_for(crd)


def servable(registry: Registry, crd_name: str,
             entries: tuple[Resource, ...]) -> tuple[Resource, ...]:
    """``entries`` but those whose path or storage another entry serves already: a CRD that
    overlaps a built-in resource (an approved ``*.k8s.io`` group may define one) is established,
    but kube-apiserver's built-in handlers answer its paths (crds.md §2.2
    ``OverlappingBuiltInResource``), and its storage is the built-in kind's, never replaced."""
    def taken(res: Resource) -> bool:
        other = registry.lookup(res.group, res.version, res.plural)
        if other is not None and other.crd_name != crd_name:
            return True
        stored = registry.by_id(res.id)
        return stored is not None and stored.crd_name != crd_name

    if not any(taken(res) for res in entries):
        return entries
    ids = {res.id for res in entries if taken(res)}
    return tuple(res for res in entries if res.id not in ids)


async def served_at_start(store: Store, registry: Registry) -> Registry:
    """The registry with every established CRD's kinds, read from the store before the caches
    load, so custom resources are served (and cached) from the first request after a restart."""
    crd_kind = registry.by_id(crd_strategy.CRD_ID)
    assert crd_kind is not None
    records, _ = await store.list(crd_kind.storage_prefix())
    for record in records:
        crd = _decode(record.value)
        name = crd["metadata"]["name"]
        entries = servable(registry, name, entries_for(crd))
        if entries:
            registry = registry.with_custom(name, entries)
    return registry


class CustomResourceDefinitions:
    """Naming, establishing, serving and cleanup of CRDs, one queue keyed by CRD name."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        crd_kind = ctx.registry.by_id(crd_strategy.CRD_ID)
        assert crd_kind is not None
        self.kind = crd_kind
        self.queue = WorkQueue("customresourcedefinitions", self._sync)
        # CRD name -> the facts its served entries were built from (see ``serving_facts``)
        self._serving: dict[str, tuple[Any, ...]] = {}
        self._cleanups: dict[str, asyncio.TimerHandle] = {}
        self._teardowns: set[asyncio.TimerHandle] = set()  # unserved kinds' streams to end

    def start(self) -> None:
        self.ctx.store.subscribe(self._on_changes)
        self.queue.start()
        served: dict[str, list[Resource]] = {}
        for res in self.ctx.registry.custom():
            served.setdefault(res.crd_name, []).append(res)
        for obj in self.ctx.caches.for_resource(self.kind).scan(self.kind.storage_prefix()):
            crd = _decode(obj.value)
            entries = entries_for(crd)
            # served since the start (``served_at_start``), with caches, from this very state
            # of the CRD; one established or changed after that read (by another replica,
            # meanwhile) is built afresh by its first sync, caches included
            if entries and served.get(obj.name) == list(entries):
                self._serving[obj.name] = serving_facts(crd)
            self.queue.mark(obj.name)

    async def stop(self) -> None:
        for handle in (*self._cleanups.values(), *self._teardowns):
            handle.cancel()
        await self.queue.stop()

    def _on_changes(self, changes: Sequence[Change]) -> None:
        prefix = self.kind.storage_prefix()
        for change in changes:
            if change.key.startswith(prefix):
                self.queue.mark(change.key[len(prefix):])

    def _crd(self, name: str) -> dict[str, Any] | None:
        found = self.ctx.caches.for_resource(self.kind).get(self.kind.storage_key("", name))
        return None if found is None else _decode(found.value)

    def _others(self, crd: Mapping[str, Any]) -> list[dict[str, Any]]:
        name = crd["metadata"]["name"]
        group = (crd.get("spec") or {}).get("group")
        out = []
        for obj in self.ctx.caches.for_resource(self.kind).scan(self.kind.storage_prefix()):
            if obj.name != name:
                other = naming_view(obj.value)
                if (other.get("spec") or {}).get("group") == group:
                    out.append(other)
        return out

    async def _sync(self, name: str) -> None:
        crd = self._crd(name)
        if crd is None:
            await self._unserve(name)
            return
        if crd["metadata"].get("deletionTimestamp"):
            await self._serve(crd)  # the entries learn it is terminating (creates: 405)
            await self._clean_up(crd)
            return
        crd = await self._name_and_establish(crd)
        await self._serve(crd)

    async def _name_and_establish(self, crd: dict[str, Any]) -> dict[str, Any]:
        """The naming controller's pass, then the establishing controller's (kube's two
        controllers; kubewire is one apiserver, so establishing needs no delay)."""
        now = format_time(self.ctx.now())
        # kube checks names against the other CRDs of the group only: a built-in kind's paths
        # simply win over a CRD's (crds.md §2.3)
        names, names_condition = naming.accepted_names(crd, self._others(crd))
        status = dict(crd.get("status") or {})
        status["acceptedNames"] = names
        status["conditions"] = naming.conditions_after_naming(crd, names_condition, now)
        named = {**crd, "status": status}
        if naming.establishing_needed(named):
            status["conditions"] = naming.conditions_after_establishing(named, now)
        if status == crd.get("status"):
            return crd
        if is_condition_true({"status": status}, "Established"):
            # served before a client can read Established (kubectl wait, then create)
            await self._serve({**crd, "status": status})
        return await self._write_status(crd, status)

    async def _write_status(self, crd: Mapping[str, Any],
                            status: Mapping[str, Any]) -> dict[str, Any]:
        def with_status(current: dict[str, Any]) -> dict[str, Any]:
            current["status"] = dict(status)
            return current

        route = Route(self.kind, "", crd["metadata"]["name"], "status", False)
        updated, _ = await guaranteed_update(self.ctx, route, with_status, APIEXTENSIONS)
        return updated

    async def _serve(self, crd: Mapping[str, Any]) -> None:
        name = crd["metadata"]["name"]
        entries = servable(self.ctx.registry, name, entries_for(crd))
        if not entries:
            await self._unserve(name)
            return
        facts = serving_facts(crd)
        rebuild = self._serving.get(name) != facts
        old_ids = {res.id for res in self.ctx.registry.custom() if res.crd_name == name}
        registry = self.ctx.registry.with_custom(name, entries)
        new_ids = {res.id for res in entries if res.is_stored_version}
        if rebuild:  # each new cache replaces the old one once loaded (no request misses it)
            for res in entries:
                if res.is_stored_version:
                    await self.ctx.caches.add_kind(res)
            self._serving[name] = facts
        else:  # same storage: the caches keep their objects and watchers, with the new entry
            self.ctx.caches.refresh_kinds(entries)
        for kind_id in old_ids - new_ids:
            self.ctx.caches.remove_kind(kind_id)
        self.ctx.serve(registry)

    async def _unserve(self, name: str) -> None:
        served = [res for res in self.ctx.registry.custom() if res.crd_name == name]
        self._serving.pop(name, None)
        if not served:
            return
        self.ctx.serve(self.ctx.registry.with_custom(name, ()))
        for res in served:
            if res.is_stored_version:  # its open streams end a moment later, as kube's do
                self._tear_down_later(res.id, self.ctx.caches.for_resource(res))
        group = served[0].group
        for obj in self.ctx.caches.for_resource(self.kind).scan(self.kind.storage_prefix()):
            if (_decode(obj.value).get("spec") or {}).get("group") == group:
                self.queue.mark(obj.name)  # its names are free now

    def _tear_down_later(self, kind_id: str, cache: object) -> None:
        """End a kind's watch streams once unserved for ``TEARDOWN_DELAY_S``, unless a CRD
        serving it again has replaced its cache meanwhile (``add_kind`` closed those)."""
        def tear_down() -> None:
            self._teardowns.discard(handle)
            self.ctx.caches.remove_kind(kind_id, only=cache)

        handle = asyncio.get_running_loop().call_later(TEARDOWN_DELAY_S, tear_down)
        self._teardowns.add(handle)

    async def _clean_up(self, crd: dict[str, Any]) -> None:
        """crd_finalizer.go ``sync``: delete the custom resources, then release the CRD."""
        meta = crd["metadata"]
        if crd_strategy.CLEANUP_FINALIZER not in (meta.get("finalizers") or ()):
            return
        now = format_time(self.ctx.now())
        status = dict(crd.get("status") or {})
        served = [res for res in self.ctx.registry.custom()
                  if res.crd_name == meta["name"] and res.is_stored_version]
        builtins = [(res.group, res.plural) for res in self.ctx.registry if res.crd is None]
        outcome = naming.finalizer_outcome(crd, builtins)
        if outcome != "delete" or not served:
            # never established, or its paths and storage are a built-in kind's: nothing of
            # its own to delete
            reason = outcome if outcome != "delete" else "OverlappingBuiltInResource"
            crd_strategy.set_condition(status, naming.terminating_condition(reason), now)
            await self._release(crd, status)
            return
        progress = naming.terminating_condition("InstanceDeletionInProgress")
        if (find_condition(crd, "Terminating") or {}).get("reason") != progress["reason"]:
            crd_strategy.set_condition(status, progress, now)
            crd = await self._write_status(crd, status)
            status = dict(crd.get("status") or {})
        remaining = 0
        for res in served:
            cache = self.ctx.caches.for_resource(res)
            for obj in list(cache.scan(res.storage_prefix())):
                remaining += 1
                try:
                    await delete_object(self.ctx, res, obj.namespace, obj.name, DeleteOptions())
                except StatusError as err:
                    if err.code != 404:
                        log.warning("deleting %s %s/%s: %s", res.plural, obj.namespace,
                                    obj.name, err)
            remaining = sum(1 for r in served
                            for _ in self.ctx.caches.for_resource(r).scan(r.storage_prefix()))
        if remaining:  # custom resources with finalizers of their own: look again later
            self._look_again(meta["name"])
            return
        crd_strategy.set_condition(status, naming.terminating_condition(
            "InstanceDeletionCompleted"), now)
        await self._release(crd, status)

    async def _release(self, crd: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        """Remove the cleanup finalizer through ``/status`` (which may change metadata for a
        CRD): the last finalizer gone, the CRD is deleted."""
        def released(current: dict[str, Any]) -> dict[str, Any]:
            current["status"] = dict(status)
            meta = current["metadata"]
            meta["finalizers"] = [f for f in meta.get("finalizers") or ()
                                  if f != crd_strategy.CLEANUP_FINALIZER]
            return current

        route = Route(self.kind, "", crd["metadata"]["name"], "status", False)
        try:
            await guaranteed_update(self.ctx, route, released, APIEXTENSIONS)
        except StatusError as err:
            if err.code != 404:
                raise

    def _look_again(self, name: str) -> None:
        old = self._cleanups.pop(name, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._cleanups[name] = loop.call_later(CLEANUP_POLL_S, self.queue.mark, name)
