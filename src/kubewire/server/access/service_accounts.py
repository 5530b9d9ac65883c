"""Bound service-account tokens: issued for a TokenRequest, accepted as bearer tokens.

A token is a JWS in compact form, signed and verified with PyJWT: RS256 (or ES256/384/512 for
an ECDSA signing key) with the server's signing key (``sa_keys.py``: ``--service-account-
signing-key-file``, by default ``pki.service_account_key``), its header ``{"alg", "kid"}`` as
go-jose writes it (no ``typ``), ``kid`` kube's ``keyIDFromPublicKey``. Claims are kube's
(``pkg/serviceaccount/claims.go``; go-jose encodes them as a map, so keys are sorted): ``aud``
(a list), ``exp``, ``iat``, ``iss``, ``jti``, ``kubernetes.io`` (``namespace``,
``serviceaccount`` {``name``, ``uid``}, and {``name``, ``uid``} of a bound ``pod``, ``secret``
or ``node``, the pod's node as ``node`` too, and ``warnafter`` for an extended token), ``nbf``,
``sub`` (``system:serviceaccount:<ns>:<name>``).

Accepting one (``ServiceAccountTokens``, kube's ``jwtTokenAuthenticator`` and its validator),
in kube's order: a token whose unverified ``iss`` is not one of the server's issuers, or that
is not a JWS of an allowed algorithm, is another authenticator's (no opinion); then the
signature, with the keys whose ``kid`` matches or else every ``--service-account-key-file``
key; then one of the token's audiences must be among those the request wants (the server's
``--api-audiences``, or a TokenReview's own); then ``nbf``/``exp``/``iat`` with go-jose's minute
of leeway; then the objects the token names must still be there with the same uid and not
deleted more than a minute ago: the service account, a bound secret, pod or node. Each refusal
carries kube's error text (a TokenReview's ``status.error``). The user is
``system:serviceaccount:<ns>:<name>`` in ``system:serviceaccounts`` and
``system:serviceaccounts:<ns>`` (the union adds ``system:authenticated``), with the pod's and
node's names and uids and the token's credential id as extra.

Legacy secret-based tokens (``legacy_claims``, issuer ``kubernetes/serviceaccount``, no audience
nor expiry; the serviceaccount-token controller signs them into Secrets) are accepted as kube's
``legacyValidator`` does: for the server's audiences, with all their claims, while the Secret
they name exists, is not being deleted nor labelled ``kubernetes.io/legacy-token-invalid-since``
and holds that very token, and while the account has the claimed uid. (kube's daily
``kubernetes.io/legacy-token-last-used`` label on the Secret is not written.)
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import jwt

from kubewire.server.access.authn import CREDENTIAL_ID_KEY, UserInfo
from kubewire.server.access.pki import SERVICE_ACCOUNT_KEY, service_account_key
from kubewire.server.access.sa_keys import (
    PrivateKey,
    VerifyingKey,
    load_signing_key,
    load_verifying_keys,
    verifying_key,
)
from kubewire.times import parse_time_or_none

if TYPE_CHECKING:
    from kubewire.server.context import ServerConfig

__all__ = ["LEGACY_ISSUER", "BoundObject", "ObjectLookup", "ServiceAccountTokens",
           "TokenIssuer", "TokenSpec", "TokenVerdict", "issuer_for", "legacy_claims",
           "token_claims"]

LEEWAY_S = 60  # go-jose jwt.DefaultLeeway; also the validator's grace for deleted objects
MAX_TOKEN_BYTES = 64 * 1024  # no honest token comes near; nothing larger is decoded
PRIVATE_CLAIMS = "kubernetes.io"
POD_NAME_KEY = "authentication.kubernetes.io/pod-name"
POD_UID_KEY = "authentication.kubernetes.io/pod-uid"
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"
NODE_UID_KEY = "authentication.kubernetes.io/node-uid"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
ALGORITHMS = ("RS256", "ES256", "ES384", "ES512")  # what kube's authenticator parses
INVALIDATED = "service account token has been invalidated"
BAD_SIGNATURE = "go-jose/go-jose: error in cryptographic primitive"
# Legacy secret-based tokens (pkg/serviceaccount/legacy.go): their issuer and private claims
LEGACY_ISSUER = "kubernetes/serviceaccount"
LEGACY_NAMESPACE = "kubernetes.io/serviceaccount/namespace"
LEGACY_SECRET_NAME = "kubernetes.io/serviceaccount/secret.name"
LEGACY_ACCOUNT_NAME = "kubernetes.io/serviceaccount/service-account.name"
LEGACY_ACCOUNT_UID = "kubernetes.io/serviceaccount/service-account.uid"
LEGACY_INVALID_SINCE = "kubernetes.io/legacy-token-invalid-since"
LEGACY_INVALIDATED = "token has been invalidated"


def username(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def go_quote_list(items: Sequence[str]) -> str:
    """Go's ``%q`` of a ``[]string``: ``["a" "b"]``."""
    return "[" + " ".join(json.dumps(item) for item in items) + "]"


