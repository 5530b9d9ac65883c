"""A small HTTP/1.1 server on an asyncio ``Protocol``: the I/O half of the HTTP layer.

Bytes become requests in ``http_parse.RequestParser`` and responses become bytes in
``http_messages`` (both sans-I/O, unit-tested without sockets, h11's split). ``HTTPConnection``
is the adapter between them and a transport: it schedules requests, runs timers, keeps the
body budget and back-pressure, and writes. ``HTTPServer`` listens and owns the connections.

Why not aiohttp or an ASGI stack: a watch is a long-lived chunked response that the watch cache
writes to directly, with no task, queue or body-wrapping layer per watcher. Here a streaming
response is a ``ChunkedStream`` over the connection's transport; the transport's own flow
control (``pause_writing``/``resume_writing``) is the back-pressure signal the watch cache reads.

Guarantees:
- requests on one connection are answered in order (pipelined requests wait their turn);
- a handler either returns a ``Response`` or takes over the connection with
  ``Request.start_stream`` and returns ``None``; the connection serves its next request only
  after the stream is closed;
- request heads and bodies are bounded (``Limits``); going over answers 413 (a Status) or Go's
  431 and closes. A head may be as long as Go's (``max_head_bytes`` plus Go's 4 KiB), so a
  URL is not limited to httptools' 64 KiB;
- back-pressure, as Go reads a connection's next request only after answering the last: at
  most ``max_queued_requests`` requests wait parsed behind the one being served, and while the
  client leaves answers unread (the transport is over its high-water mark) no request is
  started or parsed; then the connection stops parsing (bytes already read are kept,
  unparsed) and stops reading. Input is
  parsed in slices so one read cannot queue thousands of small requests. A connection whose
  answers stay unread for ``request_timeout_s`` is dropped (kube's timeout filter kills a
  request whose handler could not finish writing in time);
- request bodies read and not yet handed to a handler are bounded per connection
  (``max_connection_body_bytes``, while another request waits) and server-wide
  (``max_pending_body_bytes``: each body reserves its announced size before it is read, see
  ``http_input.BodyBudget``): past either, the connection stops reading until there is room;
- a request with a body is checked on its head first (``HTTPServer.head_check``: the server
  authenticates there, as kube's filters do before a handler reads the body); a refusal is
  answered at once and the body is never buffered;
- a body must arrive whole within ``Limits.request_timeout_s`` of its head (paused or not), else
  kube's 504 Timeout answer and the connection closes; a request's handler, a watch included,
  is not timed here;
- after a connection's last answer (a refusal, a protocol error, ``Connection: close``) nothing
  more is parsed; what the client still sends is read and dropped up to ``_MAX_DRAIN_BYTES``
  (Go's ``maxPostHandlerReadBytes``), or not read at all when a refused request's
  Content-Length announces that much still to come (Go's ``tooBig``), then reading pauses and
  the kernel's flow control stops the client; the close waits a moment (Go's
  ``closeWriteAndWait``), so a client that sent a moderate body before reading is not reset
  under an unread answer, and one that sends on costs no more than a paused connection, and is
  then cut off (a graceful TLS close would decrypt all it sends until its close_notify);
- TLS connections come through ``listen.TLSListener``: their handshakes, and then their first
  reads, are taken a few per loop turn (``listen.Pacer``), so that a burst of new connections
  cannot hold the requests already being served; their plaintext is decrypted into one shared
  buffer a slice at a time (``TLSConnection``);
- a connection idle between requests is closed after ``Limits.keepalive_timeout_s``;
- while a chunked stream is open, bytes the client sends are kept unparsed (reading pauses
  past ``_MAX_HELD_BYTES``) and parsed when the stream ends, as Go reads the next request only
  after a response; the connection holds no HTTP parser meanwhile, so an idle watch costs
  little memory (a WebSocket never returns to HTTP and drops its parser for good);
- a request head (request line and headers) must arrive whole within
  ``Limits.header_timeout_s`` of its first byte (of the connection, for the first request),
  else the connection is closed without an answer, as Go's ``ReadHeaderTimeout`` does: a
  slow-loris client cannot hold a connection by sending its head a byte at a time;
- a lost connection keeps nothing: its parser, held bytes, queued requests and body bytes
  (given back to the budget) go with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from typing import Any

from kubewire.server.wire.http_input import BodyBudget
from kubewire.server.wire.http_messages import (
    CONTINUE,
    ChunkedStream,
    Handler,
    HeadCheck,
    Limits,
    Request,
    Response,
    internal_error,
    render_head,
    render_response,
    request_timeout_answer,
    status_response,
    stream_head,
)
from kubewire.server.wire.http_parse import Closed, Refused, RequestParser, Upgraded
from kubewire.server.wire.listen import PACED_PER_TURN, Pacer, TLSListener, bind_sockets
from kubewire.server.wire.websocket import WebSocketStream
from kubewire.status import StatusError

log = logging.getLogger(__name__)
_MAX_UPGRADE_TAIL = 64 * 1024  # client bytes kept while an upgrade request is being decided
_MAX_HELD_BYTES = 64 * 1024  # client bytes kept during a stream before reading pauses
# Input is parsed this much at a time (more for a body of known length), so that one read of
# tiny pipelined requests queues at most ~230 of them before the queue bound is checked, and
# a body waiting for the budget has at most this much of it parsed.
_PARSE_SLICE_BYTES = 4096
_BACKLOG = 2048  # the kernel's queue of connections not yet accepted
_LINGER_S = 0.5  # Go's rstAvoidanceDelay: how long the close waits after the last answer
# Go's maxPostHandlerReadBytes: how much input after the last answer is read and dropped before
# reading pauses (net/http reads at most this much of an unread body, chunkWriter.writeHeader;
# its closeWriteAndWait then sleeps without reading).
_MAX_DRAIN_BYTES = 256 * 1024


def _tls_read_limit(transport: asyncio.BaseTransport, high: int | None) -> None:
    """How much a TLS transport reads ahead into its own buffer while its reading is paused
    (None: asyncio's default, 256 KiB); a plain transport has no such buffer."""
    set_limits = getattr(transport, "set_read_buffer_limits", None)
    if set_limits is not None:
        set_limits(high=high)


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


class HTTPConnection(asyncio.BaseProtocol):
    """One client connection: feed its bytes to a ``RequestParser``, run the handler on each
    request, write the answers in order.

    The interface of ``asyncio.Protocol`` without being one, so that ``TLSConnection`` can be a
    buffered protocol to both loops (uvloop takes a ``Protocol`` with ``get_buffer`` for a plain
    one; asyncio wants a ``BufferedProtocol``)."""

    # An idle watch is mostly this object: slots, and no parser or body while streaming.
    __slots__ = ("_drain_limit", "_drained", "_feeding", "_held", "_input_closed", "_keep_alive",
                 "_last_answer", "_limits", "_parser", "_pending", "_queued_body_bytes",
                 "_reading_paused", "_reserved", "_server", "_stream", "_task", "_timer",
                 "_transport", "_upgrade_tail", "_waiting_budget", "_write_timer", "write_paused")

    def __init__(self, server: HTTPServer) -> None:
        self._server = server
        self._limits = server.limits
        self._transport: asyncio.Transport | None = None
        # None while a stream is open: bytes then wait in ``_held``
        self._parser: RequestParser | None = self._new_parser()
        self._held: bytes | bytearray = b""  # read, not parsed yet; a bytearray once kept
        self._reading_paused = False
        self._feeding = False  # inside ``_feed`` (a callback must not feed again)
        self._pending: list[Request] | None = None  # requests read, not yet started (pipelined)
        self._queued_body_bytes = 0  # bodies of the requests in ``_pending`` (budgeted)
        self._reserved = 0  # budget reserved for the body being read
        self._waiting_budget = False  # that reservation waits: the body is not parsed
        self._task: asyncio.Task[None] | None = None
        self._stream: ChunkedStream | WebSocketStream | None = None
        self._upgrade_tail: bytes | None = None  # client bytes after an Upgrade request's head
        self._keep_alive = True
        self._input_closed = False  # nothing more the client sends is parsed
        self._drained = 0  # bytes read and dropped since then (bounded by _drain_limit)
        self._drain_limit = _MAX_DRAIN_BYTES  # 0: a refused body too big to drain (Go's tooBig)
        self._last_answer: bytes | None = None  # the closing answer, once those ahead are out
        self._timer: asyncio.TimerHandle | None = None  # head, body, keep-alive or linger
        self._write_timer: asyncio.TimerHandle | None = None  # answers left unread too long
        self.write_paused = False

    def _new_parser(self) -> RequestParser:
        return RequestParser(self, self, self._limits, self._server.head_check, _loop_time)

    # -- asyncio.Protocol ------------------------------------------------------------------
    def eof_received(self) -> bool | None:
        return None  # asyncio.Protocol's: the transport closes itself

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport
        self._transport = transport  # type: ignore[assignment]
        self.set_write_high_water(None)
        self._server.connections.add(self)
        self._arm_timer(self._limits.header_timeout_s, self.close)

    def data_received(self, data: bytes) -> None:
        if self._upgrade_tail is not None:  # past an Upgrade request: frames, not HTTP
            if isinstance(self._stream, WebSocketStream):
                self._stream.feed(data)
            elif len(self._upgrade_tail) < _MAX_UPGRADE_TAIL:
                self._upgrade_tail += data
            return
        if self._stream is None and self._input_closed:
            self._drop(len(data))
            return
        if self._stream is not None or self._held or not self._may_parse():
            self._hold(data)  # the next request is read after the stream, or once there is room
            return
        self._feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        server = self._server
        server.connections.discard(self)
        self._drop_reservation()
        self._release_queued(self._queued_body_bytes)
        self._cancel_timer()
        self._cancel_write_timer()
        if self._stream is not None and not self._stream.closed:
            self._stream._finish()
        self._stream = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._transport = None
        # Keep nothing: the connection object may outlive the socket (a task, a stream).
        self._parser = None
        self._held = b""
        self._pending = None
        self._last_answer = None

    def pause_writing(self) -> None:
        self.write_paused = True
        if self._stream is None:  # a stream's writer has its own policy (storage/watcher.py)
            self._arm_write_timer()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._cancel_write_timer()
        stream = self._stream
        if stream is not None:
            if stream.on_resume is not None:
                stream.on_resume()
            return
        if self._task is None:  # answers were drained: serve what waits, read on
            self._maybe_start_next()
            self._resume_parsing()

    # -- reading: parse while there is room ------------------------------------------------
    def _may_parse(self) -> bool:
        """Whether more input may be parsed now; if not, it is held and reading pauses."""
        parser = self._parser
        if (parser is None or self._stream is not None or self._input_closed
                or self._waiting_budget):
            return False
        limits = self._limits
        pending = self._pending  # room comes when a waiting request starts (answers drained)
        return not pending or not (
            self.write_paused or len(pending) >= limits.max_queued_requests
            or self._queued_body_bytes + parser.body_bytes > limits.max_connection_body_bytes)

    def _feed(self, data: bytes | bytearray) -> None:
        """Parse ``data`` a slice at a time while parsing may go on; hold the rest. (Callers
        have checked ``_may_parse``.)"""
        view = memoryview(data)
        at = 0
        self._feeding = True
        try:
            if len(view) <= _PARSE_SLICE_BYTES:  # the usual read: one slice, already allowed
                self._parse(view, 0, len(view))
                return
            while at < len(view):
                if not self._may_parse():
                    if not self._input_closed:
                        self._hold(view[at:])
                    return
                end = at + self._slice_bytes()
                if not self._parse(view, at, end):
                    return
                at = end
        finally:
            self._feeding = False
            parser = self._parser
            if (parser is not None and parser.reading_body and self._timer is None
                    and not self._input_closed):
                # A body not whole in the read that brought its head: its time runs from now.
                # (Armed here, not per request: most bodies come with their head.)
                self._arm_timer(self._limits.request_timeout_s, self._body_timed_out)

    def _slice_bytes(self) -> int:
        """How much to parse at once: the rest of a body of known length (its budget is
        reserved), otherwise a small slice, so the queue bound is checked every few requests."""
        parser = self._parser
        return _PARSE_SLICE_BYTES if parser is None else max(parser.body_left, _PARSE_SLICE_BYTES)

    def _parse(self, view: memoryview, at: int, end: int) -> bool:
        """Feed ``view[at:end]`` to the parser; False once this connection reads no more HTTP."""
        parser = self._parser
        assert parser is not None  # _may_parse checked
        outcome = parser.feed(view[at:end])
        if outcome is None:
            return not self._input_closed
        if isinstance(outcome, Upgraded):
            # The request was completed (and queued) first; no more HTTP on this connection.
            offset = outcome.offset
            self._upgrade_tail = b"" if offset is None else bytes(view[at + offset:])
            self._keep_alive = False
            self._parser = None
        elif isinstance(outcome, Refused):
            self._answer_last(outcome.answer, outcome.unread)
        else:
            assert isinstance(outcome, Closed)  # request_read closed the input already
        return False

    def _hold(self, data: bytes | memoryview) -> None:
        """Keep bytes that cannot be parsed yet, and let the kernel hold the rest: at once, or
        during a stream past ``_MAX_HELD_BYTES`` (a watch keeps reading so that a client that
        closes is noticed; one that closes meanwhile is noticed at the next write)."""
        if self._held:
            self._held += data  # in place: many small reads must not copy all that is kept
        else:
            self._held = bytearray(data)
        if self._reading_paused or (self._stream is not None
                                    and len(self._held) < _MAX_HELD_BYTES):
            return
        self._reading_paused = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def _resume_parsing(self) -> None:
        """Parse what was held once nothing blocks parsing, then read from the socket again."""
        if self._feeding or self._transport is None:
            return
        if not self._held and not self._reading_paused and self._parser is not None:
            return  # nothing waits: the usual case after an answer
        if (self._parser is None and self._stream is None and self._upgrade_tail is None
                and not self._input_closed):
            self._parser = self._new_parser()  # a stream ended
        if not self._may_parse():
            return
        held, self._held = self._held, b""
        if held:
            self._feed(held)
        if not self._held:
            self._resume_reading()

    def _drop(self, size: int) -> None:
        """Input after the last answer: dropped, so that a client that sent a moderate body
        before reading the answer is not reset under it at the close; past ``_MAX_DRAIN_BYTES``
        reading pauses and the rest waits in the kernel, which stops the sender (Go reads at
        most ``maxPostHandlerReadBytes`` of an unread body, then closeWriteAndWait reads
        nothing), so a client pushing a large body costs no loop time until the close."""
        self._drained += size
        if self._drained >= self._drain_limit and not self._reading_paused:
            self._reading_paused = True
            transport = self._transport
            if transport is not None and not transport.is_closing():
                transport.pause_reading()
                # TLS reads on into its own buffer (up to 256 KiB) while the application's
                # reading is paused: for a connection never read again, not one byte more.
                _tls_read_limit(transport, 0)

    def throttle_reading(self, seconds: float) -> None:
        """A WebSocket client over its budget: read nothing from it for ``seconds``."""
        if self._transport is None or self._transport.is_closing():
            return
        if not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        self._arm_timer(seconds, self._resume_reading)

    def _resume_reading(self) -> None:
        if self._reading_paused:
            self._reading_paused = False
            if self._transport is not None and not self._transport.is_closing():
                self._transport.resume_reading()

    def _budget_granted(self) -> None:
        """The body's reservation was granted: parse it, on the next loop turn."""
        self._waiting_budget = False
        asyncio.get_running_loop().call_soon(self._resume_parsing)

    def _drop_reservation(self) -> None:
        """The body being read is gone: give back (or withdraw) its reservation."""
        if self._waiting_budget:
            self._server.budget.cancel(self._budget_granted)
            self._waiting_budget = False
        elif self._reserved:
            self._server.budget.release(self._reserved)
        self._reserved = 0

    def _settle_reservation(self, size: int) -> None:
        """A body is whole: the budget now counts its ``size`` (a reservation is never less)."""
        budget = self._server.budget
        if self._waiting_budget:  # it was whole within the slice that ended its head
            budget.cancel(self._budget_granted)
            self._waiting_budget = False
            budget.take(size)
        else:
            budget.release(self._reserved - size)
        self._reserved = 0
        self._queued_body_bytes += size

    def _release_queued(self, n: int) -> None:
        """A queued request's body is handed to its handler (or dropped)."""
        if n:
            self._queued_body_bytes -= n
            self._server.budget.release(n)

    # -- what the parser reports (http_parse.ParseSink) ------------------------------------
    def head_started(self) -> None:
        self._arm_timer(self._limits.header_timeout_s, self.close)

    def head_read(self) -> None:
        self._cancel_timer()

    def body_expected(self, size: int, send_continue: bool) -> None:
        """Reserve the body in the budget (if it must wait, the body is not parsed meanwhile;
        the request timer, armed by ``_feed``, runs all the same), and send ``100 Continue``
        only between responses, so an interim line never lands inside an earlier response
        (Go's ``readRequest``; curl waits a second for it before sending a body)."""
        self._reserved = size if size >= 0 else self._limits.max_body_bytes
        self._waiting_budget = not self._server.budget.reserve(self._reserved,
                                                               self._budget_granted)
        if send_continue and not (self._task is not None or self._stream is not None
                                  or self._pending):
            self.write(CONTINUE)

    def request_read(self, request: Request, had_body: bool, closing: bool) -> None:
        if had_body:
            self._cancel_timer()
            self._settle_reservation(len(request.body))
        if self._pending is None:
            self._pending = [request]
        else:
            self._pending.append(request)
        if closing:  # Go reads nothing after a Connection: close request
            self._keep_alive = False
            self._input_closed = True
            self._parser = None
        self._maybe_start_next()

    # -- request scheduling ----------------------------------------------------------------
    def _maybe_start_next(self) -> None:
        pending = self._pending
        if (self._task is not None or self._stream is not None or not pending
                or self._transport is None or self.write_paused):
            return
        request = pending.pop(0)
        if not pending:
            self._pending = None
        if request.body:
            self._release_queued(len(request.body))  # the handler holds it now
        self._task = asyncio.get_running_loop().create_task(self._run(request))

    async def _run(self, request: Request) -> None:
        try:
            response = await self._server.handler(request)
        except asyncio.CancelledError:
            raise
        except StatusError as exc:  # the app normally maps these; a fallback keeps it sane
            response = status_response(exc)
        except Exception:
            log.exception("unhandled error in handler")
            response = internal_error()
        finally:
            self._task = None
        if request.stream is None:
            if response is not None:
                self.send_response(response, head_only=request.method == "HEAD",
                                   accept_encoding=request.header("accept-encoding"))
            self._after_response()
        elif request.stream.closed:  # the stream ended before the handler returned
            self._after_response()

    def _after_response(self) -> None:
        if self._server.closing:
            self.close()
            return
        if self._pending:
            self._maybe_start_next()
        elif self._last_answer is not None:
            answer, self._last_answer = self._last_answer, None
            self._write_last(answer)
            return
        elif not self._keep_alive:
            self.close()
            return
        self._resume_parsing()
        if self._task is not None or self._stream is not None or self._input_closed:
            return
        if self.write_paused and self._write_timer is None:
            self._arm_write_timer()  # a stream ended with its answers unread
        if self._timer is None:
            self._arm_next_timer()

    def _arm_next_timer(self) -> None:
        """After an answer (a stream stopped the timers): the bound of what is read now."""
        parser = self._parser
        if parser is not None and parser.reading_head:  # a pipelined head: its time restarts
            self._arm_timer(self._limits.header_timeout_s, self.close)
        elif parser is not None and parser.reading_body:
            self._arm_timer(self._limits.request_timeout_s, self._body_timed_out)
        elif not self._pending:
            self._arm_timer(self._limits.keepalive_timeout_s, self.close)

    # -- responses -------------------------------------------------------------------------
    def send_response(self, response: Response, *, head_only: bool = False,
                      accept_encoding: str = "") -> None:
        last = not self._keep_alive and not self._pending and self._last_answer is None
        self.write(render_response(response, head_only=head_only,
                                   accept_encoding=accept_encoding, closing=last))

    def _answer_last(self, answer: bytes, unread: int = -1) -> None:
        """End the connection with ``answer``, written after the answers to the requests read
        before it; the request being read is dropped (its body bytes given back), nothing more
        is parsed, and what the client still sends is dropped (``_drop``) until the close.
        A body whose Content-Length announces ``_MAX_DRAIN_BYTES`` or more still to come
        (``unread``) is not read at all: Go's ``tooBig`` (its server discards an unread body
        only when less than ``maxPostHandlerReadBytes`` is left, else it closes), so a flood of
        refused large bodies costs no reading, and no TLS decryption, past what came with the
        head."""
        self._input_closed = True
        self._keep_alive = False
        self._parser = None  # with it the request being read, its head and body
        self._held = b""
        self._drop_reservation()
        self._cancel_timer()
        if unread >= _MAX_DRAIN_BYTES:
            self._drain_limit = 0
            self._drop(0)  # nothing is drained: reading pauses now
        else:
            self._resume_reading()
        if self._task is None and self._stream is None and not self._pending:
            self._write_last(answer)
        else:
            self._last_answer = answer

    def _write_last(self, answer: bytes) -> None:
        """Go's ``closeWriteAndWait``: the answer, our FIN (plain TCP), and the close a moment
        later; meanwhile at most ``_MAX_DRAIN_BYTES`` of the client's input is read and
        dropped."""
        self.write(answer)
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if transport.can_write_eof():
            transport.write_eof()
        self._arm_timer(_LINGER_S, self._linger_ended)

    def _linger_ended(self) -> None:
        """The close after the last answer. A client still sending what is no longer read
        (reading paused by ``_drop``) is cut off, as Go's close of the socket does: a graceful
        close would have TLS read and decrypt everything it sends on until its close_notify
        (uvloop's shutdown reads the peer's data into the void for up to 30 s), a flood of
        refused bodies costing the loop its whole volume."""
        self._timer = None
        if self._reading_paused and self.buffered_bytes() == 0:
            self.abort()
        else:
            self.close()

    def _body_timed_out(self) -> None:
        """kube's timeout filter: the handler was still reading the body at the deadline."""
        self._timer = None
        self._answer_last(request_timeout_answer())

    # -- streams ---------------------------------------------------------------------------
    def start_stream(self, status: int, headers: list[tuple[str, str]]) -> ChunkedStream:
        self.write(stream_head(status, headers))
        self._stream = ChunkedStream(self)
        # Until the stream ends, nothing the client sends is parsed (see the module docstring):
        # no parser is needed, and none of a pipelined head's timer either.
        if self._parser is not None and not self._parser.in_message:
            self._parser = None
        self._cancel_timer()
        self._cancel_write_timer()
        return self._stream

    def start_websocket(self, headers: list[tuple[str, str]]) -> WebSocketStream:
        self.write(render_head(101, headers, date=False))
        stream = WebSocketStream(self)
        self._stream = stream
        self._cancel_write_timer()
        tail, self._upgrade_tail = self._upgrade_tail or b"", b""
        if tail:
            stream.feed(tail)
        return stream

    def stream_finished(self, stream: ChunkedStream) -> None:
        if stream is self._stream:
            self._stream = None
            if self._task is None:  # else the handler's task continues the connection
                self._after_response()

    # -- writing and closing ---------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def buffered_bytes(self) -> int:
        return 0 if self._transport is None else self._transport.get_write_buffer_size()

    def set_write_high_water(self, high: int | None) -> None:
        """Flow control's pause mark for this connection (None: ``Limits``'); see streams.py."""
        if self._transport is not None:
            self._transport.set_write_buffer_limits(
                high=self._limits.write_high_water_bytes if high is None else high)

    def transport_extra(self, name: str) -> Any:
        return None if self._transport is None else self._transport.get_extra_info(name)

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def shutdown(self) -> None:
        """Server stopping: end an open stream cleanly, close an idle connection."""
        if self._stream is not None:
            self._stream.close()
        elif self._task is None:
            self.close()

    # -- timers ----------------------------------------------------------------------------
    def _arm_timer(self, seconds: float, callback: Callable[[], None]) -> None:
        self._cancel_timer()
        self._timer = asyncio.get_running_loop().call_later(seconds, callback)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm_write_timer(self) -> None:
        """Answers unread for ``request_timeout_s``: drop the connection and what it holds."""
        self._cancel_write_timer()
        self._write_timer = asyncio.get_running_loop().call_later(
            self._limits.request_timeout_s, self.abort)

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None


# Plaintext a TLS connection takes at once (``TLSConnection``): one buffer for all of them,
# each read handed on (copied) before another connection's.
_TLS_READ_BYTES = 64 * 1024
_tls_read_view = memoryview(bytearray(_TLS_READ_BYTES))


class TLSConnection(HTTPConnection, asyncio.BufferedProtocol):
    """An ``HTTPConnection`` over TLS: its first request waits for its turn (``Pacer``), and
    it takes its plaintext ``_TLS_READ_BYTES`` at a time, decrypted into one shared buffer.

    As a plain protocol it would be handed everything that has arrived (up to the transport's
    256 KiB), decrypted into a fresh 256 KiB ``bytes`` per TLS record read (an mmap, a resize
    and an unmap each): a refused request's body, never to be read, decrypted whole. Given a
    buffer, the transport decrypts what fits, hands it on, and decrypts more on the next loop
    turn only if the connection still reads (Go's server likewise decrypts only the records
    its reader asks for)."""

    __slots__ = ()

    def get_buffer(self, sizehint: int) -> memoryview:
        return _tls_read_view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(_tls_read_view[:nbytes]))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Handshake done: its input waits for its turn (``listen.Pacer``) before any of it is
        read, the TLS transport's own buffer included."""
        super().connection_made(transport)
        self._reading_paused = True
        transport.pause_reading()  # type: ignore[attr-defined]
        _tls_read_limit(transport, 0)
        pacer = self._server.pacer
        if pacer is None:
            self._first_read()
        else:
            pacer.enter(self._first_read)

    def _first_read(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing() or self._input_closed:
            return
        _tls_read_limit(transport, None)
        self._resume_reading()


class HTTPServer:
    """Listens on a socket and serves ``handler``; ``close()`` ends streams and connections.

    ``head_check`` sees each request whose head announces a body before the body is read.
    """

    def __init__(self, handler: Handler, limits: Limits | None = None,
                 head_check: HeadCheck | None = None) -> None:
        self.handler = handler
        self.limits = limits or Limits()
        self.head_check = head_check
        self.budget = BodyBudget(self.limits.max_pending_body_bytes)
        self.connections: set[HTTPConnection] = set()
        self.closing = False
        self._server: asyncio.Server | None = None
        self._tls: TLSListener | None = None
        self.pacer: Pacer | None = None  # new TLS connections' handshakes and first reads

    async def listen(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None,
                     *, reuse_port: bool = False) -> tuple[str, int]:
        """Listen on ``host:port``; ``reuse_port`` (``SO_REUSEPORT``) shares the port with the
        other workers of ``serve --workers`` (the kernel spreads connections over them). TLS
        connections are accepted a few per loop turn (``listen.TLSListener``)."""
        if ssl_context is not None:
            sockets = bind_sockets(host, port, reuse_port=reuse_port, backlog=_BACKLOG)
            self.pacer = Pacer(PACED_PER_TURN)
            self._tls = TLSListener(sockets, lambda: TLSConnection(self), ssl_context,
                                    self.limits.header_timeout_s, self.pacer)
        else:
            loop = asyncio.get_running_loop()
            self._server = await loop.create_server(
                lambda: HTTPConnection(self),
                host, port, reuse_address=True, reuse_port=reuse_port or None,
                backlog=_BACKLOG)
        return self.addresses()[0]

    def addresses(self) -> list[tuple[str, int]]:
        """Every (host, port) listened on: a name such as ``localhost`` may bind several."""
        if self._tls is not None:
            names = [sock.getsockname() for sock in self._tls.sockets if sock.fileno() >= 0]
        elif self._server is not None:
            names = [sock.getsockname() for sock in self._server.sockets]
        else:
            names = []
        return [(str(name[0]), int(name[1])) for name in names]

    async def close(self) -> None:
        self.closing = True
        if self._server is not None:
            self._server.close()
        if self._tls is not None:
            self._tls.close()
        for conn in list(self.connections):
            conn.shutdown()
        # Python 3.11's wait_closed does not wait for connections, and a TLS close needs a few
        # loop turns for close_notify: give them a moment, then drop whatever is left.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 2.0
        while self.connections and loop.time() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.abort()
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)
