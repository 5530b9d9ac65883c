"""``authentication.k8s.io/v1`` SelfSubjectReview (``kubectl auth whoami``) and TokenReview,
and the service-account story end to end: a token from ``kubectl create token`` works in a
kubeconfig, names its service account, and dies with it (``server/writes/authn_reviews.py``,
``server/access/token_review.py``, ``server/access/service_accounts.py``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from kubewire.server.access.kubeconfig import Credentials, kubeconfig_text
from kubewire.server.access.service_accounts import data_dir_issuer
from tests.api_only import API_ONLY
from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl
from tests.integration.test_access import https

ISSUER = "https://kubernetes.default.svc.cluster.local"
AUDIENCE = "robot-audience"
REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


@pytest.fixture
def secure(make_server: Callable[..., ServerThread], tmp_path: Path) -> ServerThread:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('file-token,alice,u-1,"team-a,team-b"\n')
    return make_server(insecure_http=False, api_audiences=(ISSUER, AUDIENCE),
                       token_auth_file=tokens)


def _admin(server: ServerThread, method: str, path: str, body: Any = None) -> Any:
    pki = server.config.data_dir / "pki"
    reply = https(server, method, path, cert=(pki / "admin.crt", pki / "admin.key"), body=body)
    assert reply.status < 300, (reply.status, reply.body)
    return json.loads(reply.body) if reply.body else None


def _review(server: ServerThread, spec: dict[str, Any], **extra: Any) -> tuple[int, Any]:
    pki = server.config.data_dir / "pki"
    reply = https(server, "POST", REVIEWS, cert=(pki / "admin.crt", pki / "admin.key"),
                  body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                        "spec": spec, **extra})
    return reply.status, json.loads(reply.body)


def _token(server: ServerThread, name: str, spec: dict[str, Any]) -> str:
    answer = _admin(server, "POST", f"/api/v1/namespaces/default/serviceaccounts/{name}/token",
                    {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                     "spec": spec})
    return str(answer["status"]["token"])


def _kubeconfig(server: ServerThread, token: str) -> Path:
    path = server.config.data_dir.parent / "robot" / "kubeconfig"
    path.parent.mkdir(exist_ok=True)
    ca = (server.config.data_dir / "pki" / "ca.crt").read_bytes()
    path.write_text(kubeconfig_text(server.url, Credentials(user="robot", token=token),
                                    ca_cert=ca))
    return path


@needs_kubectl
def test_kubectl_create_token_whoami_and_delete(secure: ServerThread) -> None:
    kubectl.ok(secure, "create", "sa", "robot")
    token = kubectl.ok(secure, "create", "token", "robot", "--duration", "20m",
                       "--audience", AUDIENCE).strip()
    robot = _kubeconfig(secure, token)
    assert kubectl.run(robot, "get", "pods").returncode == 0
    who = kubectl.ok(robot, "auth", "whoami").splitlines()
    assert who[0].split() == ["ATTRIBUTE", "VALUE"]
    assert who[1].split() == ["Username", "system:serviceaccount:default:robot"]
    uid = _admin(secure, "GET", "/api/v1/namespaces/default/serviceaccounts/robot")[
        "metadata"]["uid"]
    assert who[2].split() == ["UID", uid]
    assert who[3].split() == ["Groups", "[system:serviceaccounts",
                              "system:serviceaccounts:default", "system:authenticated]"]
    assert who[4].startswith("Extra: authentication.kubernetes.io/credential-id")
    as_yaml = yaml.safe_load(kubectl.ok(robot, "auth", "whoami", "-o", "yaml"))
    assert as_yaml["kind"] == "SelfSubjectReview"
    assert as_yaml["apiVersion"] == "authentication.k8s.io/v1"
    info = as_yaml["status"]["userInfo"]
    assert info["username"] == "system:serviceaccount:default:robot"
    assert info["uid"] == uid
    assert list(info["extra"]) == ["authentication.kubernetes.io/credential-id"]
    assert info["extra"]["authentication.kubernetes.io/credential-id"][0].startswith("JTI=")
    # the admin (client certificate) and an impersonated user
    admin = json.loads(kubectl.ok(secure, "auth", "whoami", "-o", "json"))["status"]["userInfo"]
    assert (admin["username"], admin["groups"]) == ("kubewire-admin",
                                                    ["system:masters", "system:authenticated"])
    assert admin["extra"]["authentication.kubernetes.io/credential-id"][0].startswith(
        "X509SHA256=")
    alice = json.loads(kubectl.ok(secure, "auth", "whoami", "-o", "json", "--as", "alice",
                                  "--as-group", "devs"))["status"]["userInfo"]
    assert alice == {"username": "alice", "groups": ["devs", "system:authenticated"]}
    kubectl.ok(secure, "delete", "sa", "robot")
    done = kubectl.run(robot, "get", "pods")
    assert done.returncode == 1
    assert "You must be logged in to the server (Unauthorized)" in done.stderr
    status, review = _review(secure, {"token": token})
    assert status == 201
    assert review["status"] == {"user": {}, "error": 'serviceaccounts "robot" not found'}


def test_token_review_answers(secure: ServerThread) -> None:
    _admin(secure, "POST", "/api/v1/namespaces/default/serviceaccounts",
           {"metadata": {"name": "app"}})
    token = _token(secure, "app", {"audiences": [ISSUER, "vault"]})
    status, review = _review(secure, {"token": token}, metadata={"name": "r1"})
    assert status == 201
    assert review["kind"] == "TokenReview"
    assert review["metadata"] == {"name": "r1", "creationTimestamp": None}
    assert review["spec"] == {"token": token}
    answer = review["status"]
    assert answer["authenticated"] is True
    assert answer["audiences"] == [ISSUER]
    user = answer["user"]
    assert user["username"] == "system:serviceaccount:default:app"
    assert user["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default",
                              "system:authenticated"]
    assert list(user["extra"]) == ["authentication.kubernetes.io/credential-id"]
    # spec.audiences: the token must name one of them; the answer names the ones it met
    _, review = _review(secure, {"token": token, "audiences": ["vault", "other"]})
    assert review["status"]["audiences"] == ["vault"]
    assert review["spec"]["audiences"] == ["vault", "other"]
    _, review = _review(secure, {"token": token, "audiences": ["elsewhere"]})
    assert review["status"] == {"user": {}, "error": (
        f'token audiences ["{ISSUER}" "vault"] is invalid for the target audiences '
        '["elsewhere"]')}
    # the token file's users, for the server's audiences only
    _, review = _review(secure, {"token": "file-token"})
    assert review["status"] == {"authenticated": True, "user": {
        "username": "alice", "uid": "u-1",
        "groups": ["team-a", "team-b", "system:authenticated"]}, "audiences": [ISSUER, AUDIENCE]}
    _, review = _review(secure, {"token": "file-token", "audiences": ["vault"]})
    assert review["status"] == {"user": {}, "error": "invalid bearer token"}
    # garbage, forged and expired tokens
    _, review = _review(secure, {"token": "not-a-token"})
    assert review["status"] == {"user": {}, "error": "invalid bearer token"}
    head, payload, signature = token.split(".")
    _, review = _review(secure, {"token": f"{head}.{payload}.{signature[:-4]}AAAA"})
    assert review["status"]["error"] == "go-jose/go-jose: error in cryptographic primitive"
    account = _admin(secure, "GET", "/api/v1/namespaces/default/serviceaccounts/app")
    now = int(time.time())
    old = data_dir_issuer(secure.config.data_dir, ISSUER).sign({
        "aud": [ISSUER], "exp": now - 120, "iat": now - 900, "iss": ISSUER, "nbf": now - 900,
        "kubernetes.io": {"namespace": "default", "serviceaccount": {
            "name": "app", "uid": account["metadata"]["uid"]}},
        "sub": "system:serviceaccount:default:app"})
    _, review = _review(secure, {"token": old})
    assert review["status"] == {"user": {}, "error": "service account token has expired"}
    # a token with a space ends there (kube reads it from an Authorization header)
    _, review = _review(secure, {"token": "file-token trailing"})
    assert review["status"]["authenticated"] is True
    # kube's 400s
    for spec in ({}, {"token": ""}):
        status, body = _review(secure, spec)
        assert (status, body["reason"], body["message"]) == (
            400, "BadRequest", "token is required for TokenReview in authentication")


def test_token_review_hostile_input_is_bounded(secure: ServerThread) -> None:
    for token in ("x" * 200_000, "a.b.c" * 40_000, "." * 100_000,
                  "eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMu"
                  "Y2x1c3Rlci5sb2NhbCJ9.", "\u00e9\u0000\ufffd"):
        started = time.monotonic()
        status, review = _review(secure, {"token": token})
        assert status == 201, review
        assert review["status"] == {"user": {}, "error": "invalid bearer token"}
        assert time.monotonic() - started < 5
    status, body = _review(secure, {"token": 5})
    assert (status, body["message"]) == (
        400, 'TokenReview in version "v1" cannot be handled as a TokenReview: json: cannot '
        "unmarshal number into Go struct field TokenReviewSpec.spec.token of type string")
    # nothing was stored, and the kind has no list, get or watch
    reply = https(secure, "GET", REVIEWS, cert=_admin_cert(secure))
    assert reply.status == 405
    assert json.loads(reply.body)["reason"] == "MethodNotAllowed"
    reply = https(secure, "GET", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                  cert=_admin_cert(secure))
    assert reply.status == 405


def _admin_cert(server: ServerThread) -> tuple[Path, Path]:
    pki = server.config.data_dir / "pki"
    return pki / "admin.crt", pki / "admin.key"


def test_discovery_lists_the_reviews(secure: ServerThread) -> None:
    doc = _admin(secure, "GET", "/apis/authentication.k8s.io/v1")
    assert doc["resources"] == [
        {"name": "selfsubjectreviews", "singularName": "selfsubjectreview", "namespaced": False,
         "kind": "SelfSubjectReview", "verbs": ["create"]},
        {"name": "tokenreviews", "singularName": "tokenreview", "namespaced": False,
         "kind": "TokenReview", "verbs": ["create"]}]
    groups = [g["name"] for g in _admin(secure, "GET", "/apis")["groups"]]
    assert groups.index("authentication.k8s.io") == groups.index("events.k8s.io") + 1


def test_secret_bound_token_dies_with_its_secret(secure: ServerThread) -> None:
    _admin(secure, "POST", "/api/v1/namespaces/default/serviceaccounts",
           {"metadata": {"name": "app"}})
    secret = _admin(secure, "POST", "/api/v1/namespaces/default/secrets",
                    {"metadata": {"name": "s"}})
    token = _token(secure, "app", {"boundObjectRef": {"kind": "Secret", "apiVersion": "v1",
                                                      "name": "s"}})
    _, payload, _ = token.split(".")
    import base64

    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["kubernetes.io"]["secret"] == {"name": "s", "uid": secret["metadata"]["uid"]}
    assert https(secure, "GET", "/api/v1/namespaces/default/pods", token=token).status == 200
    _admin(secure, "DELETE", "/api/v1/namespaces/default/secrets/s")
    assert https(secure, "GET", "/api/v1/namespaces/default/pods", token=token).status == 401
    _, review = _review(secure, {"token": token})
    assert review["status"]["error"] == "service account token has been invalidated"


def test_node_bound_token_and_a_pods_node(secure: ServerThread) -> None:
    _admin(secure, "POST", "/api/v1/namespaces/default/serviceaccounts",
           {"metadata": {"name": "app"}})
    node = _admin(secure, "POST", "/api/v1/nodes", {"metadata": {"name": "n1"}})
    token = _token(secure, "app", {"boundObjectRef": {"kind": "Node", "apiVersion": "v1",
                                                      "name": "n1"}})
    _, review = _review(secure, {"token": token})
    extra = review["status"]["user"]["extra"]
    assert extra["authentication.kubernetes.io/node-name"] == ["n1"]
    assert extra["authentication.kubernetes.io/node-uid"] == [node["metadata"]["uid"]]
    pod = _admin(secure, "POST", "/api/v1/namespaces/default/pods", {
        "metadata": {"name": "web"}, "spec": {"serviceAccountName": "app", "nodeName": "n1",
                                              "containers": [{"name": "c", "image": "x"}]}})
    pod_token = _token(secure, "app", {"boundObjectRef": {
        "kind": "Pod", "apiVersion": "v1", "name": "web", "uid": pod["metadata"]["uid"]}})
    _, review = _review(secure, {"token": pod_token})
    extra = review["status"]["user"]["extra"]
    assert extra["authentication.kubernetes.io/pod-name"] == ["web"]
    assert extra["authentication.kubernetes.io/node-name"] == ["n1"]
    _admin(secure, "DELETE", "/api/v1/nodes/n1")
    _, review = _review(secure, {"token": token})
    assert review["status"]["error"] == "service account token has been invalidated"
    _, review = _review(secure, {"token": pod_token})  # a pod's node is named, not checked
    assert review["status"]["authenticated"] is True
    bad = https(secure, "POST", "/api/v1/namespaces/default/serviceaccounts/app/token",
                cert=_admin_cert(secure), body={"spec": {"boundObjectRef": {
                    "kind": "ConfigMap", "apiVersion": "v1", "name": "x"}}})
    assert (bad.status, json.loads(bad.body)["message"]) == (
        400, "cannot bind token to object of type /v1, Kind=ConfigMap")


def test_kubernetes_package_reviews(secure: ServerThread) -> None:
    api_client = k8s_config.new_client_from_config(str(secure.kubeconfig))
    core = k8s.CoreV1Api(api_client)
    core.create_namespaced_service_account("default", k8s.V1ServiceAccount(
        metadata=k8s.V1ObjectMeta(name="py")))
    token = core.create_namespaced_service_account_token(
        "py", "default", k8s.AuthenticationV1TokenRequest(
            spec=k8s.V1TokenRequestSpec(audiences=[]))).status.token
    authn = k8s.AuthenticationV1Api(api_client)
    review = authn.create_token_review(k8s.V1TokenReview(spec=k8s.V1TokenReviewSpec(
        token=token)))
    assert review.status.authenticated
    assert review.status.user.username == "system:serviceaccount:default:py"
    me = authn.create_self_subject_review(k8s.V1SelfSubjectReview())
    assert me.status.user_info.username == "kubewire-admin"
    assert "system:masters" in me.status.user_info.groups


def test_protobuf_bodies(secure: ServerThread) -> None:
    """Typed clients send the reviews as protobuf; the answer is JSON, as they accept."""
    import http.client
    import ssl

    from tests.unit.test_protobuf import encode_body

    def post(path: str, obj: dict[str, Any]) -> tuple[int, Any]:
        ctx = ssl.create_default_context(cafile=str(secure.config.data_dir / "pki/ca.crt"))
        ctx.load_cert_chain(*_admin_cert(secure))
        conn = http.client.HTTPSConnection("127.0.0.1", secure.port, context=ctx, timeout=10)
        try:
            conn.request("POST", path, body=encode_body(obj), headers={
                "Content-Type": "application/vnd.kubernetes.protobuf",
                "Accept": "application/vnd.kubernetes.protobuf, application/json"})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        finally:
            conn.close()

    status, review = post(REVIEWS, {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "metadata": {"name": "pb"},
        "spec": {"token": "file-token", "audiences": [AUDIENCE]}})
    assert status == 201
    assert review["spec"] == {"token": "file-token", "audiences": [AUDIENCE]}
    assert review["status"]["user"]["username"] == "alice"
    assert review["status"]["audiences"] == [AUDIENCE]
    status, me = post("/apis/authentication.k8s.io/v1/selfsubjectreviews", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
        "metadata": {}})
    assert status == 201
    assert me["status"]["userInfo"]["username"] == "kubewire-admin"


def _get(server: ServerThread, path: str, token: str | None = None) -> Any:
    cert = None if token else _admin_cert(server)
    return https(server, "GET", path, cert=cert, token=token)


def test_openid_discovery_verifies_the_servers_tokens(secure: ServerThread) -> None:
    import ssl

    import jwt

    _admin(secure, "POST", "/api/v1/namespaces/default/serviceaccounts",
           {"metadata": {"name": "app"}})
    token = _token(secure, "app", {"audiences": ["vault"]})
    reply = _get(secure, "/.well-known/openid-configuration")
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["cache-control"] == "public, max-age=3600"
    jwks_uri = f"https://127.0.0.1:{secure.port}/openid/v1/jwks"
    assert reply.body == json.dumps({
        "issuer": ISSUER, "jwks_uri": jwks_uri, "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"]}, separators=(",", ":")).encode()
    keys = _get(secure, "/openid/v1/jwks")
    assert keys.headers["content-type"] == "application/jwk-set+json"
    assert keys.headers["cache-control"] == "public, max-age=3600"
    (key,) = json.loads(keys.body)["keys"]
    assert list(key) == ["use", "kty", "kid", "alg", "n", "e"]
    assert (key["use"], key["kty"], key["alg"], key["e"]) == ("sig", "RSA", "RS256", "AQAB")
    # a relying party's check: the JWKS at jwks_uri verifies the token
    ctx = ssl.create_default_context(cafile=str(secure.config.data_dir / "pki/ca.crt"))
    ctx.load_cert_chain(*_admin_cert(secure))
    signing = jwt.PyJWKClient(jwks_uri, ssl_context=ctx).get_signing_key_from_jwt(token)
    claims = jwt.decode(token, signing.key, algorithms=["RS256"], audience="vault",
                        issuer=ISSUER)
    assert claims["sub"] == "system:serviceaccount:default:app"
    # a service account's own token may read them (AlwaysAllow here); other methods are 405
    assert _get(secure, "/openid/v1/jwks",
                token=_token(secure, "app", {})).status == 200
    pki = secure.config.data_dir / "pki"
    post = https(secure, "POST", "/openid/v1/jwks", cert=(pki / "admin.crt", pki / "admin.key"),
                 body={})
    assert post.status == 405


def test_an_http_issuer_has_no_discovery(make_server: Callable[..., ServerThread]) -> None:
    server = make_server(insecure_http=False, service_account_issuer="kubernetes/sa")
    assert _get(server, "/.well-known/openid-configuration").status == 404
    assert _get(server, "/openid/v1/jwks").status == 404


def test_key_flags(make_server: Callable[..., ServerThread], tmp_path: Path) -> None:
    """An ECDSA signing key, an extra verifying key, a second issuer and a JWKS URI."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    from kubewire.server.access.service_accounts import TokenIssuer

    signing = ec.generate_private_key(ec.SECP256R1())
    signing_file = tmp_path / "signing.pem"
    signing_file.write_bytes(signing.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    old = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_file = tmp_path / "keys.pem"
    public_file.write_bytes(
        signing.public_key().public_bytes(serialization.Encoding.PEM,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
        + old.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo))
    server = make_server(insecure_http=False, service_account_issuer="https://new.test",
                         service_account_other_issuers=("https://old.test",),
                         service_account_signing_key_file=signing_file,
                         service_account_key_files=(public_file,),
                         service_account_jwks_uri="https://keys.test/jwks")
    _admin(server, "POST", "/api/v1/namespaces/default/serviceaccounts",
           {"metadata": {"name": "app"}})
    token = _token(server, "app", {})
    head = json.loads(base64_part(token.split(".")[0]))
    assert head["alg"] == "ES256"
    assert _get(server, "/api/v1/namespaces/default/pods", token=token).status == 200
    # a token the old key signed for the old issuer is still accepted
    account = _admin(server, "GET", "/api/v1/namespaces/default/serviceaccounts/app")
    now = int(time.time())
    legacy = TokenIssuer(old, "https://old.test").sign({
        "aud": ["https://new.test"], "exp": now + 600, "iat": now, "iss": "https://old.test",
        "nbf": now, "kubernetes.io": {"namespace": "default", "serviceaccount": {
            "name": "app", "uid": account["metadata"]["uid"]}},
        "sub": "system:serviceaccount:default:app"})
    assert _get(server, "/api/v1/namespaces/default/pods", token=legacy).status == 200
    config = json.loads(_get(server, "/.well-known/openid-configuration").body)
    assert config["issuer"] == "https://new.test"
    assert config["jwks_uri"] == "https://keys.test/jwks"
    assert config["id_token_signing_alg_values_supported"] == ["ES256", "RS256"]
    keys = json.loads(_get(server, "/openid/v1/jwks").body)["keys"]
    assert [(k["kty"], k.get("crv")) for k in keys] == [("EC", "P-256"), ("RSA", None)]
    assert list(keys[0]) == ["use", "kty", "kid", "crv", "alg", "x", "y"]


def base64_part(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@pytest.mark.parametrize(("flag", "content", "message"), [
    ("--service-account-key-file", None,
     "error reading public key file {path}: open {path}: no such file or directory"),
    ("--service-account-key-file", "not a key",
     "failed to parse key file {path}: data does not contain any valid RSA or ECDSA public "
     "keys"),
    ("--service-account-signing-key-file", "-----BEGIN PUBLIC KEY-----\nAAAA\n"
     "-----END PUBLIC KEY-----\n",
     "failed to parse service-account-issuer-key-file: {path}: data does not contain a valid "
     "RSA or ECDSA private key"),
])
def test_bad_key_files_stop_the_start(tmp_path: Path, flag: str, content: str | None,
                                      message: str) -> None:
    import subprocess
    import sys

    path = tmp_path / "key.pem"
    if content is not None:
        path.write_text(content)
    done = subprocess.run(
        [sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY,
         "--data-dir", str(tmp_path / "d"),
         "--port", "0", flag, str(path)], capture_output=True, text=True, timeout=60,
        check=False)
    assert done.returncode != 0
    assert message.format(path=path) in done.stderr.splitlines()[-1], done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--service-account-issuer", "https://a", "--service-account-issuer", "https://a"],
     'service-account-issuer "https://a" is already specified'),
    (["--service-account-max-token-expiration", "30m"],
     "the service-account-max-token-expiration must be between 1 hour and 2^32 seconds"),
    (["--service-account-jwks-uri", "http://keys.test/jwks"],
     "service-account-jwks-uri requires https scheme, parsed as: http://keys.test/jwks"),
])
def test_bad_flags_are_refused(tmp_path: Path, args: list[str], message: str) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY,
         "--data-dir", str(tmp_path / "d"),
         "--port", "0", *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].endswith(message), done.stderr


