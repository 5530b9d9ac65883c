"""kube's ``timeout`` query parameter (server/request_timeout.py): a malformed one is a 400 for
every request that is not a watch; a watch ignores it. The 504 itself needs a store that does not
answer: tests/reliability/test_stalled_writer.py."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest

from tests.integration.harness import ServerThread
from tests.integration.wire import call, host_port

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def _bad_timeout(text: str) -> dict[str, object]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"invalid timeout specified in the request URL - {text}",
            "reason": "BadRequest", "code": 400}


@pytest.mark.parametrize(("method", "path", "body"), [
    ("GET", CONFIGMAPS, None),
    ("GET", f"{CONFIGMAPS}/missing", None),
    ("POST", CONFIGMAPS, {"metadata": {"name": "never"}}),
    ("GET", "/healthz", None),
    ("GET", "/api", None),
])
def test_a_malformed_timeout_is_a_bad_request_and_changes_nothing(
        server: ServerThread, method: str, path: str, body: object) -> None:
    reply = call(server, method, f"{path}?timeout=abc", body)
    assert reply.status == 400
    assert reply.json == _bad_timeout('time: invalid duration "abc"')
    reply = call(server, method, f"{path}?timeout=5", body)  # Go wants a unit
    assert reply.json == _bad_timeout('time: missing unit in duration "5"')
    assert call(server, "GET", f"{CONFIGMAPS}/never").status == 404


def test_well_formed_timeouts_are_taken(server: ServerThread) -> None:
    for i, value in enumerate(("5s", "1m0s", "0s", "-1s", "100h", "")):  # 0, < 0, over: the cap
        reply = call(server, "POST", f"{CONFIGMAPS}?timeout={value}",
                     {"metadata": {"name": f"cm{i}"}})
        assert reply.status == 201, (value, reply.body)


def test_a_watch_ignores_the_timeout_parameter(server: ServerThread) -> None:
    host, port = host_port(server)
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", f"{CONFIGMAPS}?watch=1&timeout=abc&timeoutSeconds=1")
        resp = conn.getresponse()
        assert resp.status == 200  # long-running: no deadline, so no parse (request_deadline.go)
        resp.read()  # ends after timeoutSeconds
    finally:
        conn.close()


def test_the_deadline_counts_from_the_head_not_from_the_body(server: ServerThread) -> None:
    """kube's deadline starts when the request is received: a body that took longer than the
    request's ``timeout`` to arrive leaves its handler no time, so the write is not made."""
    body = b'{"metadata":{"name":"slow-body"}}'
    with socket.create_connection(host_port(server), timeout=10) as sock:
        sock.sendall(b"POST " + CONFIGMAPS.encode() + b"?timeout=1s HTTP/1.1\r\n"
                     b"Host: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body[:5])
        time.sleep(1.5)
        sock.sendall(body[5:])
        resp = http.client.HTTPResponse(sock)
        resp.begin()
        assert resp.status == 504
        assert json.loads(resp.read())["reason"] == "Timeout"
    assert call(server, "GET", f"{CONFIGMAPS}/slow-body").status == 404
