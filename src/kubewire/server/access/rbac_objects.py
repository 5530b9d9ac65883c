"""Roles and bindings as the watch caches hold them now: ``kubewire.rbac_rules.RbacObjects`` for the
server (kube's rule resolver reads its informers' caches the same way).

Each cached object is decoded once per revision and kept (a memo keyed by storage key, checked
against the cached revision), so resolving a user's rules costs a walk over the bindings, not a
decode of each. The memo is bounded (``MEMO_LIMIT``): past it, it starts again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

from kubewire.rbac_rules import RBAC_GROUP
from kubewire.resources import Resource
from kubewire.server.context import ServerContext

MEMO_LIMIT = 50_000  # decoded objects kept, at most
_decode = msgspec.json.Decoder(dict[str, Any]).decode
_KINDS = ("clusterrolebindings", "rolebindings", "clusterroles", "roles")


class CachedRbacObjects:
    """``RbacObjects`` over ``ctx.caches``."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self._memo: dict[str, tuple[int, dict[str, Any]]] = {}
        self._resources: dict[str, Resource | None] = {}
        self._watched: tuple[Any, ...] | None = None  # the kinds' watch caches

    def _resource(self, plural: str) -> Resource | None:
        found = self._resources.get(plural)
        if found is None:  # built-in kinds: their entries never change while serving
            found = self._resources[plural] = self.ctx.registry.lookup(RBAC_GROUP, "v1", plural)
        return found

    def _decoded(self, key: str, revision: int, value: bytes) -> dict[str, Any]:
        seen = self._memo.get(key)
        if seen is not None and seen[0] == revision:
            return seen[1]
        obj = _decode(value)
        self._memo[key] = (revision, obj)
        return obj

    def _get(self, plural: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        resource = self._resource(plural)
        if resource is None:
            return None
        key = resource.storage_key(namespace, name)
        found = self.ctx.caches.for_resource(resource).get(key)
        return None if found is None else self._decoded(key, found.revision, found.value)

    def _all(self, plural: str, namespace: str = "") -> Iterator[Mapping[str, Any]]:
        resource = self._resource(plural)
        if resource is None:
            return
        cache = self.ctx.caches.for_resource(resource)
        if len(self._memo) > MEMO_LIMIT:  # deleted objects' entries: start again
            self._memo.clear()
        for item in cache.scan(resource.storage_prefix(namespace)):
            yield self._decoded(item.key, item.revision, item.value)

    def revision(self) -> tuple[int, int, int, int]:
        """The newest revision that touched each RBAC kind: changes when any object does
        (``rbac_authorizer.RbacSource``)."""
        watched = self._watched
        if watched is None:  # built-in kinds' caches: made at start, never replaced
            caches = self.ctx.caches
            watched = self._watched = tuple(
                caches.for_resource(resource)
                for resource in map(self._resource, _KINDS) if resource is not None)
        a, b, c, d = watched
        return a.last_change_rev, b.last_change_rev, c.last_change_rev, d.last_change_rev

    def role(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._get("roles", namespace, name)

    def cluster_role(self, name: str) -> Mapping[str, Any] | None:
        return self._get("clusterroles", "", name)

    def role_bindings(self, namespace: str) -> Iterator[Mapping[str, Any]]:
        return self._all("rolebindings", namespace)

    def cluster_role_bindings(self) -> Iterator[Mapping[str, Any]]:
        return self._all("clusterrolebindings")
