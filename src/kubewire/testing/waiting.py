"""Wait, without polling, until an object the server holds satisfies a condition (or is gone).

The server's watch caches hold every object as it is now and wake ``wait_for_revision``
waiters on each commit: the waiter checks the object after each change and sleeps until the
next one, so it returns in the loop turn that applied the change it waited for. Runs on the
server's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from kubewire.resources import Registry, Resource
from kubewire.server.context import ServerContext
from kubewire.status import StatusError

# A callable on the object's dict, or (type, status) of one of its ``status.conditions``.
Condition = Callable[[dict[str, Any]], bool] | tuple[str, str]


def find_resource(registry: Registry, name: str) -> Resource | None:
    """``pods`` -> core pods; ``deployments.apps``, ``widgets.example.com``: plural.group.
    None when the server serves no such kind (yet: a CRD not established)."""
    plural, _, group = name.partition(".")
    return registry.by_id(f"{group or 'core'}/{plural}")  # the stored version's entry


def current(ctx: ServerContext, resource_name: str, namespace: str,
            name: str) -> dict[str, Any] | None:
    """The object as the cache holds it now, or None."""
    resource = find_resource(ctx.registry, resource_name)
    if resource is None:
        return None
    try:
        cache = ctx.caches.for_resource(resource)
    except KeyError:  # served, not cached yet
        return None
    found = cache.get(resource.storage_key(namespace if resource.namespaced else "", name))
    if found is None:
        return None
    obj: dict[str, Any] = msgspec.json.decode(found.value)
    return obj


def satisfies(obj: dict[str, Any], condition: Condition | None) -> bool:
    if condition is None:
        return True
    if callable(condition):
        return bool(condition(obj))
    kind, status = condition
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == kind and c.get("status") == status
               for c in conditions)


@dataclass(frozen=True, slots=True)
class Wanted:
    """What ``wait_for_object`` waits for."""

    resource: str  # pods, deployments.apps, widgets.example.com
    name: str
    namespace: str = ""
    condition: Condition | None = None
    deleted: bool = False  # wait until it is gone instead
    timeout: float = 10.0


async def wait_for_object(ctx: ServerContext, wanted: Wanted) -> dict[str, Any] | None:
    """The object once it satisfies ``wanted.condition`` (None once gone, with ``deleted``);
    TimeoutError naming the last object seen after ``wanted.timeout`` seconds."""
    resource, name, namespace = wanted.resource, wanted.name, wanted.namespace
    condition, deleted, timeout = wanted.condition, wanted.deleted, wanted.timeout
    if find_resource(ctx.registry, resource) is None and "." not in resource:
        raise ValueError(f"no core kind {resource!r}: name others as plural.group "
                         "(deployments.apps)")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: dict[str, Any] | None = None
    while True:
        obj = current(ctx, resource, namespace, name)
        if obj is not None:
            last = obj
        if deleted and obj is None:
            return None
        if not deleted and obj is not None and satisfies(obj, condition):
            return obj
        left = deadline - loop.time()
        if left <= 0:
            where = f"{namespace}/{name}" if namespace else name
            what = "go away" if deleted else f"satisfy {condition!r}"
            raise TimeoutError(f"{resource} {where} did not {what} in {timeout}s; "
                               f"last seen: {last!r}")
        await _next_change(ctx, left)


async def _next_change(ctx: ServerContext, left_s: float) -> None:
    """Return after the caches apply the next commit, or after ``left_s``."""
    try:
        async with asyncio.timeout(left_s):
            await ctx.caches.wait_for_revision(ctx.caches.revision + 1)
    except TimeoutError:
        return
    except StatusError:  # the caches' own 3 s freshness limit: nothing committed meanwhile
        return
