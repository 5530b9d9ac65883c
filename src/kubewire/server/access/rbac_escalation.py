"""Escalation prevention on writes of RBAC objects, as kube's policy-based storages decide it.

A user may create or update a Role or ClusterRole only with rules it already holds where the
object is (``ConfirmNoEscalation``), unless it may ``escalate`` roles/clusterroles; setting or
updating an aggregated ClusterRole (``aggregationRule`` with selectors, before or after) needs
every permission (``*`` on ``*.*`` and on URLs). It may create or update a RoleBinding or
ClusterRoleBinding only when it holds the rules of the role it references, unless it may
``bind`` that role. ``system:masters`` skips every
check (kube's ``EscalationAllowed``), and an update that changes only what the garbage
collector changes (owner references, finalizers) is never checked.

Sources: kubernetes pkg/registry/rbac/escalation_check.go (``EscalationAllowed``,
``RoleEscalationAuthorized``, ``BindingAuthorized``, ``IsOnlyMutatingGCFields``),
pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased/storage.go.

Pure: the request's facts, the rule resolver and an ``Authorize`` callable in, the ``Forbidden``
to answer (or None) out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubewire.rbac_rules import (
    RBAC_GROUP,
    ResolutionError,
    Rule,
    RuleResolver,
    Subject,
    confirm_no_escalation,
    rules_of,
)
from kubewire.status import Forbidden, forbidden_resource

MASTERS = "system:masters"
ROLE_RESOURCES = frozenset({"roles", "clusterroles"})
BINDING_RESOURCES = frozenset({"rolebindings", "clusterrolebindings"})
FULL_AUTHORITY = (Rule(("*",), ("*",), ("*",)), Rule(("*",), non_resource_urls=("*",)))
AGGREGATION_MESSAGE = "must have cluster-admin privileges to use the aggregationRule"
# what IsOnlyMutatingGCFields copies from the old object before comparing (kube's own three,
# and managedFields: kube's field manager has already run on the object it compares, and keeps
# the old entries for a body without them or a write that changes nothing)
_GC_FIELDS = ("ownerReferences", "finalizers", "selfLink", "managedFields")


@dataclass(frozen=True, slots=True)
class Check:
    """One ``authorizer.AttributesRecord`` the checks ask about (``escalate`` or ``bind``)."""

    verb: str
    namespace: str
    api_group: str
    resource: str
    name: str
    resource_request: bool = True
    subresource: str = ""
    path: str = ""
    api_version: str = "*"


Authorize = Callable[[Check], bool]
"""Whether the requesting user is allowed ``Check`` by the server's authorizers."""


@dataclass(frozen=True, slots=True)
class Write:
    """One write of an RBAC object: its resource (plural), the request's namespace and name
    (empty for a POST), the decoded and defaulted object, and the stored one (None: a
    create)."""

    resource: str
    namespace: str
    url_name: str
    obj: Mapping[str, Any]
    old: Mapping[str, Any] | None = None


def escalation_allowed(user: Subject) -> bool:
    """``EscalationAllowed``: members of ``system:masters`` may grant anything."""
    return MASTERS in user.groups


def only_gc_fields_changed(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """``IsOnlyMutatingGCFields``: ``new`` equals ``old`` once owner references, finalizers,
    selfLink (and managedFields, see ``_GC_FIELDS``) are taken from ``old``."""
    if old is None:
        return False
    new_meta = dict(new.get("metadata") or {})
    old_meta = old.get("metadata") or {}
    for key in _GC_FIELDS:
        new_meta.pop(key, None)
        if key in old_meta:
            new_meta[key] = old_meta[key]
    return {**new, "metadata": new_meta} == old


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def check_role_write(resolver: RuleResolver, user: Subject, authorize: Authorize,
                     write: Write) -> Forbidden | None:
    """A Role's or ClusterRole's create or update: the 403 it gets, or None.
    ``RoleEscalationAuthorized`` asks about the request's name (empty for a POST)."""
    resource, namespace, obj, old = write.resource, write.namespace, write.obj, write.old
    if escalation_allowed(user):
        return None
    if authorize(Check("escalate", namespace, RBAC_GROUP, resource, write.url_name)):
        return None
    if only_gc_fields_changed(obj, old):
        return None
    name = _name(obj)
    message = confirm_no_escalation(resolver, user, namespace, rules_of(obj))
    if message:
        return forbidden_resource(RBAC_GROUP, resource, name, message)
    if resource == "clusterroles" and _aggregation_set(obj, old) and confirm_no_escalation(
            resolver, user, namespace, FULL_AUTHORITY):
        return forbidden_resource(RBAC_GROUP, resource, name, AGGREGATION_MESSAGE)
    return None


def _aggregation_set(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """``hasAggregationRule`` of the new object, or (an update) of the old one: any update of
    an aggregated ClusterRole, or one that makes it aggregated, needs every permission."""
    return _has_aggregation_rule(obj) or (old is not None and _has_aggregation_rule(old))


def _has_aggregation_rule(role: Mapping[str, Any]) -> bool:
    """``hasAggregationRule``: an ``aggregationRule`` with at least one selector."""
    rule = role.get("aggregationRule")
    return isinstance(rule, dict) and bool(rule.get("clusterRoleSelectors"))


def check_binding_write(resolver: RuleResolver, user: Subject, authorize: Authorize,
                        write: Write) -> Forbidden | None:
    """A RoleBinding's or ClusterRoleBinding's create or update: the 403 it gets, or None.
    The namespace is the binding's ("" for a ClusterRoleBinding)."""
    resource, namespace, obj, old = write.resource, write.namespace, write.obj, write.old
    if escalation_allowed(user):
        return None
    if only_gc_fields_changed(obj, old):
        return None
    raw_ref = obj.get("roleRef")
    role_ref: Mapping[str, Any] = raw_ref if isinstance(raw_ref, dict) else {}
    kind = role_ref.get("kind")
    if kind in ("Role", "ClusterRole"):
        plural = "roles" if kind == "Role" else "clusterroles"
        check = Check("bind", namespace, str(role_ref.get("apiGroup") or ""), plural,
                      str(role_ref.get("name") or ""))
        if authorize(check):
            return None
    name = _name(obj)
    try:
        rules = resolver.role_reference_rules(role_ref, namespace)
    except ResolutionError as err:
        return forbidden_resource(RBAC_GROUP, resource, name, str(err))
    message = confirm_no_escalation(resolver, user, namespace, rules)
    return forbidden_resource(RBAC_GROUP, resource, name, message) if message else None
