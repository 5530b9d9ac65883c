"""The service-account keys and issuer settings, as kube-apiserver's flags name them.

- ``--service-account-signing-key-file``: the private key (RSA, or ECDSA on P-256/384/521)
  that signs the tokens the server issues; kubewire's default is ``DIR/pki/sa.key``, made on
  first use.
- ``--service-account-key-file`` (repeatable): PEM files whose keys verify tokens (public keys,
  private keys, whose public half is taken, and certificates' keys, every block of a file);
  kube's default is the signing key alone.
- ``--service-account-issuer`` (repeatable): the first is the ``iss`` of new tokens, every one
  is accepted; ``--api-audiences`` (default: the first issuer) are the audiences a token must
  name to authenticate a request; ``--service-account-jwks-uri`` overrides the ``jwks_uri`` of
  the OIDC discovery document; ``--service-account-max-token-expiration`` caps a
  TokenRequest's lifetime.

A key's id is kube's ``keyIDFromPublicKey``: the unpadded base64url SHA-256 of its PKIX DER.
Bad files are refused at start (``ServiceAccountKeyError``) in one line, with kube's words;
the flags' own checks are in ``sa_options``.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kubewire.server.access.authn import ServiceAccountKeyError

__all__ = ["PrivateKey", "PublicKey", "ServiceAccountKeyError", "VerifyingKey", "algorithm",
           "key_id", "load_signing_key", "load_verifying_keys"]

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
MAX_KEY_FILE_BYTES = 1 << 20  # a PEM bundle of keys is a few KiB
_CURVE_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}


@dataclass(frozen=True, slots=True)
class VerifyingKey:
    """A public key tokens are checked against, with its kube key id and JWS algorithm."""

    key: PublicKey
    kid: str
    alg: str


def key_id(public: PublicKey) -> str:
    """kube's ``keyIDFromPublicKey``."""
    der = public.public_bytes(serialization.Encoding.DER,
                              serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode("ascii")


def algorithm(public: PublicKey) -> str:
    """The JWS algorithm kube signs with a key of this type (``algorithmFromPublicKey``)."""
    if isinstance(public, rsa.RSAPublicKey):
        return "RS256"
    found = _CURVE_ALGORITHMS.get(public.curve.name)
    if found is None:
        raise ServiceAccountKeyError("unknown private key curve, must be 256, 384, or 521")
    return found


def verifying_key(public: PublicKey) -> VerifyingKey:
    return VerifyingKey(public, key_id(public), algorithm(public))


def _read(path: Path, what: str) -> bytes:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as err:
        raise ServiceAccountKeyError(
            f"error reading {what} key file {path}: open {path}: "
            f"{(err.strerror or str(err)).lower()}") from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise ServiceAccountKeyError(f"{what} key file {path} is larger than "
                                     f"{MAX_KEY_FILE_BYTES} bytes")
    return data


def _pem_blocks(data: bytes) -> list[bytes]:
    blocks, rest = [], data
    while (start := rest.find(b"-----BEGIN ")) >= 0:
        end = rest.find(b"-----END ", start)
        stop = rest.find(b"-----", end + 9) if end >= 0 else -1
        if stop < 0:
            break
        blocks.append(rest[start:stop + 5])
        rest = rest[stop + 5:]
    return blocks


def _private(block: bytes) -> PrivateKey | None:
    try:
        key = serialization.load_pem_private_key(block, password=None)
    except (ValueError, TypeError):
        return None
    if isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        return key
    return None


def _public(block: bytes) -> PublicKey | None:
    key: object = None
    if b"CERTIFICATE" in block[:40]:
        try:
            key = x509.load_pem_x509_certificate(block).public_key()
        except ValueError:
            return None
    elif b"PRIVATE KEY" in block[:40]:
        private = _private(block)
        key = None if private is None else private.public_key()
    else:
        try:
            key = serialization.load_pem_public_key(block)
        except (ValueError, TypeError):
            return None
    if isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
        return key
    return None


def load_signing_key(path: Path) -> PrivateKey:
    """``--service-account-signing-key-file`` (kube's ``keyutil.PrivateKeyFromFile``)."""
    data = _read(path, "private")
    for block in _pem_blocks(data):
        key = _private(block)
        if key is not None:
            algorithm(key.public_key())  # refuses curves kube cannot sign with
            return key
    raise ServiceAccountKeyError(
        f"failed to parse service-account-issuer-key-file: {path}: data does not contain a "
        "valid RSA or ECDSA private key")


def load_verifying_keys(path: Path) -> list[VerifyingKey]:
    """Every key of a ``--service-account-key-file`` (kube's ``keyutil.PublicKeysFromFile``)."""
    data = _read(path, "public")
    found = [key for key in map(_public, _pem_blocks(data)) if key is not None]
    if not found:
        raise ServiceAccountKeyError(
            f"failed to parse key file {path}: data does not contain any valid RSA or ECDSA "
            "public keys")
    return [verifying_key(key) for key in found]