class TokenRejected(Exception):
    """A token this authenticator recognizes but refuses; ``str()`` is kube's error text."""


class TokenIssuer:
    """Signs with one private key for the first of its issuers; verifies with its keys."""

    def __init__(self, key: PrivateKey, issuer: str, *, issuers: Sequence[str] = (),
                 audiences: Sequence[str] = (), keys: Sequence[VerifyingKey] = ()) -> None:
        self._key = key
        self.issuer = issuer
        self.issuers = tuple(issuers) or (issuer,)
        self.audiences: tuple[str, ...] = tuple(audiences) or (issuer,)  # --api-audiences
        self.signing = verifying_key(key.public_key())
        self.key_id = self.signing.kid
        self.keys: tuple[VerifyingKey, ...] = tuple(keys) or (self.signing,)

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self._key, algorithm=self.signing.alg,
                          headers={"kid": self.key_id, "typ": None}, sort_headers=True)

    def recognizes(self, token: str) -> bool:
        """kube's ``hasCorrectIssuer``: three parts, the middle one JSON naming one of the
        issuers or the legacy one (unverified: it only picks the authenticator)."""
        parts = token.split(".")
        if len(token) > MAX_TOKEN_BYTES or len(parts) != 3:
            return False
        try:
            payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        except (ValueError, binascii.Error, UnicodeError):
            return False
        return isinstance(payload, dict) and (payload.get("iss") in self.issuers
                                              or payload.get("iss") == LEGACY_ISSUER)

    def verify(self, token: str) -> dict[str, Any] | None:
        """The claims of a token one of the keys signed; None when it is not a JWS of an
        allowed algorithm. Raises ``TokenRejected`` for a bad signature."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            return None
        kid = header.get("kid")
        keys = [key for key in self.keys if kid and key.kid == kid] or list(self.keys)
        for key in keys:
            if key.alg != alg:
                continue
            try:
                claims = jwt.decode(token, key.key, algorithms=[alg], options=_SIGNATURE_ONLY)
            except jwt.InvalidSignatureError:
                continue
            except jwt.PyJWTError:
                return None
            return claims if isinstance(claims, dict) else None
        raise TokenRejected(BAD_SIGNATURE)


# PyJWT checks the signature alone: the claims are checked below, in kube's order and words.
_SIGNATURE_ONLY: jwt.types.Options = {
    "verify_signature": True, "verify_exp": False, "verify_nbf": False, "verify_iat": False,
    "verify_aud": False, "verify_iss": False, "verify_sub": False, "verify_jti": False}


def build_issuer(config: ServerConfig, key: PrivateKey | None = None) -> TokenIssuer:
    """The issuer ``config``'s flags describe; its signing key is ``key``, else the signing
    key file's, else the data directory's (made if missing)."""
    if key is None:
        key = (load_signing_key(config.service_account_signing_key_file)
               if config.service_account_signing_key_file is not None
               else service_account_key(config.data_dir / "pki"))
    keys = [found for path in config.service_account_key_files
            for found in load_verifying_keys(path)]
    return TokenIssuer(key, config.service_account_issuer,
                       issuers=(config.service_account_issuer,
                                *config.service_account_other_issuers),
                       audiences=config.api_audiences, keys=keys)


_ISSUERS: dict[tuple[Any, ...], TokenIssuer] = {}


def _config_key(config: ServerConfig) -> tuple[Any, ...]:
    return (config.data_dir, config.service_account_issuer,
            config.service_account_other_issuers, config.api_audiences,
            config.service_account_signing_key_file, config.service_account_key_files)


def issuer_for(config: ServerConfig) -> TokenIssuer:
    """The server's issuer (its key loaded or made once per process)."""
    found = _ISSUERS.get(_config_key(config))
    if found is None:
        if len(_ISSUERS) >= 8:  # tests start many servers in one process
            _ISSUERS.clear()
        found = _ISSUERS[_config_key(config)] = build_issuer(config)
    return found


