"""``GET /kubewire/snapshot``: every stored object of every kind, with the revision they are at
(what ``kubewire snapshot save`` writes; ``kubewire snapshot load`` sends it back through
``/kubewire/import``).

The answer is JSON lines: first ``{"kind": "Snapshot", "revision": R, "objects": N}``, then one
object a line, each in its kind's stored version with its resourceVersion. CRDs come first and
namespaces next, so a load writes a custom resource after the CRD that serves it and a
namespaced object after its namespace. The objects are read from the watch caches in one loop
turn, so they are one consistent state at ``revision``; they are in memory already, and the
answer is one copy of them.
"""

from __future__ import annotations

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import HasContext, ServerContext
from kubewire.server.wire.http_messages import Request, Response
from kubewire.status import MethodNotAllowed

FIRST = ("apiextensions.k8s.io/customresourcedefinitions", "core/namespaces")
_encode = msgspec.json.Encoder().encode


def order(resource: Resource) -> tuple[int, str]:
    """CRDs, then namespaces, then every other kind by its id."""
    rank = FIRST.index(resource.id) if resource.id in FIRST else len(FIRST)
    return rank, resource.id


def snapshot_lines(ctx: ServerContext) -> list[bytes]:
    """The answer's lines (no await: one consistent state)."""
    revision = ctx.store.current_revision
    lines: list[bytes] = []
    for res in sorted(ctx.registry.stored(), key=order):
        if not res.is_stored_version:  # another version of a kind listed under its own
            continue
        try:
            cache = ctx.caches.for_resource(res)
        except KeyError:  # a kind with no cache (yet): nothing stored to read from it
            continue
        for found in cache.scan(res.storage_prefix()):
            lines.append(found.value + b"\n")  # stored objects carry apiVersion and kind
    head = {"kind": "Snapshot", "revision": revision, "objects": len(lines)}
    return [_encode(head) + b"\n", *lines]


async def handle(target: HasContext, request: Request) -> Response:
    if request.method != "GET":
        raise MethodNotAllowed(f"the server does not allow this method on the requested "
                               f"resource: {request.method} /kubewire/snapshot (GET only)", {})
    return Response(200, b"".join(snapshot_lines(target.ctx)), "application/json")
