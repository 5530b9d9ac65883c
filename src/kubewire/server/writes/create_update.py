"""Create, update, patch and the status subresource: validate, set metadata, commit.

A write goes once through decoding, lifecycle rules and validation, then commits to the store
with a revision precondition. Read-modify-write paths (unconditional PUT, PATCH) retry on a
concurrent change as kube's ``GuaranteedUpdate`` does; a PUT carrying a resourceVersion does
not (409 Conflict). Rejected requests change nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Mapping
from typing import Any

import msgspec

from kubewire.conversions import as_go_encodes
from kubewire.json_copy import copy_json
from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.conversion.objects import served_one
from kubewire.server.patch import json_patch as patching
from kubewire.server.patch.field_ownership import (
    APPLY_PATCH_MEDIA_TYPE,
    Mutation,
    WriteFacts,
    parse_apply,
    parse_tracked_write_options,
    requested_managed_fields,
    track_write,
)
from kubewire.server.patch.strategic import apply_strategic_merge_patch
from kubewire.server.request.options import WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.wire.encoding import (
    decode_object,
    encode_json,
    media_type,
    negotiate_json,
    object_response,
    with_type_meta,
)
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.writes import certificate_requests, lifecycle
from kubewire.server.writes.admission import (
    DEFAULT_SERVICE_ACCOUNT,
    PodFacts,
    admission_name,
    admit_pod_create,
    admit_pod_update,
    service_account_name,
)
from kubewire.server.writes.batch_strategy import ownership_basis
from kubewire.server.writes.canonicalize import canonicalize
from kubewire.server.writes.defaults import apply_kind_defaults
from kubewire.server.writes.deletes import delete, delete_collection
from kubewire.server.writes.ingress_classes import admit_ingress
from kubewire.server.writes.listers import cluster_objects, cluster_objects_by_name
from kubewire.server.writes.priority_classes import global_default_conflict
from kubewire.server.writes.quota_admission import (
    charge_quota,
    check_limits,
    default_pod_limits,
)
from kubewire.server.writes.rbac_writes import check_rbac_write
from kubewire.server.writes.storage_admission import default_claim_class, protect
from kubewire.server.writes.validate import (
    check_namespace_usable,
    check_type_meta,
    validate,
    validate_admitted,
)
from kubewire.status import (
    BadRequest,
    MethodNotAllowed,
    StatusError,
    UnsupportedMediaType,
    already_exists,
    conflict,
    generate_name_conflict,
    method_not_supported,
    not_found,
)
from kubewire.storage.base import (
    Create,
    Delete,
    KeyExistsError,
    KeyNotFoundError,
    RevisionMismatchError,
    Update,
)
from kubewire.storage.cached import CachedObject
from kubewire.storage.version_view import VersionView

__all__ = ["create", "delete", "delete_collection", "ensure_initial_namespaces", "patch",
           "update"]

# Subresources written through the object's own update path, with their own strategies
# (lifecycle.prepare_update): the object itself, /status, pods' /ephemeralcontainers,
# CertificateSigningRequests' /approval.
PATCHABLE_SUBRESOURCES = frozenset({"", "status", "ephemeralcontainers", "approval"})
# A namespace's ``/finalize`` is PUT only (kube's FinalizeREST has no Get, so no PATCH).
UPDATABLE_SUBRESOURCES = PATCHABLE_SUBRESOURCES | {"finalize"}
GENERATE_NAME_ATTEMPTS = 8  # kube store.go maxNameGenerationCreateAttempts
UPDATE_RETRIES = 16  # read-modify-write attempts before giving up with 409
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# A CustomResourceDefinition's validation walks its schemas in Python, ~40 µs per schema object
# (MAX_SCHEMA_NODES bounds them): up to ~1-2.5 s for the largest accepted, which on the loop
# held every other request (a /readyz waited 2.6 s in CI). It is a pure function of the body,
# so it runs in a worker thread; the loop keeps its turns at the interpreter's switch interval.
_CRD_ID = "apiextensions.k8s.io/customresourcedefinitions"


async def _validate(  # noqa: PLR0913 (validate's own arguments)
        resource: Resource, obj: dict[str, Any], wopts: WriteOptions,
        old: dict[str, Any] | None = None, *, subresource: str = "",
        kind_rules: bool = True) -> tuple[dict[str, Any], list[str]]:
    """``validate``, off the loop for a CRD's spec (``_CRD_ID``)."""
    if resource.id == _CRD_ID and not subresource:
        return await asyncio.to_thread(validate, resource, obj, wopts, old,
                                       kind_rules=kind_rules)
    return validate(resource, obj, wopts, old, subresource=subresource, kind_rules=kind_rules)


