"""Who a request runs as: impersonation, unverifiable client certificates, the WebSocket token.

Real clients (kubectl, the ``kubernetes`` package) and raw HTTPS against the real server. Each
answer is compared with kube-apiserver's: impersonation as ``filters/impersonation.go`` does it,
client certificates as Go's ``tls.RequestClientCert`` plus kube's x509 authenticator take them,
and the ``Sec-WebSocket-Protocol`` bearer token only on WebSocket upgrades.
"""

from __future__ import annotations

import base64
import json

from tests.integration.harness import ServerThread
from tests.integration.test_access import UNAUTHORIZED, _token_of, https, issue, secure

__all__ = ["secure"]  # the fixture, imported for this module's tests


def _ws_protocol(token: str) -> str:
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return f"base64url.bearer.authorization.k8s.io.{encoded}"


# --- the WebSocket bearer token ----------------------------------------------------------------

def test_websocket_token_counts_only_on_websocket_upgrades(secure: ServerThread) -> None:
    token = _token_of(issue(secure, "wsuser", "system:masters", token=True))
    headers = [("Sec-WebSocket-Protocol", _ws_protocol(token))]
    # An ordinary request: kube's websocket authenticator ignores the header, so no credentials.
    reply = https(secure, "GET", "/api/v1/namespaces", headers=headers)
    assert reply.status == 401, reply.body
    assert json.loads(reply.body) == UNAUTHORIZED
    # The same token as a bearer token works, so only the header's place was wrong.
    assert https(secure, "GET", "/api/v1/namespaces", token=token).status == 200



def test_websocket_token_protocol_is_read_as_kube_reads_it(secure: ServerThread) -> None:
    token = _token_of(issue(secure, "wsuser", "system:masters", token=True))
    upgrade = [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Version", "13"),
               ("Sec-WebSocket-Key", base64.b64encode(b"k" * 16).decode())]
    path = "/api/v1/pods?watch=true&timeoutSeconds=1"

    def offer(*protocols: str) -> int:
        headers = [*upgrade, ("Sec-WebSocket-Protocol", ", ".join(protocols))]
        return https(secure, "GET", path, headers=headers).status

    assert offer(_ws_protocol(token), "base64.binary.k8s.io") == 101
    # kube refuses, each with 401: no other subprotocol to echo back, two tokens, padding
    # (the token is unpadded base64url), bytes that are not UTF-8.
    assert offer(_ws_protocol(token)) == 401
    assert offer(_ws_protocol(token), _ws_protocol(token), "base64.binary.k8s.io") == 401
    assert offer(_ws_protocol(token) + "=", "base64.binary.k8s.io") == 401
    not_utf8 = "base64url.bearer.authorization.k8s.io." + base64.urlsafe_b64encode(
        b"\xff\xfe").decode().rstrip("=")
    assert offer(not_utf8, "base64.binary.k8s.io") == 401
