"""``POST pods/<name>/eviction``: a policy/v1 (or v1beta1) ``Eviction`` deletes the pod, as
kube's ``EvictionREST.Create`` (registry/core/pod/storage/eviction.go) does.

The Eviction's name must be the URL's (400 ``name in URL does not match name in Eviction
object``), the pod must exist (404). kube then decides whether PodDisruptionBudgets matter
(``can_ignore_budgets``: a pod that is Pending, Succeeded, Failed or already being deleted is
evicted without looking); for any other pod it lists the budgets selecting it and refuses (429)
or decrements one. kubewire serves no PodDisruptionBudgets yet, so no budget selects any pod
and every eviction proceeds: the budget check belongs in ``serve_eviction`` where it says so.

Evicting is ``addConditionAndDeletePod``: the pod's ``DisruptionTarget`` condition becomes True
(reason ``EvictionByEvictionAPI``, through the status store: no validation of the spec, no
managedFields), then the pod is deleted with the Eviction's ``deleteOptions`` (grace period,
preconditions — checked before the condition is written; ``dryRun`` from either the body or
the query, and then nothing is written). The answer is ``201`` with a ``Status`` ``Success``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.patch.field_ownership import parse_tracked_write_options
from kubewire.server.request.options import DeleteOptions, parse_delete_options
from kubewire.server.request.routes import Route
from kubewire.server.wire.encoding import encode_json, negotiate_json
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.writes.deletes import delete_object
from kubewire.server.writes.payloads import (
    created_success,
    decode_payload,
    payload_name,
    set_pod_condition,
)
from kubewire.status import BadRequest, MethodNotAllowed, conflict, not_found
from kubewire.storage.base import KeyNotFoundError, RevisionMismatchError, Update

__all__ = ["can_ignore_budgets", "serve_eviction"]

EVICTION_API_VERSION = "policy/v1"
UPDATE_RETRIES = 16
DISRUPTION_TARGET = {"type": "DisruptionTarget", "status": "True",
                     "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}

_decode = msgspec.json.Decoder(dict[str, Any]).decode


def can_ignore_budgets(pod: dict[str, Any]) -> bool:
    """eviction.go ``canIgnorePDB``: evicting this pod disrupts nothing a budget protects."""
    phase = (pod.get("status") or {}).get("phase")
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    return phase in ("Succeeded", "Failed", "Pending") or deleting


async def serve_eviction(ctx: ServerContext, request: Request, route: Route) -> Response:
    if request.method != "POST":
        raise MethodNotAllowed("the server does not allow this method on the requested resource",
                               {})
    negotiate_json(request.header("accept"))
    wopts = parse_tracked_write_options(request.query, request.header("user-agent"))
    eviction = decode_payload(request, route, EVICTION_API_VERSION, "Eviction",
                              aliases=("policy/v1beta1",))
    if payload_name(eviction) != route.name:
        raise BadRequest("name in URL does not match name in Eviction object")
    options = eviction.get("deleteOptions")
    dopts = parse_delete_options(encode_json(options) if isinstance(options, dict) else b"", {})
    if wopts.dry_run:
        dopts = replace(dopts, dry_run=True)
    pods = route.resource
    await ctx.live_now(pods, route.namespace, route.name)
    # Here kube checks the PodDisruptionBudgets selecting the pod unless
    # can_ignore_budgets(pod): none are served yet, so none select it.
    await _evict(ctx, pods, route, dopts)
    return created_success()


async def _evict(ctx: ServerContext, pods: Resource, route: Route, dopts: DeleteOptions) -> None:
    """``addConditionAndDeletePod``."""
    if dopts.dry_run:
        await delete_object(ctx, pods, route.namespace, route.name, dopts)
        return
    if dopts.precondition_uid or dopts.precondition_resource_version:
        # the preconditions hold for the pod as it is, before the condition changes its version
        await delete_object(ctx, pods, route.namespace, route.name, replace(dopts, dry_run=True))
    revision = await _mark_disruption_target(ctx, pods, route)
    if dopts.precondition_resource_version:  # bumped: the condition was this request's write
        dopts = replace(dopts, precondition_resource_version=str(revision))
    await delete_object(ctx, pods, route.namespace, route.name, dopts)


async def _mark_disruption_target(ctx: ServerContext, pods: Resource, route: Route) -> int:
    key = pods.storage_key(route.namespace, route.name)
    for _ in range(UPDATE_RETRIES):
        current = await ctx.live_now(pods, route.namespace, route.name)
        pod = _decode(current.value)
        set_pod_condition(pod, DISRUPTION_TARGET, ctx.now())
        try:
            change = await ctx.store.write(Update(key, pod, current.revision))
        except RevisionMismatchError as err:  # again on the pod as it is now
            await ctx.caught_up(err.actual)
            continue
        except KeyNotFoundError:
            raise not_found(pods.group, pods.plural, route.name) from None
        return change.revision
    raise conflict(pods.group, pods.plural, route.name)
