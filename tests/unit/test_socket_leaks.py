"""The session's socket-leak listing: server-side leaks fail, client-side ones name their test."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import socket_leaks


def _unraisable(text: str) -> SimpleNamespace:
    return SimpleNamespace(exc_value=ResourceWarning(text))


def test_a_client_socket_names_the_test_whose_server_it_was_connected_to(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket_leaks, "SERVER_PORTS", {})
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/x.py::test_y (call)")
    socket_leaks.register_server(40001)
    text = ("unclosed <socket.socket fd=7, family=2, type=1, proto=6, "
            "laddr=('127.0.0.1', 51234), raddr=('127.0.0.1', 40001)>")
    assert socket_leaks._client_side_leak(_unraisable(text))
    assert socket_leaks._described(text).endswith("(to the server of tests/x.py::test_y)")


def test_a_socket_on_a_servers_listening_port_is_the_servers_leak(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket_leaks, "SERVER_PORTS", {40001: "tests/x.py::test_y"})
    text = ("unclosed <socket.socket fd=7, family=2, type=1, proto=6, "
            "laddr=('127.0.0.1', 40001), raddr=('127.0.0.1', 51234)>")
    assert not socket_leaks._client_side_leak(_unraisable(text))
