"""Sockets to listen on: one per address a host name resolves to, made as asyncio makes them.

``stream_sockets`` is what ``asyncio.base_events.create_server`` does before it binds: every
distinct address ``getaddrinfo`` gives for a passive TCP socket (all interfaces for ``None`` or
""), each socket with ``SO_REUSEADDR``, an IPv6 one ``IPV6_V6ONLY`` (so that ``::`` and
``0.0.0.0`` can both be bound). The server's TLS listener (``server/wire/listen.py``) binds and
listens on them; ``serve --workers`` (``server/daemon/workers.py``) binds them to one port for
its workers to share. Standard library only.
"""

from __future__ import annotations

import socket
from typing import Any

Address = tuple[Any, ...]


def stream_sockets(host: str | None, port: int) -> list[tuple[socket.socket, Address]]:
    """A new, unbound TCP socket for each distinct address of ``host``, with that address."""
    made: list[tuple[socket.socket, Address]] = []
    seen: set[tuple[int, str]] = set()
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(
                host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE):
            if (family, str(address[0])) in seen:
                continue
            seen.add((family, str(address[0])))
            sock = socket.socket(family, kind, proto)
            made.append((sock, address))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    except BaseException:
        close_all(made)
        raise
    return made


def close_all(made: list[tuple[socket.socket, Address]]) -> None:
    for sock, _ in made:
        sock.close()
