"""Client certificates as kube-apiserver takes them: asked for, never required, checked per request.

kube-apiserver's TLS server uses Go's ``tls.RequestClientCert``: it asks for a certificate and
takes whatever the client sends, verifying nothing during the handshake. Its x509 authenticator
verifies the chain later, for each request (against ``--client-ca-file``, for client auth), and
a certificate it cannot verify is an authentication error that the union authenticator passes
over: a valid bearer token on the same request still authenticates it, and without one the
answer is 401. The TLS connection itself always succeeds.

Python's ``ssl`` has no such mode. With ``CERT_OPTIONAL`` OpenSSL verifies an offered certificate
during the handshake and aborts the handshake when it fails (a connection reset for the client,
which also loses the token it was about to send). So:

- ``request_client_certificates`` replaces OpenSSL's chain verification on the context's
  ``SSL_CTX`` with a callback that accepts every chain (``SSL_CTX_set_cert_verify_callback``,
  called through ctypes on the libssl that ``_ssl`` links). The handshake then keeps the chain
  the client sent and verifies nothing, as Go's does. Python exposes no pointer to the
  ``SSL_CTX``; it is the first field after the object header of CPython's ``PySSLContext``
  (3.11 to 3.14), and is used only after libssl confirms it reports the context's own verify
  mode and options. If any of that fails, the context keeps OpenSSL's verification (a bad
  certificate then still resets the connection) and a warning says so.
- ``verify_chain`` is Go's ``Certificate.Verify`` for kube's options, on ``cryptography``
  objects: a path from the leaf through the client's intermediates to a root of the client CA
  file, each signature checked, each certificate within its validity window, issuers that are
  CAs allowed to sign certificates (path length too), no critical extension Go does not handle,
  and ``clientAuth`` (or any) wherever a certificate of the chain restricts its usages.
- ``ClientCertificates`` does this on a connection's first request and keeps the verdict with
  that connection's ``SSLObject`` (a weak key: it goes when the connection does, so a verdict
  only ever answers for connections that sent the same chain) until a certificate of the chain
  expires or becomes valid.

Only ``getpeercert(binary_form=True)`` and the unverified chain are read: the dict form of
``getpeercert()`` is decoded whenever the verify mode asks for a certificate, verified or not.
"""

from __future__ import annotations

import _ssl
import ctypes
import datetime
import hashlib
import logging
import ssl
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, ExtensionOID, NameOID

from kubewire.server.access.authn import (
    CREDENTIAL_ID_KEY,
    CertificateVerdict,
    UserInfo,
    with_authenticated,
)

log = logging.getLogger(__name__)

MAX_CHAIN_DEPTH = 16  # client chains are two or three long; bounds the search on hostile input
UNKNOWN_AUTHORITY = "x509: certificate signed by unknown authority"
INCOMPATIBLE_USAGE = "x509: certificate specifies an incompatible key usage"
UNHANDLED_CRITICAL = "x509: unhandled critical extension"
# Go's x509 parser understands these; any other extension marked critical fails verification.
_GO_HANDLED = frozenset({
    ExtensionOID.KEY_USAGE, ExtensionOID.BASIC_CONSTRAINTS, ExtensionOID.SUBJECT_ALTERNATIVE_NAME,
    ExtensionOID.NAME_CONSTRAINTS, ExtensionOID.CRL_DISTRIBUTION_POINTS,
    ExtensionOID.AUTHORITY_KEY_IDENTIFIER, ExtensionOID.EXTENDED_KEY_USAGE,
    ExtensionOID.SUBJECT_KEY_IDENTIFIER, ExtensionOID.CERTIFICATE_POLICIES,
    ExtensionOID.AUTHORITY_INFORMATION_ACCESS,
})


class CertificateError(Exception):
    """A client certificate that does not verify (Go's x509 error text, for the log)."""


# --- verification (pure) ----------------------------------------------------------------------

def verify_chain(chain: Sequence[x509.Certificate], roots: Sequence[x509.Certificate],
                 now: datetime.datetime) -> list[x509.Certificate]:
    """The verified path from ``chain[0]`` (the leaf) to a root; ``chain[1:]`` are the
    intermediates the client sent. Raises ``CertificateError``."""
    leaf = chain[0]
    _check_valid(leaf, now)
    path = [leaf] if leaf in roots else _path_to_root(leaf, chain[1:], roots, now)
    if path is None:
        raise CertificateError(UNKNOWN_AUTHORITY)
    if not all(_allows_client_auth(cert) for cert in path):
        raise CertificateError(INCOMPATIBLE_USAGE)
    return path


def _check_valid(cert: x509.Certificate, now: datetime.datetime) -> None:
    if now < cert.not_valid_before_utc:
        raise CertificateError(_time_text(now, "before", cert.not_valid_before_utc))
    if now > cert.not_valid_after_utc:
        raise CertificateError(_time_text(now, "after", cert.not_valid_after_utc))
    if any(ext.critical and ext.oid not in _GO_HANDLED for ext in cert.extensions):
        raise CertificateError(UNHANDLED_CRITICAL)


