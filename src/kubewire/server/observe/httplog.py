"""One log line per request, as kube-apiserver's httplog writes it
(k8s.io/apiserver ``pkg/server/httplog/httplog.go``, ``respLogger.Log``)::

    "HTTP" verb="LIST" URI="/api/v1/pods" latency="1.234567ms" userAgent="kubectl/v1.32.0 ..."
    audit-ID="7a0c..." srcIP="127.0.0.1:53124" resp=200

- ``verb`` is kube's normalized verb (``LIST``, ``WATCH``, ``APPLY``, ...: the metrics' verb);
  ``URI`` the request target as sent; ``latency`` Go's ``time.Duration`` text from the moment
  the server began to serve it; ``audit-ID`` the request's audit ID (truncated to 64 characters, as
  ``GetAuditIDTruncated``); ``srcIP`` the peer's ``host:port``; ``resp`` the status, or
  ``hijacked=true`` for a connection upgraded to a WebSocket.
- A request a fault was injected into (server/faults) ends with kubewire's own
  ``fault="error-503"`` (the faults' names, comma-separated); kube has no such key.
- A watch is logged when it ends (kube logs when its handler returns), its latency the watch's
  whole life.
- kube writes this at klog verbosity 3; kubewire at INFO on the ``kubewire.httplog`` logger, so
  ``--log-level warning`` (or that logger's level) turns it off, and then nothing is formatted.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import NamedTuple

from kubewire.go_text import go_quote, uuid4_text
from kubewire.server.observe.audit import request_uri
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.wire.websocket import WebSocketStream

log = logging.getLogger("kubewire.httplog")
MAX_AUDIT_ID_LOGGED = 64


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()`` of ``seconds`` (nanosecond precision): ``850ns``,
    ``12.5µs``, ``1.234567ms``, ``2.5s``, ``1m30.25s``, ``1h0m0s``."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return sign + _fraction(ns, 1_000) + "µs"
    if ns < 1_000_000_000:
        return sign + _fraction(ns, 1_000_000) + "ms"
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _fraction(rest, 1_000_000_000) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return sign + text


def _fraction(value: int, unit: int) -> str:
    whole, part = divmod(value, unit)
    if not part:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{part:0{digits}d}".rstrip("0")


def source_address(peer: object) -> str:
    """``http.Request.RemoteAddr``: ``host:port``, an IPv6 host in brackets."""
    if not isinstance(peer, tuple) or len(peer) < 2:
        return ""
    host, port = str(peer[0]), peer[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Entry(NamedTuple):
    """What ``respLogger.Log`` writes of one request; ``status`` None: the connection was
    hijacked (a WebSocket)."""

    verb: str
    uri: str
    seconds: float
    user_agent: str
    audit_id: str
    src: str
    status: int | None
    fault: str = ""

    def line(self) -> str:
        """klog's ``"HTTP" key="value" ...`` text, each value quoted as Go's ``%q``."""
        ended = "hijacked=true" if self.status is None else f"resp={self.status}"
        if self.fault:
            ended += f" fault={go_quote(self.fault)}"
        verb, uri, user_agent, src = self.verb, self.uri, self.user_agent, self.src
        audit_id = self.audit_id[:MAX_AUDIT_ID_LOGGED]
        latency = go_duration(self.seconds)  # printable, no quote or backslash: quoted as is
        plain = verb + uri + user_agent + audit_id + src
        if plain.isascii() and plain.isprintable() and '"' not in plain and "\\" not in plain:
            # what go_quote does with each of them, checked once for all (the usual case)
            return (f'"HTTP" verb="{verb}" URI="{uri}" latency="{latency}" '
                    f'userAgent="{user_agent}" audit-ID="{audit_id}" srcIP="{src}" {ended}')
        return (f'"HTTP" verb={go_quote(verb)} URI={go_quote(uri)} '
                f'latency="{latency}" userAgent={go_quote(user_agent)} '
                f"audit-ID={go_quote(audit_id)} srcIP={go_quote(src)} {ended}")


def enabled() -> bool:
    return log.isEnabledFor(logging.INFO)


def log_request(request: Request, verb: str, response: Response | None,  # noqa: PLR0913
                code: int, started: float, *, fault: str = "") -> None:
    """Log ``request`` now, or when its stream ends (``started``: ``time.perf_counter()`` when
    it began). Call only when ``enabled()``."""
    stream = request.stream
    if response is None and stream is not None and not stream.closed:
        previous: Callable[[], None] | None = stream.on_close
        hijacked = isinstance(stream, WebSocketStream)

        def closed() -> None:
            if previous is not None:
                previous()
            _write(request, verb, None if hijacked else code, started, fault)

        stream.on_close = closed
        return
    if response is None and isinstance(stream, WebSocketStream):
        _write(request, verb, None, started, fault)
        return
    _write(request, verb, response.status if response is not None else code, started, fault)


AUDIT_ID_HEADER = "Audit-Id"  # Go's canonical form of kube's "Audit-ID"


def new_audit_id() -> str:
    """A random version-4 UUID, as kube's ``uuid.New()`` (``go_text.uuid4_text``: ~1.6x faster
    than ``str(uuid.uuid4())``, once per request)."""
    return uuid4_text(int.from_bytes(os.urandom(16)))


def assign_audit_id(request: Request) -> str:
    """``WithAuditInit``: the request's audit ID (its ``Audit-ID`` header, else a new UUID),
    echoed in an ``Audit-Id`` header on every answer to it."""
    found = request.header("audit-id") or new_audit_id()
    request.answer_headers = ((AUDIT_ID_HEADER, found), *request.answer_headers)
    return found


def audit_id(request: Request) -> str:
    return next((v for k, v in request.answer_headers if k == AUDIT_ID_HEADER), "")


_SOURCE_FILE = __file__


def _write(request: Request, verb: str, status: int | None, started: float,
           fault: str = "") -> None:
    text = Entry(verb, request_uri(request.path, request.raw_query),
                 time.perf_counter() - started, request.header("user-agent"),
                 audit_id(request), source_address(request.extra("peername")), status,
                 fault).line()
    # ``log.info(text)`` less its ``findCaller`` (a walk up the stack for each line, a fifth of
    # the line's cost): the record goes to the same handlers, filters and format
    log.handle(log.makeRecord(log.name, logging.INFO, _SOURCE_FILE, 0, text, (), None,
                              "_write"))
