"""Admission plugins' listers of small cluster-scoped kinds (PriorityClasses, IngressClasses,
StorageClasses): every object of the kind as the watch cache holds it, decoded once per
revision (``ServerContext.listers``), as kube's plugins read a shared informer's lister instead
of the store. The decoded objects are shared: callers read them and never change them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubewire.server.context import ServerContext

_decode = msgspec.json.Decoder(dict[str, Any]).decode


def cluster_objects(ctx: ServerContext, group: str, plural: str) -> list[dict[str, Any]]:
    """Every object of the cluster-scoped kind ``group``/v1/``plural`` (none if not served)."""
    resource = ctx.registry.lookup(group, "v1", plural)
    if resource is None:
        return []
    held = ctx.listers.get(resource.id, {})
    now: dict[str, tuple[int, dict[str, Any]]] = {}
    for item in ctx.caches.for_resource(resource).scan(resource.storage_prefix()):
        known = held.get(item.key)
        now[item.key] = known if known is not None and known[0] == item.revision \
            else (item.revision, _decode(item.value))
    ctx.listers[resource.id] = now
    return [obj for _, obj in now.values()]
