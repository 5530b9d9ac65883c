"""A ``Store`` that takes writes in any served version and keeps the stored one.

kube converts a request's object to the storage version before it reaches etcd and converts the
stored result back for the response (one storage, many served versions: core/v1 and
events.k8s.io/v1 Events). Here that is one wrapper around the real store: a Create or Update
whose object names another version of the key's stored kind is converted to the stored version,
written, and its ``Change`` answered in the writer's version. Subscribers (the watch caches)
still see only stored-version changes; reads convert in the cache (storage/version_view.py).
Every other call passes through unchanged. ``after_write``, when set, is awaited with each
committed write's ``Change`` before ``write`` returns (the Service allocator releases there what
a write of this server let go of).
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import msgspec

from kubewire.conversions import (
    SchemaConversion,
    VersionKind,
    convert_object,
    needs_conversion,
    version_kind_of,
)
from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.json_types import JSON
from kubewire.resources import Registry, Resource
from kubewire.storage.base import Change, ChangeListener, Create, Op, Record, Store, Update

_decode = msgspec.json.Decoder(dict[str, Any]).decode
WebhookCall = Callable[[Resource, list[dict[str, JSON]], str], Awaitable[list[dict[str, JSON]]]]
_encode = GoJSONEncoder().encode


class VersionedStore:
    """``store`` with version conversion on writes; see the module docstring."""

    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        # How a CRD's conversion webhook is called (the server's, ``server/conversion``):
        # (stored entry, objects, apiVersion) -> the objects in that version. None: no calls.
        self.webhook: WebhookCall | None = None
        self.after_write: Callable[[Change], Awaitable[None]] | None = None

    @property
    def current_revision(self) -> int:
        return self.store.current_revision

    @property
    def compacted_revision(self) -> int:
        return self.store.compacted_revision

    @property
    def writes_in_flight(self) -> int:
        return self.store.writes_in_flight

    async def open(self) -> None:
        await self.store.open()

    async def consistent_revision(self) -> int:
        return await self.store.consistent_revision()

    async def close(self) -> None:
        await self.store.close()

    def subscribe(self, listener: ChangeListener) -> None:
        self.store.subscribe(listener)

    async def write(self, op: Op) -> Change:
        """Write ``op``; an object in another served version is stored in the stored one."""
        change = await self._write(op)
        if self.after_write is not None:
            await self.after_write(change)
        return change

    async def _write(self, op: Op) -> Change:
        if isinstance(op, Create | Update):
            stored = self.registry.resource_for_key(op.key)
            served = version_kind_of(op.obj)
            if stored is not None and served is not None and stored.conversion is not None:
                return await self._write_custom(op, stored, stored.conversion, served[0])
            if stored is not None and served is not None \
                    and needs_conversion(op.obj, stored.version_kind):
                obj = convert_object(op.obj, stored.version_kind)
                change = await self.store.write(replace(op, obj=obj, coerced=None))
                return change_as(change, served)
        return await self.store.write(op)

    async def _write_custom(self, op: Create | Update, stored: Resource,
                            conversion: SchemaConversion, served: str) -> Change:
        """A custom resource: stored as its CRD's codec encodes it (converted to the storage
        version, pruned with its schema), answered as a read in the writer's version decodes
        the stored bytes (kube's Create and Update answer what they decode from etcd). An
        object in another version with a webhook strategy is converted by ``webhook``."""
        storage_version = stored.api_version
        if served == storage_version:
            return await self.store.write(op)
        obj = _decode(_encode(op.obj))  # the caller's object stays as it is
        if conversion.webhook:  # called here, before the write is queued to the writer
            if self.webhook is None or stored is None:
                raise ValueError(f"no conversion webhook caller for {served}")
            [obj] = await self.webhook(stored, [obj], storage_version)
        # converted, and not defaulted with the storage version's schema: not as it reads back
        change = await self.store.write(replace(op, obj=conversion.write(obj, storage_version),
                                                coerced=None))
        prev = change.prev_value
        values = [change.value] if prev is None else [change.value, prev]
        read = [conversion.read(_decode(value), served) for value in values]
        if conversion.webhook and self.webhook is not None and stored is not None:
            read = await self.webhook(stored, read, served)  # after the commit, as kube does
        return replace(change, value=_encode(read[0]),
                       prev_value=None if prev is None else _encode(read[1]), obj=None)

    async def get(self, key: str) -> Record | None:
        return await self.store.get(key)

    async def list(self, prefix: str, *, revision: int = 0, start: str = "",
                   limit: int = 0) -> tuple[builtins.list[Record], int]:
        return await self.store.list(prefix, revision=revision, start=start, limit=limit)

    async def changes_since(self, revision: int, prefix: str = "",
                            limit: int = 0) -> builtins.list[Change]:
        return await self.store.changes_since(revision, prefix, limit)

    async def compact(self) -> int:
        return await self.store.compact()


def change_as(change: Change, target: VersionKind) -> Change:
    """``change`` with its values converted to ``target``'s version (for the writer)."""
    prev = change.prev_value
    return replace(change, value=_convert_bytes(change.value, target),
                   prev_value=None if prev is None else _convert_bytes(prev, target),
                   obj=None)  # the hint is the stored version's object: not this value's


def _convert_bytes(value: bytes, target: VersionKind) -> bytes:
    obj = _decode(value)
    return _encode(convert_object(obj, target)) if needs_conversion(obj, target) else value
