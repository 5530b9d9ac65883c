"""The ``scale`` subresource endpoint: GET, PUT, PATCH and apply of an autoscaling/v1 ``Scale``.

kube's ``ScaleREST`` (``pkg/registry/apps/deployment/storage/storage.go``): a read converts the
stored object with ``scale_from_deployment``; a write runs inside the parent's guaranteed update
(``scaleUpdatedObjectInfo``): the current Scale is built from the fresh parent, the PUT body
replaces it or the patch applies to it, ``apply_scale`` writes ``spec.replicas`` back, and the
parent then goes through its ordinary update (defaults, generation bump, validation), so
watchers of the parent see one MODIFIED. Subresources never create (objects-and-clients.md §2.2).

The current Scale carries the parent's managedFields converted for it (``patch.scale_ownership``,
kube's ``ScaleHandler``), so the Scale's own field manager records the write: an Update for a
PUT or a patch, or a server-side apply (``application/apply-patch+yaml``), which decides
conflicts and ownership on the Scale. Only ``spec.replicas`` goes back to the parent, with the
Scale's managedFields converted back. As kube's ``ScaleREST.Update``, the answer is the stored
parent's Scale, with no managedFields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import msgspec

from kubewire.json_copy import copy_json
from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.schema import type_for
from kubewire.server.context import ServerContext
from kubewire.server.patch import json_patch as patching
from kubewire.server.patch.apply import ApplyRequest
from kubewire.server.patch.apply_request import ServerSideApply, decode_apply_body
from kubewire.server.patch.field_ownership import (
    APPLY_PATCH_MEDIA_TYPE,
    ApplyOptions,
    PrecomputedOptions,
    WriteFacts,
    parse_apply_options,
    parse_tracked_write_options,
    requested_managed_fields,
    track_write,
)
from kubewire.server.patch.managed_fields import managed_entries
from kubewire.server.patch.scale_ownership import (
    ReplicasPaths,
    ScaleOwnershipError,
    builtin_replicas_paths,
    custom_replicas_paths,
    to_parent,
    to_subresource,
)
from kubewire.server.patch.strategic import apply_strategic_merge_patch
from kubewire.server.request.routes import Route
from kubewire.server.request.write_options import WriteOptions
from kubewire.server.wire.encoding import decode_object, json_response, media_type, negotiate_json
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.writes.create_update import guaranteed_update
from kubewire.server.writes.custom_resources import version_facts
from kubewire.server.writes.lifecycle import ensure_namespace, metadata_of
from kubewire.server.writes.scale import (
    SCALE_API_VERSION,
    SCALE_KIND,
    ScaleShape,
    apply_scale,
    builtin_scale_shape,
    custom_scale_shape,
    scale_for_update,
    scale_from_deployment,
)
from kubewire.server.writes.validate import check_type_meta
from kubewire.status import BadRequest, InternalError, MethodNotAllowed, UnsupportedMediaType
from kubewire.times import format_time

_decode = msgspec.json.Decoder(dict[str, Any]).decode
PatchFunction = Callable[[dict[str, JSON], bytes], dict[str, JSON]]

__all__ = ["serve_scale"]


async def serve_scale(ctx: ServerContext, request: Request, route: Route) -> Response:
    """Answer one request on ``<parent>/<name>/scale``; the body is always a Scale."""
    negotiate_json(request.header("accept"))
    if request.method in ("GET", "HEAD"):
        await ctx.caught_up()  # an RV-unset get: what any replica acknowledged before
        return json_response(200, scale_from_deployment(await _current(ctx, route),
                                                        shape_of(route.resource)))
    if request.method == "PUT":
        return await _write(ctx, route, request, _put_body(request, route))
    if request.method == "PATCH" and \
            media_type(request.header("content-type")) == APPLY_PATCH_MEDIA_TYPE:
        return await _apply(ctx, route, request)
    if request.method == "PATCH":
        return await _write(ctx, route, request, _patched(request, route))
    raise MethodNotAllowed("the server does not allow this method on the requested resource", {})


def shape_of(resource: Resource) -> ScaleShape:
    """Where the parent keeps its replicas: an apps/v1 kind's fields, or its CRD's paths."""
    if resource.crd is None:
        return builtin_scale_shape(resource.group, resource.plural)
    scale = (version_facts(resource.crd, resource.version).get("subresources") or {}).get(
        "scale") or {}
    return custom_scale_shape(resource.group, resource.plural, scale)


def _payload(resource: Resource) -> Resource:
    """The parent's entry seen as the payload type: decoders and the SMP schema read
    apiVersion and kind from it."""
    group, _, version = SCALE_API_VERSION.rpartition("/")
    return replace(resource, group=group, version=version, kind=SCALE_KIND)


async def _current(ctx: ServerContext, route: Route) -> dict[str, JSON]:
    return _decode((await ctx.live_now(route.resource, route.namespace, route.name)).value)


UpdatedScale = Callable[[dict[str, JSON]], dict[str, JSON]]
"""The updated Scale, given the Scale of the current parent."""


def _put_body(request: Request, route: Route) -> UpdatedScale:
    payload = _payload(route.resource)
    body = decode_object(request.body, request.header("content-type"), route.resource,
                         as_kind=(payload.api_version, payload.kind))
    check_type_meta(payload, body)
    return lambda _current_scale: body


def _patched(request: Request, route: Route) -> UpdatedScale:
    payload = _payload(route.resource)
    apply = _patch_function(payload, request.header("content-type"))

    def updated(current_scale: dict[str, JSON]) -> dict[str, JSON]:
        result = apply(current_scale, request.body)
        if not isinstance(result, dict):
            raise BadRequest("the patched object is not a JSON object")
        check_type_meta(payload, result, patch=request)
        return result

    return updated


def _patch_function(payload: Resource, content_type: str) -> PatchFunction:
    kind = media_type(content_type)
    if kind == "application/json-patch+json":
        return patching.apply_json_patch
    if kind == "application/merge-patch+json":
        return patching.apply_merge_patch
    if payload.crd is not None:
        # customresource_handler.go serveScale: PatchResource with the CR patch types (an
        # apply is served by ``_apply``), so a strategic merge patch gets handlers/patch.go's
        # 415.
        raise UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, "
            "application/apply-patch+yaml")
    if kind == "application/strategic-merge-patch+json":
        return lambda doc, body: apply_strategic_merge_patch(doc, body, payload)
    # go-restful matches the PATCH route by Consumes: no route gives its generic 415.
    raise UnsupportedMediaType("415: Unsupported Media Type", {})


async def _write(ctx: ServerContext, route: Route, request: Request,
                 updated_scale: UpdatedScale) -> Response:
    """A PUT or a patch of the Scale: the Scale's field manager records an Update of it
    (``UpdateNoErrors`` on the Scale with the parent's entries converted for it)."""
    wopts = parse_tracked_write_options(request.query, request.header("user-agent"),
                                        verb="update" if request.method == "PUT" else "patch")
    await _current(ctx, route)  # 404 before anything else: subresources never create
    scale_route = replace(route, resource=_scale_resource(route.resource))

    def written(current: dict[str, JSON]) -> tuple[dict[str, JSON], JSON]:
        scale = updated_scale(copy_json(current))
        _check_scale_identity(scale, route)
        facts = WriteFacts(scale_route, wopts, ctx.now())
        tracked = track_write(facts, current, requested_managed_fields(scale),
                              _as_typed(copy_json(scale)))
        return scale, managed_entries(tracked)

    return await _converted_write(ctx, route, wopts, written)


def _scale_resource(resource: Resource) -> Resource:
    """The Scale as the kind its field manager tracks: autoscaling/v1's type, no status
    subresource (no reset fields), a built-in type even under a custom resource."""
    return replace(_payload(resource), crd=None, subresources=(), is_custom=False)


def _as_typed(scale: dict[str, JSON]) -> dict[str, JSON]:
    """The Scale as the field manager sees the typed object: ``ScaleSpec.Replicas`` is an
    ``omitempty`` int32, so 0 is no field (the writer of 0 owns no replicas)."""
    spec = scale.get("spec")
    if isinstance(spec, dict) and spec.get("replicas") == 0:
        del spec["replicas"]
    return scale


ScaleWrite = Callable[[dict[str, JSON]], tuple[dict[str, JSON], JSON]]
"""The written Scale and its managedFields, given the current Scale (with its owners)."""


async def _converted_write(ctx: ServerContext, route: Route, options: WriteOptions,
                           written: ScaleWrite) -> Response:
    """``scaleUpdatedObjectInfo.UpdatedObject`` with ``ScaleHandler``: the parent's Scale gets
    the parent's owners converted (``to_subresource``), the write gives the new Scale and its
    owners, its ``spec.replicas`` goes to the parent (``apply_scale``) and its owners are
    converted back (``to_parent``); the parent's own update then keeps those entries."""
    shape = shape_of(route.resource)
    mappings = replicas_paths(route.resource)

    def mutate(parent: dict[str, JSON]) -> dict[str, JSON]:
        entries = managed_entries(parent)
        current = scale_for_update(parent, shape)
        try:
            owners = to_subresource(entries, mappings)
        except ScaleOwnershipError as exc:
            raise InternalError(str(exc)) from None
        if owners:
            metadata_of(current)["managedFields"] = owners
        scale, scale_owners = written(current)
        updated = apply_scale(parent, scale, shape)
        converted = to_parent(entries, scale_owners, route.resource.api_version, mappings)
        meta = metadata_of(updated)
        if converted:
            meta["managedFields"] = converted
        else:
            meta.pop("managedFields", None)
        return updated

    # The parent's own update (generation bump), its managedFields as converted.
    precomputed = PrecomputedOptions(
        dry_run=options.dry_run, field_manager=options.field_manager,
        field_validation=options.field_validation, force=options.force)
    stored, _ = await guaranteed_update(ctx, route, mutate, precomputed)
    return json_response(200, scale_from_deployment(stored, shape))


def _check_scale_identity(scale: dict[str, JSON], route: Route) -> None:
    """handlers/update.go: the body's namespace defaults to the URL's; names must match."""
    meta = metadata_of(scale)
    ensure_namespace(route.resource, meta, route.namespace)
    name = meta.get("name") or ""
    if name != route.name:
        raise BadRequest(f"the name of the object ({name}) does not match the name on the URL "
                         f"({route.name})")


def replicas_paths(resource: Resource) -> ReplicasPaths:
    """Where each apiVersion of the parent keeps its spec replicas, for ``ScaleHandler``:
    ``replicasPathIn<Kind>``, or each CRD version's ``specReplicasPath`` (None without a scale
    subresource), as ``customresource_handler.go`` builds ``replicasPathInCustomResource``."""
    if resource.crd is None:
        return builtin_replicas_paths(resource.group, resource.plural)
    versions: dict[str, str | None] = {}
    for entry in (resource.crd.get("spec") or {}).get("versions") or ():
        name = str(entry.get("name") or "")
        scale = (version_facts(resource.crd, name).get("subresources") or {}).get("scale")
        versions[name] = str(scale.get("specReplicasPath") or "") if scale else None
    return custom_replicas_paths(resource.group, versions)


def _scale_apply(request: Request, options: ApplyOptions, now: str) -> ServerSideApply:
    """The apply of a Scale: the Scale's own type and field manager (``installer.go`` builds
    it for the subresource's kind, ``scopeWithFieldManager(..., "scale")`` for a custom
    resource), no reset fields."""
    apply_request = ApplyRequest(manager=options.field_manager, api_version=SCALE_API_VERSION,
                                 kind=SCALE_KIND, now=now, force=options.force,
                                 subresource="scale")
    return ServerSideApply(decode_apply_body(request.body),
                           type_for(SCALE_API_VERSION, SCALE_KIND), apply_request,
                           strict=options.field_validation == "Strict")


async def _apply(ctx: ServerContext, route: Route, request: Request) -> Response:
    """A server-side apply of the Scale: options (422), then the parent (404), then the body
    (400); the Scale's field manager applies to the current Scale with its owners."""
    options = parse_apply_options(request.query)
    await _current(ctx, route)
    server_side_apply = _scale_apply(request, options, format_time(ctx.now()))

    def written(current: dict[str, JSON]) -> tuple[dict[str, JSON], JSON]:
        applied = server_side_apply.applied_to(current)
        _check_scale_identity(applied, route)
        return applied, managed_entries(applied)

    return await _converted_write(ctx, route, options, written)
