"""Admission plugins' listers of small cluster-scoped kinds (PriorityClasses, IngressClasses,
StorageClasses): every object of the kind as the watch cache holds it, decoded once per
revision (``ServerContext.listers``), as kube's plugins read a shared informer's lister instead
of the store. The decoded objects are shared: callers read them and never change them.

A lister is rebuilt only when its kind's cache changed (``WatchCache.last_change_rev``): a pod
create reads the PriorityClasses every time, and they almost never change, so the usual read is
one comparison instead of a scan of the cache and a new list and dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubewire.server.context import ServerContext

_decode = msgspec.json.Decoder(dict[str, Any]).decode


@dataclass(slots=True)
class Lister:
    """One kind's objects as of revision ``revision`` of ``cache`` (the cache object itself:
    a kind whose cache is replaced starts again)."""

    cache: object
    revision: int
    held: dict[str, tuple[int, dict[str, Any]]]  # key -> (its revision, its decoded form)
    objects: list[dict[str, Any]]
    by_name: dict[str, dict[str, Any]] | None = field(default=None)


def _lister(ctx: ServerContext, group: str, plural: str) -> Lister | None:
    """The kind's lister, brought up to date (None when the kind is not served)."""
    resource = ctx.registry.lookup(group, "v1", plural)
    if resource is None:
        return None
    cache = ctx.caches.for_resource(resource)
    revision = cache.last_change_rev
    known: Lister | None = ctx.listers.get(resource.id)
    if known is not None and known.cache is cache and known.revision == revision:
        return known
    held = known.held if known is not None else {}
    now: dict[str, tuple[int, dict[str, Any]]] = {}
    for item in cache.scan(resource.storage_prefix()):
        entry = held.get(item.key)
        now[item.key] = entry if entry is not None and entry[0] == item.revision \
            else (item.revision, _decode(item.value))
    lister = Lister(cache, revision, now, [obj for _, obj in now.values()])
    ctx.listers[resource.id] = lister
    return lister


def cluster_objects(ctx: ServerContext, group: str, plural: str) -> list[dict[str, Any]]:
    """Every object of the cluster-scoped kind ``group``/v1/``plural`` (none if not served):
    a new list of the shared decoded objects."""
    lister = _lister(ctx, group, plural)
    return [] if lister is None else list(lister.objects)


def cluster_objects_by_name(ctx: ServerContext, group: str,
                            plural: str) -> Mapping[str, dict[str, Any]]:
    """``cluster_objects`` by ``metadata.name``, as a lister's ``Get`` finds them: made once
    per revision of the kind and shared, so read only."""
    lister = _lister(ctx, group, plural)
    if lister is None:
        return {}
    if lister.by_name is None:
        lister.by_name = {str(obj["metadata"]["name"]): obj for obj in lister.objects}
    return lister.by_name
