"""server/pki.py, authn.py, authz.py: certificates that real TLS stacks accept, kube's token
file and ABAC policy formats, and kube's Forbidden messages."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from kubewire.server.access import pki
from kubewire.server.access.authn import (
    ANONYMOUS_USER,
    AUTHENTICATED,
    CREDENTIAL_ID_KEY,
    Authenticator,
    CertificateVerdict,
    InvalidCredentials,
    TokenFileError,
    UserInfo,
    parse_token_file,
)
from kubewire.server.access.authorizers import build_chain
from kubewire.server.access.authz import (
    Attributes,
    PolicyFileError,
    forbidden,
    parse_policy_file,
)
from kubewire.server.access.chain import TLSFiles, server_ssl_context
from kubewire.server.access.client_certs import ClientCertificates

# --- pki ---------------------------------------------------------------------------------------


def test_server_pki_is_made_once_and_reused(tmp_path: Path) -> None:
    first = pki.ensure_server_pki(tmp_path / "pki", ["kube.example", "10.1.2.3"])
    ca = first.ca_cert.read_bytes()
    serving = first.serving_cert.read_bytes()
    assert sorted(pki.certificate_sans(serving)) == sorted(
        ["localhost", "127.0.0.1", "::1", "kube.example", "10.1.2.3"])
    assert (first.serving_key.stat().st_mode & 0o777) == 0o600
    again = pki.ensure_server_pki(tmp_path / "pki", ["kube.example", "10.1.2.3"])
    assert again.ca_cert.read_bytes() == ca
    assert again.serving_cert.read_bytes() == serving
    # New SANs re-issue the serving certificate under the same CA.
    pki.ensure_server_pki(tmp_path / "pki", ["other.example"])
    assert "other.example" in pki.certificate_sans(first.serving_cert.read_bytes())
    assert first.ca_cert.read_bytes() == ca


async def _handshake(files: pki.ServerPKI, client_pair: tuple[Path, Path] | None,
                     ) -> CertificateVerdict | None:
    """A real TLS handshake on loopback with the server's own context; returns what the
    server then makes of the client's certificate (None: the client sent none).

    Raises ``ConnectionRefusedError`` when the server refused the handshake (under TLS 1.3 the
    client only learns that from its next read, so the server's side is what is checked).
    """
    server_ctx = server_ssl_context(TLSFiles(files.serving_cert, files.serving_key,
                                             files.ca_cert, files))
    certificates = ClientCertificates.from_file(files.ca_cert)
    seen: list[CertificateVerdict | None] = []

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(certificates.verdict(writer.get_extra_info("ssl_object")))
        writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    client_ctx = ssl.create_default_context(cafile=str(files.ca_cert))
    if client_pair:
        client_ctx.load_cert_chain(*client_pair)
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx,
                                                   server_hostname="localhost")
    await reader.read()
    writer.close()
    server.close()
    await server.wait_closed()
    if not seen:
        raise ConnectionRefusedError("the server refused the handshake")
    return seen[0]


def _without_credential_id(user: UserInfo | None) -> UserInfo | None:
    assert user is not None
    assert [key for key, _ in user.extra] == [CREDENTIAL_ID_KEY]
    assert user.extra[0][1][0].startswith("X509SHA256=")
    return UserInfo(user.name, user.uid, user.groups)


async def test_certificates_pass_a_real_tls_handshake(tmp_path: Path) -> None:
    files = pki.ensure_server_pki(tmp_path / "pki")
    verdict = await _handshake(files, (files.admin_cert, files.admin_key))
    assert verdict is not None and not verdict.error
    assert _without_credential_id(verdict.user) == UserInfo(
        "kubewire-admin", "", ("system:masters", AUTHENTICATED))
    # Issued for a new user by the same CA: CN is the user, each O a group.
    alice = pki.issue_client(pki.load_ca(tmp_path / "pki"), "alice", ["dev", "ops"])
    (tmp_path / "alice.crt").write_bytes(alice.cert)
    (tmp_path / "alice.key").write_bytes(alice.key)
    verdict = await _handshake(files, (tmp_path / "alice.crt", tmp_path / "alice.key"))
    assert verdict is not None
    assert _without_credential_id(verdict.user) == UserInfo("alice", "", ("dev", "ops",
                                                                           AUTHENTICATED))
    assert await _handshake(files, None) is None  # no certificate: nothing to verify


async def test_a_certificate_from_another_ca_passes_the_handshake_and_names_nobody(
        tmp_path: Path) -> None:
    files = pki.ensure_server_pki(tmp_path / "pki")
    stranger = pki.issue_client(pki.make_ca("other-ca"), "mallory", ["system:masters"])
    (tmp_path / "m.crt").write_bytes(stranger.cert)
    (tmp_path / "m.key").write_bytes(stranger.key)
    verdict = await _handshake(files, (tmp_path / "m.crt", tmp_path / "m.key"))
    assert verdict == CertificateVerdict(None, "x509: certificate signed by unknown authority")


# --- authn -------------------------------------------------------------------------------------

def test_token_file_in_kube_format() -> None:
    tokens = parse_token_file('t1,alice,u1\nt2,bob,u2,"dev,ops"\n\nt3,carol,u3,admins\n')
    assert tokens == {"t1": UserInfo("alice", "u1"), "t2": UserInfo("bob", "u2", ("dev", "ops")),
                      "t3": UserInfo("carol", "u3", ("admins",))}
    with pytest.raises(TokenFileError, match="line 1"):
        parse_token_file("only,two\n")


def test_authenticator_orders_cert_then_token_then_anonymous() -> None:
    auth = Authenticator({"t2": UserInfo("bob", "u2", ("dev",))})
    assert auth.authenticate("Bearer t2", None) == UserInfo("bob", "u2", ("dev", AUTHENTICATED))
    assert auth.authenticate("bearer t2", None).name == "bob"
    assert auth.authenticate("", None) == ANONYMOUS_USER
    assert auth.authenticate("Basic abc", None) == ANONYMOUS_USER
    with pytest.raises(InvalidCredentials):
        auth.authenticate("Bearer nope", None)
    carl = CertificateVerdict(UserInfo("carl", "", ("g1", AUTHENTICATED)))
    assert auth.authenticate("Bearer nope", carl).name == "carl"
    # kube's union: a certificate that does not verify is passed over for a valid token, and
    # without one it is the error (401), never anonymous.
    bad = CertificateVerdict(None, "x509: certificate signed by unknown authority")
    assert auth.authenticate("Bearer t2", bad).name == "bob"
    with pytest.raises(InvalidCredentials, match="unknown authority"):
        auth.authenticate("", bad)
    assert auth.authenticate("", CertificateVerdict(None)) == ANONYMOUS_USER  # no CN


# --- authz -------------------------------------------------------------------------------------

POLICIES = "\n".join([
    '{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", '
    '"spec": {"user": "bob", "namespace": "a", "resource": "*", "apiGroup": "*"}}',
    '{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", '
    '"spec": {"group": "viewers", "namespace": "*", "resource": "pods", "apiGroup": "", '
    '"readonly": true}}',
    '{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", '
    '"spec": {"user": "*", "nonResourcePath": "/apis/*", "readonly": true}}',
])
BOB = UserInfo("bob", "", (AUTHENTICATED,))
VIEWER = UserInfo("vic", "", ("viewers", AUTHENTICATED))


def _attrs(user: UserInfo, verb: str, namespace: str = "", resource: str = "pods",
           group: str = "", name: str = "") -> Attributes:
    return Attributes(user=user, verb=verb, resource_request=True, namespace=namespace,
                      api_group=group, api_version="v1", resource=resource, name=name)


def test_abac_policies_match_as_kube_does() -> None:
    authz = build_chain(("ABAC",), parse_policy_file(POLICIES), None)
    assert authz.authorize(_attrs(BOB, "watch", "a"))[0]
    assert authz.authorize(_attrs(BOB, "create", "a", "deployments", "apps"))[0]
    assert authz.authorize(_attrs(BOB, "watch", "b")) == (False, "No policy matched.")
    assert not authz.authorize(_attrs(BOB, "watch", ""))[0]  # all namespaces
    assert authz.authorize(_attrs(VIEWER, "list", ""))[0]
    assert not authz.authorize(_attrs(VIEWER, "delete", "a", name="p"))[0]
    assert not authz.authorize(_attrs(VIEWER, "list", "", "services"))[0]
    masters = UserInfo("root", "", ("system:masters", AUTHENTICATED))
    assert authz.authorize(_attrs(masters, "delete", "z"))[0]
    path = Attributes(user=BOB, verb="get", path="/apis/apps")
    assert authz.authorize(path)[0]
    assert not authz.authorize(Attributes(user=BOB, verb="get", path="/metrics"))[0]


def test_policy_file_errors() -> None:
    with pytest.raises(PolicyFileError, match=":1"):
        parse_policy_file("{not json")
    with pytest.raises(PolicyFileError, match="apiVersion"):
        parse_policy_file('{"apiVersion": "v1", "kind": "Policy", "spec": {}}')


def test_forbidden_messages_are_kubes() -> None:
    err = forbidden(_attrs(BOB, "watch", "b"), "No policy matched.")
    assert err.code == 403
    assert err.to_status()["message"] == (
        'pods is forbidden: User "bob" cannot watch resource "pods" in API group "" in the '
        'namespace "b": No policy matched.')
    assert err.details == {"kind": "pods"}
    err = forbidden(_attrs(BOB, "list", "", "deployments", "apps"), "No policy matched.")
    assert err.message == ('deployments.apps is forbidden: User "bob" cannot list resource '
                           '"deployments" in API group "apps" at the cluster scope: '
                           "No policy matched.")
    assert err.details == {"group": "apps", "kind": "deployments"}
    err = forbidden(_attrs(BOB, "delete", "b", name="web"), "")
    assert err.message.startswith('pods "web" is forbidden: User "bob" cannot delete')
    assert err.details == {"name": "web", "kind": "pods"}
    err = forbidden(Attributes(user=BOB, verb="get", path="/metrics"), "No policy matched.")
    assert err.message == 'forbidden: User "bob" cannot get path "/metrics": No policy matched.'