def has_signing_key(config: ServerConfig) -> bool:
    """Whether a signing key exists yet (a server that never issued a token makes no key:
    RSA takes tens of milliseconds) or verifying keys were given."""
    return (config.service_account_signing_key_file is not None
            or bool(config.service_account_key_files)
            or (config.data_dir / "pki" / SERVICE_ACCOUNT_KEY).exists())


@dataclass(frozen=True, slots=True)
class BoundObject:
    """An object a token is bound to: ``kind`` Pod, Secret or Node."""

    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class TokenSpec:
    """What a token is for: its audiences, lifetime, bound object, the bound pod's node and
    ``warnafter`` (an extended token's requested lifetime)."""

    audiences: tuple[str, ...]
    expiration_s: int
    bound: BoundObject | None = None
    warn_after_s: int = 0
    pod_node: BoundObject | None = None


def token_claims(issuer: TokenIssuer, service_account: dict[str, Any], spec: TokenSpec,
                 now: datetime) -> dict[str, Any]:
    """``token.Claims`` plus the issuer: the claims of a token for ``service_account``."""
    meta = service_account.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    issued = int(now.timestamp())
    private: dict[str, Any] = {"namespace": namespace}
    node = spec.pod_node
    if spec.bound is not None and spec.bound.kind == "Node":
        node = spec.bound
    if node is not None:
        private["node"] = _ref_claim(node)
    if spec.bound is not None and spec.bound.kind in ("Pod", "Secret"):
        private[spec.bound.kind.lower()] = _ref_claim(spec.bound)
    private["serviceaccount"] = {"name": name, "uid": str(meta.get("uid", ""))}
    if spec.warn_after_s:
        private["warnafter"] = issued + spec.warn_after_s
    return {"aud": list(spec.audiences), "exp": issued + spec.expiration_s, "iat": issued,
            "iss": issuer.issuer, "jti": str(uuid.uuid4()), PRIVATE_CLAIMS: private,
            "nbf": issued, "sub": username(namespace, name)}


def legacy_claims(namespace: str, account: str, account_uid: str, secret: str,
                  ) -> dict[str, Any]:
    """``LegacyClaims``: what a secret-based token says (go-jose writes the keys sorted; no
    audience, no expiry)."""
    return {"iss": LEGACY_ISSUER, LEGACY_NAMESPACE: namespace, LEGACY_SECRET_NAME: secret,
            LEGACY_ACCOUNT_NAME: account, LEGACY_ACCOUNT_UID: account_uid,
            "sub": username(namespace, account)}


def _ref_claim(obj: BoundObject) -> dict[str, str]:
    """claims.go ``ref``: ``name`` and ``uid``, each omitted when empty."""
    return {key: value for key, value in (("name", obj.name), ("uid", obj.uid)) if value}