# The ServiceAccount plugin looks the default account up 10 times, 100-200 ms apart, before
# refusing a pod: the serviceaccounts controller may not have made it yet in a new namespace.
DEFAULT_ACCOUNT_ATTEMPTS = 10
POD_RESOURCE_ID = "core/pods"
CLAIM_RESOURCE_ID = "core/persistentvolumeclaims"
PRIORITY_CLASS_ID = "scheduling.k8s.io/priorityclasses"
INGRESS_ID = "networking.k8s.io/ingresses"
JOBS_ID = "batch/jobs"

_decode = msgspec.json.Decoder(dict[str, Any]).decode

PATCH_MEDIA_TYPES = frozenset({
    "application/json-patch+json", "application/merge-patch+json",
    "application/strategic-merge-patch+json", "application/apply-patch+yaml"})
PATCH_TYPES = {
    "application/json-patch+json": patching.apply_json_patch,
    "application/merge-patch+json": patching.apply_merge_patch,
}


async def create(ctx: ServerContext, request: Request, route: Route) -> Response:
    """POST to a collection: 201 with the stored object."""
    resource = route.resource
    if route.subresource:
        raise _method_not_allowed()
    negotiate_json(request.header("accept"))
    wopts = parse_tracked_write_options(request.query, request.header("user-agent"))
    body = decode_object(request.body, request.header("content-type"), resource)
    check_type_meta(resource, body)
    obj = with_type_meta(resource, body)
    stored, warnings = await create_object(ctx, route, obj, wopts)
    return _created(stored, warnings)


def _created(stored: bytes, warnings: list[str]) -> Response:
    return object_response(201, stored, _warning_headers(warnings))