def _time_text(now: datetime.datetime, relation: str, bound: datetime.datetime) -> str:
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    return (f"x509: certificate has expired or is not yet valid: current time "
            f"{now.strftime(stamp)} is {relation} {bound.strftime(stamp)}")


def _path_to_root(leaf: x509.Certificate, intermediates: Sequence[x509.Certificate],
                  roots: Sequence[x509.Certificate], now: datetime.datetime,
                  ) -> list[x509.Certificate] | None:
    """Depth-first, roots before intermediates, as Go's ``buildChains`` tries them."""
    stack: list[list[x509.Certificate]] = [[leaf]]
    while stack:
        path = stack.pop()
        if len(path) > MAX_CHAIN_DEPTH:
            continue
        for root in roots:
            if _issued(path[-1], root, len(path) - 1, now):
                return [*path, root]
        stack.extend([*path, cert] for cert in reversed(intermediates)
                     if cert not in path and _issued(path[-1], cert, len(path) - 1, now))
    return None


def _issued(child: x509.Certificate, issuer: x509.Certificate, below: int,
            now: datetime.datetime) -> bool:
    """``issuer`` may sign and did sign ``child``, with ``below`` intermediates under it."""
    if child.issuer != issuer.subject or not _may_sign(issuer, below):
        return False
    try:
        _check_valid(issuer, now)
        child.verify_directly_issued_by(issuer)
    except (CertificateError, InvalidSignature, UnsupportedAlgorithm, ValueError, TypeError):
        return False
    return True


def _may_sign(issuer: x509.Certificate, below: int) -> bool:
    """Go's ``CheckSignatureFrom`` and path-length checks for a parent certificate."""
    try:
        basic = issuer.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        if issuer.version is not x509.Version.v1:  # v1 certificates predate the extension
            return False
    else:
        if not basic.ca or (basic.path_length is not None and below > basic.path_length):
            return False
    try:
        usage = issuer.extensions.get_extension_for_class(x509.KeyUsage).value
    except x509.ExtensionNotFound:
        return True
    return usage.key_cert_sign


def _allows_client_auth(cert: x509.Certificate) -> bool:
    """Go's ``checkChainForKeyUsage`` for the one usage kube asks for."""
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return True
    return (ExtendedKeyUsageOID.CLIENT_AUTH in usages
            or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in usages)


def certificate_user(leaf: x509.Certificate) -> UserInfo | None:
    """kube's ``CommonNameUserConversion``: CN is the user, each O a group; the credential id is
    the SHA-256 of the certificate. None without a CN (no opinion, not an error)."""
    name = ""
    groups: list[str] = []
    for attribute in leaf.subject:
        if not isinstance(attribute.value, str):
            continue
        if attribute.oid == NameOID.COMMON_NAME:
            name = attribute.value  # Go keeps the last CN
        elif attribute.oid == NameOID.ORGANIZATION_NAME:
            groups.append(attribute.value)
    if not name:
        return None
    credential = "X509SHA256=" + hashlib.sha256(leaf.public_bytes(Encoding.DER)).hexdigest()
    return with_authenticated(UserInfo(name, "", tuple(groups),
                                       ((CREDENTIAL_ID_KEY, (credential,)),)))


def judge(chain_der: Sequence[bytes], roots: Sequence[x509.Certificate],
          now: datetime.datetime) -> CertificateVerdict | None:
    """What a request learns from the chain its connection sent (None: it sent none)."""
    if not chain_der:
        return None
    try:
        chain = [x509.load_der_x509_certificate(der) for der in chain_der[:MAX_CHAIN_DEPTH]]
        verify_chain(chain, roots, now)
    except CertificateError as err:
        return CertificateVerdict(None, str(err))
    except ValueError as err:  # not DER kube could parse either
        return CertificateVerdict(None, f"x509: malformed certificate: {err}")
    return CertificateVerdict(certificate_user(chain[0]))


# --- per connection -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Kept:
    verdict: CertificateVerdict | None
    until: float  # epoch seconds: judge again after this (the leaf or an issuer expires)


class ClientCertificates:
    """Verdicts on the certificates of TLS connections, one per connection.

    A verdict is also shared by connections that send the very same chain (each proved in its
    handshake that it holds the leaf's key): a client's many connections are verified once, and
    each holds only a weak reference to it (at most ``MAX_SHARED`` chains are kept).
    """

    MAX_SHARED = 1024

    def __init__(self, roots: Sequence[x509.Certificate],
                 clock: Callable[[], float] = time.time) -> None:
        self.roots = tuple(roots)
        self._clock = clock
        self._kept: weakref.WeakKeyDictionary[Any, _Kept] = weakref.WeakKeyDictionary()
        self._shared: dict[tuple[bytes, ...], _Kept] = {}

    @classmethod
    def from_file(cls, path: Path) -> ClientCertificates:
        return cls(x509.load_pem_x509_certificates(path.read_bytes()))

    def verdict(self, ssl_object: Any) -> CertificateVerdict | None:
        """``ssl_object``: the connection's ``ssl.SSLObject`` (None on plain HTTP)."""
        if ssl_object is None:
            return None
        now = self._clock()
        kept = self._kept.get(ssl_object)
        if kept is None or now > kept.until:
            kept = self._judged(tuple(peer_chain(ssl_object)), now)
            self._kept[ssl_object] = kept
        return kept.verdict

    def _judged(self, chain: tuple[bytes, ...], now: float) -> _Kept:
        kept = self._shared.get(chain)
        if kept is None or now > kept.until:
            if len(self._shared) >= self.MAX_SHARED:
                self._shared.clear()
            moment = datetime.datetime.fromtimestamp(now, datetime.UTC)
            kept = _Kept(judge(chain, self.roots, moment), _changes_after(chain, now))
            self._shared[chain] = kept
        return kept


