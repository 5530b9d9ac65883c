"""Who a request runs as: impersonation, unverifiable client certificates, the WebSocket token.

Real clients (kubectl, the ``kubernetes`` package) and raw HTTPS against the real server. Each
answer is compared with kube-apiserver's: impersonation as ``filters/impersonation.go`` does it,
client certificates as Go's ``tls.RequestClientCert`` plus kube's x509 authenticator take them,
and the ``Sec-WebSocket-Protocol`` bearer token only on WebSocket upgrades.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import os
import signal
import socket
import ssl
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

from kubewire.server.access import pki
from kubewire.server.wire.http_messages import Limits
from tests.api_only import API_ONLY
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl, run
from tests.integration.test_access import (
    POLICY,
    UNAUTHORIZED,
    _token_of,
    ensure_namespaces,
    forbidden,
    https,
    issue,
)
from tests.reliability.proc import free_port

# ABAC as in test_access, plus "proxy": it may impersonate users and groups, and nothing else.
IMPERSONATION_POLICY = POLICY + "\n" + "\n".join(json.dumps({
    "apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
    for spec in [
        {"user": "proxy", "namespace": "*", "resource": "users", "apiGroup": ""},
        {"user": "proxy", "namespace": "*", "resource": "groups", "apiGroup": ""},
    ])


@pytest.fixture
def abac(make_server: Callable[..., ServerThread], tmp_path: Path) -> ServerThread:
    policy = tmp_path / "policy.jsonl"
    policy.write_text(IMPERSONATION_POLICY + "\n")
    server = make_server(insecure_http=False, authorization_policy_file=policy)
    ensure_namespaces(server, "a", "b")
    return server


def _ws_protocol(token: str) -> str:
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return f"base64url.bearer.authorization.k8s.io.{encoded}"


# --- the WebSocket bearer token ----------------------------------------------------------------

def test_websocket_token_counts_only_on_websocket_upgrades(abac: ServerThread) -> None:
    token = _token_of(issue(abac, "wsuser", "system:masters", token=True))
    headers = [("Sec-WebSocket-Protocol", _ws_protocol(token))]
    # An ordinary request: kube's websocket authenticator ignores the header, so no credentials.
    reply = https(abac, "GET", "/api/v1/namespaces", headers=headers)
    assert reply.status == 401, reply.body
    assert json.loads(reply.body) == UNAUTHORIZED
    # The same token as a bearer token works, so only the header's place was wrong.
    assert https(abac, "GET", "/api/v1/namespaces", token=token).status == 200



def test_websocket_token_protocol_is_read_as_kube_reads_it(abac: ServerThread) -> None:
    token = _token_of(issue(abac, "wsuser", "system:masters", token=True))
    upgrade = [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Version", "13"),
               ("Sec-WebSocket-Key", base64.b64encode(b"k" * 16).decode())]
    path = "/api/v1/pods?watch=true&timeoutSeconds=1"

    def offer(*protocols: str) -> int:
        headers = [*upgrade, ("Sec-WebSocket-Protocol", ", ".join(protocols))]
        return https(abac, "GET", path, headers=headers).status

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
        [sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY,
         "--data-dir", str(data_dir), "--port",
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



# --- impersonation -----------------------------------------------------------------------------

def _list_b_pods_forbidden(user: str) -> dict[str, Any]:
    return forbidden(f'pods is forbidden: User "{user}" cannot list resource "pods" in API group '
                     f'"" in the namespace "b": No policy matched.', {"kind": "pods"})


@needs_kubectl
def test_kubectl_as_runs_as_the_impersonated_user(abac: ServerThread) -> None:
    # The admin (system:masters) may impersonate anyone; the request then has alice's rights,
    # which here are none on pods.
    done = run(abac, "--as=alice", "get", "pods", "-n", "a")
    assert done.returncode != 0
    assert ('Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource '
            '"pods" in API group "" in the namespace "a": No policy matched.') in done.stderr
    done = run(abac, "--as=bob", "get", "pods", "-n", "a")
    assert done.returncode == 0, done.stderr
    # --as-group sends Impersonate-Group once per group: bob as a viewer may read pods anywhere.
    done = run(abac, "--as=bob", "--as-group=viewers", "--as-group=other", "get", "pods", "-n",
               "b")
    assert done.returncode == 0, done.stderr
    done = run(abac, "--as=bob", "get", "pods", "-n", "b")
    assert 'User "bob" cannot list resource "pods"' in done.stderr


def test_kubernetes_client_with_impersonation_headers(abac: ServerThread) -> None:
    import kubernetes

    api = kubernetes.config.new_client_from_config(str(abac.kubeconfig))
    try:
        api.set_default_header("Impersonate-User", "bob")
        core = kubernetes.client.CoreV1Api(api)
        assert core.list_namespaced_pod("a").items == []
        with pytest.raises(kubernetes.client.ApiException) as info:
            core.list_namespaced_pod("b")
        assert info.value.status == 403
        assert json.loads(info.value.body) == _list_b_pods_forbidden("bob")
    finally:
        api.close()


def test_impersonating_without_the_right_is_forbidden_with_kubes_text(abac: ServerThread) -> None:
    bob = _token_of(issue(abac, "bob", token=True))
    reply = https(abac, "GET", "/api/v1/namespaces/a/pods", token=bob,
                  headers=[("Impersonate-User", "alice")])
    assert reply.status == 403, reply.body
    assert json.loads(reply.body) == forbidden(
        'users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API group '
        '"" at the cluster scope: No policy matched.', {"name": "alice", "kind": "users"})
    # A service account is asked for in its namespace: bob's rule for namespace a covers it,
    # and the account then has its own (no) rights, with the service-account groups.
    reply = https(abac, "GET", "/api/v1/namespaces/a/pods", token=bob,
                  headers=[("Impersonate-User", "system:serviceaccount:a:builder")])
    assert reply.status == 403, reply.body
    assert json.loads(reply.body)["message"].startswith(
        'pods is forbidden: User "system:serviceaccount:a:builder" cannot list')
    reply = https(abac, "GET", "/api/v1/namespaces/a/pods", token=bob,
                  headers=[("Impersonate-User", "system:serviceaccount:b:builder")])
    assert json.loads(reply.body) == forbidden(
        'serviceaccounts "builder" is forbidden: User "bob" cannot impersonate resource '
        '"serviceaccounts" in API group "" in the namespace "b": No policy matched.',
        {"name": "builder", "kind": "serviceaccounts"})


def test_a_proxy_acts_for_its_users(abac: ServerThread) -> None:
    proxy = _token_of(issue(abac, "proxy", token=True))
    as_bob = [("Impersonate-User", "bob")]
    assert https(abac, "GET", "/api/v1/namespaces/a/pods", token=proxy,
                 headers=as_bob).status == 200
    reply = https(abac, "GET", "/api/v1/namespaces/b/pods", token=proxy, headers=as_bob)
    assert json.loads(reply.body) == _list_b_pods_forbidden("bob")
    # Groups replace the user's own (each header value is one group, each authorized).
    as_viewer = [*as_bob, ("Impersonate-Group", "viewers"), ("Impersonate-Group", "x, y")]
    assert https(abac, "GET", "/api/v1/namespaces/b/pods", token=proxy,
                 headers=as_viewer).status == 200
    # The proxy has no right to set extra or a uid: kube's 403 for each, the key decoded.
    reply = https(abac, "GET", "/api/v1/namespaces/a/pods", token=proxy,
                  headers=[*as_bob, ("Impersonate-Extra-Example.com%2FScopes", "view")])
    assert json.loads(reply.body) == forbidden(
        'userextras.authentication.k8s.io "view" is forbidden: User "proxy" cannot impersonate '
        'resource "userextras/example.com/scopes" in API group "authentication.k8s.io" at the '
        'cluster scope: No policy matched.',
        {"name": "view", "group": "authentication.k8s.io", "kind": "userextras"})
    reply = https(abac, "GET", "/api/v1/namespaces/a/pods", token=proxy,
                  headers=[*as_bob, ("Impersonate-Uid", "1234")])
    assert json.loads(reply.body) == forbidden(
        'uids.authentication.k8s.io "1234" is forbidden: User "proxy" cannot impersonate '
        'resource "uids" in API group "authentication.k8s.io" at the cluster scope: No policy '
        'matched.', {"name": "1234", "group": "authentication.k8s.io", "kind": "uids"})


def test_groups_extra_or_uid_without_a_user_is_a_bad_request(abac: ServerThread) -> None:
    admin = (abac.config.data_dir / "pki/admin.crt", abac.config.data_dir / "pki/admin.key")
    reply = https(abac, "GET", "/api/v1/namespaces/a/pods", cert=admin,
                  headers=[("Impersonate-Group", "viewers"), ("Impersonate-Uid", "7")])
    assert reply.status == 400, reply.body
    assert json.loads(reply.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "requested [{Group  viewers    } {UID  7  authentication.k8s.io/v1  }] "
                   "without impersonating a user",
        "reason": "BadRequest", "code": 400}


def test_limits_count_the_impersonated_user(make_server: Callable[..., ServerThread]) -> None:
    """The admin is exempt from limits (system:masters); acting as alice, it is alice."""
    server = make_server(insecure_http=False, limits=Limits(max_watches_per_user=1))
    admin = (server.config.data_dir / "pki/admin.crt", server.config.data_dir / "pki/admin.key")
    as_alice = [("Impersonate-User", "alice")]
    with _open_watch(server, admin, as_alice):
        reply = https(server, "GET", "/api/v1/pods?watch=true&timeoutSeconds=1", cert=admin,
                      headers=as_alice)
        assert reply.status == 429, reply.body
        assert json.loads(reply.body)["message"] == (
            "too many watches open for user 'alice': the limit is 1")


@contextlib.contextmanager
def _open_watch(server: ServerThread, cert: tuple[Path, Path],
                headers: list[tuple[str, str]]) -> Iterator[None]:
    """A watch held open (its head read) for the duration of the block."""
    ctx = ssl.create_default_context(cafile=str(server.config.data_dir / "pki/ca.crt"))
    ctx.load_cert_chain(*cert)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        lines = ["GET /api/v1/pods?watch=true HTTP/1.1", "Host: localhost",
                 *(f"{name}: {value}" for name, value in headers)]
        tls.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = tls.recv(4096)
            assert chunk, head
            head += chunk
        assert head.startswith(b"HTTP/1.1 200"), head
        yield
