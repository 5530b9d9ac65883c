"""The TLS listener: new connections' handshakes begin a few per loop turn.

A TLS handshake costs the event loop about half a millisecond of CPU (OpenSSL 3's ECDHE and
signature, on the loop thread in every asyncio TLS transport), and a TLS transport answers a
ClientHello in the loop turn that reads it. A burst of new connections (the hostile suite's
unauthenticated-bodies attack: 100 connections whose ClientHellos arrive together) then held
every request already being served for one long turn: a good client's GET waited 35-100 ms
behind 60-100 handshakes. Pacing the accepts did not help, for the connections were accepted
long before their ClientHellos came.

So each accepted socket first waits, outside any TLS transport, until it is readable (its
ClientHello is there); it then queues on a ``Pacer``, which begins ``PACED_PER_TURN``
handshakes per loop turn (``loop.connect_accepted_socket``), and the loop polls in between.
``http.TLSConnection`` queues its first read on the same pacer once its handshake is done.
Go needs no such thing (each connection is a goroutine the scheduler preempts); a single event
loop does. Measured on that attack (its good client's GET, 6-12 runs each): p99 39-66 ms with
``create_server``; 5-15 ms with this pacing, ``http``'s refused bodies left unread (Go's
``tooBig``) and ``TLSConnection``'s shared read buffer.

Written by hand rather than through ``create_server``, which can neither wait for the
ClientHello nor pace; binding follows ``asyncio.base_events.create_server`` (every address a
name resolves to, ``SO_REUSEADDR``, ``SO_REUSEPORT`` on request, ``IPV6_V6ONLY`` for IPv6), at
most ``ACCEPT_PER_TURN`` accepts a turn. A connection whose handshake is not done within
``handshake_timeout_s`` of its accept is dropped (Go bounds the handshake by its
``ReadHeaderTimeout``), as is one whose handshake fails. Accept errors that mean the process is
out of descriptors or memory pause accepting for a second, as asyncio does
(``constants.ACCEPT_RETRY_DELAY``).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from collections import deque
from collections.abc import Callable

from kubewire.listening import close_all, stream_sockets

log = logging.getLogger(__name__)

ACCEPT_PER_TURN = 16  # connections taken each time a listening socket is readable
# New connections' costly steps (a handshake begun, a first request read) per loop turn.
PACED_PER_TURN = 2
_ACCEPT_RETRY_S = 1.0  # asyncio's ACCEPT_RETRY_DELAY
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def bind_sockets(host: str | None, port: int, *, reuse_port: bool,
                 backlog: int) -> list[socket.socket]:
    """Listening sockets for every address ``host`` resolves to (all interfaces for ``None``
    or ""), bound as ``asyncio``'s ``create_server`` binds them."""
    made = stream_sockets(host, port)
    try:
        for sock, address in made:
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        close_all(made)
        raise
    return [sock for sock, _ in made]


class Pacer:
    """Runs what is entered, in order, at most ``per_turn`` callbacks per loop turn."""

    __slots__ = ("_loop", "_per_turn", "_queue", "_scheduled")

    def __init__(self, per_turn: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._per_turn = per_turn
        self._queue: deque[Callable[[], None]] = deque()
        self._scheduled = False

    def enter(self, callback: Callable[[], None]) -> None:
        self._queue.append(callback)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._run)

    def _run(self) -> None:
        queue = self._queue
        for _ in range(min(self._per_turn, len(queue))):
            queue.popleft()()
        if queue:
            self._loop.call_soon(self._run)  # after the next poll: the loop turns in between
        else:
            self._scheduled = False

    def clear(self) -> None:
        self._queue.clear()


class _Waiting:
    """An accepted connection whose ClientHello has not been answered yet."""

    __slots__ = ("deadline", "sock", "timer")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.timer: asyncio.TimerHandle | None = None


class TLSListener:
    """Serves TLS on ``sockets``: each accepted connection gets ``factory()``'s protocol once
    its handshake is done (``loop.connect_accepted_socket``), handshakes begun as ``pacer``
    allows (``PACED_PER_TURN`` per loop turn)."""

    def __init__(self, sockets: list[socket.socket], factory: Callable[[], asyncio.BaseProtocol],
                 ssl_context: ssl.SSLContext, handshake_timeout_s: float,
                 pacer: Pacer) -> None:
        self.sockets = sockets
        self._pacer = pacer
        self._factory = factory
        self._ssl = ssl_context
        self._handshake_timeout_s = handshake_timeout_s
        self._loop = asyncio.get_running_loop()
        self._waiting: set[_Waiting] = set()  # accepted, ClientHello not yet answered
        self._handshakes: set[asyncio.Task[None]] = set()
        self._closed = False
        for sock in sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _accept(self, sock: socket.socket) -> None:
        loop = self._loop
        for _ in range(ACCEPT_PER_TURN):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue  # the client gave up while it waited in the backlog
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    raise
                log.error("accepting a connection failed (%s): retrying in %g s", exc,
                          _ACCEPT_RETRY_S)
                loop.remove_reader(sock.fileno())
                loop.call_later(_ACCEPT_RETRY_S, self._resume, sock)
                return
            conn.setblocking(False)
            deadline = loop.time() + self._handshake_timeout_s
            waiting = _Waiting(conn, deadline)
            waiting.timer = loop.call_at(deadline, self._expire, waiting)
            self._waiting.add(waiting)
            loop.add_reader(conn.fileno(), self._hello, waiting)

    def _resume(self, sock: socket.socket) -> None:
        if not self._closed:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _hello(self, waiting: _Waiting) -> None:
        """Its first bytes (the ClientHello, or an end) arrived: in line for a handshake."""
        self._loop.remove_reader(waiting.sock.fileno())
        self._pacer.enter(lambda: self._begin(waiting))

    def _begin(self, waiting: _Waiting) -> None:
        if waiting not in self._waiting:
            return  # expired meanwhile
        self._waiting.discard(waiting)
        if waiting.timer is not None:
            waiting.timer.cancel()
        task = self._loop.create_task(self._handshake(waiting.sock, waiting.deadline))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    def _expire(self, waiting: _Waiting) -> None:
        """No ClientHello answered within the handshake timeout: dropped."""
        if waiting not in self._waiting:
            return
        self._waiting.discard(waiting)
        if waiting.timer is not None:
            waiting.timer.cancel()
        sock = waiting.sock
        if sock.fileno() >= 0:
            self._loop.remove_reader(sock.fileno())
        sock.close()

    async def _handshake(self, conn: socket.socket, deadline: float) -> None:
        try:
            await self._loop.connect_accepted_socket(
                self._factory, conn, ssl=self._ssl,
                ssl_handshake_timeout=max(deadline - self._loop.time(), 0.001))
        except OSError:  # TimeoutError and ssl.SSLError too
            conn.close()  # a failed or timed-out handshake: nothing was served (logged by TLS)

    def close(self) -> None:
        """Stop accepting; connections not yet through their handshake are dropped."""
        if self._closed:
            return
        self._closed = True
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())
            sock.close()
        for waiting in list(self._waiting):
            self._expire(waiting)
        self._pacer.clear()
        for task in list(self._handshakes):
            task.cancel()