def _decoded_body(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of a create's body with the defaults kube applies while decoding it. A custom
    resource is pruned and defaulted by ``validate`` (``custom_resources.decode``, as kube's
    codec does, pruning first); nothing before that reads its schema's fields (its create
    strategy sets metadata and drops ``status``), so it is not defaulted twice."""
    if resource.crd is not None:
        return copy_json(obj)
    return apply_kind_defaults(resource, obj)  # kube defaults while decoding the body


def _track_create(ctx: ServerContext, facts: WriteFacts, obj: dict[str, Any],
                  decoded: dict[str, Any], prepared: dict[str, Any]) -> dict[str, Any]:
    """``track_write`` for a create, then the DefaultIngressClass plugin for a new Ingress:
    kube's create handler records the writer's fields first, so what the strategy generates
    (a Job's selector and labels: ``batch_strategy.ownership_basis``) and what mutating
    admission adds (an Ingress's default class) belong to no manager."""
    resource = facts.route.resource
    if resource.id != JOBS_ID:
        prepared = track_write(facts, None, obj, prepared)
    else:
        tracked = track_write(facts, None, obj, ownership_basis(prepared, decoded))
        entries = tracked["metadata"].get("managedFields")
        prepared["metadata"].pop("managedFields", None)
        if entries is not None:
            prepared["metadata"]["managedFields"] = entries
    if resource.id == INGRESS_ID and not facts.route.subresource:
        admit_ingress(prepared, cluster_objects(ctx, "networking.k8s.io", "ingressclasses"))
    return prepared


async def create_object(ctx: ServerContext, route: Route, obj: dict[str, Any],
                        wopts: WriteOptions, *, allocate: bool = True,
                        ) -> tuple[bytes, list[str]]:
    """Prepare, validate and commit a new object (also PUT-creates); returns it encoded.
    ``allocate=False`` is for the ``kubernetes`` Service, whose reserved address is given.

    The stored bytes are the answer: the store encodes the object once, with its
    resourceVersion, and a decode and re-encode would give the same bytes back.
    """
    resource = route.resource
    if resource.crd is not None and (resource.crd.get("metadata") or {}).get(
            "deletionTimestamp"):  # customresource_handler.go serveResource
        err = method_not_supported(resource.group, resource.plural, "create")
        err.message = "create not allowed while custom resource definition is terminating"
        raise err
    generated = not (obj.get("metadata") or {}).get("name")
    attempts = GENERATE_NAME_ATTEMPTS if generated else 1
    defaulted = _decoded_body(resource, obj)
    check_rbac_write(ctx, route, defaulted, None)  # kube's policy-based storages, first
    is_pod = resource.id == POD_RESOURCE_ID and not route.subresource
    facts = await pod_admission_facts(ctx, route.namespace, defaulted) if is_pod else None
    for attempt in range(attempts):
        if attempt:  # the steps below change this attempt's copy in place (admission)
            defaulted = _decoded_body(resource, obj)
        ctx_create = lifecycle.CreateContext(namespace=route.namespace, now=ctx.now(),
                                             rng=ctx.rng)
        protect(resource.id, defaulted)  # StorageObjectInUseProtection: claims and volumes
        prepared = lifecycle.prepare_create(resource, defaulted, ctx_create)
        namespace = prepared["metadata"].get("namespace", "")
        if resource.namespaced:
            # NamespaceLifecycle, the first mutating admission plugin: kube admits before it
            # validates (handlers/create.go), so a missing or terminating namespace is the
            # answer whatever else is wrong; its 403 names the object as admission sees it,
            # before a name is generated
            await check_namespace_usable(ctx, resource, namespace, admission_name(obj))
        if resource.id == CLAIM_RESOURCE_ID:
            default_claim_class(ctx, prepared)  # DefaultStorageClass (mutating admission)
        # a pod's own rules run once, on what admission makes of it (validate_admitted)
        prepared, warnings = await _validate(resource, prepared, wopts,
                                             kind_rules=facts is None)
        prepared = canonicalize(resource, prepared)
        _admit_priority_class(ctx, resource, prepared, creating=True)
        prepared = as_go_encodes(prepared)
        # managedFields first, as kube's create handler does before mutating admission: the
        # fields admission adds belong to no manager
        prepared = _track_create(ctx, WriteFacts(route, wopts, ctx_create.now), obj, defaulted,
                                 prepared)
        name = prepared["metadata"]["name"]  # validate required one
        # a CSR: the requester in its spec (kube's strategy runs after the managedFields are
        # taken from the body), then its validating admission
        prepared = certificate_requests.with_requester(route, prepared)
        certificate_requests.admit_create(route, prepared, name)
        prepared = await _admit_create(ctx, route, prepared, facts, wopts)
        if allocate:
            prepared = await ctx.allocations.allocate_on_create(resource, prepared,
                                                                dry_run=wopts.dry_run)
        if wopts.dry_run:
            return encode_json(prepared), warnings
        key = resource.storage_key(namespace, name)
        try:
            # a custom resource is as its codec reads it: ``validate`` pruned and defaulted it
            # with its version's schema, and only its metadata has changed since
            change = await ctx.store.write(Create(key, prepared, coerced=resource.conversion))
        except KeyExistsError:
            # Only a write known not to commit gives back what it reserved; a cancelled one
            # may still commit, so its reservation stays (the repair frees a leak).
            await ctx.allocations.abandon(resource, prepared)
            if generated:
                continue
            raise already_exists(resource.group, resource.plural, name) from None
        return change.value, warnings
    raise generate_name_conflict(resource.group, resource.plural, name)


async def _admit_create(ctx: ServerContext, route: Route, prepared: dict[str, Any],
                        facts: PodFacts | None, wopts: WriteOptions) -> dict[str, Any]:
    """A create's admission after its validation: a pod's mutating plugins (LimitRanger's
    defaults, then ServiceAccount, Priority, DefaultTolerationSeconds) and its own rules again
    on what they left; then the validating LimitRanger and ResourceQuota (last in kube's
    chain), which may charge the namespace's quotas."""
    namespace = route.namespace
    if facts is not None:
        default_pod_limits(ctx, namespace, prepared)
        prepared = validate_admitted(route.resource, admit_pod_create(prepared, namespace, facts,
                                                                      owned=True))
    check_limits(ctx, route.resource, namespace, prepared)
    await charge_quota(ctx, route, prepared, None, dry_run=wopts.dry_run)
    return prepared


async def update(ctx: ServerContext, request: Request, route: Route) -> Response:
    """PUT an object, its status or a namespace's ``/finalize`` (the only way to change its
    ``spec.finalizers``): optimistic concurrency when the body carries an RV."""
    resource = route.resource
    if route.subresource not in UPDATABLE_SUBRESOURCES:
        raise _method_not_allowed()
    negotiate_json(request.header("accept"))
    wopts = parse_tracked_write_options(request.query, request.header("user-agent"),
                                        verb="update")
    body = decode_object(request.body, request.header("content-type"), resource)
    check_type_meta(resource, body)
    new = with_type_meta(resource, body)
    expected = lifecycle.update_precondition(resource, new)
    key = resource.storage_key(route.namespace, route.name)
    current = ctx.caches.for_resource(resource).get(key)
    if current is None:  # another replica may have just made it
        await ctx.caught_up()
        current = ctx.caches.for_resource(resource).get(key)
    if current is None:
        if resource.allow_create_on_update and not route.subresource:
            created, warnings = await create_object(ctx, route, _strip_rv(new), wopts)
            return _created(created, warnings)
        raise not_found(resource.group, resource.plural, route.name)

    def mutate(old: dict[str, Any]) -> dict[str, Any]:
        if expected is not None and str(expected) != old["metadata"].get("resourceVersion"):
            raise conflict(resource.group, resource.plural, route.name)
        return copy_json(new)

    stored, warnings = await guaranteed_update_encoded(ctx, route, mutate, wopts)
    return object_response(200, stored, _warning_headers(warnings))


async def patch(ctx: ServerContext, request: Request, route: Route) -> Response:
    """PATCH an object (or its status): JSON, merge or strategic merge patch, or server-side
    apply, which creates a missing object (201; never through ``/status``)."""
    resource = route.resource
    if route.subresource not in PATCHABLE_SUBRESOURCES:
        raise _method_not_allowed()
    negotiate_json(request.header("accept"))
    key = resource.storage_key(route.namespace, route.name)
    missing = ctx.caches.for_resource(resource).get(key) is None
    if missing:  # another replica may have just made it
        await ctx.caught_up()
        missing = ctx.caches.for_resource(resource).get(key) is None
    mutate: Mutation
    wopts: WriteOptions
    if media_type(request.header("content-type")) == APPLY_PATCH_MEDIA_TYPE:
        wopts, server_side_apply = parse_apply(request.query, request.body, route, ctx.now())
        if missing and not route.subresource:
            obj = server_side_apply.create(route.name)
            created, warnings = await create_object(ctx, route, obj, wopts)
            return _created(created, warnings)

        def applied(live: dict[str, Any]) -> dict[str, Any]:
            # the apply's result may share values with its body, used again on a retry
            return copy_json(server_side_apply(live))

        mutate = applied
    else:
        wopts = parse_tracked_write_options(request.query, request.header("user-agent"),
                                            verb="patch")
        apply = _patch_function(resource, request.header("content-type"))

        def patched(live: dict[str, Any]) -> dict[str, Any]:
            live_rv = live["metadata"].get("resourceVersion")  # ``live`` is patched in place
            result = apply(live, request.body)
            if not isinstance(result, dict):
                raise BadRequest("the patched object is not a JSON object")
            check_type_meta(resource, result, patch=request)
            rv = (result.get("metadata") or {}).get("resourceVersion")
            if rv and rv != live_rv:
                raise conflict(resource.group, resource.plural, route.name)
            return with_type_meta(resource, result)

        mutate = patched
    if missing:
        raise not_found(resource.group, resource.plural, route.name)
    stored, warnings = await guaranteed_update_encoded(ctx, route, mutate, wopts)
    return object_response(200, stored, _warning_headers(warnings))


async def apply_object(ctx: ServerContext, route: Route, applied: dict[str, Any],
                       field_manager: str, *, force: bool = False) -> dict[str, Any]:
    """Server-side apply of ``applied`` to the object ``route`` names, as a PATCH of
    ``application/apply-patch+yaml`` with ``fieldManager`` (and ``force``) does, creating a
    missing object: for the server's own controllers, which kube's apply as clients."""
    query = {"fieldManager": [field_manager], **({"force": ["true"]} if force else {})}
    wopts, server_side_apply = parse_apply(query, encode_json(applied), route, ctx.now())
    key = route.resource.storage_key(route.namespace, route.name)
    if ctx.caches.for_resource(route.resource).get(key) is None:
        created, _ = await create_object(ctx, route, server_side_apply.create(route.name), wopts)
        return _decode(created)

    def result(live: dict[str, Any]) -> dict[str, Any]:
        return copy_json(server_side_apply(live))

    stored, _ = await guaranteed_update(ctx, route, result, wopts)
    return stored


def _patch_function(resource: Resource, content_type: str) -> Any:
    """The patch of ``content_type``, applied in place to the request's own copy of the live
    object (``guaranteed_update``)."""
    kind = media_type(content_type)
    func = PATCH_TYPES.get(kind)
    if func is not None:
        return lambda doc, body: func(doc, body, owned=True)
    if kind == "application/strategic-merge-patch+json" and not resource.is_custom:
        return lambda doc, body: apply_strategic_merge_patch(doc, body, resource, owned=True)
    if not resource.is_custom and kind not in PATCH_MEDIA_TYPES:
        # go-restful matches a built-in's PATCH route by Consumes: no route → its generic 415.
        raise UnsupportedMediaType("415: Unsupported Media Type", {})
    raise UnsupportedMediaType(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")


async def guaranteed_update(ctx: ServerContext, route: Route, mutate: Mutation,
                            wopts: WriteOptions) -> tuple[dict[str, Any], list[str]]:
    """``guaranteed_update_encoded``, the object decoded: for callers that read it."""
    encoded, warnings = await guaranteed_update_encoded(ctx, route, mutate, wopts)
    return _decode(encoded), warnings


async def guaranteed_update_encoded(ctx: ServerContext, route: Route, mutate: Mutation,
                                    wopts: WriteOptions) -> tuple[bytes, list[str]]:
    """Read, mutate, validate, commit with the read revision; retry on a concurrent write.
    Returns the object as stored (the bytes an update answers, as a create answers its
    stored bytes), or as it would be (dry run), or the live one (a no-op).

    ``mutate`` gets the request's own copy of the live object (decoded again from the stored
    bytes: cheaper than copying ``old``) and returns an object of its own; from there every step
    changes that one object in place (one copy of the object per attempt).
    """
    resource = route.resource
    key = resource.storage_key(route.namespace, route.name)
    for _ in range(UPDATE_RETRIES):
        # a conversion webhook's version: the live object converted (before the write)
        current = await served_one(ctx, resource, await ctx.live_now(resource, route.namespace,
                                                                      route.name))
        old = _decode(current.value)
        new = await _mutated(ctx, resource, key, current, mutate)
        if new is None:
            continue
        asked = requested_managed_fields(new)  # before the steps below drop them
        new = apply_kind_defaults(resource, new, owned=True)
        check_rbac_write(ctx, route, new, old)  # in kube's update transform, before the strategy
        if resource.id == POD_RESOURCE_ID and not route.subresource:
            new = admit_pod_update(old, new, owned=True)
        uctx = lifecycle.UpdateContext(subresource=route.subresource, now=ctx.now(),
                                       namespace=route.namespace, name=route.name)
        prepared = lifecycle.prepare_update(resource, old, new, uctx, owned=True)
        prepared, warnings = await _validate(resource, prepared, wopts, old=old,
                                             subresource=route.subresource)
        prepared = canonicalize(resource, prepared)
        certificate_requests.admit_update(route, old, prepared)  # a CSR's admission
        _admit_priority_class(ctx, resource, prepared, creating=False)
        prepared = as_go_encodes(prepared)
        prepared = track_write(WriteFacts(route, wopts, uctx.now), old, asked, prepared)
        if not route.subresource:  # status writes keep the stored spec: nothing to allocate
            prepared = await _admit_update(ctx, route, old, prepared, wopts)
        if wopts.dry_run:
            return encode_json(prepared), warnings
        if lifecycle.is_noop_update(old, prepared) and not _stored_otherwise(ctx, resource, key):
            await ctx.allocations.abandon(resource, prepared, kept=old)
            return current.value, warnings
        try:
            if lifecycle.should_remove_after_update(resource, prepared):
                # store.go Update: emptied finalizers on a marked object → the update is not
                # written, the object is deleted (watchers see one DELETED) — errEmptiedFinalizers
                await ctx.allocations.abandon(resource, prepared, kept=old)
                change = await ctx.store.write(Delete(key, current.revision))
                return change.value, warnings
            change = await ctx.store.write(Update(key, prepared, current.revision))
        except RevisionMismatchError as err:  # retried on the object as it is now
            await ctx.allocations.abandon(resource, prepared, kept=old)
            await ctx.caught_up(err.actual)
            continue
        except KeyNotFoundError:
            await ctx.allocations.abandon(resource, prepared, kept=old)
            raise not_found(resource.group, resource.plural, route.name) from None
        return change.value, warnings
    raise conflict(resource.group, resource.plural, route.name)


async def _admit_update(ctx: ServerContext, route: Route, old: dict[str, Any],
                        prepared: dict[str, Any], wopts: WriteOptions) -> dict[str, Any]:
    """An update's validating admission and allocations: LimitRanger bounds a claim's new size,
    ResourceQuota charges services and claims again for what a change adds, then cluster IPs
    and node ports follow the spec."""
    if not lifecycle.is_noop_update(old, prepared):
        if route.resource.id == CLAIM_RESOURCE_ID:  # LimitRanger bounds claims on update too
            check_limits(ctx, route.resource, route.namespace, prepared)
        await charge_quota(ctx, route, prepared, old, dry_run=wopts.dry_run)
    return await ctx.allocations.allocate_on_update(route.resource, old, prepared,
                                                    dry_run=wopts.dry_run)


async def _mutated(ctx: ServerContext, resource: Resource, key: str, current: CachedObject,
                   mutate: Mutation) -> dict[str, Any] | None:
    """``mutate`` of the request's copy of ``current``; None when it refused a cached object
    that was not the latest (another replica's write had not reached the cache): try again on
    the latest, as kube's GuaranteedUpdate does when it checked cached data."""
    try:
        return mutate(_decode(current.value))
    except StatusError:
        if await ctx.was_stale(resource, key, current.revision):
            return None
        raise


def _stored_otherwise(ctx: ServerContext, resource: Resource, key: str) -> bool:
    """True for a custom resource whose stored bytes are not what a write of it would store
    now (stored in an older storage version, or before a default was added): kube compares the
    new encoding with the stored bytes, so an unchanged update still rewrites it (crds.md
    §6.5)."""
    if resource.conversion is None:
        return False
    cache = ctx.caches.for_resource(resource)
    stored = (cache.cache if isinstance(cache, VersionView) else cache).get(key)
    return stored is not None and stored.stored is not None


async def pod_admission_facts(ctx: ServerContext, namespace: str,
                              pod: dict[str, Any]) -> PodFacts:
    """What the ServiceAccount plugin looks up for a new pod: its account (waiting a little for
    ``default``, as kube does) and a token volume suffix."""
    suffix = lifecycle.generate_name("", ctx.rng)
    accounts = ctx.registry.lookup("", "v1", "serviceaccounts")
    namespaces = ctx.registry.lookup("", "v1", "namespaces")
    assert accounts is not None and namespaces is not None
    if ctx.caches.for_resource(namespaces).get(namespaces.storage_key("", namespace)) is None:
        return PodFacts(None, suffix)  # NamespaceLifecycle answers first
    name = service_account_name(pod)
    key = accounts.storage_key(namespace, name)
    cache = ctx.caches.for_resource(accounts)
    attempts = DEFAULT_ACCOUNT_ATTEMPTS if name == DEFAULT_SERVICE_ACCOUNT else 1
    classes = priority_classes(ctx)
    for attempt in range(attempts):
        if attempt:
            await asyncio.sleep(ctx.rng.uniform(0.1, 0.2))
        found = cache.get(key)
        if found is not None:
            return PodFacts(_decode(found.value), suffix, classes)
    return PodFacts(None, suffix, classes)


def priority_classes(ctx: ServerContext) -> Mapping[str, dict[str, Any]]:
    """The PriorityClasses by name, as the Priority admission plugin's lister holds them
    (shared, made once per revision of the kind: read only)."""
    return cluster_objects_by_name(ctx, "scheduling.k8s.io", "priorityclasses")


def _admit_priority_class(ctx: ServerContext, resource: Resource, obj: dict[str, Any],
                          *, creating: bool) -> None:
    """The Priority plugin's validation of a PriorityClass write (after the object's own
    validation, as validating admission runs): one global default at most."""
    if resource.id != PRIORITY_CLASS_ID:
        return
    refused = global_default_conflict(obj, priority_classes(ctx).values(), creating=creating)
    if refused is not None:
        raise refused


async def ensure_initial_namespaces(ctx: ServerContext) -> None:
    """``default``, ``kube-system``, ``kube-public`` and ``kube-node-lease`` always exist."""
    resource = ctx.registry.lookup("", "v1", "namespaces")
    assert resource is not None
    cache = ctx.caches.for_resource(resource)
    for name in INITIAL_NAMESPACES:
        if cache.get(resource.storage_key("", name)) is None:
            obj = with_type_meta(resource, {"metadata": {"name": name}})
            lctx = lifecycle.CreateContext(namespace="", now=ctx.now(), rng=ctx.rng)
            with contextlib.suppress(KeyExistsError):
                await ctx.store.write(Create(resource.storage_key("", name),
                                             lifecycle.prepare_create(resource, obj, lctx)))


def _strip_rv(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    (out.get("metadata") or {}).pop("resourceVersion", None)
    return out


def _warning_headers(warnings: list[str]) -> list[tuple[str, str]]:
    """RFC 7234 warn-text: a quoted string with ``\\`` and ``"`` escaped."""
    return [("Warning", '299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"')
            for w in warnings]


def _method_not_allowed() -> StatusError:
    return MethodNotAllowed("the server does not allow this method on the requested resource", {})
