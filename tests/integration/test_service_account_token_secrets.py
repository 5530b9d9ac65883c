"""The serviceaccount-token controller and legacy tokens, driven by kubectl as on a cluster:
a ``kubernetes.io/service-account-token`` Secret is filled with ``token``, ``ca.crt`` and
``namespace``; the token authenticates as the account (``kubectl auth whoami``) while the
Secret holds it; a Secret for no account is deleted, and the account's deletion deletes its
Secrets; the controller switched off leaves Secrets alone."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration import kubectl as cli
from tests.integration.harness import ServerThread
from tests.integration.test_access_control_story import refused, token_kubeconfig

SECRET = """
apiVersion: v1
kind: Secret
metadata:
  name: {name}
  annotations: {{kubernetes.io/service-account.name: {account}}}
type: kubernetes.io/service-account-token
"""


def _until(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _secret(server: ServerThread, name: str) -> dict[str, Any] | None:
    done = cli.run(server, "get", "secret", name, "-o", "json")
    return json.loads(done.stdout) if done.returncode == 0 else None


@pytest.fixture
def tls(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server(insecure_http=False, authorization_mode="RBAC")


def test_token_secret_is_filled_and_authenticates(tls: ServerThread) -> None:
    cli.ok(tls, "create", "serviceaccount", "robot")
    cli.ok(tls, "apply", "-f", "-", stdin=SECRET.format(name="robot-token", account="robot"))

    def filled() -> dict[str, Any] | None:
        found = _secret(tls, "robot-token")
        return found if found and "token" in (found.get("data") or {}) else None

    secret = _until(filled, "the token")
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert set(data) == {"ca.crt", "namespace", "token"}
    assert data["namespace"] == "default"
    assert data["ca.crt"] == (tls.config.data_dir / "pki/ca.crt").read_text()
    uid = json.loads(cli.ok(tls, "get", "sa", "robot", "-o", "json"))["metadata"]["uid"]
    assert secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"] == uid
    # kube's legacy claims, unexpiring, no audience
    payload = data["token"].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims == {
        "iss": "kubernetes/serviceaccount",
        "kubernetes.io/serviceaccount/namespace": "default",
        "kubernetes.io/serviceaccount/secret.name": "robot-token",
        "kubernetes.io/serviceaccount/service-account.name": "robot",
        "kubernetes.io/serviceaccount/service-account.uid": uid,
        "sub": "system:serviceaccount:default:robot"}
    robot = token_kubeconfig(tls, "robot", data["token"])
    user = json.loads(cli.ok(robot, "auth", "whoami", "-o", "json"))["status"]["userInfo"]
    assert user["username"] == "system:serviceaccount:default:robot"
    assert user["uid"] == uid
    assert user["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default",
                              "system:authenticated"]
    # the Secret gone, the token is dead
    cli.ok(tls, "delete", "secret", "robot-token")
    assert refused(robot, "auth", "whoami") == (
        "error: You must be logged in to the server (Unauthorized)")


def test_secrets_follow_their_account(tls: ServerThread) -> None:
    cli.ok(tls, "apply", "-f", "-", stdin=SECRET.format(name="orphan", account="nobody"))
    _until(lambda: _secret(tls, "orphan") is None, "the orphan deleted")
    cli.ok(tls, "create", "serviceaccount", "bot")
    cli.ok(tls, "apply", "-f", "-", stdin=SECRET.format(name="bot-token", account="bot"))
    _until(lambda: "token" in ((_secret(tls, "bot-token") or {}).get("data") or {}),
           "filled")
    cli.ok(tls, "delete", "serviceaccount", "bot")
    _until(lambda: _secret(tls, "bot-token") is None, "the account's token Secret deleted")


def test_switched_off_it_leaves_secrets_alone(make_server: Callable[..., ServerThread]
                                              ) -> None:
    server = make_server(controllers=("*", "-serviceaccount-token"))
    cli.ok(server, "create", "serviceaccount", "robot")
    cli.ok(server, "apply", "-f", "-", stdin=SECRET.format(name="robot-token", account="robot"))
    cli.ok(server, "apply", "-f", "-", stdin=SECRET.format(name="orphan", account="nobody"))
    time.sleep(1.0)
    assert not (_secret(server, "robot-token") or {}).get("data")
    assert _secret(server, "orphan") is not None
