"""The server's own certificates: a CA, a serving certificate and client identities.

On first start ``kubewire serve`` makes a CA in ``DIR/pki`` and signs with it a serving
certificate (SANs: localhost, 127.0.0.1, ::1 and ``--tls-san`` extras) and an admin client
certificate (CN ``kubewire-admin``, O ``system:masters``), as kubeadm does for a cluster. Later
starts reuse them; the serving certificate is re-issued when the SANs asked for change or it is
near expiry. Client certificates follow Kubernetes: CN is the user name, each O a group.

ECDSA P-256 keys: generated in about a millisecond (RSA 2048 takes tens of milliseconds, and
start-up time matters), and accepted by Go's crypto/tls, OpenSSL and every Kubernetes client.

The service-account signing key (``sa.key``, as kubeadm names it) is RSA 2048: kube signs
service-account tokens RS256 by default, and token verifiers outside the server (OIDC
discovery users) expect it. It is made once, on the first start that needs it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=30)
DEFAULT_SANS = ("localhost", "127.0.0.1", "::1")
ADMIN_USER = "kubewire-admin"
ADMIN_GROUPS = ("system:masters",)
SERVICE_ACCOUNT_KEY = "sa.key"
SERVICE_ACCOUNT_KEY_BITS = 2048

Key = ec.EllipticCurvePrivateKey


@dataclass(frozen=True, slots=True)
class PEMPair:
    """A certificate and its private key, PEM-encoded."""

    cert: bytes
    key: bytes


@dataclass(frozen=True, slots=True)
class ServerPKI:
    """Paths of the files a TLS server and its admin kubeconfig need."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _new_key() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: Key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    parts.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(parts)


def _builder(subject: x509.Name, issuer: x509.Name, key: Key, days: int,
             ) -> x509.CertificateBuilder:
    start = _now() - datetime.timedelta(minutes=5)  # tolerate small clock skew between peers
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=days)))


def make_ca(common_name: str = "kubewire-ca") -> PEMPair:
    key = _new_key()
    name = _name(common_name)
    cert = (_builder(name, name, key, CA_DAYS)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return PEMPair(_cert_pem(cert), _key_pem(key))


def _load_ca(ca: PEMPair) -> tuple[x509.Certificate, Key]:
    cert = x509.load_pem_x509_certificate(ca.cert)
    key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an ECDSA key made by kubewire")
    return cert, key


def _leaf(ca: PEMPair, subject: x509.Name, usage: x509.ObjectIdentifier, days: int,
          sans: Sequence[x509.GeneralName] = ()) -> PEMPair:
    ca_cert, ca_key = _load_ca(ca)
    key = _new_key()
    builder = (_builder(subject, ca_cert.subject, key, days)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False,
                                            key_cert_sign=False, crl_sign=False,
                                            content_commitment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return PEMPair(_cert_pem(builder.sign(ca_key, hashes.SHA256())), _key_pem(key))


def _general_name(san: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(san))
    except ValueError:
        return x509.DNSName(san)


def serving_sans(extra: Iterable[str] = ()) -> list[str]:
    """The SANs a serving certificate gets: the defaults, then extras, without repeats."""
    out: list[str] = []
    for san in (*DEFAULT_SANS, *extra):
        if san and san not in out:
            out.append(san)
    return out


def issue_serving(ca: PEMPair, sans: Sequence[str], days: int = LEAF_DAYS) -> PEMPair:
    return _leaf(ca, _name("kubewire-serving"), ExtendedKeyUsageOID.SERVER_AUTH, days,
                 [_general_name(san) for san in sans])


def issue_client(ca: PEMPair, user: str, groups: Sequence[str] = (),
                 days: int = LEAF_DAYS) -> PEMPair:
    """A client certificate as Kubernetes reads it: CN = user, one O per group."""
    return _leaf(ca, _name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH, days)


def certificate_sans(cert_pem: bytes) -> list[str]:
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    names: list[str] = [str(ip) for ip in ext.get_values_for_type(x509.IPAddress)]
    names += ext.get_values_for_type(x509.DNSName)
    return names


def _expires_soon(cert_pem: bytes) -> bool:
    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.not_valid_after_utc - RENEW_BEFORE < _now()


def _write_private(path: Path, data: bytes) -> None:
    """Keys are readable by the owner only; written whole so a crash leaves no half file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    tmp.replace(path)


def _write_pair(directory: Path, stem: str, pair: PEMPair) -> None:
    _write_private(directory / f"{stem}.key", pair.key)
    (directory / f"{stem}.crt").write_bytes(pair.cert)


def _read_pair(directory: Path, stem: str) -> PEMPair | None:
    cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
    if cert.exists() and key.exists():
        return PEMPair(cert.read_bytes(), key.read_bytes())
    return None


def load_ca(directory: Path) -> PEMPair:
    """The CA of a data dir's ``pki`` folder (``kubewire`` issues users' credentials with it)."""
    found = _read_pair(directory, "ca")
    if found is None:
        raise FileNotFoundError(f"no CA in {directory}: start `kubewire serve` once first")
    return found


def ensure_server_pki(directory: Path, extra_sans: Iterable[str] = ()) -> ServerPKI:
    """Create what is missing in ``directory`` (the CA, serving and admin pairs) and say where."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca = _read_pair(directory, "ca")
    if ca is None:
        ca = make_ca()
        _write_pair(directory, "ca", ca)
    sans = serving_sans(extra_sans)
    serving = _read_pair(directory, "serving")
    if (serving is None or sorted(certificate_sans(serving.cert)) != sorted(sans)
            or _expires_soon(serving.cert)):
        _write_pair(directory, "serving", issue_serving(ca, sans))
    admin = _read_pair(directory, "admin")
    if admin is None or _expires_soon(admin.cert):
        _write_pair(directory, "admin", issue_client(ca, ADMIN_USER, ADMIN_GROUPS))
    return ServerPKI(ca_cert=directory / "ca.crt", serving_cert=directory / "serving.crt",
                     serving_key=directory / "serving.key", admin_cert=directory / "admin.crt",
                     admin_key=directory / "admin.key")


def service_account_key(directory: Path) -> rsa.RSAPrivateKey:
    """The service-account signing key in ``directory`` (``sa.key``), made if missing."""
    path = directory / SERVICE_ACCOUNT_KEY
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = rsa.generate_private_key(public_exponent=65537, key_size=SERVICE_ACCOUNT_KEY_BITS)
        _write_private(path, key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return key
    loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(loaded, rsa.RSAPrivateKey):
        raise ValueError(f"{path} must hold an RSA private key")
    return loaded
