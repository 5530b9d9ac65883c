"""kube-apiserver's checks of the service-account flags (``ServiceAccountAuthenticationOptions
.Validate``): pure, and free of ``cryptography`` so that ``kubewire serve`` can refuse a bad
flag before it needs the server's dependencies. The key files are read by ``sa_keys``."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

__all__ = ["issuer_errors", "max_expiration_error"]

MIN_MAX_EXPIRATION_S = 3600
MAX_MAX_EXPIRATION_S = 1 << 32


def issuer_errors(issuers: Sequence[str], jwks_uri: str = "") -> list[str]:
    """``ServiceAccountAuthenticationOptions.Validate``'s issuer and JWKS URI checks."""
    errors: list[str] = []
    seen: set[str] = set()
    for issuer in issuers:
        if not issuer:
            errors.append("service-account-issuer should not be an empty string")
            continue
        if issuer in seen:
            errors.append(f'service-account-issuer "{issuer}" is already specified')
        seen.add(issuer)
        if ":" in issuer and (bad := _url_error(issuer)):
            errors.append(f'service-account-issuer "{issuer}" contained a \':\' but was not a '
                          f"valid URL: {bad}")
    if jwks_uri:
        if not issuers:
            errors.append("service-account-jwks-uri requires service-account-issuer")
        bad = _url_error(jwks_uri)
        if bad:
            errors.append(f"service-account-jwks-uri must be a valid URL: {bad}")
        elif urlsplit(jwks_uri).scheme != "https":
            errors.append(f"service-account-jwks-uri requires https scheme, parsed as: "
                          f"{jwks_uri}")
    return errors


def _url_error(text: str) -> str:
    try:
        urlsplit(text)
    except ValueError as err:
        return str(err)
    return ""


def max_expiration_error(seconds: float) -> str | None:
    """``--service-account-max-token-expiration``: 0 (no cap) or 1 hour to 2^32 seconds."""
    if seconds and not MIN_MAX_EXPIRATION_S <= seconds <= MAX_MAX_EXPIRATION_S:
        return "the service-account-max-token-expiration must be between 1 hour and 2^32 seconds"
    return None
