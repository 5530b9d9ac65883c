"""The request record: what was asked of the server, one entry per request, in a bounded ring.

Tests assert on it ("patched once, never deleted") instead of sleeping and re-reading objects:
each entry holds when, who, kube's verb (``get``, ``list``, ``watch``, ``create``, ``update``,
``patch``, ``delete``, ``deletecollection``; the lower-case HTTP method for a non-resource
path), the API group, version, resource, subresource, namespace and name, the SHA-256 of the
request body (hex; "" without a body), the response code, and the faults injected into the
request (``server/faults``' labels, comma-separated; None without). The ring keeps the
newest ``capacity`` entries (10,000 by default), so a long-running server holds a bounded
amount. Pure data: ``RequestRecord.add`` is called by the
server once a request is answered; ``select`` filters; ``answer`` serves the admin endpoint
``/kubewire/requests`` (GET with the same filters as query parameters; DELETE clears).
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass

from kubewire.server.access.chain import resource_verb
from kubewire.server.observe.per_request import RequestInfo
from kubewire.server.wire.http_messages import Request, Response, json_response
from kubewire.status import BadRequest, MethodNotAllowed

DEFAULT_CAPACITY = 10_000
# The filters ``select`` (and the admin endpoint's query) understands.
FILTERS = ("verb", "group", "version", "resource", "subresource", "namespace", "name", "user",
           "code", "fault")


@dataclass(frozen=True, slots=True)
class RequestEntry:
    """One answered request."""

    time: float  # seconds since the epoch, when it was answered
    user: str  # who it ran as ("" when unauthenticated, or on a public path)
    verb: str
    group: str
    version: str
    resource: str  # "" for a non-resource path
    subresource: str
    namespace: str
    name: str
    path: str
    body_sha256: str  # "" when the request had no body
    code: int
    fault: str | None = None  # the faults injected into it (server/faults), comma-separated


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest() if body else ""


class RequestRecord:
    """The newest ``capacity`` entries, oldest first."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, not {capacity}")
        self.capacity = capacity
        self._entries: deque[RequestEntry] = deque(maxlen=capacity)

    def add(self, entry: RequestEntry) -> None:
        if self.capacity:
            self._entries.append(entry)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[RequestEntry]:
        return iter(list(self._entries))  # a copy: another thread may add meanwhile

    def clear(self) -> None:
        self._entries.clear()

    def select(self, **filters: object) -> list[RequestEntry]:
        """The entries whose fields equal every filter given (None: any), oldest first.
        ``select(verb="patch", resource="pods", namespace="ns")``. Unknown names raise
        TypeError, as a misspelt keyword would."""
        wanted = {name: value for name, value in filters.items() if value is not None}
        unknown = set(wanted) - set(FILTERS)
        if unknown:
            raise TypeError(f"unknown request filters: {', '.join(sorted(unknown))}")
        return [entry for entry in self
                if all(getattr(entry, name) == value for name, value in wanted.items())]


def filters_from_query(query: Mapping[str, list[str]]) -> dict[str, object]:
    """``?verb=patch&code=200`` -> the ``select`` filters; 400 for an unknown parameter or a
    code that is not a number."""
    filters: dict[str, object] = {}
    for name, values in query.items():
        if name not in FILTERS:
            raise BadRequest(f"unknown filter {name!r}: the filters are {', '.join(FILTERS)}",
                             {})
        value = values[-1] if values else ""
        if name == "code":
            if not value.isdigit():
                raise BadRequest(f"code must be a number, not {value!r}", {})
            filters[name] = int(value)
        else:
            filters[name] = value
    return filters


def answer(record: RequestRecord, method: str, query: Mapping[str, list[str]]) -> Response:
    """``GET /kubewire/requests?verb=...``: ``{"items": [entries]}``; ``DELETE``: cleared."""
    if method == "DELETE":
        record.clear()
        return Response(200, b'{"items":[]}', "application/json")
    if method != "GET":
        raise MethodNotAllowed(f"{method} is not allowed on /kubewire/requests: GET or DELETE",
                               {})
    items = [asdict(entry) for entry in record.select(**filters_from_query(query))]
    return json_response({"items": items})


def entry_of(request: Request, info: RequestInfo, code: int) -> RequestEntry:
    """The entry for an answered request (what routing learned about it is in ``info``)."""
    user = info.user.name if info.user is not None else ""
    route = info.route
    if route is None:
        return RequestEntry(time.time(), user, request.method.lower(), "", "", "", "", "", "",
                            request.path, body_digest(request.body), code, info.fault or None)
    resource = route.resource
    verb = info.verb or resource_verb(request, route)  # refused before its verb was noted
    return RequestEntry(time.time(), user, verb, resource.group, resource.version,
                        resource.plural, route.subresource, route.namespace, route.name,
                        request.path, body_digest(request.body), code, info.fault or None)
