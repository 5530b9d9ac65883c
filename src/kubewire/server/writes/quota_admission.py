"""LimitRanger and ResourceQuota admission for one write: the I/O around ``limit_ranger`` and
``quota``.

Reads a namespace's LimitRanges and ResourceQuotas from the watch caches; a write a quota
charges moves the quota's ``status.used`` first, with the quota's revision as precondition (as
kube's quota evaluator updates the quota before the object is stored), checking again on a
concurrent change. A dry run is checked and charges nothing. The quota controller
(``controllers/resource_quota``) recalculates ``used`` from what the namespace holds, so a
charge whose write then fails, and deletions, are set right.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.request.routes import Route
from kubewire.server.writes import limit_ranger, quota
from kubewire.server.writes.admission import admission_name
from kubewire.status import StatusError, conflict, forbidden_resource
from kubewire.storage.base import KeyNotFoundError, RevisionMismatchError, Update
from kubewire.storage.cached import CachedObject

_decode = msgspec.json.Decoder(dict[str, Any]).decode
CHARGE_ATTEMPTS = 4  # checkQuotas: the first try and 3 retries on conflicts
POD_ID = "core/pods"
CLAIM_ID = "core/persistentvolumeclaims"


def _namespace_objects(ctx: ServerContext, plural: str,
                       namespace: str) -> list[tuple[CachedObject, dict[str, Any]]]:
    """The namespace's objects of a core/v1 kind, each decoded anew (the caller's own: a
    charge changes its quota's copy). Every pod create asks for LimitRanges twice and for
    ResourceQuotas once, and most namespaces (most clusters) have none: the scan of an empty
    span is a cheap check (``WatchCache.scan``)."""
    resource = ctx.registry.lookup("", "v1", plural)
    if resource is None or not namespace:
        return []
    found = ctx.caches.for_resource(resource).scan(resource.storage_prefix(namespace))
    return [(item, _decode(item.value)) for item in found] if found else []


def limit_ranges(ctx: ServerContext, namespace: str) -> list[dict[str, Any]]:
    return [obj for _, obj in _namespace_objects(ctx, "limitranges", namespace)]


def default_pod_limits(ctx: ServerContext, namespace: str, pod: dict[str, Any]) -> None:
    """LimitRanger's mutating half, on a pod being created (in place)."""
    ranges = limit_ranges(ctx, namespace)
    if ranges:
        limit_ranger.default_pod(pod, ranges)


def _forbidden(resource: Resource, obj: dict[str, Any], why: str) -> StatusError:
    return forbidden_resource(resource.group, resource.plural, admission_name(obj), why)


def check_limits(ctx: ServerContext, resource: Resource, namespace: str,
                 obj: dict[str, Any]) -> None:
    """LimitRanger's validating half, on pods and claims being created: 403 with kube's text."""
    if resource.id not in (POD_ID, CLAIM_ID):
        return
    ranges = limit_ranges(ctx, namespace)
    if not ranges:
        return
    problems = (limit_ranger.pod_problems(obj, ranges) if resource.id == POD_ID
                else limit_ranger.claim_problems(obj, ranges))
    if problems:
        raise _forbidden(resource, obj, limit_ranger.aggregate(problems))


def _evaluator(ctx: ServerContext, route: Route,
               old: dict[str, Any] | None) -> quota.Evaluator | None:
    """The evaluator ResourceQuota admission charges a write with; None when nothing is
    charged: a cluster-scoped kind, another version than the stored one, an update of a kind
    charged only on create, or a namespace without quotas (most: found before an evaluator is
    made, without decoding anything)."""
    resource, namespace = route.resource, route.namespace
    if not resource.namespaced or not namespace or not resource.is_stored_version:
        return None
    quotas = ctx.registry.lookup("", "v1", "resourcequotas")
    if quotas is None or not ctx.caches.for_resource(quotas).scan(
            quotas.storage_prefix(namespace)):
        return None
    evaluator = quota.evaluator_for(resource.group, resource.plural)
    if old is not None and not evaluator.handles_update():
        return None
    return evaluator


async def charge_quota(ctx: ServerContext, route: Route, obj: dict[str, Any],
                       old: dict[str, Any] | None, *, dry_run: bool) -> None:
    """ResourceQuota admission of a create (``old`` None) or update of ``obj`` in
    ``route.namespace``: 403 with kube's text when a quota would be exceeded, else the quotas'
    ``status.used`` moved."""
    resource, namespace = route.resource, route.namespace
    evaluator = _evaluator(ctx, route, old)
    if evaluator is None:
        return
    quotas_res = ctx.registry.lookup("", "v1", "resourcequotas")
    assert quotas_res is not None
    for _ in range(CHARGE_ATTEMPTS):
        found = _namespace_objects(ctx, "resourcequotas", namespace)
        if not found:
            return
        by_name = {quota.quota_name(q): (cached, q) for cached, q in found}
        try:
            charges = quota.check_request([q for _, q in found], evaluator, obj, old, ctx.now())
        except quota.QuotaRefused as refused:
            raise _forbidden(resource, obj, str(refused)) from None
        if dry_run or not charges:
            return
        try:
            for charge in charges:
                cached, current = by_name[charge.name]
                status = dict(current.get("status") or {})
                status["used"] = charge.used
                current["status"] = status
                await ctx.store.write(Update(quotas_res.storage_key(namespace, charge.name),
                                             current, cached.revision))
        except RevisionMismatchError as err:
            await ctx.caught_up(err.actual)
            continue
        except KeyNotFoundError:  # the quota went meanwhile: check against what is left
            await ctx.caught_up()
            continue
        return
    raise conflict("", "resourcequotas", next(iter(by_name), ""))


__all__ = ["charge_quota", "check_limits", "default_pod_limits", "limit_ranges"]
