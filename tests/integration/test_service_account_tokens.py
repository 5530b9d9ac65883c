"""``serviceaccounts/token``: ``kubectl create token`` gets a signed JWT with kube's claims, and
the server accepts it as ``system:serviceaccount:<ns>:<name>`` until it expires or its service
account (or bound pod) is gone (``server/access/service_accounts.py``,
``server/writes/token_request.py``)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from kubewire.cli import build_parser, config_from_args
from kubewire.server.access.kubeconfig import Credentials, kubeconfig_text
from kubewire.server.access.service_accounts import TokenIssuer
from tests.api_only import API_ONLY
from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl
from tests.integration.test_access import https

ISSUER = "https://kubernetes.default.svc.cluster.local"
# Service accounts of namespace "default" may do anything in it; nothing else is granted but
# discovery to anyone authenticated.
POLICY = "\n".join(json.dumps({
    "apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
    for spec in [{"group": "system:serviceaccounts:default", "namespace": "default",
                  "resource": "*", "apiGroup": "*"},
                 {"group": "system:authenticated", "nonResourcePath": "*", "readonly": True}])


@pytest.fixture
def secure(make_server: Callable[..., ServerThread], tmp_path: Path) -> ServerThread:
    policy = tmp_path / "policy.jsonl"
    policy.write_text(POLICY + "\n")
    admin = {"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy",
             "spec": {"group": "system:masters", "namespace": "*", "resource": "*",
                      "apiGroup": "*", "nonResourcePath": "*"}}
    policy.write_text(POLICY + "\n" + json.dumps(admin) + "\n")
    return make_server(insecure_http=False, authorization_policy_file=policy)


def _part(text: str) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    return decoded


def _claims(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    head, payload, _ = token.split(".")
    return _part(head), _part(payload)


def _admin(server: ServerThread, method: str, path: str, body: Any = None) -> Any:
    pki = server.config.data_dir / "pki"
    reply = https(server, method, path, cert=(pki / "admin.crt", pki / "admin.key"), body=body)
    assert reply.status < 300, (reply.status, reply.body)
    return json.loads(reply.body) if reply.body else None


def _request_token(server: ServerThread, name: str, spec: dict[str, Any]) -> Any:
    pki = server.config.data_dir / "pki"
    return https(server, "POST", f"/api/v1/namespaces/default/serviceaccounts/{name}/token",
                 cert=(pki / "admin.crt", pki / "admin.key"),
                 body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                       "spec": spec})


def _token_kubeconfig(server: ServerThread, token: str) -> Path:
    path = server.config.data_dir.parent / "sa.kubeconfig"
    ca = (server.config.data_dir / "pki" / "ca.crt").read_bytes()
    path.write_text(kubeconfig_text(server.url, Credentials(user="sa", token=token), ca_cert=ca))
    return path


@needs_kubectl
def test_kubectl_create_token_and_use_it(secure: ServerThread) -> None:
    kubectl.ok(secure, "create", "serviceaccount", "bot")
    token = kubectl.ok(secure, "create", "token", "bot", "--duration=20m",
                       "--audience", ISSUER, "--audience", "vault").strip()
    header, claims = _claims(token)
    account = _admin(secure, "GET", "/api/v1/namespaces/default/serviceaccounts/bot")
    key = serialization.load_pem_private_key(
        (secure.config.data_dir / "pki" / "sa.key").read_bytes(), password=None)
    assert header == {"alg": "RS256", "kid": TokenIssuer(key, ISSUER).key_id}  # type: ignore[arg-type]
    assert claims["iss"] == ISSUER
    assert claims["aud"] == [ISSUER, "vault"]
    assert claims["sub"] == "system:serviceaccount:default:bot"
    assert claims["exp"] - claims["iat"] == 1200 and claims["nbf"] == claims["iat"]
    assert abs(claims["iat"] - time.time()) < 60
    assert claims["kubernetes.io"] == {
        "namespace": "default",
        "serviceaccount": {"name": "bot", "uid": account["metadata"]["uid"]}}
    as_bot = _token_kubeconfig(secure, token)
    done = kubectl.run(as_bot, "get", "pods")
    assert (done.returncode, done.stderr) == (0, "No resources found in default namespace.\n")
    done = kubectl.run(as_bot, "get", "pods", "-n", "kube-system")
    assert done.returncode == 1
    assert ('User "system:serviceaccount:default:bot" cannot list resource "pods" in API group '
            '"" in the namespace "kube-system"') in done.stderr
    # Deleted: the token stops working at once.
    kubectl.ok(secure, "delete", "serviceaccount", "bot")
    done = kubectl.run(as_bot, "get", "pods")
    assert "error: You must be logged in to the server (Unauthorized)" in done.stderr
    # Made again under the same name: a new uid, still refused.
    kubectl.ok(secure, "create", "serviceaccount", "bot")
    assert kubectl.run(as_bot, "get", "pods").returncode == 1


def test_token_request_answer_defaults_and_errors(secure: ServerThread) -> None:
    _admin(secure, "POST", "/api/v1/namespaces/default/serviceaccounts",
           {"metadata": {"name": "app"}})
    reply = _request_token(secure, "app", {})
    assert reply.status == 201
    answer = json.loads(reply.body)
    assert (answer["kind"], answer["apiVersion"]) == ("TokenRequest", "authentication.k8s.io/v1")
    assert answer["metadata"]["name"] == "app"
    assert answer["spec"] == {"audiences": [ISSUER], "expirationSeconds": 3600,
                              "boundObjectRef": None}
    _, claims = _claims(answer["status"]["token"])
    assert claims["exp"] - claims["iat"] == 3600
    assert answer["status"]["expirationTimestamp"].endswith("Z")
    short = _request_token(secure, "app", {"expirationSeconds": 599})
    assert short.status == 422
    assert json.loads(short.body)["message"] == (
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid '
        "value: 599: may not specify a duration less than 10 minutes")
    missing = _request_token(secure, "ghost", {})
    assert (missing.status, json.loads(missing.body)["message"]) == (
        404, 'serviceaccounts "ghost" not found')
    # a token only for another audience does not authenticate to this server
    other = json.loads(_request_token(secure, "app", {"audiences": ["vault"]}).body)
    reply = https(secure, "GET", "/api/v1/namespaces/default/pods",
                  token=other["status"]["token"])
    assert reply.status == 401
    good = json.loads(_request_token(secure, "app", {}).body)["status"]["token"]
    assert https(secure, "GET", "/api/v1/namespaces/default/pods", token=good).status == 200
    head, _, signature = good.split(".")
    forged = json.dumps({**_claims(good)[1], "sub": "system:admin"}).encode()
    forged_token = f"{head}.{base64.urlsafe_b64encode(forged).rstrip(b'=').decode()}.{signature}"
    assert https(secure, "GET", "/api/v1/namespaces/default/pods",
                 token=forged_token).status == 401


def test_pod_bound_token_names_the_pod_and_dies_with_it(secure: ServerThread) -> None:
    _admin(secure, "POST", "/api/v1/namespaces/default/serviceaccounts",
           {"metadata": {"name": "app"}})
    pod = _admin(secure, "POST", "/api/v1/namespaces/default/pods",
                 {"metadata": {"name": "web"},
                  "spec": {"serviceAccountName": "app",
                           "containers": [{"name": "c", "image": "busybox"}]}})
    ref = {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": pod["metadata"]["uid"]}
    answer = json.loads(_request_token(secure, "app", {"boundObjectRef": ref}).body)
    _, claims = _claims(answer["status"]["token"])
    assert claims["kubernetes.io"]["pod"] == {"name": "web", "uid": pod["metadata"]["uid"]}
    token = answer["status"]["token"]
    assert https(secure, "GET", "/api/v1/namespaces/default/pods", token=token).status == 200
    kubelet_like = json.loads(_request_token(
        secure, "app", {"boundObjectRef": ref, "expirationSeconds": 3607}).body)
    _, extended = _claims(kubelet_like["status"]["token"])
    assert extended["exp"] - extended["iat"] == 365 * 24 * 3600
    assert extended["kubernetes.io"]["warnafter"] - extended["iat"] == 3607
    stale = _request_token(secure, "app", {"boundObjectRef": {**ref, "uid": "other"}})
    assert stale.status == 409
    _admin(secure, "POST", "/api/v1/namespaces/default/serviceaccounts",
           {"metadata": {"name": "other"}})
    wrong = _request_token(secure, "other", {"boundObjectRef": ref})
    assert (wrong.status, json.loads(wrong.body)["message"]) == (
        400, 'cannot bind token for serviceaccount "other" to pod running with different '
        "serviceaccount name.")
    _admin(secure, "DELETE", "/api/v1/namespaces/default/pods/web?gracePeriodSeconds=0")
    assert https(secure, "GET", "/api/v1/namespaces/default/pods", token=token).status == 401


def test_expired_tokens_are_refused(secure: ServerThread) -> None:
    account = _admin(secure, "POST", "/api/v1/namespaces/default/serviceaccounts",
                     {"metadata": {"name": "old"}})
    assert not (secure.config.data_dir / "pki" / "sa.key").exists()  # made on first use
    assert _request_token(secure, "old", {}).status == 201
    key = serialization.load_pem_private_key(
        (secure.config.data_dir / "pki" / "sa.key").read_bytes(), password=None)
    issuer = TokenIssuer(key, ISSUER)  # type: ignore[arg-type]
    now = int(time.time())
    claims = {"aud": [ISSUER], "iss": ISSUER, "sub": "system:serviceaccount:default:old",
              "kubernetes.io": {"namespace": "default",
                                "serviceaccount": {"name": "old",
                                                   "uid": account["metadata"]["uid"]}}}
    fresh = issuer.sign({**claims, "iat": now, "nbf": now, "exp": now + 600})
    assert https(secure, "GET", "/api/v1/namespaces/default/pods", token=fresh).status == 200
    expired = issuer.sign({**claims, "iat": now - 900, "nbf": now - 900, "exp": now - 120})
    assert https(secure, "GET", "/api/v1/namespaces/default/pods", token=expired).status == 401


def test_kubernetes_package_requests_a_token(secure: ServerThread) -> None:
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(secure.kubeconfig)))
    api.create_namespaced_service_account("default", k8s.V1ServiceAccount(
        metadata=k8s.V1ObjectMeta(name="py")))
    answer = api.create_namespaced_service_account_token(
        "py", "default", k8s.AuthenticationV1TokenRequest(
            spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=900)))
    assert answer.spec.expiration_seconds == 900
    assert _claims(answer.status.token)[1]["sub"] == "system:serviceaccount:default:py"


def test_the_issuer_flag_names_the_tokens_issuer(make_server: Callable[..., ServerThread],
                                                 tmp_path: Path) -> None:
    args = build_parser().parse_args(["serve", *API_ONLY, "--data-dir", str(tmp_path / "d"),
                                      "--service-account-issuer", "https://issuer.test"])
    config = config_from_args(args)
    assert config.service_account_issuer == "https://issuer.test"
    server = make_server(insecure_http=False, service_account_issuer="https://issuer.test")
    _admin(server, "POST", "/api/v1/namespaces/default/serviceaccounts",
           {"metadata": {"name": "app"}})
    answer = json.loads(_request_token(server, "app", {}).body)
    _, claims = _claims(answer["status"]["token"])
    assert (claims["iss"], claims["aud"]) == ("https://issuer.test", ["https://issuer.test"])
    reply = https(server, "GET", "/api/v1/namespaces/default/pods",
                  token=answer["status"]["token"])
    assert reply.status == 200
