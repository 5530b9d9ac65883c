"""Bound service-account tokens: issued for a TokenRequest, accepted as bearer tokens.

A token is a JWS in compact form, RS256 with the server's service-account key
(``pki.service_account_key``), its ``kid`` the unpadded base64url SHA-256 of the public key's
PKIX DER (kube's ``keyIDFromPublicKey``). The signature is ``cryptography``'s RSA PKCS#1 v1.5
with SHA-256; the compact form around it (two base64url JSON documents and the signature
joined by dots, RFC 7515 §7.1) is written here, as it is three lines and PyJWT is not a
dependency. Claims are kube's (``pkg/serviceaccount/claims.go``; go-jose encodes them as a
map, so keys are sorted): ``aud`` (a list), ``exp``, ``iat``, ``iss``, ``jti``,
``kubernetes.io`` (``namespace``, ``serviceaccount`` {``name``, ``uid``}, and ``pod``
{``name``, ``uid``} for a pod-bound token, ``warnafter`` for an extended one), ``nbf``, ``sub``
(``system:serviceaccount:<ns>:<name>``).

Accepting one (``ServiceAccountTokens``, kube's ``jwtTokenAuthenticator`` and its validator):
the signature and issuer must match, ``exp``/``nbf`` hold with go-jose's one minute of leeway,
one audience must be the server's, and the objects the token names must still be there: the
service account with the same uid and not being deleted, and a bound pod with the same uid
and not deleted more than a minute ago. The user is ``system:serviceaccount:<ns>:<name>`` in
``system:serviceaccounts`` and ``system:serviceaccounts:<ns>`` (the union adds
``system:authenticated``), with the pod name and uid and the token's credential id as extra.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from kubewire.server.access.authn import CREDENTIAL_ID_KEY, UserInfo
from kubewire.server.access.pki import SERVICE_ACCOUNT_KEY, service_account_key
from kubewire.times import parse_time_or_none

__all__ = ["BoundObject", "ObjectLookup", "ServiceAccountTokens", "TokenIssuer", "TokenSpec",
           "issuer_for", "token_claims"]

LEEWAY_S = 60  # go-jose jwt.DefaultLeeway
POD_DELETION_GRACE_S = 60  # validator: a deleted pod's tokens work a minute more
MAX_TOKEN_BYTES = 64 * 1024  # no honest token comes near; nothing larger is decoded
PRIVATE_CLAIMS = "kubernetes.io"
POD_NAME_KEY = "authentication.kubernetes.io/pod-name"
POD_UID_KEY = "authentication.kubernetes.io/pod-uid"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def username(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


class TokenIssuer:
    """Signs and verifies tokens with one RSA key for one issuer."""

    def __init__(self, key: rsa.RSAPrivateKey, issuer: str) -> None:
        self._key = key
        self._public = key.public_key()
        self.issuer = issuer
        der = self._public.public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
        self.key_id = _b64(hashlib.sha256(der).digest())

    @property
    def audiences(self) -> tuple[str, ...]:
        """kube-apiserver's ``--api-audiences`` default: its service-account issuer."""
        return (self.issuer,)

    def sign(self, claims: dict[str, Any]) -> str:
        head = _b64(_json({"alg": "RS256", "kid": self.key_id})) + "." + _b64(_json(claims))
        signature = self._key.sign(head.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        return head + "." + _b64(signature)

    def verify(self, token: str) -> dict[str, Any] | None:
        """The claims of a token this issuer's key signed, else None."""
        parts = token.split(".")
        if len(token) > MAX_TOKEN_BYTES or len(parts) != 3:
            return None
        try:
            header = json.loads(_unb64(parts[0]))
            if not isinstance(header, dict) or header.get("alg") != "RS256":
                return None
            self._public.verify(_unb64(parts[2]), f"{parts[0]}.{parts[1]}".encode("ascii"),
                                padding.PKCS1v15(), hashes.SHA256())
            claims = json.loads(_unb64(parts[1]))
        except (ValueError, binascii.Error, InvalidSignature, UnicodeError):
            return None
        return claims if isinstance(claims, dict) else None


@lru_cache(maxsize=8)
def _issuer(pki_dir: Path, issuer: str) -> TokenIssuer:
    return TokenIssuer(service_account_key(pki_dir), issuer)


def issuer_for(data_dir: Path, issuer: str) -> TokenIssuer:
    """The issuer of a data directory (its key in ``DIR/pki``), one per process."""
    return _issuer(data_dir / "pki", issuer)


@dataclass(frozen=True, slots=True)
class BoundObject:
    """An object a token is bound to: a pod, as ``kubernetes.io.pod``."""

    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class TokenSpec:
    """What a token is for: its audiences, lifetime, bound pod and ``warnafter`` (an extended
    token's requested lifetime)."""

    audiences: tuple[str, ...]
    expiration_s: int
    pod: BoundObject | None = None
    warn_after_s: int = 0


def token_claims(issuer: TokenIssuer, service_account: dict[str, Any], spec: TokenSpec,
                 now: datetime) -> dict[str, Any]:
    """``token.Claims`` plus the issuer: the claims of a token for ``service_account``."""
    meta = service_account.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    issued = int(now.timestamp())
    private: dict[str, Any] = {"namespace": namespace,
                               "serviceaccount": {"name": name, "uid": str(meta.get("uid", ""))}}
    if spec.pod is not None:
        private["pod"] = {"name": spec.pod.name, "uid": spec.pod.uid}
    if spec.warn_after_s:
        private["warnafter"] = issued + spec.warn_after_s
    return {"aud": list(spec.audiences), "exp": issued + spec.expiration_s, "iat": issued,
            "iss": issuer.issuer, "jti": str(uuid.uuid4()), PRIVATE_CLAIMS: private,
            "nbf": issued, "sub": username(namespace, name)}


class ObjectLookup(Protocol):
    """The server's current objects (its watch caches)."""

    def current(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None: ...


class ServiceAccountTokens:
    """The service-account token authenticator: a ``TokenLookup`` for ``Authenticator``."""

    def __init__(self, data_dir: Path, issuer: str, objects: ObjectLookup,
                 clock: Any = None) -> None:
        self._data_dir = data_dir
        self._issuer_name = issuer
        self._issuer: TokenIssuer | None = None
        self.objects = objects
        self._clock = clock

    @property
    def issuer(self) -> TokenIssuer | None:
        """The data directory's issuer once its key exists: a server that never issued a
        token makes no key (RSA takes tens of milliseconds) to check one."""
        if self._issuer is None and (self._data_dir / "pki" / SERVICE_ACCOUNT_KEY).exists():
            self._issuer = issuer_for(self._data_dir, self._issuer_name)
        return self._issuer

    def _now(self) -> float:
        if self._clock is not None:
            return float(self._clock())
        return datetime.now().timestamp()

    def get(self, token: str) -> UserInfo | None:
        issuer = self.issuer
        if token.count(".") != 2 or issuer is None:
            return None  # not a JWT (another authenticator's), or none was ever issued
        claims = issuer.verify(token)
        if claims is None or claims.get("iss") != issuer.issuer:
            return None
        private = claims.get(PRIVATE_CLAIMS)
        if not isinstance(private, dict) or not self._in_time(claims):
            return None
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences
        if not isinstance(audiences, list) or not set(audiences) & set(issuer.audiences):
            return None
        return self._user(claims, private)

    def _in_time(self, claims: dict[str, Any]) -> bool:
        now = self._now()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if not isinstance(exp, int | float) or now > exp + LEEWAY_S:
            return False
        return not (isinstance(nbf, int | float) and now < nbf - LEEWAY_S)

    def _user(self, claims: dict[str, Any], private: dict[str, Any]) -> UserInfo | None:
        namespace = private.get("namespace")
        account = private.get("serviceaccount")
        if not isinstance(namespace, str) or not isinstance(account, dict):
            return None
        name, uid = account.get("name"), account.get("uid")
        if not isinstance(name, str) or not isinstance(uid, str):
            return None
        found = self.objects.current("serviceaccounts", namespace, name)
        if found is None or not _same_live_object(found, uid, 0, self._now()):
            return None  # deleted, or deleted and made again
        extra: list[tuple[str, tuple[str, ...]]] = []
        pod = private.get("pod")
        if pod is not None:
            if not isinstance(pod, dict):
                return None
            pod_name, pod_uid = str(pod.get("name", "")), str(pod.get("uid", ""))
            live = self.objects.current("pods", namespace, pod_name)
            if live is None or not _same_live_object(live, pod_uid, POD_DELETION_GRACE_S,
                                                     self._now()):
                return None
            extra += [(POD_NAME_KEY, (pod_name,)), (POD_UID_KEY, (pod_uid,))]
        jti = claims.get("jti")
        if isinstance(jti, str) and jti:
            extra.append((CREDENTIAL_ID_KEY, (f"JTI={jti}",)))
        return UserInfo(username(namespace, name), uid,
                        (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}"),
                        tuple(sorted(extra)))


def _same_live_object(obj: dict[str, Any], uid: str, grace_s: int, now: float) -> bool:
    meta = obj.get("metadata") or {}
    if meta.get("uid") != uid:
        return False
    deleted = parse_time_or_none(meta.get("deletionTimestamp"))
    return deleted is None or (deleted + timedelta(seconds=grace_s)).timestamp() > now
