"""The decisions of kube's CSR signer and cleaner, apart from keys and writes.

Sources (kubernetes v1.32): pkg/controller/certificates/signer/signer.go (which requests each
signer takes, ``duration``), pkg/apis/certificates/helpers.go (``ValidateKubeletServingCSR``,
``ValidateKubeletClientCSR`` and their texts), pkg/controller/certificates/authority/policies.go
(``PermissiveSigningPolicy``: backdating, NotAfter, key usages) and
pkg/controller/certificates/cleaner/cleaner.go (when a request is deleted).

The signers kubewire runs are kube's in-tree ones for the Kubernetes signer names:
``kube-apiserver-client``, ``kube-apiserver-client-kubelet`` and ``kubelet-serving``. The
``legacy-unknown`` signer is not run (certificates/v1 refuses new requests for it). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kubewire.times import parse_time_or_none

KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
KUBELET_CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
SIGNERS = (KUBE_APISERVER_CLIENT, KUBELET_CLIENT, KUBELET_SERVING)

DEFAULT_SIGNING_DURATION_S = 365 * 24 * 3600.0  # --cluster-signing-duration's default (8760h)
MIN_DURATION = timedelta(minutes=10)  # signer.duration's lower bound
BACKDATE = timedelta(minutes=5)
SHORT = timedelta(hours=8)

# authority/policies.go keyUsageDict: usage -> cryptography's KeyUsage argument
KEY_USAGES: Mapping[str, str] = {
    "signing": "digital_signature", "digital signature": "digital_signature",
    "content commitment": "content_commitment", "key encipherment": "key_encipherment",
    "key agreement": "key_agreement", "data encipherment": "data_encipherment",
    "cert sign": "key_cert_sign", "crl sign": "crl_sign", "encipher only": "encipher_only",
    "decipher only": "decipher_only",
}
# extKeyUsageDict: usage -> (Go's ExtKeyUsage number, which orders them; OID)
EXT_KEY_USAGES: Mapping[str, tuple[int, str]] = {
    "any": (0, "2.5.29.37.0"), "server auth": (1, "1.3.6.1.5.5.7.3.1"),
    "client auth": (2, "1.3.6.1.5.5.7.3.2"), "code signing": (3, "1.3.6.1.5.5.7.3.3"),
    "email protection": (4, "1.3.6.1.5.5.7.3.4"), "s/mime": (4, "1.3.6.1.5.5.7.3.4"),
    "ipsec end system": (5, "1.3.6.1.5.5.7.3.5"), "ipsec tunnel": (6, "1.3.6.1.5.5.7.3.6"),
    "ipsec user": (7, "1.3.6.1.5.5.7.3.7"), "timestamping": (8, "1.3.6.1.5.5.7.3.8"),
    "ocsp signing": (9, "1.3.6.1.5.5.7.3.9"), "microsoft sgc": (10, "1.3.6.1.4.1.311.10.3.3"),
    "netscape sgc": (11, "2.16.840.1.113730.4.1"),
}

_KUBELET_SERVING_USAGES = (frozenset({"digital signature", "key encipherment", "server auth"}),
                           frozenset({"digital signature", "server auth"}))
_KUBELET_CLIENT_USAGES = (frozenset({"digital signature", "key encipherment", "client auth"}),
                          frozenset({"digital signature", "client auth"}))


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What the checks read of a PKCS#10 request."""

    common_name: str
    organizations: tuple[str, ...]
    dns_names: int = 0
    ip_addresses: int = 0
    emails: int = 0
    uris: int = 0


def _go_list(values: frozenset[str]) -> str:
    return "[" + " ".join(sorted(values)) + "]"


def signer_problem(signer: str, facts: RequestFacts, usages: Sequence[str]) -> str | None:
    """The signer's check of a request it takes (``isRequestForSignerFn``): None when it may be
    signed, else the ``Failed`` condition's message."""
    if signer == KUBE_APISERVER_CLIENT:
        return _api_server_client_problem(usages)
    if signer == KUBELET_CLIENT:
        return _kubelet_client_problem(facts, frozenset(usages))
    if signer == KUBELET_SERVING:
        return _kubelet_serving_problem(facts, frozenset(usages))
    raise ValueError(f"unrecognized signerName: {signer!r}")


def _api_server_client_problem(usages: Sequence[str]) -> str | None:
    """``validAPIServerClientUsages``."""
    has_client_auth = False
    for usage in usages:
        if usage == "client auth":
            has_client_auth = True
        elif usage not in ("digital signature", "key encipherment"):
            return f"invalid usage for client certificate: {usage}"
    return None if has_client_auth else "missing required usage for client certificate: client auth"


