"""Sockets left open to the garbage collector: which fail a test and which are only listed."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import Any

import pytest

# A client library's socket that reaches the garbage collector still open (a keep-alive
# connection of an aiohttp or httpx pool whose event loop has ended, as kopf's and kr8s's do when
# their loop stops) is the client's affair, and it surfaces at whichever later test the collector
# happens to run in, so failing that test says nothing about it. Such leaks are listed at the end
# of the session instead. A socket whose *local* port is a listening port of a server a test
# started is the server's, and still fails the test: the server's connections are bounded and
# closed by the server, and the hostile-client tests count them.
_SOCKET_LEAK = re.compile(r"unclosed <socket\.socket .*laddr=\('[^']*', (\d+)\)")
_REMOTE_PORT = re.compile(r"raddr=\('[^']*', (\d+)\)")
_TRANSPORT_LEAK = re.compile(r"unclosed transport <_Selector\w*Transport")
SERVER_PORTS: dict[int, str] = {}
"""Listening ports of the servers tests started in this process (tests/integration/harness),
each with the test that started it, so a leaked client socket names the test it came from."""
_client_leaks: list[str] = []


def _client_side_leak(unraisable: Any) -> bool:
    if not isinstance(unraisable.exc_value, ResourceWarning):
        return False
    text = str(unraisable.exc_value)
    socket_leak = _SOCKET_LEAK.search(text)
    if socket_leak is not None:
        return int(socket_leak.group(1)) not in SERVER_PORTS
    return _TRANSPORT_LEAK.search(text) is not None


def _described(text: str) -> str:
    """The leak's text, with the test whose server the socket was connected to, if known."""
    remote = _REMOTE_PORT.search(text)
    started_by = SERVER_PORTS.get(int(remote.group(1))) if remote is not None else None
    return f"{text} (to the server of {started_by})" if started_by else text


def register_server(port: int) -> None:
    """Note a test server's listening port and the test that started it."""
    SERVER_PORTS[port] = os.environ.get("PYTEST_CURRENT_TEST", "").split(" (")[0]


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Wrap the unraisable hook pytest installed, so client-side leaks are noted, not raised."""
    inner: Callable[[Any], object] = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if _client_side_leak(unraisable):
            _client_leaks.append(_described(str(unraisable.exc_value)))
            return
        inner(unraisable)

    sys.unraisablehook = hook


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _client_leaks:
        terminalreporter.section("client sockets left to the garbage collector")
        for line in _client_leaks:
            terminalreporter.write_line(line)
