"""Who a request runs as: impersonation, unverifiable client certificates, the WebSocket token.

Real clients (kubectl, the ``kubernetes`` package) and raw HTTPS against the real server. Each
answer is compared with kube-apiserver's: impersonation as ``filters/impersonation.go`` does it,
client certificates as Go's ``tls.RequestClientCert`` plus kube's x509 authenticator take them,
and the ``Sec-WebSocket-Protocol`` bearer token only on WebSocket upgrades.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubewire.server import pki
from tests.integration.harness import ServerThread
from tests.integration.test_access import (
    POLICY,
    UNAUTHORIZED,
    _token_of,
    https,
    issue,
    secure,
)
from tests.reliability.proc import free_port

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


# --- client certificates that do not verify ----------------------------------------------------

@dataclass
class Served:
    """What ``https()`` and ``issue()`` need of a server: its port and data dir."""

    port: int
    data_dir: Path

    @property
    def config(self) -> Served:
        return self


@pytest.fixture
def stdlib_loop_server(make_server: Callable[..., ServerThread], tmp_path: Path) -> Served:
    """The tests' server thread (asyncio's own loop and SSL transport)."""
    policy = tmp_path / "policy.jsonl"
    policy.write_text(POLICY + "\n")
    server = make_server(insecure_http=False, authorization_policy_file=policy)
    return Served(server.port, server.config.data_dir)


@pytest.fixture
def uvloop_server(tmp_path: Path) -> Iterator[Served]:
    """``kubewire serve`` itself, in a subprocess: uvloop and its SSL transport."""
    pytest.importorskip("uvloop")
    policy = tmp_path / "policy.jsonl"
    policy.write_text(POLICY + "\n")
    data_dir, port = tmp_path / "served", free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubewire.cli", "serve", "--data-dir", str(data_dir), "--port",
         str(port), "--authorization-policy-file", str(policy), "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()  # "kubewire ready: ..." once it listens
        assert line.startswith("kubewire ready:"), line + proc.stdout.read().decode()
        yield Served(port, data_dir)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()


def _client_cert(ca: pki.PEMPair, *, usage: x509.ObjectIdentifier = ExtendedKeyUsageOID.CLIENT_AUTH,
                 valid_days: tuple[int, int] = (-1, 365)) -> pki.PEMPair:
    """A certificate for ``mallory`` in ``system:masters`` signed by ``ca``, valid from
    ``valid_days[0]`` to ``valid_days[1]`` days from now."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                x509.NameAttribute(NameOID.COMMON_NAME, "mallory")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now + datetime.timedelta(days=valid_days[0]))
            .not_valid_after(now + datetime.timedelta(days=valid_days[1]))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return pki.PEMPair(cert.public_bytes(serialization.Encoding.PEM),
                       key.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))


def _bad_certificates(data_dir: Path) -> dict[str, pki.PEMPair]:
    """Certificates kube's x509 authenticator refuses, each naming an admin."""
    ours = pki.load_ca(data_dir / "pki")
    return {
        "self-signed": pki.make_ca("mallory"),
        "another CA": _client_cert(pki.make_ca("elsewhere")),
        "expired": _client_cert(ours, valid_days=(-30, -1)),
        "not yet valid": _client_cert(ours, valid_days=(1, 30)),
        "server usage only": _client_cert(ours, usage=ExtendedKeyUsageOID.SERVER_AUTH),
    }


def _pair_files(tmp_path: Path, name: str, pair: pki.PEMPair) -> tuple[Path, Path]:
    stem = tmp_path / name.replace(" ", "-")
    stem.with_suffix(".crt").write_bytes(pair.cert)
    stem.with_suffix(".key").write_bytes(pair.key)
    return stem.with_suffix(".crt"), stem.with_suffix(".key")


@pytest.mark.parametrize("kind", ["stdlib_loop_server", "uvloop_server"])
def test_a_bad_client_certificate_is_no_credential_and_the_token_still_counts(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    served: Any = request.getfixturevalue(kind)
    data_dir = served.data_dir
    admin = (data_dir / "pki/admin.crt", data_dir / "pki/admin.key")
    bob = _token_of(issue(served, "bob", token=True))
    forbidden_to_bob = ('pods is forbidden: User "bob" cannot list resource "pods" in API group '
                        '"" in the namespace "b": No policy matched.')
    assert https(served, "GET", "/api/v1/namespaces/b/pods", cert=admin).status == 200
    for name, pair in _bad_certificates(data_dir).items():
        cert = _pair_files(tmp_path, name, pair)
        # The handshake succeeds (kube asks for a certificate and takes any), and with no other
        # credential the request is refused as unauthenticated.
        reply = https(served, "GET", "/api/v1/namespaces/b/pods", cert=cert)
        assert reply.status == 401, (name, reply.body)
        assert json.loads(reply.body) == UNAUTHORIZED, name
        # A valid bearer token on the same connection authenticates it: bob, not mallory.
        reply = https(served, "GET", "/api/v1/namespaces/a/pods", cert=cert, token=bob)
        assert reply.status == 200, (name, reply.body)
        reply = https(served, "GET", "/api/v1/namespaces/b/pods", cert=cert, token=bob)
        assert reply.status == 403, (name, reply.body)
        assert json.loads(reply.body)["message"] == forbidden_to_bob, name
    # The next connection's valid certificate is judged on its own.
    assert https(served, "GET", "/api/v1/namespaces/b/pods", cert=admin).status == 200

