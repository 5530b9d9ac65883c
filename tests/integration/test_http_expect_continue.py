"""``Expect: 100-continue`` on the real server, as Go's net/http answers it for kube-apiserver.

curl sends ``Expect: 100-continue`` for bodies over 1 KiB and waits (one second by default) for
the interim ``100 Continue`` before sending the body; Go replies when the handler reads the body
(server.go ``expectContinueReader``). Any other expectation gets 417 and a closed connection
(server.go ``sendExpectationFailed``).
"""

from __future__ import annotations

import json
import socket

from tests.integration.harness import ServerThread
from tests.integration.kinds import POD
from tests.integration.wire import get, host_port

INTERIM_WAIT_S = 5.0  # bound on waiting for the interim answer; a hang fails the test


def send_head(server: ServerThread, head: str) -> socket.socket:
    sock = socket.create_connection(host_port(server), timeout=INTERIM_WAIT_S)
    sock.sendall(head.encode())
    return sock


def read_head(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return data


def post_head(server: ServerThread, body: bytes, expect: str, version: str = "1.1") -> str:
    host, port = host_port(server)
    return (f"POST {POD.collection()} HTTP/{version}\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json\r\n"
            f"Content-Length: {len(body)}\r\nExpect: {expect}\r\n\r\n")


def test_100_continue_comes_before_the_body_is_sent(server: ServerThread) -> None:
    body = json.dumps(POD.obj("web", annotations={"pad": "x" * 2048})).encode()
    with send_head(server, post_head(server, body, "100-continue")) as sock:
        assert read_head(sock) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        answer = read_head(sock)
    assert answer.startswith(b"HTTP/1.1 201 Created\r\n")
    assert get(server, POD.item("web"))["metadata"]["annotations"]["pad"] == "x" * 2048


def test_100_continue_is_a_case_insensitive_token(server: ServerThread) -> None:
    body = json.dumps(POD.obj("web")).encode()
    with send_head(server, post_head(server, body, "100-Continue")) as sock:
        assert read_head(sock) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        assert read_head(sock).startswith(b"HTTP/1.1 201 Created\r\n")


def test_other_expectations_get_417_and_close(server: ServerThread) -> None:
    body = json.dumps(POD.obj("web")).encode()
    with send_head(server, post_head(server, body, "something-else")) as sock:
        answer = read_head(sock)
        status, *headers = answer.split(b"\r\n\r\n")[0].split(b"\r\n")
        assert status == b"HTTP/1.1 417 Expectation Failed"
        assert {h.split(b": ")[0] for h in headers} == {b"Connection", b"Content-Length", b"Date"}
        assert b"Connection: close" in headers and b"Content-Length: 0" in headers
        assert sock.recv(1) == b""  # closed
    assert get(server, POD.collection())["items"] == []  # nothing was created