class ObjectLookup(Protocol):
    """The server's current objects (its watch caches)."""

    def current(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class TokenVerdict:
    """What the authenticator says of a token: its user and the audiences it was accepted
    for, or kube's error text, or neither (no opinion: not a token of this server's)."""

    user: UserInfo | None = None
    audiences: tuple[str, ...] = ()
    error: str = ""


class ServiceAccountTokens:
    """The service-account token authenticator: a ``TokenLookup`` for ``Authenticator``."""

    def __init__(self, config: ServerConfig, objects: ObjectLookup,
                 clock: Callable[[], float] | None = None) -> None:
        self._config = config
        self._issuer: TokenIssuer | None = None
        self.objects = objects
        self._clock = clock
        if has_signing_key(config):
            self._issuer = issuer_for(config)  # bad key files fail the start

    @property
    def issuer(self) -> TokenIssuer | None:
        """The server's issuer once a key exists."""
        if self._issuer is None and has_signing_key(self._config):
            self._issuer = issuer_for(self._config)
        return self._issuer

    def _now(self) -> float:
        if self._clock is not None:
            return float(self._clock())
        return datetime.now().timestamp()

    def get(self, token: str) -> UserInfo | None:
        return self.review(token).user

    def review(self, token: str, audiences: Sequence[str] | None = None) -> TokenVerdict:
        """kube's ``AuthenticateToken`` for a request that wants ``audiences`` (default: the
        server's ``--api-audiences``)."""
        issuer = self.issuer
        if token.count(".") != 2 or issuer is None or not issuer.recognizes(token):
            return TokenVerdict()  # not a JWT of ours (another authenticator's)
        try:
            claims = issuer.verify(token)
            if claims is None:
                return TokenVerdict()
            wanted = tuple(audiences or issuer.audiences)
            if claims.get("iss") == LEGACY_ISSUER:
                return self._accept_legacy(issuer, token, claims, wanted)
            return self._accept(issuer, claims, wanted)
        except TokenRejected as err:
            return TokenVerdict(error=str(err))

    def _accept(self, issuer: TokenIssuer, claims: dict[str, Any],
                wanted: tuple[str, ...]) -> TokenVerdict:
        if claims.get("iss") not in issuer.issuers:
            raise TokenRejected(f"token issuer {json.dumps(claims.get('iss'))} is invalid")
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences
        if not isinstance(audiences, list) or not audiences:
            audiences = list(issuer.audiences)  # a legacy token: the server's audiences
        # kube's Audiences.Intersect, through a set: a token holds thousands of audiences and
        # a TokenReview asks for hundreds of thousands, a product that would stall the server
        held = {aud for aud in audiences if isinstance(aud, Hashable)}
        matched = tuple(aud for aud in wanted if aud in held)
        if not matched:
            raise TokenRejected(f"token audiences {go_quote_list(audiences)} is invalid for the "
                                f"target audiences {go_quote_list(wanted)}")
        private = claims.get(PRIVATE_CLAIMS)
        if not isinstance(private, dict):
            raise TokenRejected("service account token claims could not be validated due to "
                                "unexpected private claim")
        self._in_time(claims)
        return TokenVerdict(self._user(claims, private), matched)

    def _accept_legacy(self, issuer: TokenIssuer, token: str, claims: dict[str, Any],
                       wanted: tuple[str, ...]) -> TokenVerdict:
        """A secret-based token: the server's audiences (it has none), then kube's
        ``legacyValidator``: the claims, the secret still there, not being deleted nor
        invalidated, holding this very token, and the service account with the claimed uid."""
        matched = tuple(aud for aud in wanted if aud in issuer.audiences)
        if not matched:
            raise TokenRejected(f"token audiences {go_quote_list(list(issuer.audiences))} is "
                                f"invalid for the target audiences {go_quote_list(wanted)}")
        self._in_time(claims)
        values = _legacy_values(claims)
        namespace, name = values[LEGACY_NAMESPACE], values[LEGACY_ACCOUNT_NAME]
        secret = self.objects.current("secrets", namespace, values[LEGACY_SECRET_NAME])
        secret_meta = (secret or {}).get("metadata") or {}
        if secret is None or secret_meta.get("deletionTimestamp") \
                or (secret_meta.get("labels") or {}).get(LEGACY_INVALID_SINCE):
            raise TokenRejected(LEGACY_INVALIDATED)
        stored = (secret.get("data") or {}).get("token")
        try:
            held = base64.b64decode(stored or "", validate=True)
        except (ValueError, binascii.Error):
            held = b""
        if held != token.encode():
            raise TokenRejected("token does not match server's copy")
        account = self.objects.current("serviceaccounts", namespace, name)
        if account is None:
            raise TokenRejected(f'serviceaccounts "{name}" not found')
        account_meta = account.get("metadata") or {}
        if account_meta.get("deletionTimestamp"):
            raise TokenRejected(f"service account {namespace}/{name} has been deleted")
        uid = values[LEGACY_ACCOUNT_UID]
        if account_meta.get("uid") != uid:
            raise TokenRejected(f"service account UID ({account_meta.get('uid', '')}) does not "
                                f"match claim ({uid})")
        return TokenVerdict(UserInfo(username(namespace, name), uid,
                                     (SERVICE_ACCOUNTS_GROUP,
                                      f"{SERVICE_ACCOUNTS_GROUP}:{namespace}"), ()), matched)

    def _in_time(self, claims: dict[str, Any]) -> None:
        """go-jose ``Claims.ValidateWithLeeway``, in its order."""
        now = self._now()
        nbf, exp, iat = (_number(claims.get(key)) for key in ("nbf", "exp", "iat"))
        if nbf is not None and now + LEEWAY_S < nbf:
            raise TokenRejected("service account token is not valid yet")
        if exp is not None and now - LEEWAY_S > exp:
            raise TokenRejected("service account token has expired")
        if iat is not None and now + LEEWAY_S < iat:
            raise TokenRejected("service account token is issued in the future")

    def _user(self, claims: dict[str, Any], private: dict[str, Any]) -> UserInfo:
        namespace = private.get("namespace")
        account = private.get("serviceaccount")
        if not isinstance(namespace, str) or not isinstance(account, dict):
            raise TokenRejected("service account token claims could not be validated due to "
                                "unexpected private claim")
        name, uid = str(account.get("name") or ""), str(account.get("uid") or "")
        found = self.objects.current("serviceaccounts", namespace, name)
        if found is None:
            raise TokenRejected(f'serviceaccounts "{name}" not found')
        self._live(found, uid, f"service account UID ({{}}) does not match claim ({uid})",
                   f"service account {namespace}/{name} has been deleted")
        extra: list[tuple[str, tuple[str, ...]]] = []
        secret = _ref(private.get("secret"))
        if secret is not None:
            self._bound("secrets", namespace, secret, "secret UID ({}) does not match service "
                        f"account secret ref claim ({secret[1]})")
        pod = _ref(private.get("pod"))
        if pod is not None:
            self._bound("pods", namespace, pod, "pod UID ({}) does not match service account "
                        f"pod ref claim ({pod[1]})")
            extra += [(POD_NAME_KEY, (pod[0],)), (POD_UID_KEY, (pod[1],))]
        node = _ref(private.get("node"))
        if node is not None:
            if pod is None:  # a node-bound token: the node must live
                self._bound("nodes", "", node, "node UID ({}) does not match service account "
                            f"node ref claim ({node[1]})")
            extra.append((NODE_NAME_KEY, (node[0],)))
            if node[1]:
                extra.append((NODE_UID_KEY, (node[1],)))
        jti = claims.get("jti")
        if isinstance(jti, str) and jti:
            extra.append((CREDENTIAL_ID_KEY, (f"JTI={jti}",)))
        return UserInfo(username(namespace, name), uid,
                        (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}"),
                        tuple(sorted(extra)))

    def _bound(self, plural: str, namespace: str, ref: tuple[str, str], uid_text: str) -> None:
        found = self.objects.current(plural, namespace, ref[0])
        if found is None:
            raise TokenRejected(INVALIDATED)
        self._live(found, ref[1], uid_text, INVALIDATED)

    def _live(self, obj: dict[str, Any], uid: str, uid_text: str, deleted_text: str) -> None:
        """The validator's checks of one named object: the same uid, and not deleted more
        than a minute ago."""
        meta = obj.get("metadata") or {}
        if meta.get("uid") != uid:
            raise TokenRejected(uid_text.format(meta.get("uid", "")))
        deleted = parse_time_or_none(meta.get("deletionTimestamp"))
        if deleted is not None and (deleted + timedelta(seconds=LEEWAY_S)).timestamp() < \
                self._now():
            raise TokenRejected(deleted_text)


def _legacy_values(claims: dict[str, Any]) -> dict[str, str]:
    """The legacy validator's checks of the claims themselves, in its order and words."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise TokenRejected("sub claim is missing")
    values: dict[str, str] = {}
    for key, what in ((LEGACY_NAMESPACE, "namespace"), (LEGACY_SECRET_NAME, "secretName"),
                      (LEGACY_ACCOUNT_NAME, "serviceAccountName"),
                      (LEGACY_ACCOUNT_UID, "serviceAccountUID")):
        value = claims.get(key)
        if not isinstance(value, str) or not value:
            raise TokenRejected(f"{what} claim is missing")
        values[key] = value
    if subject != username(values[LEGACY_NAMESPACE], values[LEGACY_ACCOUNT_NAME]):
        raise TokenRejected("sub claim is invalid")
    return values


def _number(value: object) -> float | None:
    """A NumericDate claim (JSON number), else None (go-jose skips what is absent)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _ref(value: object) -> tuple[str, str] | None:
    if not isinstance(value, dict):
        return None
    return str(value.get("name") or ""), str(value.get("uid") or "")


def data_dir_issuer(data_dir: Path, issuer: str) -> TokenIssuer:
    """The issuer of a data directory's own key (for tests that sign tokens of their own)."""
    return TokenIssuer(service_account_key(data_dir / "pki"), issuer)
