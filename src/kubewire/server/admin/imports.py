"""``POST /kubewire/import``: write objects into the store as they are given (what ``kubewire
replay`` and ``kubewire snapshot load`` send).

kube's create path cannot keep an object's uid, creationTimestamp, generation, managedFields or
status; a replayed trace must. So this endpoint bypasses defaulting, validation and admission and
writes each event's object as given into the store, the server choosing only the new
resourceVersion: ADDED and MODIFIED create the object or replace the stored one, DELETED deletes
it (a no-op, counted as skipped, when it is not there). One store write per event, in the body's
order, so the target's watchers see the events in the same order.

The body is JSON lines or one JSON array, each item ``{"type": ..., "object": {...}}``; at most
``MAX_EVENTS`` of them (the wire already bounds a body at 3 MiB). The whole body is checked
before anything is written — a bad item, or an object of a kind the server does not serve, is a
400 ``Status`` and changes nothing. A kind that a CustomResourceDefinition earlier in the body
(or already stored) defines is awaited: its objects are written once the CRD's controller serves
the kind (at most ``SERVE_WAIT_S``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from kubewire.resources import Registry, Resource
from kubewire.server.context import HasContext, ServerContext
from kubewire.server.wire.http_messages import Request, Response, json_response
from kubewire.status import (
    BadRequest,
    InternalError,
    MethodNotAllowed,
    RequestEntityTooLarge,
    ServiceUnavailable,
)
from kubewire.storage.base import (
    Create,
    Delete,
    KeyExistsError,
    KeyNotFoundError,
    StorageError,
    Update,
    ValueTooLargeError,
)

MAX_EVENTS = 1000
SERVE_WAIT_S = 10.0
TYPES = ("ADDED", "MODIFIED", "DELETED")
CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_KIND = "CustomResourceDefinition"

_decode = msgspec.json.Decoder(Any).decode
_decode_obj = msgspec.json.Decoder(dict[str, Any]).decode


@dataclass(frozen=True, slots=True)
class ImportEvent:
    type: str
    obj: dict[str, Any]
    api_version: str
    kind: str
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class CustomKind:
    """A kind a CRD defines: (apiVersion, kind) and whether it is namespaced."""

    api_version: str
    kind: str
    namespaced: bool


# --- the body, checked (pure) -------------------------------------------------------------

def parse_body(body: bytes) -> list[ImportEvent]:
    """The body's events, or ``BadRequest`` saying what is wrong with which item."""
    stripped = body.strip()
    if not stripped:
        raise BadRequest("the import body is empty: send JSON lines or a JSON array of "
                         '{"type": ADDED|MODIFIED|DELETED, "object": {...}}', {})
    items: list[Any]
    try:
        if stripped.startswith(b"["):
            value = _decode(stripped)
            items = value if isinstance(value, list) else [value]
        else:
            items = [_decode(line) for line in stripped.split(b"\n") if line.strip()]
    except msgspec.DecodeError as err:
        raise BadRequest(f"the import body is not JSON lines or a JSON array: {err}", {}) from err
    if len(items) > MAX_EVENTS:
        raise RequestEntityTooLarge(f"the import body has {len(items)} events, over the limit "
                                    f"of {MAX_EVENTS} per request", {})
    return [_event(item, index) for index, item in enumerate(items)]


def _event(item: Any, index: int) -> ImportEvent:
    where = f"event {index}"
    if not isinstance(item, dict):
        raise BadRequest(f"{where}: not a JSON object", {})
    kind_of_event = item.get("type")
    if kind_of_event not in TYPES:
        raise BadRequest(f"{where}: type {kind_of_event!r} is not ADDED, MODIFIED or DELETED",
                         {})
    obj = item.get("object")
    if not isinstance(obj, dict):
        raise BadRequest(f"{where}: object must be a JSON object", {})
    api_version, kind, meta = obj.get("apiVersion"), obj.get("kind"), obj.get("metadata")
    if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) \
            or not kind:
        raise BadRequest(f"{where}: the object needs apiVersion and kind", {})
    if not isinstance(meta, dict):
        raise BadRequest(f"{where}: the object needs metadata", {})
    name, namespace = meta.get("name"), meta.get("namespace") or ""
    if not isinstance(name, str) or not _segment_ok(name):
        raise BadRequest(f"{where}: metadata.name {name!r} is not a usable name", {})
    if not isinstance(namespace, str) or (namespace and not _segment_ok(namespace)):
        raise BadRequest(f"{where}: metadata.namespace {namespace!r} is not a usable name", {})
    return ImportEvent(kind_of_event, obj, api_version, kind, namespace, name)


def _segment_ok(text: str) -> bool:
    """A storage key segment: not empty, no slash, not a path step (the key space stays
    ``<id>/<namespace>/<name>``)."""
    return 0 < len(text) <= 253 and "/" not in text and text not in (".", "..")


