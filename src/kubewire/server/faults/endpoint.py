"""``/kubewire/faults`` and ``/kubewire/clock``: the admin API over ``Faults`` and the clock.

- ``GET /kubewire/faults``: ``{"kind": "FaultList", "items": [...]}``, the active faults;
- ``POST /kubewire/faults`` with one fault spec (``rules``): 201 and the fault with its id
  (``dropWatches``: 200 and how many streams ended); a bad spec gets 400 and changes nothing;
- ``DELETE /kubewire/faults``: clear all; ``DELETE /kubewire/faults/<id>``: that one (404 if
  there is none); both answer ``{"cleared": n}``;
- ``GET /kubewire/clock``: ``{"now": ..., "manual": bool, "pendingTimers": n}``;
- ``POST /kubewire/clock`` with ``{"advanceSeconds": s}``: a manual clock moves on and fires
  what falls due (400 on a real-time clock).

Only admins get here (``server/admin/endpoints`` checks).
"""

from __future__ import annotations

import math
from typing import Any

from kubewire.clock import MAX_ADVANCE_S, ManualClock
from kubewire.server.context import HasContext
from kubewire.server.faults.faults import Faults
from kubewire.server.wire.http_messages import Request, Response, json_object_body, json_response
from kubewire.status import BadRequest, MethodNotAllowed, NotFound


async def serve_faults(target: HasContext, request: Request) -> Response:
    faults = target.ctx.faults
    assert isinstance(faults, Faults)
    rest = request.path.rstrip("/").split("/")[3:]  # "", "kubewire", "faults", [id]
    method = request.method
    if len(rest) > 1:
        raise NotFound("the server could not find the requested resource", {})
    if method == "GET" and not rest:
        return json_response({"kind": "FaultList", "items": faults.list_faults()})
    if method == "POST" and not rest:
        done = faults.add(json_object_body(request))
        return json_response(done, 200 if done.get("type") == "dropWatches" else 201)
    if method == "DELETE":
        if rest:
            cleared = faults.clear(rest[0])
            if not cleared:
                raise NotFound(f'fault "{rest[0]}" not found', {"name": rest[0],
                                                                 "kind": "faults"})
        else:
            cleared = faults.clear()
        return json_response({"cleared": cleared})
    raise MethodNotAllowed("the server does not allow this method on the requested resource",
                           {})


async def serve_clock(target: HasContext, request: Request) -> Response:
    clock = target.ctx.clock
    if request.method == "POST":
        body = json_object_body(request)
        unknown = sorted(set(body) - {"advanceSeconds"})
        if unknown:
            raise BadRequest(f"unknown field(s): {', '.join(unknown)}", {})
        seconds = body.get("advanceSeconds")
        if (isinstance(seconds, bool) or not isinstance(seconds, int | float)
                or not math.isfinite(seconds) or not 0 <= seconds <= MAX_ADVANCE_S):
            raise BadRequest(f"advanceSeconds must be a number in [0, {MAX_ADVANCE_S:g}]", {})
        if not isinstance(clock, ManualClock):
            raise BadRequest("the server's clock is real time: start it with a manual clock "
                             "(kubewire serve --manual-clock) to advance it", {})
        fired = clock.advance(float(seconds))
        return json_response({**_clock_json(clock), "fired": fired})
    if request.method in ("GET", "HEAD"):
        return json_response(_clock_json(clock))
    raise MethodNotAllowed("the server does not allow this method on the requested resource",
                           {})


def _clock_json(clock: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"now": clock.now().isoformat(), "manual": bool(clock.manual)}
    if isinstance(clock, ManualClock):
        found["pendingTimers"] = clock.pending
    return found
