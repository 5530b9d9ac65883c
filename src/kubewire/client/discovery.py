"""Finding a kind the client does not know: the server's discovery document of its
group-version (``/apis/<group>/<version>``, ``/api/v1``) names its plural and scope.

``Discovery`` is one client's cache of those documents (``Client.discovery``), filled on first
use of a group-version. A kind missing from a cached document is looked up once more in a fresh
one, as client-go's deferred RESTMapper resets on a miss: a CRD created since the last fetch is
found, and a kind that is not served raises ``NoKindMatch`` with client-go's message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import msgspec

from kubewire.client.errors import NoKindMatch, NotFound
from kubewire.client.resource import ResourceInfo
from kubewire.client.transport import Request


class APIResource(msgspec.Struct):
    """One entry of an ``APIResourceList`` (only what the client needs)."""

    name: str
    kind: str = ""
    namespaced: bool = False


class APIResourceList(msgspec.Struct):
    resources: list[APIResource] = msgspec.field(default_factory=list)


_resource_list = msgspec.json.Decoder(APIResourceList)


def document_path(api_version: str) -> str:
    """Where the discovery document of ``api_version`` is served."""
    return f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"


def find(resources: Sequence[APIResource], api_version: str, kind: str | None,
         plural: str | None) -> ResourceInfo | None:
    """The entry serving ``kind`` (and ``plural``, when both are given) among ``resources``,
    subresources (``widgets/status``) left out; None when there is none."""
    for res in resources:
        if "/" in res.name:
            continue
        if (kind is None or res.kind == kind) and (plural is None or res.name == plural):
            return ResourceInfo(api_version, res.kind, res.name, res.namespaced)
    return None


def no_match(api_version: str, kind: str | None, plural: str | None) -> NoKindMatch:
    """client-go's ``NoKindMatchError`` / ``NoResourceMatchError`` text."""
    if kind:
        return NoKindMatch(f"no matches for kind {kind!r} in version {api_version!r}"
                           .replace("'", '"'))
    return NoKindMatch(f"no matches for {api_version}, Resource={plural}")


class Discovery:
    """The discovery documents one client has read, by group-version."""

    def __init__(self, request: Callable[[Request], Awaitable[bytes]]) -> None:
        self._request = request
        self._documents: dict[str, list[APIResource]] = {}
        self._lock = asyncio.Lock()

    async def resolve(self, api_version: str, kind: str | None = None,
                      plural: str | None = None) -> ResourceInfo:
        """Where ``kind`` (or ``plural``) of ``api_version`` is served. Raises
        ``NoKindMatch`` when the server does not serve it."""
        async with self._lock:  # one fetch of a document at a time
            cached = self._documents.get(api_version)
            if cached is not None and (found := find(cached, api_version, kind, plural)):
                return found
            resources = await self._fetch(api_version)
        found = find(resources, api_version, kind, plural)
        if found is None:
            raise no_match(api_version, kind, plural)
        return found

    async def _fetch(self, api_version: str) -> list[APIResource]:
        try:
            body = await self._request(Request("GET", document_path(api_version)))
        except NotFound:
            resources: list[APIResource] = []  # the group-version is not served (yet)
        else:
            resources = _resource_list.decode(body).resources
        self._documents[api_version] = resources
        return resources

    def invalidate(self, api_version: str | None = None) -> None:
        """Forget one group-version's document (all of them with None)."""
        if api_version is None:
            self._documents.clear()
        else:
            self._documents.pop(api_version, None)
