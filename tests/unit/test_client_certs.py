"""server/client_certs.py: Go's x509 verification for kube's client-certificate options."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

from kubewire.server.access.authn import AUTHENTICATED, CertificateVerdict
from kubewire.server.access.client_certs import (
    INCOMPATIBLE_USAGE,
    UNHANDLED_CRITICAL,
    UNKNOWN_AUTHORITY,
    CertificateError,
    ClientCertificates,
    certificate_user,
    judge,
    verify_chain,
)

NOW = datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC)


@dataclass
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def make(cn: str, issuer: Issued | None = None, *, ca: bool = False,
         path_length: int | None = None, usages: list[ObjectIdentifier] | None = None,
         days: tuple[int, int] = (-10, 10), orgs: tuple[str, ...] = (),
         extra: x509.ExtensionType | None = None) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs),
                      *([x509.NameAttribute(NameOID.COMMON_NAME, cn)] if cn else [])])
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer.cert.subject if issuer else name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOW + datetime.timedelta(days=days[0]))
               .not_valid_after(NOW + datetime.timedelta(days=days[1]))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=path_length),
                              critical=True))
    if usages is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if extra is not None:
        builder = builder.add_extension(extra, critical=True)
    signer = issuer.key if issuer else key
    return Issued(builder.sign(signer, hashes.SHA256()), key)


def test_a_leaf_signed_by_a_root_verifies() -> None:
    root = make("root", ca=True)
    leaf = make("alice", root, usages=[ExtendedKeyUsageOID.CLIENT_AUTH])
    assert verify_chain([leaf.cert], [root.cert], NOW) == [leaf.cert, root.cert]
    other = make("other-root", ca=True)
    with pytest.raises(CertificateError, match=UNKNOWN_AUTHORITY):
        verify_chain([leaf.cert], [other.cert], NOW)
    # A root of the client CA file is its own chain (Go: the pool holds the leaf).
    assert verify_chain([root.cert], [root.cert], NOW) == [root.cert]


def test_intermediates_come_from_the_client_and_must_be_cas() -> None:
    root = make("root", ca=True)
    middle = make("middle", root, ca=True)
    leaf = make("alice", middle)
    assert verify_chain([leaf.cert, middle.cert], [root.cert], NOW) == [
        leaf.cert, middle.cert, root.cert]
    with pytest.raises(CertificateError, match=UNKNOWN_AUTHORITY):
        verify_chain([leaf.cert], [root.cert], NOW)  # intermediate not sent
    not_a_ca = make("middle", root, ca=False)
    leaf2 = make("alice", not_a_ca)
    with pytest.raises(CertificateError, match=UNKNOWN_AUTHORITY):
        verify_chain([leaf2.cert, not_a_ca.cert], [root.cert], NOW)
    # pathLenConstraint 0 on the root: no intermediate may stand below it.
    strict_root = make("root", ca=True, path_length=0)
    middle2 = make("middle", strict_root, ca=True)
    leaf3 = make("alice", middle2)
    with pytest.raises(CertificateError, match=UNKNOWN_AUTHORITY):
        verify_chain([leaf3.cert, middle2.cert], [strict_root.cert], NOW)


def test_validity_windows_of_every_certificate_count() -> None:
    root = make("root", ca=True)
    expired = make("alice", root, days=(-10, -1))
    with pytest.raises(CertificateError) as info:
        verify_chain([expired.cert], [root.cert], NOW)
    assert str(info.value) == (
        "x509: certificate has expired or is not yet valid: current time 2026-06-01T00:00:00Z "
        "is after 2026-05-31T00:00:00Z")
    early = make("alice", root, days=(1, 10))
    with pytest.raises(CertificateError, match="is before 2026-06-02T00:00:00Z"):
        verify_chain([early.cert], [root.cert], NOW)
    old_root = make("root", ca=True, days=(-10, -1))
    leaf = make("alice", old_root)
    with pytest.raises(CertificateError, match=UNKNOWN_AUTHORITY):
        verify_chain([leaf.cert], [old_root.cert], NOW)


def test_client_auth_must_be_allowed_along_the_chain() -> None:
    root = make("root", ca=True)
    server = make("web", root, usages=[ExtendedKeyUsageOID.SERVER_AUTH])
    with pytest.raises(CertificateError, match=INCOMPATIBLE_USAGE):
        verify_chain([server.cert], [root.cert], NOW)
    anything = make("alice", root, usages=[ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE])
    assert verify_chain([anything.cert], [root.cert], NOW)
    server_ca = make("middle", root, ca=True, usages=[ExtendedKeyUsageOID.SERVER_AUTH])
    leaf = make("alice", server_ca, usages=[ExtendedKeyUsageOID.CLIENT_AUTH])
    with pytest.raises(CertificateError, match=INCOMPATIBLE_USAGE):
        verify_chain([leaf.cert, server_ca.cert], [root.cert], NOW)


def test_a_critical_extension_go_does_not_handle_fails() -> None:
    root = make("root", ca=True)
    odd = make("alice", root, extra=x509.UnrecognizedExtension(
        ObjectIdentifier("1.3.6.1.4.1.99999.1"), b"\x05\x00"))
    with pytest.raises(CertificateError, match=UNHANDLED_CRITICAL):
        verify_chain([odd.cert], [root.cert], NOW)


def test_the_user_is_cn_and_groups_are_o() -> None:
    root = make("root", ca=True)
    leaf = make("alice", root, orgs=("dev", "ops"))
    user = certificate_user(leaf.cert)
    assert user is not None
    assert (user.name, user.groups) == ("alice", ("dev", "ops", AUTHENTICATED))
    assert dict(user.extra) == {"authentication.kubernetes.io/credential-id": (
        "X509SHA256=" + leaf.cert.fingerprint(hashes.SHA256()).hex(),)}
    assert certificate_user(make("", root, orgs=("dev",)).cert) is None


def test_judge_turns_the_sent_chain_into_a_verdict() -> None:
    root = make("root", ca=True)
    leaf = make("alice", root)
    der = leaf.cert.public_bytes(Encoding.DER)
    assert judge([], [root.cert], NOW) is None
    verdict = judge([der], [root.cert], NOW)
    assert verdict is not None and verdict.user is not None and verdict.user.name == "alice"
    assert judge([der], [], NOW) == CertificateVerdict(None, UNKNOWN_AUTHORITY)
    garbage = judge([b"\x30\x03\x02\x01\x00"], [root.cert], NOW)
    assert garbage is not None and garbage.user is None
    assert garbage.error.startswith("x509: malformed certificate")


class FakeSSLObject:
    """Stands in for ``ssl.SSLObject``: the chain the client sent (3.13's public method)."""

    def __init__(self, *certs: x509.Certificate) -> None:
        self.chain = [cert.public_bytes(Encoding.DER) for cert in certs]

    def get_unverified_chain(self) -> list[bytes]:
        return self.chain


def test_verdicts_are_kept_per_connection_and_shared_by_equal_chains() -> None:
    root = make("root", ca=True, days=(-1000, 1000))
    later = make("alice", root, days=(1, 10))  # valid from a day after NOW
    now = [(NOW + datetime.timedelta(hours=1)).timestamp()]
    certs = ClientCertificates([root.cert], clock=lambda: now[0])
    first, second = FakeSSLObject(later.cert), FakeSSLObject(later.cert)
    early = certs.verdict(first)
    assert early is not None and early.user is None and "is before" in early.error
    assert certs.verdict(second) is early  # the same chain: judged once
    assert certs.verdict(FakeSSLObject(root.cert)) is not early
    assert certs.verdict(None) is None
    # The verdict is judged again once the certificate becomes valid.
    now[0] = (NOW + datetime.timedelta(days=2)).timestamp()
    valid = certs.verdict(first)
    assert valid is not None and valid.user is not None and valid.user.name == "alice"
