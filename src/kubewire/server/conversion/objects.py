"""Objects of a webhook-converted CRD version, converted in the request's task.

``served`` takes what a read found in the watch cache (objects still in the version they are
stored in, ``apiextensions/crd/versions.py``) and converts those not in the request's version, in
one review per ``webhook.MAX_BATCH`` objects; ``convert_or_fail`` is the same for decoded
objects (the versioned store's writes). A failed conversion is kube's plain error: 500 with the
webhook's text and no reason (crds.md §6.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.apiextensions.crd.conversion_review import ConversionFailure
from kubewire.server.context import ServerContext
from kubewire.server.conversion import webhook
from kubewire.status import StatusError
from kubewire.storage.cached import CachedObject

_encode = GoJSONEncoder().encode
_decode = msgspec.json.Decoder(dict[str, Any]).decode


def needs_webhook(resource: Resource) -> bool:
    """True for a version of a CRD whose conversion strategy is ``Webhook``."""
    return resource.conversion is not None and resource.conversion.webhook


async def convert_or_fail(ctx: ServerContext, resource: Resource,
                          objects: Sequence[dict[str, JSON]],
                          desired: str) -> list[dict[str, JSON]]:
    """``webhook.convert``, its failure as the ``Status`` kube answers (500, no reason)."""
    try:
        return await webhook.convert(ctx, resource, objects, desired)
    except ConversionFailure as err:
        raise StatusError(str(err)) from None


async def served(ctx: ServerContext, resource: Resource,
                 objects: list[CachedObject]) -> list[CachedObject]:
    """``objects`` in ``resource``'s version (the same list when none needs the webhook)."""
    if not needs_webhook(resource):
        return objects
    todo = [i for i, obj in enumerate(objects) if obj.api_version != resource.api_version]
    if not todo:
        return objects
    converted = await convert_or_fail(ctx, resource, [_decode(objects[i].value) for i in todo],
                                      resource.api_version)
    out = list(objects)
    for index, obj in zip(todo, converted, strict=True):
        found = objects[index]
        out[index] = CachedObject(found.key, found.revision, _encode(obj), obj, resource)
    return out


async def served_one(ctx: ServerContext, resource: Resource, obj: CachedObject) -> CachedObject:
    """``served`` of one object."""
    if not needs_webhook(resource) or obj.api_version == resource.api_version:
        return obj
    return (await served(ctx, resource, [obj]))[0]
