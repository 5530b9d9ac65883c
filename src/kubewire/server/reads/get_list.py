"""GET of one object and LIST of a collection, with kube's resourceVersion semantics.

Reads come from the watch cache, which always holds the current state; a read at an older exact
revision (``resourceVersionMatch=Exact``, legacy ``limit`` + RV, continue tokens) is the cache's
state with the changes since undone while its history ring holds them all
(storage/past_view.py), else rebuilt from the durable change log, so pages of one list stay
consistent for as long as the log retains history (watch-protocol.md §2.3, §10).

A page reads only what it returns (``_page``): it walks the cache's keys from its start and
stops after ``limit + 1`` matches; ``remainingItemCount`` (only without selectors, as kube's
``GetList``) is a count of the cache's sorted keys; a ``metadata.name`` selector is a key lookup,
``metadata.namespace`` a key range, and a label equality reads the cache's label index.

A CRD version whose objects a conversion webhook converts gets the page's objects converted in
one call (``server/conversion``) after the page is cut: selectors see the objects as the
cache holds them, in the version they are stored in.

A request that negotiated a Table (``kubectl get``) gets the same read rendered as a
``meta.k8s.io`` Table (objects-and-clients.md §5); only then are objects decoded.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import Protocol

from kubewire.resources import Resource
from kubewire.selectors.labels import LabelSelector, Operator
from kubewire.server.context import ServerContext
from kubewire.server.conversion.objects import served, served_one
from kubewire.server.request.options import ListOptions, decode_continue, encode_continue
from kubewire.server.request.routes import Route
from kubewire.server.tables.bodies import list_table_body, object_table_body
from kubewire.server.tables.output import NegotiatedTable
from kubewire.server.wire.encoding import list_item, object_response, type_meta_prefix
from kubewire.server.wire.http_messages import Response
from kubewire.status import Expired, not_found, too_large_resource_version
from kubewire.storage.base import CompactedError, Record
from kubewire.storage.cached import CachedObject

CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list.")
LIST_TOO_OLD = "The resourceVersion for the provided list is too old."
# Label equalities whose index sizes are compared to pick the one to read (each builds an index
# the first time, so a selector of many equalities does not build many).
LABEL_CANDIDATES = 3


class ListSource(Protocol):
    """What a page reads: the watch cache (``WatchCache``, ``VersionView``) or, for an older
    revision, the records read back from the durable log (``_Records``). Results are read
    before anything else runs (no await between)."""

    def range(self, prefix: str, start: str = "") -> Iterator[CachedObject]: ...

    def count(self, prefix: str, start: str = "") -> int: ...

    def named(self, prefix: str, name: str, start: str = "") -> Iterable[CachedObject]: ...

    def label_count(self, label: str, value: str) -> int: ...

    def labelled(self, prefix: str, start: str, label: str,
                 value: str) -> Iterable[CachedObject] | None: ...


async def serve_get(ctx: ServerContext, route: Route, resource_version: str,
                    table: NegotiatedTable | None = None) -> Response:
    """One object; RV "" is consistent, "0" any, N not older than N.

    With ``table``, a one-row Table; a bad ``includeObject`` is 400 only once the object was
    found (kube transforms the read's result).
    """
    await _wait_fresh(ctx, resource_version)
    cache = ctx.caches.for_resource(route.resource)
    obj = cache.get(route.resource.storage_key(route.namespace, route.name))
    if obj is None:
        raise not_found(route.resource.group, route.resource.plural, route.name)
    obj = await served_one(ctx, route.resource, obj)  # a conversion webhook's, if any
    if table is None:
        return object_response(200, obj.value)
    return object_response(200, object_table_body(route.resource, obj.value, table.resolve(),
                                                  ctx.now()))


async def _wait_fresh(ctx: ServerContext, resource_version: str) -> None:
    if resource_version == "":
        await ctx.caches.wait_for_revision(await ctx.store.consistent_revision())
    elif resource_version != "0":
        await ctx.caches.wait_for_revision(int(resource_version))


async def serve_list(ctx: ServerContext, route: Route, opts: ListOptions,
                     table: NegotiatedTable | None = None) -> Response:
    """One page of the collection, as a kind List or, with ``table``, as a Table."""
    resource = route.resource
    namespace = _scope_namespace(route, opts)
    prefix = resource.storage_prefix(namespace)
    if opts.continue_token:
        revision, start_rel = decode_continue(opts.continue_token)
        start = prefix + start_rel
        try:
            source, revision = await _objects_at(ctx, resource, prefix, revision, start)
        except CompactedError as exc:
            token = encode_continue(-1, start_rel)
            raise Expired(CONTINUE_EXPIRED, metadata={"continue": token}) from exc
    else:
        revision, start = await _list_revision(ctx, resource, opts), ""
        try:
            source, revision = await _objects_at(ctx, resource, prefix, revision, start)
        except CompactedError as exc:
            raise Expired(LIST_TOO_OLD) from exc
    items, more, remaining = _page(source, prefix, start, opts, namespace)
    items = await served(ctx, resource, items)  # a conversion webhook's, if any
    token = "" if more is None else encode_continue(revision, more.key[len(prefix):] + "\x00")
    if table is not None:
        list_meta = {"resourceVersion": str(revision), "continue": token,
                     "remainingItemCount": None if more is None else remaining}
        return object_response(200, list_table_body(resource, (o.value for o in items),
                                                    list_meta, table.resolve(), ctx.now()))
    meta = b'"resourceVersion":"%d"' % revision
    if more is not None:
        meta += b',"continue":"%b"' % token.encode()
        if remaining is not None:
            meta += b',"remainingItemCount":%d' % remaining
    type_prefix = type_meta_prefix(resource)
    strip = not resource.is_custom
    body = b'{"kind":"%b","apiVersion":"%b","metadata":{%b},"items":[%b]}' % (
        resource.list_kind.encode(), resource.api_version.encode(), meta,
        b",".join(list_item(o.value, type_prefix) if strip else o.value for o in items))
    return object_response(200, body)


def _scope_namespace(route: Route, opts: ListOptions) -> str:
    """All-namespaces collections narrowed by ``metadata.namespace=<ns>`` (store.go)."""
    if route.namespace or not route.resource.namespaced:
        return route.namespace
    return opts.field_selector.exact("metadata.namespace") or ""


async def _list_revision(ctx: ServerContext, resource: Resource, opts: ListOptions) -> int:
    """The revision a list without a continue token reflects (0 means "current")."""
    rv, match = opts.resource_version, opts.resource_version_match
    if rv == "":
        await ctx.caches.wait_for_revision(await ctx.store.consistent_revision())
        return 0
    if rv == "0":
        return 0
    wanted = int(rv)
    if match == "Exact" or (match == "" and opts.limit > 0):
        return wanted
    await ctx.caches.wait_for_revision(wanted)
    return 0


async def _objects_at(ctx: ServerContext, resource: Resource, prefix: str, revision: int,
                      start: str) -> tuple[ListSource, int]:
    """Objects under ``prefix`` from ``start`` as of ``revision`` (0 or -1: current).

    Raises CompactedError when ``revision`` is older than the change log retains, or than an
    expired history (``faults.expire_history``) lets it be read.
    """
    cache = ctx.caches.for_resource(resource)
    current = ctx.caches.revision
    if 0 < revision < ctx.caches.expired_below:  # an expired history (a fault): as compacted
        raise CompactedError(revision, ctx.caches.expired_below)
    if revision <= 0 or (cache.last_change_rev <= revision <= current):
        # Nothing of this kind changed since ``revision``: the current state is that state.
        return cache, (revision if revision > 0 else current)
    if revision > current:
        raise too_large_resource_version(revision, current)
    if revision < ctx.store.compacted_revision:
        raise CompactedError(revision, ctx.store.compacted_revision)
    past = cache.at(revision)  # from the cache while its ring holds every change since
    if past is not None:
        return past, revision
    records, at = await ctx.store.list(prefix, revision=revision, start=start)
    return _Records(records, resource), at


def _page(source: ListSource, prefix: str, start: str, opts: ListOptions,
          namespace: str) -> tuple[list[CachedObject], CachedObject | None, int | None]:
    """Filter and cut one page: (items, last item if more follow, remainingItemCount).

    Reads candidates in key order and stops at the first match past ``limit``; without
    selectors the remaining count is every key from that one on (kube's ``GetList`` sets it
    only then)."""
    limit = opts.limit if opts.limit > 0 and opts.resource_version != "0" else 0
    labels, fields = opts.label_selector, opts.field_selector
    filtered = not labels.is_empty or not fields.is_empty
    candidates: Iterable[CachedObject] = source.range(prefix, start)
    if filtered:
        name = fields.exact("metadata.name")
        if name:
            candidates = source.named(prefix, name, start)
        else:
            candidates = _by_label(source, prefix, start, labels) or candidates
    items: list[CachedObject] = []
    for obj in candidates:
        if namespace and obj.namespace != namespace:
            continue
        if filtered and not (labels.matches(obj.labels) and fields.matches(obj.fields)):
            continue
        if limit and len(items) == limit:
            remaining = None if filtered else source.count(prefix, obj.key)
            return items, items[-1], remaining
        items.append(obj)
    return items, None, None


def _by_label(source: ListSource, prefix: str, start: str,
              labels: LabelSelector) -> Iterable[CachedObject] | None:
    """The objects with the value one equality requirement asks for (the fewest of the first
    ``LABEL_CANDIDATES``), from the label index; None without such a requirement."""
    # value_set, not values: the sorted list is made on first use, and a set may be huge.
    equal = [(r.key, next(iter(r.value_set))) for r in labels.requirements
             if r.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)
             and len(r.value_set) == 1][:LABEL_CANDIDATES]
    if not equal:
        return None
    label, value = min(equal, key=lambda kv: source.label_count(*kv)) if len(equal) > 1 \
        else equal[0]
    return source.labelled(prefix, start, label, value)


class _Records:
    """The records of a list at an older revision (from the durable log) as a ``ListSource``:
    already under the prefix and from the start, in key order. Each is decoded only when a
    page reads it, so a page decodes what it returns, not every record after its start."""

    __slots__ = ("_keys", "records", "resource")

    def __init__(self, records: list[Record], resource: Resource) -> None:
        self.records = records
        self.resource = resource
        self._keys: list[str] | None = None

    def range(self, prefix: str, start: str = "") -> Iterator[CachedObject]:
        resource = self.resource
        return (CachedObject.decode(r.key, r.revision, r.value, resource) for r in self.records)

    def count(self, prefix: str, start: str = "") -> int:
        if self._keys is None:
            self._keys = [r.key for r in self.records]
        return len(self._keys) - bisect.bisect_left(self._keys, start)

    def named(self, prefix: str, name: str, start: str = "") -> Iterator[CachedObject]:
        return self.range(prefix, start)  # all of them: the page's filter keeps the named one

    def label_count(self, label: str, value: str) -> int:
        return 0

    def labelled(self, prefix: str, start: str, label: str,
                 value: str) -> Iterable[CachedObject] | None:
        return None
