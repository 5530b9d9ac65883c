"""Service-account issuer discovery: ``/.well-known/openid-configuration`` and
``/openid/v1/jwks``, as kube-apiserver serves them (``pkg/serviceaccount/openidmetadata.go``,
``pkg/routes/openidmetadata.go``), so that relying parties (a cloud's workload identity, Vault)
can verify the server's service-account tokens.

The configuration is ``issuer`` (the first ``--service-account-issuer``), ``jwks_uri``
(``--service-account-jwks-uri``, else ``https://<the server's address>/openid/v1/jwks``),
``response_types_supported`` ``["id_token"]``, ``subject_types_supported`` ``["public"]`` and
``id_token_signing_alg_values_supported`` (the keys' algorithms, sorted), as Go's
``json.Marshal`` writes it (no newline). The key set holds every key that verifies tokens
(``--service-account-key-file``, by default the signing key) as go-jose writes a public JWK:
``use`` ``sig``, ``kty``, ``kid``, ``crv``, ``alg``, then ``x``/``y`` or ``n``/``e``. Both are
``Cache-Control: public, max-age=3600``; the key set is ``application/jwk-set+json``.

kube installs the endpoints only when the issuer is an https URL without query or fragment
(``NewOpenIDMetadataProvider``): otherwise they are 404, as there. Who may read them is the
authorizers' decision (kube's ``system:service-account-issuer-discovery`` ClusterRole).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kubewire.go_print import go_json
from kubewire.server.access.sa_keys import VerifyingKey
from kubewire.server.access.service_accounts import issuer_for
from kubewire.server.context import ServerConfig
from kubewire.server.wire.http_messages import Response

__all__ = ["CONFIG_PATH", "JWKS_PATH", "OpenIDMetadata", "metadata_for", "openid_response",
           "provider_error"]

CONFIG_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"
MAX_AGE_S = 3600  # staticPublicKeysGetter.GetCacheAgeMaxSeconds
JWKS_CONTENT_TYPE = "application/jwk-set+json"
_CURVE_NAMES = {"secp256r1": ("P-256", 32), "secp384r1": ("P-384", 48),
                "secp521r1": ("P-521", 66)}


@dataclass(frozen=True, slots=True)
class OpenIDMetadata:
    """The two documents, rendered once."""

    config: bytes
    keyset: bytes

    @property
    def headers(self) -> list[tuple[str, str]]:
        return [("Cache-Control", f"public, max-age={MAX_AGE_S}")]


def provider_error(issuer: str) -> str | None:
    """Why kube would not install the endpoints for ``issuer``, or None."""
    try:
        parts = urlsplit(issuer)
    except ValueError as err:
        return str(err)
    if parts.scheme != "https":
        return f"issuer URL must use https scheme, got: {issuer}"
    if parts.query:
        return f"issuer URL may not include a query, got: {issuer}"
    if parts.fragment:
        return f"issuer URL may not include a fragment, got: {issuer}"
    return None


def _go_json(value: Any) -> bytes:
    """Go's ``json.Marshal`` of the documents' structs (``go_print.go_json``, fields in the
    order the dicts are built in)."""
    return go_json(value, sort_keys=False).encode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unsigned(number: int, size: int = 0) -> bytes:
    """go-jose's byteBuffer: big-endian, minimal (or padded to ``size``)."""
    length = max(size, (number.bit_length() + 7) // 8, 1)
    return number.to_bytes(length, "big")


def jwk(key: VerifyingKey) -> dict[str, str]:
    """A public key as go-jose's ``JSONWebKey.MarshalJSON`` writes it."""
    public = key.key
    if isinstance(public, rsa.RSAPublicKey):
        numbers = public.public_numbers()
        return {"use": "sig", "kty": "RSA", "kid": key.kid, "alg": key.alg,
                "n": _b64(_unsigned(numbers.n)), "e": _b64(_unsigned(numbers.e))}
    assert isinstance(public, ec.EllipticCurvePublicKey)
    crv, size = _CURVE_NAMES[public.curve.name]
    point = public.public_numbers()
    return {"use": "sig", "kty": "EC", "kid": key.kid, "crv": crv, "alg": key.alg,
            "x": _b64(_unsigned(point.x, size)), "y": _b64(_unsigned(point.y, size))}


def metadata_for(issuer: str, jwks_uri: str, address: str,
                 keys: tuple[VerifyingKey, ...]) -> OpenIDMetadata:
    """The documents for ``issuer`` and its ``keys``; ``address`` (``host:port``) makes the
    default ``jwks_uri``."""
    uri = jwks_uri or f"https://{address}{JWKS_PATH}"
    config = {"issuer": issuer, "jwks_uri": uri, "response_types_supported": ["id_token"],
              "subject_types_supported": ["public"],
              "id_token_signing_alg_values_supported": sorted({key.alg for key in keys})}
    return OpenIDMetadata(_go_json(config), _go_json({"keys": [jwk(key) for key in keys]}))


_RENDERED: dict[tuple[Any, ...], OpenIDMetadata] = {}


def openid_response(path: str, method: str, config: ServerConfig,
                    address: tuple[str, int]) -> Response | None:
    """The answer to a discovery path, or None (not one, or not installed: 404)."""
    if path not in (CONFIG_PATH, JWKS_PATH) or provider_error(config.service_account_issuer):
        return None
    if method != "GET":  # go-restful's answer for a route without the method
        return Response(405, b"405: Method Not Allowed", "text/plain; charset=utf-8")
    host, port = address
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    key = (config.service_account_issuer, config.service_account_jwks_uri, where,
           config.data_dir, config.service_account_signing_key_file,
           config.service_account_key_files)
    found = _RENDERED.get(key)
    if found is None:
        if len(_RENDERED) >= 8:  # tests start many servers in one process
            _RENDERED.clear()
        issuer = issuer_for(config)  # makes the signing key if none was made yet
        found = _RENDERED[key] = metadata_for(config.service_account_issuer,
                                              config.service_account_jwks_uri, where,
                                              issuer.keys)
    if path == CONFIG_PATH:
        return Response(200, found.config, "application/json", found.headers)
    return Response(200, found.keyset, JWKS_CONTENT_TYPE, found.headers)
