"""kube-apiserver's RBAC bootstrap: at start, the default policy (``rbac_policy``: the
ClusterRoles and ClusterRoleBindings, and the Roles and RoleBindings of ``kube-system`` and
``kube-public``, namespaces that always exist in kubewire) is reconciled into the store
(kube's ``rbac/bootstrap-roles`` post-start hook, pkg/registry/rbac/rest/storage_rbac.go
``ensureRBACPolicy``).

Each object is read from the watch cache and created, updated or (a binding whose roleRef
changed) deleted and created again through the ordinary write paths as ``kube-apiserver``,
with no requester: the server's own writes pass the escalation checks, as kube's loopback
client (``system:masters``) does. It runs on every server: replicas starting together race
benignly, as kube's do (a create another replica made first is AlreadyExists, an update it
made first a conflict that ``guaranteed_update`` retries on the new object, which then needs
nothing). A failure is logged and the server serves without that object, as kube's hook
retries and then gives up on one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.controllers.rbac_policy import (
    default_cluster_role_bindings,
    default_cluster_roles,
    default_role_bindings,
    default_roles,
    reconcile_binding,
    reconcile_role,
)
from kubewire.server.request.delete_options import DeleteOptions
from kubewire.server.request.options import WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes.create_update import create_object, guaranteed_update
from kubewire.server.writes.deletes import delete_object
from kubewire.server.writes.rbac_writes import REQUESTER
from kubewire.status import StatusError
from kubewire.storage.base import StorageError

log = logging.getLogger(__name__)

API_SERVER = WriteOptions(field_manager="kube-apiserver")
GROUP = "rbac.authorization.k8s.io"

_decode = msgspec.json.Decoder(dict[str, Any]).decode
Reconcile = Callable[[dict[str, Any], dict[str, Any]], tuple[str, dict[str, Any]]]


class RbacBootstrap:
    """``await reconcile()`` once the caches are filled; ``done`` when it has run."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        found = [ctx.registry.lookup(GROUP, "v1", plural) for plural in
                 ("clusterroles", "clusterrolebindings", "roles", "rolebindings")]
        assert all(resource is not None for resource in found)
        self.roles, self.bindings, self.ns_roles, self.ns_bindings = (
            resource for resource in found if resource is not None)
        self.done = False

    async def reconcile(self) -> None:
        REQUESTER.set(None)  # the server's own writes (this task's context, and its children's)
        work: list[tuple[Resource, dict[str, Any], Reconcile]] = [
            *((self.roles, role, reconcile_role) for role in default_cluster_roles()),
            *((self.bindings, binding, reconcile_binding)
              for binding in default_cluster_role_bindings()),
            *((self.ns_roles, role, reconcile_role) for role in default_roles()),
            *((self.ns_bindings, binding, reconcile_binding)
              for binding in default_role_bindings())]
        try:
            # all at once: the store commits concurrent writes together, so the ~120 objects
            # of a fresh data directory cost a few commits, not one each (kube's hook goes
            # one by one; the outcome is the same, each object is reconciled on its own)
            await asyncio.gather(*(self._ensure(*item) for item in work))
        finally:
            self.done = True

    async def _ensure(self, resource: Resource, expected: dict[str, Any],
                      reconcile: Reconcile) -> None:
        name = expected["metadata"]["name"]
        namespace = expected["metadata"].get("namespace", "")
        try:
            await self._reconcile_one(resource, namespace, name, expected, reconcile)
        except (StatusError, StorageError) as err:
            log.error("reconciling %s %s/%s failed: %s", resource.plural, namespace, name, err)

    async def _reconcile_one(self, resource: Resource, namespace: str, name: str,
                             expected: dict[str, Any], reconcile: Reconcile) -> None:
        found = self.ctx.caches.for_resource(resource).get(resource.storage_key(namespace, name))
        if found is None:
            await self._create(resource, namespace, expected)
            return
        operation, _ = reconcile(_decode(found.value), expected)
        if operation == "none":
            return
        route = Route(resource, namespace, name, "", False)
        if operation == "recreate":
            await delete_object(self.ctx, resource, namespace, name, DeleteOptions())
            await self._create(resource, namespace, expected)
            return

        def reconciled(live: dict[str, Any]) -> dict[str, Any]:
            # decided again on what is stored now (another replica may have written it)
            return reconcile(live, expected)[1]

        await guaranteed_update(self.ctx, route, reconciled, API_SERVER)

    async def _create(self, resource: Resource, namespace: str, obj: dict[str, Any]) -> None:
        try:
            await create_object(self.ctx, Route(resource, namespace, "", "", False), obj,
                                API_SERVER)
        except StatusError as err:
            if err.code != 409:  # another replica (or a client) made it first: fine
                raise
