"""How long a request may take before it is answered 504, as kube-apiserver decides it.

kube gives every request that is not long-running a deadline (``WithRequestDeadline``,
k8s.io/apiserver pkg/endpoints/filters/request_deadline.go): the ``timeout`` query parameter, a
Go duration (``kubectl --request-timeout=5s`` sends it), when it is above 0 and below
``--request-timeout``, else ``--request-timeout`` itself; a malformed one is a 400 before
anything else is looked at. A handler still running at the deadline is answered
``NewTimeoutError("request did not complete within requested timeout - context deadline
exceeded", 0)`` (pkg/endpoints/handlers/finisher/finisher.go): 504, reason ``Timeout``,
``details: {}``. Long-running requests get no deadline (``BasicLongRunningRequestCheck``: the
watch and proxy verbs, the attach, exec, proxy, log and portforward subresources); a watch ends
by its own ``timeoutSeconds``.

Pure: the server (``app.py``) applies the deadline.
"""

from __future__ import annotations

from kubewire.go_text import parse_go_duration
from kubewire.server.request.query_params import Query, first_value
from kubewire.server.request.routes import GroupVersionPath, Route, is_watch
from kubewire.status import BadRequest, Timeout

LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "proxy", "log", "portforward"})
_INVALID_TIMEOUT = "invalid timeout specified in the request URL"  # request_deadline.go


def is_long_running(method: str, route: Route | GroupVersionPath | None, query: Query) -> bool:
    """A watch (or a streaming subresource): no request deadline applies.

    A watch is what the server serves as one: a GET of a collection with a true ``watch``
    parameter, or any GET under the legacy ``/watch/`` prefix (kube's RequestInfo calls a named
    GET ``get`` whatever its ``watch`` parameter says).
    """
    if not isinstance(route, Route):
        return False
    return route.subresource in LONG_RUNNING_SUBRESOURCES or is_watch(method, route, query)


def request_timeout_s(query: Query, maximum_s: float) -> float:
    """The request's deadline in seconds from its start; raises ``BadRequest`` (kube's text)
    for a ``timeout`` that is not a Go duration."""
    value = first_value(query, "timeout")
    if not value:
        return maximum_s
    try:
        asked = parse_go_duration(value)
    except ValueError as exc:
        raise BadRequest(f"{_INVALID_TIMEOUT} - {exc}") from None
    return asked if 0 < asked < maximum_s else maximum_s


def deadline_exceeded() -> Timeout:
    """The 504 a request gets when it runs past its deadline."""
    return Timeout("Timeout: request did not complete within requested timeout - context "
                   "deadline exceeded", {})
