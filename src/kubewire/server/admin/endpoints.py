"""Route ``/kubewire/<name>`` to its handler, for admins only.

Bodies are JSON in and out. A handler gets the running server's ``AdminTarget`` (what the admin
API may act on) and the request; it answers a ``Response`` or raises a ``StatusError``, which the
server turns into kube's ``Status`` as for any request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from kubewire.server.access.authn import UserInfo
from kubewire.server.admin import imports, reset, snapshot
from kubewire.server.context import HasContext
from kubewire.server.faults.endpoint import serve_clock, serve_faults
from kubewire.server.observe import request_record
from kubewire.server.observe.request_record import RequestRecord
from kubewire.server.wire.http_messages import Request, Response
from kubewire.status import Forbidden, NotFound

PREFIX = "/kubewire/"
ADMIN_GROUP = "system:masters"


class AdminTarget(HasContext, Protocol):
    """What an admin endpoint may act on: the server's context (store, caches, registry) and
    its request record."""

    @property
    def requests(self) -> RequestRecord: ...


Handler = Callable[[AdminTarget, Request], Awaitable[Response]]


async def _requests(target: AdminTarget, request: Request) -> Response:
    return request_record.answer(target.requests, request.method, request.query)


# ``/kubewire/<name>`` -> its handler; each room that owns an endpoint adds its line here.
HANDLERS: dict[str, Handler] = {
    "reset": reset.serve,  # POST: back to the state right after start
    "faults": serve_faults,  # server/faults
    "clock": serve_clock,  # server/faults: the manual clock
    "import": imports.handle,  # objects written as given (replay, snapshot load)
    "snapshot": snapshot.handle,  # every stored object (snapshot save)
    "requests": _requests,  # observe/request_record: GET (filters in the query), DELETE
}


def is_admin_path(path: str) -> bool:
    return path.startswith(PREFIX)


async def serve(target: AdminTarget, request: Request, user: UserInfo | None) -> Response:
    """The endpoint's answer; 403 unless ``user`` is an admin, kube's 404 for an unknown name."""
    path = request.path
    if user is not None and ADMIN_GROUP not in user.groups:
        raise Forbidden(f'forbidden: User "{user.name}" cannot {request.method.lower()} path '
                        f'"{path}"', {})
    name = path[len(PREFIX):].strip("/").split("/", 1)[0]
    handler = HANDLERS.get(name)
    if handler is None:
        raise NotFound("the server could not find the requested resource", {})
    return await handler(target, request)
