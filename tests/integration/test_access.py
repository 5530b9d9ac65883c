"""HTTPS by default, client certificates and tokens, ABAC authorization — with real clients.

The server makes its CA, serving and admin certificates on first start and writes a kubeconfig
that kubectl and the ``kubernetes`` package use as-is; ``kubewire user`` issues more users.
Every refusal is kube-apiserver's Status: 401 ``Unauthorized``, 403 with ``forbiddenMessage``.
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from kubewire.server.access import pki
from kubewire.server.access.users import UserRequest, user_kubeconfig
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl, run
from tests.integration.wire import Reply

POLICY = "\n".join(json.dumps({
    "apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
    for spec in [
        {"user": "bob", "namespace": "a", "resource": "*", "apiGroup": "*"},
        {"group": "viewers", "namespace": "*", "resource": "pods", "apiGroup": "",
         "readonly": True},
        {"group": "system:authenticated", "nonResourcePath": "*", "readonly": True},
    ])
UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def forbidden(message: str, details: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "Forbidden", "details": details, "code": 403}


@pytest.fixture
def secure(make_server: Callable[..., ServerThread], tmp_path: Path) -> ServerThread:
    policy = tmp_path / "policy.jsonl"
    policy.write_text(POLICY + "\n")
    server = make_server(insecure_http=False, authorization_policy_file=policy)
    assert server.url.startswith("https://")
    return server


def issue(server: ServerThread, name: str, *groups: str, token: bool = False) -> Path:
    data_dir = server.config.data_dir
    request = UserRequest(name, groups, token_file=data_dir / "tokens.csv" if token else None)
    path = data_dir.parent / f"{name}.kubeconfig"
    path.write_text(user_kubeconfig(data_dir, request))
    return path


def https(server: ServerThread, method: str, path: str, *, cert: tuple[Path, Path] | None = None,
          token: str | None = None, body: Any = None, ca: Path | None = None,
          headers: Iterable[tuple[str, str]] = ()) -> Reply:
    """One request on a fresh TLS connection; ``headers`` may repeat a name, as Go sends them."""
    ctx = ssl.create_default_context(cafile=str(ca or server.config.data_dir / "pki/ca.crt"))
    if cert:
        ctx.load_cert_chain(*cert)
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
    data = json.dumps(body).encode() if body is not None else b""
    try:
        conn.putrequest(method, path)
        for name, value in headers:
            conn.putheader(name, value)
        if token:
            conn.putheader("Authorization", f"Bearer {token}")
        if data or method in ("POST", "PUT", "PATCH"):
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data or None)
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()





def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def ensure_namespaces(server: ServerThread, *names: str) -> None:
    pair = (server.config.data_dir / "pki/admin.crt", server.config.data_dir / "pki/admin.key")
    for name in names:
        reply = https(server, "POST", "/api/v1/namespaces", cert=pair,
                      body={"metadata": {"name": name}})
        assert reply.status == 201, reply.body


# --- authentication ------------------------------------------------------------------------------

@needs_kubectl
def test_kubectl_uses_the_admin_kubeconfig_over_tls(secure: ServerThread) -> None:
    done = run(secure.kubeconfig, "create", "namespace", "team")
    assert done.returncode == 0, done.stderr
    done = run(secure.kubeconfig, "get", "namespaces", "-o", "name")
    assert "namespace/team" in done.stdout.split()


def test_kubernetes_client_with_certificate_and_with_token(secure: ServerThread) -> None:
    ensure_namespaces(secure, "a")
    for kubeconfig in (secure.kubeconfig, issue(secure, "bob", token=True)):
        api = kubernetes.config.new_client_from_config(str(kubeconfig))
        try:
            core = kubernetes.client.CoreV1Api(api)
            created = core.create_namespaced_pod("a", pod(f"p-{kubeconfig.stem}"))
            assert created.metadata.namespace == "a"
            names = [p.metadata.name for p in core.list_namespaced_pod("a").items]
            assert f"p-{kubeconfig.stem}" in names
        finally:
            api.close()


def test_requests_without_valid_credentials_get_401(secure: ServerThread, tmp_path: Path) -> None:
    assert json.loads(https(secure, "GET", "/api/v1/pods").body) == UNAUTHORIZED
    assert json.loads(https(secure, "GET", "/api", token="wrong").body) == UNAUTHORIZED
    stranger = pki.issue_client(pki.make_ca("elsewhere"), "mallory", ["system:masters"])
    (tmp_path / "m.crt").write_bytes(stranger.cert)
    (tmp_path / "m.key").write_bytes(stranger.key)
    # As kube's: the handshake succeeds and the certificate names nobody.
    reply = https(secure, "GET", "/api/v1/pods", cert=(tmp_path / "m.crt", tmp_path / "m.key"))
    assert json.loads(reply.body) == UNAUTHORIZED
    # Health and version stay open, as kube's public-info paths.
    for path in ("/healthz", "/livez", "/readyz", "/version"):
        assert https(secure, "GET", path).status == 200, path
    # The server is still healthy and serving the admin after the refusals.
    admin = (secure.config.data_dir / "pki/admin.crt", secure.config.data_dir / "pki/admin.key")
    assert https(secure, "GET", "/api/v1/namespaces", cert=admin).status == 200


def test_an_issued_certificate_names_user_and_groups(secure: ServerThread) -> None:
    ensure_namespaces(secure, "a", "b")
    viewer = issue(secure, "vic", "viewers")
    api = kubernetes.config.new_client_from_config(str(viewer))
    try:
        core = kubernetes.client.CoreV1Api(api)
        assert core.list_pod_for_all_namespaces().items == []
        with pytest.raises(kubernetes.client.ApiException) as info:
            core.create_namespaced_pod("a", pod("x"))
        assert info.value.status == 403
        assert json.loads(info.value.body) == forbidden(
            'pods is forbidden: User "vic" cannot create resource "pods" in API group "" in '
            'the namespace "a": No policy matched.', {"kind": "pods"})
    finally:
        api.close()


# --- authorization -------------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path", "verb", "resource", "group", "name", "namespace"), [
    ("GET", "/api/v1/namespaces/b/pods", "list", "pods", "", "", "b"),
    ("GET", "/api/v1/namespaces/b/pods?watch=true", "watch", "pods", "", "", "b"),
    ("GET", "/api/v1/watch/namespaces/b/pods", "watch", "pods", "", "", "b"),
    ("GET", "/api/v1/pods?watch=1", "watch", "pods", "", "", ""),
    ("GET", "/api/v1/namespaces/b/pods/x", "get", "pods", "", "x", "b"),
    ("POST", "/api/v1/namespaces/b/pods", "create", "pods", "", "", "b"),
    ("PUT", "/api/v1/namespaces/b/pods/x", "update", "pods", "", "x", "b"),
    ("PATCH", "/api/v1/namespaces/b/pods/x/status", "patch", "pods/status", "", "x", "b"),
    ("DELETE", "/api/v1/namespaces/b/pods/x", "delete", "pods", "", "x", "b"),
    ("DELETE", "/api/v1/namespaces/b/pods", "deletecollection", "pods", "", "", "b"),
    ("GET", "/apis/apps/v1/deployments", "list", "deployments", "apps", "", ""),
    ("GET", "/api/v1/nodes", "list", "nodes", "", "", ""),
])
def test_a_user_limited_to_one_namespace_gets_403_elsewhere(
        secure: ServerThread, method: str, path: str, verb: str, resource: str, group: str,
        name: str, namespace: str) -> None:
    ensure_namespaces(secure, "a", "b")
    token = _token_of(issue(secure, "bob", token=True))
    reply = https(secure, method, path, token=token, body={} if method != "GET" else None)
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    plural = resource.split("/")[0]
    qualified = f"{plural}.{group}" if group else plural
    subject = f'{qualified} "{name}"' if name else qualified
    details: dict[str, Any] = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = plural
    assert reply.status == 403, reply.body
    assert json.loads(reply.body) == forbidden(
        f'{subject} is forbidden: User "bob" cannot {verb} resource "{resource}" in API group '
        f'"{group}" {where}: No policy matched.', details)


def test_the_granted_namespace_works_for_every_verb(secure: ServerThread) -> None:
    ensure_namespaces(secure, "a")
    token = _token_of(issue(secure, "bob", token=True))
    assert https(secure, "POST", "/api/v1/namespaces/a/pods", token=token,
                 body=pod("mine")).status == 201
    assert https(secure, "GET", "/api/v1/namespaces/a/pods/mine", token=token).status == 200
    assert https(secure, "GET", "/api/v1/namespaces/a/pods?watch=true&timeoutSeconds=1",
                 token=token).status == 200
    assert https(secure, "DELETE", "/api/v1/namespaces/a/pods/mine", token=token).status == 200
    # Non-resource paths follow their own policy line (read-only for everyone signed in).
    assert https(secure, "GET", "/apis", token=token).status == 200


@needs_kubectl
def test_kubectl_shows_kubes_forbidden_error(secure: ServerThread) -> None:
    ensure_namespaces(secure, "a", "b")
    bob = issue(secure, "bob", token=True)
    done = run(bob, "get", "pods", "-n", "a")
    assert done.returncode == 0, done.stderr
    done = run(bob, "get", "pods", "-n", "b")
    assert done.returncode != 0
    assert ('Error from server (Forbidden): pods is forbidden: User "bob" cannot list resource '
            '"pods" in API group "" in the namespace "b": No policy matched.') in done.stderr


def test_kubewire_user_command_prints_a_working_kubeconfig(secure: ServerThread) -> None:
    done = subprocess.run([sys.executable, "-m", "kubewire.cli", "user", "carol", "--group",
                           "system:masters", "--data-dir", str(secure.config.data_dir)],
                          capture_output=True, text=True, timeout=60, check=True)
    path = secure.config.data_dir.parent / "carol.kubeconfig"
    path.write_text(done.stdout)
    api = kubernetes.config.new_client_from_config(str(path))
    try:
        nodes = kubernetes.client.CoreV1Api(api).list_node()
        assert nodes.items == []
    finally:
        api.close()


def _token_of(kubeconfig: Path) -> str:
    doc = yaml.safe_load(kubeconfig.read_text())
    return str(doc["users"][0]["user"]["token"])