def _changes_after(chain_der: Sequence[bytes], now: float) -> float:
    """When a verdict on ``chain_der`` may change: the earliest expiry in it, or a start of
    validity still to come (inf for none)."""
    until = float("inf")
    for der in chain_der[:MAX_CHAIN_DEPTH]:
        try:
            cert = x509.load_der_x509_certificate(der)
        except ValueError:
            continue
        until = min(until, cert.not_valid_after_utc.timestamp())
        start = cert.not_valid_before_utc.timestamp()
        if start > now:
            until = min(until, start)
    return until


def peer_chain(ssl_object: Any) -> list[bytes]:
    """The DER certificates the client sent, leaf first (unverified)."""
    public = getattr(ssl_object, "get_unverified_chain", None)  # Python 3.13+
    inner = getattr(ssl_object, "_sslobj", None)
    try:
        if public is not None:
            chain = public()
        elif inner is not None and hasattr(inner, "get_unverified_chain"):
            chain = inner.get_unverified_chain()  # 3.10-3.12: on the C object only
        else:
            chain = None
    except (ssl.SSLError, ValueError):
        chain = None
    if chain:
        ders = [item if isinstance(item, bytes) else item.public_bytes(_ssl.ENCODING_DER)
                for item in chain if item is not None]  # 3.11 lists None without a certificate
        if ders:
            return ders
    leaf = ssl_object.getpeercert(binary_form=True)
    return [leaf] if leaf else []


# --- the handshake ------------------------------------------------------------------------------

_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def _accept_any_chain(store_ctx: int | None, arg: int | None) -> int:
    """OpenSSL's ``app_verify_callback``: 1 = the chain is acceptable (checked per request)."""
    return 1


_ACCEPT_ANY_CHAIN = _VerifyCallback(_accept_any_chain)  # kept alive here while libssl holds it


_SSL_VERIFY_PEER = 1
_SSL_VERIFY_FAIL_IF_NO_PEER_CERT = 2


def request_client_certificates(context: ssl.SSLContext) -> bool:
    """Make ``context`` ask for a client certificate and accept any, as Go's
    ``tls.RequestClientCert`` does; False (and OpenSSL's verification kept) where the libssl
    call cannot be made safely."""
    context.verify_mode = ssl.CERT_OPTIONAL
    try:
        libssl = _libssl()
        pointer = _ssl_ctx_pointer(context, libssl)
    except (OSError, AttributeError, ValueError) as err:
        log.warning("client certificates that fail verification will reset the TLS connection "
                    "instead of being ignored: %s", err)
        return False
    libssl.SSL_CTX_set_cert_verify_callback(pointer, _ACCEPT_ANY_CHAIN, None)
    return True


def _libssl() -> ctypes.CDLL:
    """The libssl ``_ssl`` uses (dlsym on its handle also searches the libraries it links)."""
    if sys.implementation.name != "cpython":
        raise ValueError(f"not CPython: {sys.implementation.name}")
    lib = ctypes.CDLL(_ssl.__file__)
    lib.SSL_CTX_get_verify_mode.argtypes = (ctypes.c_void_p,)
    lib.SSL_CTX_get_verify_mode.restype = ctypes.c_int
    lib.SSL_CTX_get_options.argtypes = (ctypes.c_void_p,)
    lib.SSL_CTX_get_options.restype = ctypes.c_uint64
    lib.SSL_CTX_set_cert_verify_callback.argtypes = (ctypes.c_void_p, _VerifyCallback,
                                                     ctypes.c_void_p)
    lib.SSL_CTX_set_cert_verify_callback.restype = None
    return lib


def _ssl_ctx_pointer(context: ssl.SSLContext, libssl: ctypes.CDLL) -> int:
    """``PySSLContext.ctx``, checked against what libssl reports for it."""
    pointer = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    if not pointer:
        raise ValueError("no SSL_CTX found in the SSLContext")
    expected_mode = _SSL_VERIFY_PEER | (
        _SSL_VERIFY_FAIL_IF_NO_PEER_CERT if context.verify_mode == ssl.CERT_REQUIRED else 0)
    if (libssl.SSL_CTX_get_verify_mode(pointer) != expected_mode
            or libssl.SSL_CTX_get_options(pointer) != int(context.options)):
        raise ValueError("the SSLContext's layout is not the one expected")
    return pointer
