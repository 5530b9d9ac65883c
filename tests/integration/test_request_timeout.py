"""kube's ``timeout`` query parameter (server/request_timeout.py): a malformed one is a 400 for
every request that is not a watch; a watch ignores it. The 504 itself needs a store that does not
answer: tests/reliability/test_stalled_writer.py."""

from __future__ import annotations

import http.client

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