def _kubelet_client_problem(facts: RequestFacts, usages: frozenset[str]) -> str | None:
    if facts.organizations != ("system:nodes",):
        return "subject organization is not system:nodes"
    if facts.dns_names:
        return "DNS subjectAltNames are not allowed"
    if facts.emails:
        return "Email subjectAltNames are not allowed"
    if facts.ip_addresses:
        return "IP subjectAltNames are not allowed"
    if facts.uris:
        return "URI subjectAltNames are not allowed"
    if not facts.common_name.startswith("system:node:"):
        return "subject common name does not begin with system:node:"
    if usages not in _KUBELET_CLIENT_USAGES:
        return f"usages did not match {_go_list(_KUBELET_CLIENT_USAGES[0])}"
    return None


def _kubelet_serving_problem(facts: RequestFacts, usages: frozenset[str]) -> str | None:
    if facts.organizations != ("system:nodes",):
        return "subject organization is not system:nodes"
    if not facts.dns_names and not facts.ip_addresses:
        return "DNS or IP subjectAltName is required"
    if facts.emails:
        return "Email subjectAltNames are not allowed"
    if facts.uris:
        return "URI subjectAltNames are not allowed"
    if usages not in _KUBELET_SERVING_USAGES:
        return f"usages did not match {_go_list(_KUBELET_SERVING_USAGES[0])}"
    if not facts.common_name.startswith("system:node:"):
        return "subject common name does not begin with system:node:"
    return None


def certificate_duration(expiration_seconds: int | None, max_duration_s: float) -> timedelta:
    """``signer.duration``: the requested ``expirationSeconds`` capped by the signing duration,
    at least 10 minutes; the signing duration when none was asked for."""
    limit = timedelta(seconds=max_duration_s)
    if expiration_seconds is None:
        return limit
    asked = timedelta(seconds=expiration_seconds)
    if asked > limit:
        return limit
    return max(asked, MIN_DURATION)


def validity(now: datetime, ttl: timedelta, signer_not_after: datetime,
             ) -> tuple[datetime, datetime]:
    """``PermissiveSigningPolicy.apply``'s NotBefore and NotAfter (ValueError: Go's text when
    the signing CA has expired)."""
    not_before = now - BACKDATE
    not_after = now + ttl if ttl < SHORT else now + ttl - BACKDATE
    not_after = min(not_after, signer_not_after)
    if not_before >= signer_not_after:
        raise ValueError(f"the signer has expired: NotAfter={signer_not_after}")
    if now >= signer_not_after:
        raise ValueError(
            f"refusing to sign a certificate that expired in the past: NotAfter={signer_not_after}")
    return not_before, not_after


def key_usages(usages: Sequence[str]) -> tuple[frozenset[str], list[str]]:
    """``keyUsagesFromStrings``: the KeyUsage bits (cryptography's argument names) and the
    extended key usage OIDs in Go's order (ValueError for an unknown usage)."""
    bits: set[str] = set()
    extended: dict[int, str] = {}
    unknown: list[str] = []
    for usage in usages:
        if usage in KEY_USAGES:
            bits.add(KEY_USAGES[usage])
        elif usage in EXT_KEY_USAGES:
            number, oid = EXT_KEY_USAGES[usage]
            extended[number] = oid
        else:
            unknown.append(usage)
    if unknown:
        raise ValueError("unrecognized usage values: [" +
                         " ".join(f'"{u}"' for u in unknown) + "]")
    return frozenset(bits), [extended[n] for n in sorted(extended)]


# --- the cleaner ---------------------------------------------------------------------------------

APPROVED_EXPIRATION = timedelta(hours=1)
DENIED_EXPIRATION = timedelta(hours=1)
PENDING_EXPIRATION = timedelta(hours=24)
CLEANER_INTERVAL_S = 3600.0  # pollingInterval


def _older_than(value: Any, age: timedelta, now: datetime) -> bool:
    when = parse_time_or_none(value)
    return when is not None and now - when > age


def should_clean(csr: Mapping[str, Any], now: datetime,
                 certificate_not_after: datetime | None) -> bool:
    """``CSRCleanerController.handle``: issued and approved over an hour ago, denied or failed
    over an hour ago, pending (no conditions) for a day, or issued with an expired
    certificate (``certificate_not_after``: its first certificate's NotAfter, if any)."""
    status = csr.get("status")
    status = status if isinstance(status, dict) else {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    issued = bool(status.get("certificate"))
    for condition in conditions:
        kind, updated = condition.get("type"), condition.get("lastUpdateTime")
        if kind == "Approved" and issued and _older_than(updated, APPROVED_EXPIRATION, now):
            return True
        if kind in ("Denied", "Failed") and _older_than(updated, DENIED_EXPIRATION, now):
            return True
    meta = csr.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    if not conditions and _older_than(meta.get("creationTimestamp"), PENDING_EXPIRATION, now):
        return True
    approved = any(c.get("type") == "Approved" for c in conditions)
    return (approved and issued and certificate_not_after is not None
            and now > certificate_not_after)
