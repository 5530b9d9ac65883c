"""``POST pods/<name>/eviction``: a policy/v1 (or v1beta1) ``Eviction`` deletes the pod, as
kube's ``EvictionREST.Create`` (registry/core/pod/storage/eviction.go) does.

The Eviction's name must be the URL's (400 ``name in URL does not match name in Eviction
object``), the pod must exist (404). kube then decides whether PodDisruptionBudgets matter
(``can_ignore_budgets``: a pod that is Pending, Succeeded, Failed or already being deleted is
evicted without looking); for any other pod it lists the budgets selecting it (``_budgets``):
more than one is kube's ``201`` carrying a ``Failure`` Status with code 500; one is checked and
decremented through its status (``disruption_budgets``: 429 ``Cannot evict pod as it would
violate the pod's disruption budget.`` with a ``DisruptionBudget`` cause when none is left,
retried on conflicts with a fresh read), unless the pod is unready and the budget's
``unhealthyPodEvictionPolicy`` (or its being satisfied) lets it go untouched, pinned to the
pod's resourceVersion (a conflict then is a 429 too). A dry run decrements nothing.

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
from kubewire.server.request.write_options import WriteOptions
from kubewire.server.wire.encoding import encode_json, json_response, negotiate_json
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.writes.create_update import guaranteed_update
from kubewire.server.writes.deletes import delete_object
from kubewire.server.writes.disruption_budgets import (
    MULTIPLE_BUDGETS,
    decremented,
    matching_budgets,
    plan_for,
    too_many_requests,
)
from kubewire.server.writes.payloads import (
    created_success,
    decode_payload,
    payload_name,
    set_pod_condition,
)
from kubewire.status import (
    BadRequest,
    Conflict,
    MethodNotAllowed,
    StatusError,
    conflict,
    not_found,
    success_status,
)
from kubewire.storage.base import KeyNotFoundError, RevisionMismatchError, Update

__all__ = ["can_ignore_budgets", "serve_eviction"]

EVICTION_API_VERSION = "policy/v1"
UPDATE_RETRIES = 16
API_SERVER = WriteOptions(field_manager="kube-apiserver")  # kube's loopback client
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
    current = await ctx.live_now(pods, route.namespace, route.name)
    pod = _decode(current.value)
    if not can_ignore_budgets(pod):
        budgets = await _budgets(ctx, pod)
        if len(budgets) > 1:  # kube returns this Status as the create's object: HTTP 201
            return json_response(201, {**success_status(), "status": "Failure",
                                       "message": MULTIPLE_BUDGETS, "code": 500})
        if budgets:
            plan = plan_for(pod, budgets[0])
            if plan.decrement:
                await _check_and_decrement(ctx, budgets[0], route.name, dopts.dry_run)
            elif not dopts.precondition_resource_version:
                name = str(budgets[0]["metadata"]["name"])
                pinned = replace(dopts, precondition_resource_version=str(current.revision))
                try:
                    await _evict(ctx, pods, route, pinned)
                except Conflict:  # the pod changed since it was judged unready: retry later
                    raise _still_processing(name) from None
                return created_success()
    await _evict(ctx, pods, route, dopts)
    return created_success()


def _still_processing(name: str) -> StatusError:
    return too_many_requests(f"The disruption budget {name} is still being processed by the "
                             "server.", 10)


async def _budgets(ctx: ServerContext, pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The budgets of the pod's namespace selecting it, read consistently (kube lists them)."""
    resource = ctx.registry.lookup("policy", "v1", "poddisruptionbudgets")
    if resource is None:
        return []
    await ctx.caught_up()
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    cache = ctx.caches.for_resource(resource)
    return matching_budgets(pod, (_decode(found.value)
                                  for found in cache.scan(resource.storage_prefix(namespace))))


async def _check_and_decrement(ctx: ServerContext, budget: dict[str, Any], pod_name: str,
                               dry_run: bool) -> None:
    """``checkAndDecrement``, written as kube's loopback client's ``UpdateStatus`` (manager
    ``kube-apiserver``, the status strategy and its validation), decided again on the budget
    as it is now after a conflict (``retry.RetryOnConflict``)."""
    resource = ctx.registry.lookup("policy", "v1", "poddisruptionbudgets")
    assert resource is not None
    meta = budget["metadata"]
    route = Route(resource, str(meta["namespace"]), str(meta["name"]), "status", False)
    if dry_run:  # the checks alone
        decremented(_decode((await ctx.live_now(resource, route.namespace,
                                                route.name)).value), pod_name, ctx.now())
        return

    def decrement(live: dict[str, Any]) -> dict[str, Any]:
        return decremented(live, pod_name, ctx.now())

    await guaranteed_update(ctx, route, decrement, API_SERVER)


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