def test_max_token_expiration_shortens_requests(make_server: Callable[..., ServerThread]) -> None:
    server = make_server(insecure_http=False, service_account_max_token_expiration_s=7200)
    _admin(server, "POST", "/api/v1/namespaces/default/serviceaccounts",
           {"metadata": {"name": "app"}})
    reply = https(server, "POST", "/api/v1/namespaces/default/serviceaccounts/app/token",
                  cert=_admin_cert(server), body={"spec": {"expirationSeconds": 86400}})
    assert reply.status == 201
    assert reply.headers["warning"] == (
        '299 - "requested expiration of 86400 seconds shortened to 7200 seconds"')
    answer = json.loads(reply.body)
    assert answer["spec"]["expirationSeconds"] == 7200
    claims = json.loads(base64_part(answer["status"]["token"].split(".")[1]))
    assert claims["exp"] - claims["iat"] == 7200


@needs_kubectl
def test_kubectl_secret_bound_token(secure: ServerThread) -> None:
    kubectl.ok(secure, "create", "sa", "robot")
    kubectl.ok(secure, "create", "secret", "generic", "anchor")
    token = kubectl.ok(secure, "create", "token", "robot", "--bound-object-kind", "Secret",
                       "--bound-object-name", "anchor").strip()
    claims = json.loads(base64_part(token.split(".")[1]))
    assert claims["kubernetes.io"]["secret"]["name"] == "anchor"
    robot = _kubeconfig(secure, token)
    who = yaml.safe_load(kubectl.ok(robot, "auth", "whoami", "-o", "yaml"))
    assert who["status"]["userInfo"]["username"] == "system:serviceaccount:default:robot"
    kubectl.ok(secure, "delete", "secret", "anchor")
    done = kubectl.run(robot, "auth", "whoami")
    assert done.returncode == 1
    assert "Unauthorized" in done.stderr


@needs_kubectl
def test_kubectl_node_bound_token(secure: ServerThread) -> None:
    kubectl.ok(secure, "create", "sa", "robot")
    kubectl.ok(secure, "apply", "-f", "-", stdin=json.dumps(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}))
    token = kubectl.ok(secure, "create", "token", "robot", "--bound-object-kind", "Node",
                       "--bound-object-name", "n1").strip()
    robot = _kubeconfig(secure, token)
    info = json.loads(kubectl.ok(robot, "auth", "whoami", "-o", "json"))["status"]["userInfo"]
    assert info["extra"]["authentication.kubernetes.io/node-name"] == ["n1"]
    kubectl.ok(secure, "delete", "node", "n1")
    assert kubectl.run(robot, "auth", "whoami").returncode == 1