def custom_kinds(crd: Mapping[str, Any]) -> list[CustomKind]:
    """The kinds a CRD object defines, one per served version (a version that is not served
    never will be: its objects are refused at once rather than awaited)."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return []
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    group, kind = spec.get("group"), (names or {}).get("kind")
    if not isinstance(group, str) or not isinstance(kind, str):
        return []
    namespaced = spec.get("scope") != "Cluster"
    versions = spec.get("versions") if isinstance(spec.get("versions"), list) else []
    return [CustomKind(f"{group}/{v['name']}", kind, namespaced)
            for v in versions or () if isinstance(v, dict) and isinstance(v.get("name"), str)
            and v.get("served", True) is not False]


def check(events: list[ImportEvent], registry: Registry,
          stored_crds: Iterable[Mapping[str, Any]]) -> None:
    """Every event's kind is served, or defined by a CRD stored or earlier in the body, and its
    object's scope fits the kind; else ``BadRequest`` naming the first event that fails."""
    pending: dict[tuple[str, str], bool] = {}
    for crd in stored_crds:
        for custom in custom_kinds(crd):
            pending[(custom.api_version, custom.kind)] = custom.namespaced
    for index, event in enumerate(events):
        res = registry.by_kind(event.api_version, event.kind)
        namespaced: bool | None = None
        if res is not None and not res.create_only:
            namespaced = res.namespaced
        elif (event.api_version, event.kind) in pending:
            namespaced = pending[(event.api_version, event.kind)]
        else:
            raise BadRequest(f"event {index}: this server does not serve {event.kind} of "
                             f"{event.api_version}: install its CustomResourceDefinition "
                             "first (or put the CRD before its objects)", {})
        if namespaced and not event.namespace:
            raise BadRequest(f"event {index}: {event.kind} {event.name!r} is namespaced but "
                             "has no metadata.namespace", {})
        if not namespaced and event.namespace:
            raise BadRequest(f"event {index}: {event.kind} {event.name!r} is cluster-scoped "
                             "but has metadata.namespace", {})
        if (event.api_version, event.kind) == (CRD_API_VERSION, CRD_KIND) \
                and event.type != "DELETED":
            for custom in custom_kinds(event.obj):
                pending[(custom.api_version, custom.kind)] = custom.namespaced


# --- writing -------------------------------------------------------------------------------

async def handle(target: HasContext, request: Request) -> Response:
    if request.method != "POST":
        raise MethodNotAllowed(f"the server does not allow this method on the requested "
                               f"resource: {request.method} /kubewire/import (POST only)", {})
    ctx = target.ctx
    events = parse_body(request.body)
    check(events, ctx.registry, _stored_crds(ctx))
    imported = skipped = 0
    for index, event in enumerate(events):
        res = await _served(ctx, event)
        try:
            if await _write(ctx, res, event):
                imported += 1
            else:
                skipped += 1
        except ValueTooLargeError as err:
            raise RequestEntityTooLarge(f"event {index}: {err} ({imported} events before it "
                                        "were imported)", {}) from err
        except StorageError as err:
            raise InternalError(f"event {index}: {err} ({imported} events before it were "
                                "imported)", {}) from err
    body = {"kind": "ImportResult", "imported": imported, "skipped": skipped,
            "revision": ctx.store.current_revision}
    return json_response(body)


def _stored_crds(ctx: ServerContext) -> list[dict[str, Any]]:
    res = ctx.registry.by_kind(CRD_API_VERSION, CRD_KIND)
    if res is None:
        return []
    return [_decode_obj(found.value)
            for found in ctx.caches.for_resource(res).scan(res.storage_prefix())]


async def _served(ctx: ServerContext, event: ImportEvent) -> Resource:
    """The event's kind as the server serves it, waiting for a CRD's kind to be served."""
    deadline = time.monotonic() + SERVE_WAIT_S
    while True:
        res = ctx.registry.by_kind(event.api_version, event.kind)
        if res is not None:
            return res
        if time.monotonic() > deadline:
            raise ServiceUnavailable(f"{event.kind} of {event.api_version} was not served "
                                     f"{SERVE_WAIT_S:g}s after its CustomResourceDefinition "
                                     "was written: is the CRD established?", {})
        await asyncio.sleep(0.01)


async def _write(ctx: ServerContext, res: Resource, event: ImportEvent) -> bool:
    """One store write for the event; False when there was nothing to do (a DELETED of an
    object that is not there)."""
    key = res.storage_key(event.namespace, event.name)
    if event.type == "DELETED":
        try:
            await ctx.store.write(Delete(key))
        except KeyNotFoundError:
            return False
        return True
    obj = dict(event.obj)
    meta = dict(obj["metadata"])
    meta.pop("resourceVersion", None)  # the store's to give
    obj["metadata"] = meta
    if ctx.caches.for_resource(res).get(key) is None:
        try:
            await ctx.store.write(Create(key, obj))
            return True
        except KeyExistsError:
            pass  # written meanwhile: replace it
    try:
        await ctx.store.write(Update(key, obj))
    except KeyNotFoundError:  # deleted meanwhile
        await ctx.store.write(Create(key, obj))
    return True
