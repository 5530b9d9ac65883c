"""DELETE of one object and of a collection.

An object without finalizers (and not a scheduled pod in its grace period) is removed at once:
watchers get DELETED carrying the delete's revision. Otherwise it is marked — deletionTimestamp
set, a MODIFIED event — and removed when its last finalizer goes or its grace period ends
(objects-and-clients.md §1.10, §1.11). Namespaces are marked Terminating and emptied by the
namespace controller.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.request.options import DeleteOptions, parse_delete_options, parse_list_options
from kubewire.server.request.routes import Route
from kubewire.server.wire.encoding import encode_json, json_response, media_type, negotiate_json
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.wire.protobuf import PROTOBUF_MEDIA_TYPE, decode_protobuf_object
from kubewire.server.writes import lifecycle
from kubewire.server.writes.priority_classes import system_class_delete_forbidden
from kubewire.status import MethodNotAllowed, StatusError, conflict, not_found
from kubewire.storage.base import (
    ChangeType,
    CompactedError,
    Delete,
    KeyNotFoundError,
    RevisionMismatchError,
    StorageError,
    Update,
)

DELETE_RETRIES = 16

_decode = msgspec.json.Decoder(dict[str, Any]).decode


async def delete(ctx: ServerContext, request: Request, route: Route) -> Response:
    if route.subresource:
        raise MethodNotAllowed("the server does not allow this method on the requested resource",
                               {})
    negotiate_json(request.header("accept"))
    dopts = parse_delete_options(_options_body(request), request.query)
    if route.resource.id == "scheduling.k8s.io/priorityclasses":
        refused = system_class_delete_forbidden(route.name)  # its REST.Delete, before the store
        if refused is not None:
            raise refused
    result = await delete_object(ctx, route.resource, route.namespace, route.name, dopts)
    return json_response(200, result)


async def delete_object(ctx: ServerContext, resource: Resource, namespace: str, name: str,
                        dopts: DeleteOptions) -> dict[str, Any]:
    """Delete or mark one object; returns the DELETE response body."""
    key = resource.storage_key(namespace, name)
    for _ in range(DELETE_RETRIES):
        current = await ctx.live_now(resource, namespace, name)
        old = _decode(current.value)
        try:
            plan = lifecycle.plan_delete(resource, old, _delete_request(ctx, dopts), ctx.now())
        except StatusError:  # preconditions checked on cached data, maybe stale: again
            if await ctx.was_stale(resource, key, current.revision):
                continue
            raise
        if dopts.dry_run:
            return lifecycle.delete_response(resource, plan.obj, removed=plan.remove)
        try:
            revision = current.revision
            marked = None
            if plan.needs_write:
                # kube writes the marked object first (watchers see MODIFIED), even when the
                # delete then completes at once (grace 0, no finalizers): store.go Delete
                change = await ctx.store.write(Update(key, plan.obj, revision))
                revision, marked = change.revision, change.value
            if plan.remove:
                return await _remove(ctx, resource, key, revision, marked)
            if not plan.needs_write:
                return plan.obj
        except RevisionMismatchError as err:  # retried on the object as it is now
            await ctx.caught_up(err.actual)
            continue
        except KeyNotFoundError:
            raise not_found(resource.group, resource.plural, name) from None
        return _decode(change.value)  # the controllers see it marked in the commit feed
    raise conflict(resource.group, resource.plural, name)


async def _remove(ctx: ServerContext, resource: Resource, key: str, revision: int,
                  marked: bytes | None) -> dict[str, Any]:
    """Remove the object at ``revision``; the DELETE response body. If the deletion controller
    removed the object we just ``marked`` first (it saw the mark in the commit feed: a pod with
    grace 0; likelier the slower the store, as on etcd), this deletion is done all the same."""
    try:
        change = await ctx.store.write(Delete(key, revision))
    except KeyNotFoundError:
        if marked is None:
            raise
        # kube answers the removed object at the delete's revision (etcd3 conditionalDelete),
        # as the DELETED event carries it: here, the controller's removal
        removed = await _removal(ctx, key, revision)
        return lifecycle.delete_response(resource, _decode(removed or marked))
    return lifecycle.delete_response(resource, _decode(change.value))


async def _removal(ctx: ServerContext, key: str, after: int) -> bytes | None:
    """The DELETED value (last state at the delete's revision) of another writer's removal of
    ``key`` after revision ``after``; None if the history no longer holds it."""
    try:
        await ctx.caches.wait_for_revision(await ctx.store.consistent_revision())
        changes = await ctx.store.changes_since(after, prefix=key)
    except (CompactedError, StorageError):
        return None
    return next((c.value for c in changes
                 if c.key == key and c.type is ChangeType.DELETED), None)


def _options_body(request: Request) -> bytes:
    """The DeleteOptions body as JSON. client-go's typed clients send it in their content type,
    protobuf included, with ``apiVersion: v1`` (its scheme's first DeleteOptions kind)."""
    if request.body and media_type(request.header("content-type")) == PROTOBUF_MEDIA_TYPE:
        return encode_json(decode_protobuf_object(request.body, "v1", "DeleteOptions"))
    return request.body


def _delete_request(ctx: ServerContext, dopts: DeleteOptions) -> lifecycle.DeleteRequest:
    return lifecycle.DeleteRequest(
        grace_period_seconds=dopts.grace_period_seconds,
        precondition_uid=dopts.precondition_uid,
        precondition_resource_version=dopts.precondition_resource_version,
        propagation_policy=dopts.propagation_policy,
        orphan_dependents=dopts.orphan_dependents,
        garbage_collection=ctx.garbage_collection)


async def delete_collection(ctx: ServerContext, request: Request, route: Route) -> Response:
    """Delete every object a list with the same query would return; answer that list."""
    resource = route.resource
    if resource.id == "core/namespaces" or route.subresource:
        raise MethodNotAllowed("the server does not allow this method on the requested resource",
                               {})
    negotiate_json(request.header("accept"))
    opts = parse_list_options(request.query, resource)
    dopts = parse_delete_options(_options_body(request), request.query)
    cache = ctx.caches.for_resource(resource)
    listed = [obj for obj in cache.scan(resource.storage_prefix(route.namespace))
              if opts.label_selector.matches(obj.labels)
              and opts.field_selector.matches(obj.fields)]
    failures: list[StatusError] = []
    for obj in listed:
        try:
            await delete_object(ctx, resource, obj.namespace, obj.name, dopts)
        except StatusError as err:
            if err.code != 404:  # gone meanwhile is fine (store.go DeleteCollection)
                failures.append(err)
    if failures:
        raise failures[0]
    # kube answers the list it processed, as it was listed (before the deletes)
    items = [_list_item(resource, _decode(obj.value)) for obj in listed]
    return json_response(200, {"kind": resource.list_kind, "apiVersion": resource.api_version,
                               "metadata": {"resourceVersion": str(ctx.caches.revision)},
                               "items": items})


def _list_item(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """Built-in kinds' list items carry no kind/apiVersion; custom kinds' keep them."""
    if not resource.is_custom:
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
    return obj


async def remove_if_finished(ctx: ServerContext, resource: Resource, key: str,
                             revision: int) -> None:
    """Remove an object whose deletion just completed (last finalizer gone, grace over)."""
    # Someone else changing or removing it meanwhile is fine: their write decides.
    with contextlib.suppress(RevisionMismatchError, KeyNotFoundError):
        await ctx.store.write(Delete(key, revision))
