"""Service-account keys, tokens and reviews without a server: ``access/sa_keys.py``,
``sa_options.py``, ``service_accounts.py``, ``token_review.py`` and ``oidc_discovery.py``."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kubewire.server.access.authn import ServiceAccountKeyError, UserInfo
from kubewire.server.access.oidc_discovery import jwk, metadata_for, provider_error
from kubewire.server.access.sa_keys import (
    key_id,
    load_signing_key,
    load_verifying_keys,
    verifying_key,
)
from kubewire.server.access.sa_options import issuer_errors, max_expiration_error
from kubewire.server.access.service_accounts import (
    BoundObject,
    ServiceAccountTokens,
    TokenIssuer,
    TokenSpec,
    token_claims,
)
from kubewire.server.access.token_review import bearer_token, review_token
from kubewire.server.context import ServerConfig

ISSUER = "https://kubernetes.default.svc.cluster.local"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP384R1())
ACCOUNT = {"metadata": {"namespace": "default", "name": "app", "uid": "sa-uid"}}
NOW = 1_800_000_000


def _pem(key: Any, private: bool = True) -> bytes:
    if private:
        return bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo))


def _part(text: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


class Objects:
    def __init__(self, **found: dict[str, Any]) -> None:
        self.found = found

    def current(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.found.get(f"{plural}/{name}")


def _authenticator(tmp_path: Path, objects: Objects, now: float = NOW,
                   **config: Any) -> tuple[ServiceAccountTokens, TokenIssuer]:
    signing = tmp_path / "signing.pem"
    signing.write_bytes(_pem(RSA_KEY))
    cfg = ServerConfig(data_dir=tmp_path, service_account_signing_key_file=signing, **config)
    tokens = ServiceAccountTokens(cfg, objects, clock=lambda: now)
    assert tokens.issuer is not None
    return tokens, tokens.issuer


def test_key_id_and_header_are_kubes() -> None:
    issuer = TokenIssuer(RSA_KEY, ISSUER)
    der = RSA_KEY.public_key().public_bytes(serialization.Encoding.DER,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)
    import hashlib

    assert issuer.key_id == base64.urlsafe_b64encode(
        hashlib.sha256(der).digest()).rstrip(b"=").decode()
    token = issuer.sign({"iss": ISSUER})
    assert token.split(".")[0] == base64.urlsafe_b64encode(json.dumps(
        {"alg": "RS256", "kid": issuer.key_id}, separators=(",", ":")).encode()).rstrip(
        b"=").decode()
    assert jwt.decode(token, RSA_KEY.public_key(), algorithms=["RS256"]) == {"iss": ISSUER}
    ec_issuer = TokenIssuer(EC_KEY, ISSUER)
    assert _part(ec_issuer.sign({})[:ec_issuer.sign({}).index(".")])["alg"] == "ES384"


def test_claims_are_kubes_sorted_with_bound_objects() -> None:
    from datetime import UTC, datetime

    issuer = TokenIssuer(RSA_KEY, ISSUER)
    now = datetime.fromtimestamp(NOW, UTC)
    claims = token_claims(issuer, ACCOUNT, TokenSpec(
        (ISSUER,), 3600, BoundObject("Pod", "web", "pod-uid"), 0,
        BoundObject("Node", "n1", "")), now)
    assert list(claims) == sorted(claims)
    assert claims["kubernetes.io"] == {"namespace": "default", "node": {"name": "n1"},
                                       "pod": {"name": "web", "uid": "pod-uid"},
                                       "serviceaccount": {"name": "app", "uid": "sa-uid"}}
    secret = token_claims(issuer, ACCOUNT, TokenSpec((ISSUER,), 600,
                                                     BoundObject("Secret", "s", "s-uid")), now)
    assert list(secret["kubernetes.io"]) == ["namespace", "secret", "serviceaccount"]


def test_refusals_carry_kubes_texts(tmp_path: Path) -> None:
    live = {"serviceaccounts/app": {"metadata": {"uid": "sa-uid"}}}
    tokens, issuer = _authenticator(tmp_path, Objects(**live))
    base: dict[str, Any] = {
        "aud": [ISSUER], "iss": ISSUER, "iat": NOW, "nbf": NOW, "exp": NOW + 600,
        "kubernetes.io": {"namespace": "default",
                          "serviceaccount": {"name": "app", "uid": "sa-uid"}},
        "sub": "system:serviceaccount:default:app", "jti": "j-1"}

    def verdict(claims: dict[str, Any], audiences: tuple[str, ...] | None = None) -> Any:
        return tokens.review(issuer.sign(claims), audiences)

    good = verdict(base)
    assert good.user == UserInfo("system:serviceaccount:default:app", "sa-uid",
                                 ("system:serviceaccounts", "system:serviceaccounts:default"),
                                 (("authentication.kubernetes.io/credential-id",
                                   ("JTI=j-1",)),))
    assert good.audiences == (ISSUER,)
    assert verdict({**base, "exp": NOW - 61}).error == "service account token has expired"
    assert verdict({**base, "exp": NOW - 59}).user is not None  # go-jose's minute of leeway
    assert verdict({**base, "nbf": NOW + 61}).error == "service account token is not valid yet"
    assert verdict({**base, "iat": NOW + 61}).error == (
        "service account token is issued in the future")
    assert verdict(base, ("other",)).error == (
        f'token audiences ["{ISSUER}"] is invalid for the target audiences ["other"]')
    assert verdict({**base, "iss": "https://elsewhere"}).error == ""  # not ours: no opinion
    gone = {**base, "kubernetes.io": {"namespace": "default",
                                      "serviceaccount": {"name": "ghost", "uid": "x"}}}
    assert verdict(gone).error == 'serviceaccounts "ghost" not found'
    remade = {**base, "kubernetes.io": {"namespace": "default",
                                        "serviceaccount": {"name": "app", "uid": "old"}}}
    assert verdict(remade).error == "service account UID (sa-uid) does not match claim (old)"
    pod = {**base, "kubernetes.io": {**base["kubernetes.io"],
                                     "pod": {"name": "web", "uid": "p"}}}
    assert verdict(pod).error == "service account token has been invalidated"
    other_key = TokenIssuer(rsa.generate_private_key(public_exponent=65537, key_size=2048),
                            ISSUER)
    assert tokens.review(other_key.sign(base)).error == (
        "go-jose/go-jose: error in cryptographic primitive")
    unsigned = jwt.encode(base, "s" * 32, algorithm="HS256")
    assert tokens.review(unsigned).error == ""  # an algorithm kube does not parse


def test_deleted_objects_have_a_minute_of_grace(tmp_path: Path) -> None:
    deleted = "2027-01-15T08:00:00Z"  # NOW is 2027-01-15T08:00:00Z
    live = {"serviceaccounts/app": {"metadata": {"uid": "sa-uid",
                                                 "deletionTimestamp": deleted}}}
    claims = {"aud": [ISSUER], "iss": ISSUER, "exp": NOW + 600, "kubernetes.io": {
        "namespace": "default", "serviceaccount": {"name": "app", "uid": "sa-uid"}}}
    tokens, issuer = _authenticator(tmp_path, Objects(**live), now=NOW + 30)
    assert tokens.review(issuer.sign(claims)).user is not None
    tokens, issuer = _authenticator(tmp_path, Objects(**live), now=NOW + 61)
    assert tokens.review(issuer.sign(claims)).error == (
        "service account default/app has been deleted")


def test_review_follows_kubes_union(tmp_path: Path) -> None:
    class File:
        def get(self, token: str) -> UserInfo | None:
            return UserInfo("alice", "1", ("dev",)) if token == "t" else None

    tokens, _ = _authenticator(tmp_path, Objects())
    verdict = review_token("t", [], [ISSUER, "b"], File(), tokens)
    assert (verdict.authenticated, verdict.audiences) == (True, (ISSUER, "b"))
    assert verdict.user == UserInfo("alice", "1", ("dev", "system:authenticated"))
    assert review_token("t", ["b", "c"], [ISSUER, "b"], File(), tokens).audiences == ("b",)
    assert review_token("t", ["c"], [ISSUER], File(), tokens).error == "invalid bearer token"
    assert review_token(" t", [], [ISSUER], File(), tokens).error == ""  # an empty bearer
    assert bearer_token("t rest") == "t" and bearer_token("  ") == ""


def test_key_files(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(b"junk\n" + _pem(RSA_KEY, private=False) + _pem(EC_KEY))
    keys = load_verifying_keys(bundle)
    assert [(k.alg, k.kid) for k in keys] == [
        ("RS256", key_id(RSA_KEY.public_key())), ("ES384", key_id(EC_KEY.public_key()))]
    signing = tmp_path / "ec.pem"
    signing.write_bytes(_pem(EC_KEY))
    assert isinstance(load_signing_key(signing), ec.EllipticCurvePrivateKey)
    with pytest.raises(ServiceAccountKeyError, match="data does not contain a valid RSA or "
                                                     "ECDSA private key"):
        load_signing_key(_write(tmp_path / "public.pem", _pem(RSA_KEY, private=False)))
    with pytest.raises(ServiceAccountKeyError, match="error reading public key file"):
        load_verifying_keys(tmp_path / "missing.pem")
    huge = _write(tmp_path / "huge.pem", b"x" * (2 << 20))
    with pytest.raises(ServiceAccountKeyError, match="larger than"):
        load_verifying_keys(huge)
    odd = ec.generate_private_key(ec.SECP256K1())
    with pytest.raises(ServiceAccountKeyError, match="curve"):
        load_signing_key(_write(tmp_path / "k1.pem", _pem(odd)))


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_flag_checks() -> None:
    assert issuer_errors([ISSUER, "https://b"]) == []
    assert issuer_errors(["", "a", "a"]) == [
        "service-account-issuer should not be an empty string",
        'service-account-issuer "a" is already specified']
    assert issuer_errors([ISSUER], "ftp://x") == [
        "service-account-jwks-uri requires https scheme, parsed as: ftp://x"]
    assert max_expiration_error(0) is None and max_expiration_error(3600) is None
    assert max_expiration_error(3599) == (
        "the service-account-max-token-expiration must be between 1 hour and 2^32 seconds")


def test_openid_documents() -> None:
    assert provider_error(ISSUER) is None
    assert provider_error("kubernetes/serviceaccount") == (
        "issuer URL must use https scheme, got: kubernetes/serviceaccount")
    assert provider_error("https://a?x=1") == "issuer URL may not include a query, got: " \
        "https://a?x=1"
    keys = (verifying_key(RSA_KEY.public_key()), verifying_key(EC_KEY.public_key()))
    found = metadata_for(ISSUER, "", "10.0.0.1:6443", keys)
    assert json.loads(found.config) == {
        "issuer": ISSUER, "jwks_uri": "https://10.0.0.1:6443/openid/v1/jwks",
        "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES384", "RS256"]}
    assert b"\n" not in found.config
    rsa_jwk, ec_jwk = json.loads(found.keyset)["keys"]
    assert rsa_jwk == jwk(keys[0])
    assert len(base64.urlsafe_b64decode(ec_jwk["x"] + "==")) == 48
    # PyJWT reads them back as the same keys
    token = TokenIssuer(EC_KEY, ISSUER).sign({"iss": ISSUER})
    public = jwt.PyJWK(ec_jwk).key
    assert jwt.decode(token, public, algorithms=["ES384"]) == {"iss": ISSUER}
    escaped = metadata_for("https://a/<&>", "", "h:1", keys[:1]).config
    assert b"\\u003c\\u0026\\u003e" in escaped


def test_openid_configuration_is_json_marshal_of_kubes_struct() -> None:
    """openidmetadata.go marshals its openIDMetadata struct: fields in declaration order, and
    encode.go appendString escapes ``<``, ``>``, ``&`` (escapeHTML), U+2028/U+2029, and writes
    invalid UTF-8 (a byte 0xff in the flag, surrogate-escaped by Python's argv) as \\ufffd."""
    keys = (verifying_key(RSA_KEY.public_key()),)
    found = metadata_for("https://a/<\u2028\udcff", "", "h:1", keys)
    assert found.config == (
        b'{"issuer":"https://a/\\u003c\\u2028\\ufffd","jwks_uri":"https://h:1/openid/v1/jwks",'
        b'"response_types_supported":["id_token"],"subject_types_supported":["public"],'
        b'"id_token_signing_alg_values_supported":["RS256"]}')


def test_huge_and_garbage_tokens_are_no_opinion(tmp_path: Path) -> None:
    tokens, _ = _authenticator(tmp_path, Objects())
    started = time.monotonic()
    for token in ("a" * 1_000_000, "a.b.c", ".." * 100_000, "x.eyJpc3MiOjF9.y",
                  "e30.eyJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMuY2x1c3Rlci5sb2Nh"
                  "bCJ9.AAAA"):
        assert tokens.review(token).user is None
    assert time.monotonic() - started < 2


def test_the_flags_make_the_config(tmp_path: Path) -> None:
    from kubewire.cli import build_parser, config_from_args, service_account_error

    args = build_parser().parse_args([
        "serve", "--data-dir", str(tmp_path), "--service-account-issuer", "https://a",
        "--service-account-issuer", "https://b", "--service-account-key-file", "k1.pem",
        "--service-account-key-file", "k2.pem", "--service-account-signing-key-file", "s.pem",
        "--api-audiences", "x,y", "--service-account-jwks-uri", "https://keys/jwks",
        "--service-account-max-token-expiration", "48h"])
    assert service_account_error(args) is None
    config = config_from_args(args)
    assert (config.service_account_issuer, config.service_account_other_issuers) == (
        "https://a", ("https://b",))
    assert config.service_account_key_files == (Path("k1.pem"), Path("k2.pem"))
    assert config.service_account_signing_key_file == Path("s.pem")
    assert config.api_audiences == ("x", "y")
    assert config.service_account_jwks_uri == "https://keys/jwks"
    assert config.service_account_max_token_expiration_s == 48 * 3600
    default = config_from_args(build_parser().parse_args(["serve", "--data-dir", str(tmp_path)]))
    assert (default.service_account_issuer, default.api_audiences) == (ISSUER, ())


def test_review_protobuf_bodies_decode_as_kubes_json() -> None:
    from kubewire.server.wire.protobuf import decode_protobuf_object
    from tests.unit.test_protobuf import encode_body

    sent = {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": "r"}, "spec": {"token": "t", "audiences": ["a"]},
            "status": {"authenticated": True, "user": {
                "username": "u", "groups": ["g"],
                "extra": {"k": {"items": ["v1", "v2"]}, "none": {}}}}}
    decoded = decode_protobuf_object(encode_body(sent), "authentication.k8s.io/v1",
                                     "TokenReview")
    assert decoded["spec"] == {"token": "t", "audiences": ["a"]}
    assert decoded["status"] == {"authenticated": True, "user": {
        "username": "u", "groups": ["g"], "extra": {"k": ["v1", "v2"], "none": None}}}
    me = {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
          "metadata": {}}
    assert decode_protobuf_object(encode_body(me), "authentication.k8s.io/v1",
                                  "SelfSubjectReview") == me
