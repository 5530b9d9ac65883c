"""Sockets left open to the garbage collector: which fail a test and which are only listed."""

from __future__ import annotations

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
_TRANSPORT_LEAK = re.compile(r"unclosed transport <_Selector\w*Transport")
SERVER_PORTS: set[int] = set()
"""Listening ports of the servers tests started in this process (tests/integration/harness)."""
_client_leaks: list[str] = []


def _client_side_leak(unraisable: Any) -> bool:
    if not isinstance(unraisable.exc_value, ResourceWarning):
        return False
    text = str(unraisable.exc_value)
    socket_leak = _SOCKET_LEAK.search(text)
    if socket_leak is not None:
        return int(socket_leak.group(1)) not in SERVER_PORTS
    return _TRANSPORT_LEAK.search(text) is not None


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Wrap the unraisable hook pytest installed, so client-side leaks are noted, not raised."""
    inner: Callable[[Any], object] = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if _client_side_leak(unraisable):
            _client_leaks.append(str(unraisable.exc_value))
            return
        inner(unraisable)

    sys.unraisablehook = hook


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _client_leaks:
        terminalreporter.section("client sockets left to the garbage collector")
        for line in _client_leaks:
            terminalreporter.write_line(line)
