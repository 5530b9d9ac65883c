"""Escalation prevention in the write path: who is writing, and the checks of
``access/rbac_escalation`` on Roles, ClusterRoles and their bindings.

The app sets ``REQUESTER`` for each request it serves (the user the request runs as, after
impersonation, and what the server's authorizers allow it); writes made by the server itself
(controllers, bootstrap) have none and are privileged, as kube's loopback client is
(``system:masters``). kube runs the checks on the decoded, defaulted object before the strategy
(create) and inside the update's transform, before the strategy (update): so do
``create_object`` and ``guaranteed_update``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from kubewire.rbac_rules import RBAC_GROUP, RuleResolver
from kubewire.server.access.authn import UserInfo
from kubewire.server.access.rbac_escalation import (
    BINDING_RESOURCES,
    ROLE_RESOURCES,
    Check,
    Write,
    check_binding_write,
    check_role_write,
)
from kubewire.server.access.rbac_objects import CachedRbacObjects
from kubewire.server.context import ServerContext
from kubewire.server.request.routes import Route


@dataclass(frozen=True, slots=True)
class Requester:
    """The user a request runs as, whether the server's authorizers allow it a ``Check``, and
    the server's rule resolver (``rbac_resolver``)."""

    user: UserInfo
    authorize: Callable[[Check], bool]
    resolver: RuleResolver


REQUESTER: ContextVar[Requester | None] = ContextVar("kubewire_requester", default=None)
"""Set by the app around each request it serves; None for the server's own writes."""



def rbac_resolver(ctx: ServerContext) -> RuleResolver:
    """A rule resolver over the context's watch caches (a server keeps one: its memo)."""
    return RuleResolver(CachedRbacObjects(ctx))


def check_rbac_write(ctx: ServerContext, route: Route, obj: Mapping[str, Any],
                     old: Mapping[str, Any] | None) -> None:
    """Raise kube's 403 when the requester may not write ``obj`` (a create when ``old`` is
    None); nothing for other kinds, for the server's own writes and for ``system:masters``."""
    resource = route.resource
    if resource.group != RBAC_GROUP or route.subresource:
        return
    requester = REQUESTER.get()
    if requester is None:
        return
    resolver = requester.resolver
    user = requester.user
    authorize = requester.authorize  # the server's authorizer chain (--authorization-mode)
    write = Write(resource.plural, route.namespace, route.name, obj, old)
    if resource.plural in ROLE_RESOURCES:
        refused = check_role_write(resolver, user, authorize, write)
    elif resource.plural in BINDING_RESOURCES:
        refused = check_binding_write(resolver, user, authorize, write)
    else:
        return
    if refused is not None:
        raise refused
