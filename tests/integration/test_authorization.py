"""``--authorization-mode`` with real clients: RBAC enforcing kube's answers, modes in order.

A user bound to ``view`` in one namespace lists, gets and watches there (kubectl, raw HTTP,
WebSocket) and gets kube-apiserver's exact 403 everywhere else: other namespaces, the cluster
scope (``-A``), secrets, subresources, non-resource paths; ``system:masters`` may do everything;
``edit`` cannot bind ``admin``. Modes combine as kube's union authorizer.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubewire.server.access.authn import UserInfo
from kubewire.server.access.authorizers import AuthorizationModeError
from kubewire.server.app import APIServer
from kubewire.server.context import ServerConfig
from tests.api_only import API_ONLY
from tests.integration.harness import ServerThread
from tests.integration.kubectl import background, needs_kubectl, run, stop
from tests.integration.test_access import ensure_namespaces, https, issue
from tests.integration.wire import wait_for

GROUP = "rbac.authorization.k8s.io"


def forbidden(message: str, details: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "Forbidden", "details": details, "code": 403}


def token_of(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"])


def admin_pair(server: ServerThread) -> tuple[Path, Path]:
    pki = server.config.data_dir / "pki"
    return pki / "admin.crt", pki / "admin.key"


def bind(server: ServerThread, name: str, namespace: str, role: str, user: str,
         kind: str = "ClusterRole") -> None:
    """A RoleBinding (``namespace``) or ClusterRoleBinding ("") made by the admin."""
    meta: dict[str, Any] = {"name": name}
    path = f"/apis/{GROUP}/v1/clusterrolebindings"
    if namespace:
        meta["namespace"] = namespace
        path = f"/apis/{GROUP}/v1/namespaces/{namespace}/rolebindings"
    body = {"apiVersion": f"{GROUP}/v1", "kind": "RoleBinding" if namespace else
            "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role},
            "subjects": [{"kind": "User", "name": user, "apiGroup": GROUP}]}
    reply = https(server, "POST", path, cert=admin_pair(server), body=body)
    assert reply.status == 201, reply.body


def make_rbac(make_server: Callable[..., ServerThread], mode: str) -> ServerThread:
    server = make_server(insecure_http=False, authorization_mode=mode)
    ensure_namespaces(server, "team-a", "team-b")
    bind(server, "alice-view", "team-a", "view", "alice")
    return server


@pytest.fixture
def rbac(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_rbac(make_server, "RBAC")


def status_of(server: ServerThread, method: str, path: str, token: str,
              body: Any = None) -> tuple[int, Any]:
    reply = https(server, method, path, token=token, body=body)
    return reply.status, json.loads(reply.body) if reply.body else None


@needs_kubectl
def test_view_in_one_namespace_with_kubectl(rbac: ServerThread) -> None:
    alice = issue(rbac, "alice", token=True)
    admin = rbac.kubeconfig
    done = run(admin, "run", "web", "-n", "team-a", "--image", "nginx")
    assert done.returncode == 0, done.stderr
    done = run(alice, "get", "pods", "-n", "team-a", "-o", "name")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pod/web"]
    done = run(alice, "get", "pod", "web", "-n", "team-a", "-o", "name")
    assert done.stdout.split() == ["pod/web"], done.stderr
    done = run(alice, "get", "pods", "-n", "team-b")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource '
        '"pods" in API group "" in the namespace "team-b"')
    done = run(alice, "get", "pods", "-A")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource '
        '"pods" in API group "" at the cluster scope')
    done = run(alice, "get", "secrets", "-n", "team-a")
    assert done.stderr.strip() == (
        'Error from server (Forbidden): secrets is forbidden: User "alice" cannot list '
        'resource "secrets" in API group "" in the namespace "team-a"')
    done = run(alice, "delete", "pod", "web", "-n", "team-a")
    assert done.stderr.strip() == (
        'Error from server (Forbidden): pods "web" is forbidden: User "alice" cannot delete '
        'resource "pods" in API group "" in the namespace "team-a"')
    # system:masters (the admin's certificate) may do everything, everywhere
    done = run(admin, "get", "pods", "-A", "-o", "name")
    assert done.returncode == 0 and done.stdout.split() == ["pod/web"], done.stderr


def pod_metric(server: ServerThread, name: str) -> int:
    text = https(server, "GET", "/metrics", cert=admin_pair(server)).body.decode()
    found = re.search(rf'^{name}\{{[^}}]*kind="Pod"[^}}]*\}} (\d+)', text, re.MULTILINE)
    return int(found.group(1)) if found else 0


@needs_kubectl
def test_kubectl_watch_in_the_namespace_bound(rbac: ServerThread) -> None:
    alice = issue(rbac, "alice", token=True)
    watcher = background(alice, "get", "pods", "-n", "team-a", "--watch", "-o", "name")
    try:
        wait_for(lambda: pod_metric(rbac, "apiserver_registered_watchers") == 1,
                 what="alice's watch to be registered")
        sent = pod_metric(rbac, "apiserver_watch_events_total")
        done = run(rbac.kubeconfig, "run", "late", "-n", "team-a", "--image", "nginx")
        assert done.returncode == 0, done.stderr
        wait_for(lambda: pod_metric(rbac, "apiserver_watch_events_total") > sent,
                 what="the pod's event to reach alice")
    finally:
        out, err = stop(watcher)
    assert "pod/late" in out.split(), (out, err)
    assert "Forbidden" not in err, err


def test_kubes_status_for_each_kind_of_request(rbac: ServerThread) -> None:
    token = token_of(issue(rbac, "alice", token=True))
    assert status_of(rbac, "GET", "/api/v1/namespaces/team-a/pods", token)[0] == 200
    cases = [
        ("GET", "/api/v1/namespaces/team-b/pods", 'pods is forbidden: User "alice" cannot list '
         'resource "pods" in API group "" in the namespace "team-b"', {"kind": "pods"}),
        ("GET", "/api/v1/namespaces/team-b/pods/x", 'pods "x" is forbidden: User "alice" cannot '
         'get resource "pods" in API group "" in the namespace "team-b"',
         {"name": "x", "kind": "pods"}),
        ("GET", "/api/v1/namespaces/team-b/pods?watch=1", 'pods is forbidden: User "alice" '
         'cannot watch resource "pods" in API group "" in the namespace "team-b"',
         {"kind": "pods"}),
        ("GET", "/api/v1/watch/namespaces/team-b/pods", 'pods is forbidden: User "alice" '
         'cannot watch resource "pods" in API group "" in the namespace "team-b"',
         {"kind": "pods"}),
        ("GET", "/api/v1/pods?watch=true", 'pods is forbidden: User "alice" cannot watch '
         'resource "pods" in API group "" at the cluster scope', {"kind": "pods"}),
        ("PATCH", "/api/v1/namespaces/team-a/pods/x/status", 'pods "x" is forbidden: User '
         '"alice" cannot patch resource "pods/status" in API group "" in the namespace '
         '"team-a"', {"name": "x", "kind": "pods"}),
        ("GET", "/apis/apps/v1/namespaces/team-b/deployments", 'deployments.apps is forbidden: '
         'User "alice" cannot list resource "deployments" in API group "apps" in the namespace '
         '"team-b"', {"group": "apps", "kind": "deployments"}),
    ]
    for method, path, message, details in cases:
        code, status = status_of(rbac, method, path, token, body={} if method == "PATCH"
                                 else None)
        assert (code, status) == (403, forbidden(message, details)), path
    # non-resource paths: discovery is everyone's (system:discovery), /metrics is not
    assert status_of(rbac, "GET", "/api", token)[0] == 200
    assert status_of(rbac, "GET", "/metrics", token) == (
        403, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": 'forbidden: User "alice" cannot get path "/metrics"',
              "reason": "Forbidden", "details": {}, "code": 403})
    # a watch where alice may: served
    reply = https(rbac, "GET", "/api/v1/namespaces/team-a/pods?watch=1&timeoutSeconds=1",
                  token=token)
    assert reply.status == 200


def test_websocket_watch_is_refused_before_the_upgrade(rbac: ServerThread) -> None:
    token = token_of(issue(rbac, "alice", token=True))
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    headers = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
               ("Sec-WebSocket-Version", "13"),
               ("Sec-WebSocket-Key", base64.b64encode(b"k" * 16).decode()),
               ("Sec-WebSocket-Protocol",
                f"base64url.bearer.authorization.k8s.io.{encoded}, base64.binary.k8s.io")]
    allowed = https(rbac, "GET", "/api/v1/namespaces/team-a/pods?watch=true&timeoutSeconds=1",
                    headers=headers)
    assert allowed.status == 101
    for path, scope in (("/api/v1/namespaces/team-b/pods?watch=true",
                         'in the namespace "team-b"'),
                        ("/api/v1/pods?watch=true", "at the cluster scope")):
        refused = https(rbac, "GET", path, headers=headers)
        assert refused.status == 403, path
        assert json.loads(refused.body) == forbidden(
            f'pods is forbidden: User "alice" cannot watch resource "pods" in API group "" '
            f"{scope}", {"kind": "pods"})


def test_a_binding_to_a_missing_role_says_so(rbac: ServerThread) -> None:
    token = token_of(issue(rbac, "alice", token=True))
    bind(rbac, "ghost", "team-b", "ghost", "alice")
    assert status_of(rbac, "GET", "/api/v1/namespaces/team-b/pods", token) == (403, forbidden(
        'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the '
        'namespace "team-b": RBAC: clusterrole.rbac.authorization.k8s.io "ghost" not found',
        {"kind": "pods"}))
    # once the role exists, the binding counts (the authorizer sees RBAC changes at once)
    reply = https(rbac, "POST", f"/apis/{GROUP}/v1/clusterroles", cert=admin_pair(rbac), body={
        "metadata": {"name": "ghost"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
    assert reply.status == 201, reply.body
    assert status_of(rbac, "GET", "/api/v1/namespaces/team-b/pods", token)[0] == 200


def test_edit_cannot_grant_admin(rbac: ServerThread) -> None:
    bind(rbac, "bob-edit", "team-a", "edit", "bob")
    token = token_of(issue(rbac, "bob", token=True))
    grant = {"apiVersion": f"{GROUP}/v1", "kind": "RoleBinding",
             "metadata": {"name": "grant-admin", "namespace": "team-a"},
             "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "admin"},
             "subjects": [{"kind": "User", "name": "bob", "apiGroup": GROUP}]}
    path = f"/apis/{GROUP}/v1/namespaces/team-a/rolebindings"
    # edit holds no RBAC permissions: the authorizer refuses
    assert status_of(rbac, "POST", path, token, grant) == (403, forbidden(
        'rolebindings.rbac.authorization.k8s.io is forbidden: User "bob" cannot create '
        'resource "rolebindings" in API group "rbac.authorization.k8s.io" in the namespace '
        '"team-a"', {"group": GROUP, "kind": "rolebindings"}))
    # allowed to write bindings too, bob still cannot grant what admin holds beyond edit
    reply = https(rbac, "POST", f"/apis/{GROUP}/v1/clusterroles", cert=admin_pair(rbac), body={
        "metadata": {"name": "binding-writer"},
        "rules": [{"apiGroups": [GROUP], "resources": ["rolebindings"], "verbs": ["create"]}]})
    assert reply.status == 201, reply.body
    bind(rbac, "bob-writes", "team-a", "binding-writer", "bob")
    code, status = status_of(rbac, "POST", path, token, grant)
    assert code == 403
    assert status["message"].startswith(
        'rolebindings.rbac.authorization.k8s.io "grant-admin" is forbidden: user "bob" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not '
        "currently held:\n")
    # binding edit itself (held) is allowed
    grant["metadata"]["name"] = "grant-edit"
    grant["roleRef"]["name"] = "edit"
    assert status_of(rbac, "POST", path, token, grant)[0] == 201


def test_modes_combine_in_order(make_server: Callable[..., ServerThread]) -> None:
    server = make_rbac(make_server, "RBAC,AlwaysDeny")
    token = token_of(issue(server, "alice", token=True))
    assert status_of(server, "GET", "/api/v1/namespaces/team-a/pods", token)[0] == 200
    assert status_of(server, "GET", "/api/v1/namespaces/team-b/pods", token) == (
        403, forbidden('pods is forbidden: User "alice" cannot list resource "pods" in API '
                       'group "" in the namespace "team-b": Everything is forbidden.',
                       {"kind": "pods"}))
    deny = make_rbac(make_server, "AlwaysDeny")
    token = token_of(issue(deny, "alice", token=True))
    assert status_of(deny, "GET", "/api/v1/namespaces/team-a/pods", token) == (
        403, forbidden('pods is forbidden: User "alice" cannot list resource "pods" in API '
                       'group "" in the namespace "team-a": Everything is forbidden.',
                       {"kind": "pods"}))
    # system:masters stays all-powerful
    reply = https(deny, "GET", "/api/v1/namespaces/team-a/pods", cert=admin_pair(deny))
    assert reply.status == 200
    allow = make_rbac(make_server, "AlwaysAllow,RBAC")
    token = token_of(issue(allow, "alice", token=True))
    assert status_of(allow, "GET", "/api/v1/namespaces/team-b/secrets", token)[0] == 200


def test_modes_kube_refuses_stop_the_start(tmp_path: Path) -> None:
    policy = tmp_path / "abac.jsonl"
    policy.write_text("")
    cases = [
        ({"authorization_mode": "Node"}, 'authorization-mode "Node" is not supported by '
         "kubewire (it serves AlwaysAllow, AlwaysDeny, ABAC, RBAC)"),
        ({"authorization_mode": "RBAC", "authorization_policy_file": policy},
         "cannot specify --authorization-policy-file without mode ABAC"),
        ({"authorization_mode": "ABAC"},
         "authorization-mode ABAC's authorization policy file not passed"),
        ({"authorization_mode": "RBAC,RBAC,Foo"}, '[authorization-mode "Foo" is not a valid '
         'mode, authorization-mode ["RBAC" "RBAC" "Foo"] has mode specified more than once]'),
    ]
    for overrides, text in cases:
        config = ServerConfig(data_dir=tmp_path / "data", host="127.0.0.1", port=0,
                              insecure_http=False, **overrides)
        with pytest.raises(AuthorizationModeError) as err:
            APIServer(config)
        assert str(err.value) == text
    # kubewire serve says it in one line (the flag may repeat, as pflag's StringSlice)
    done = subprocess.run([sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY, "--data-dir",
                           str(tmp_path / "cli"), "--port", "0", "--authorization-mode",
                           "RBAC", "--authorization-mode", "Webhook"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().endswith('authorization-mode "Webhook" is not supported by '
                                        "kubewire (it serves AlwaysAllow, AlwaysDeny, ABAC, "
                                        "RBAC)"), done.stderr


def test_impersonation_is_authorized_by_rbac(rbac: ServerThread) -> None:
    reply = https(rbac, "POST", f"/apis/{GROUP}/v1/clusterroles", cert=admin_pair(rbac), body={
        "metadata": {"name": "impersonator"},
        "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}]})
    assert reply.status == 201, reply.body
    bind(rbac, "alice-impersonates", "", "impersonator", "alice")
    bind(rbac, "bob-view", "team-b", "view", "bob")
    alice = token_of(issue(rbac, "alice", token=True))
    as_bob = [("Impersonate-User", "bob")]
    reply = https(rbac, "GET", "/api/v1/namespaces/team-b/pods", token=alice, headers=as_bob)
    assert reply.status == 200, reply.body
    # as bob, alice's own view of team-a does not count
    reply = https(rbac, "GET", "/api/v1/namespaces/team-a/pods", token=alice, headers=as_bob)
    assert json.loads(reply.body) == forbidden(
        'pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the '
        'namespace "team-a"', {"kind": "pods"})
    carol = token_of(issue(rbac, "carol", token=True))
    reply = https(rbac, "GET", "/api/v1/namespaces/team-b/pods", token=carol, headers=as_bob)
    assert json.loads(reply.body) == forbidden(
        'users "bob" is forbidden: User "carol" cannot impersonate resource "users" in API '
        'group "" at the cluster scope', {"name": "bob", "kind": "users"})


def test_rules_for_lists_what_the_bindings_grant(rbac: ServerThread) -> None:
    """``Access.authorizer.rules_for`` (what SelfSubjectRulesReview answers from) over the
    server's own RBAC objects: view's rules in team-a, discovery's everywhere, no error."""
    assert rbac.server is not None
    chain = rbac.server.access.authorizer  # idle server: nothing else touches it meanwhile
    alice = UserInfo("alice", groups=("system:authenticated",))
    in_a, in_b = chain.rules_for(alice, "team-a"), chain.rules_for(alice, "team-b")
    assert (in_a.incomplete, in_a.evaluation_error) == (False, "")
    assert {"verbs": ["get", "list", "watch"], "apiGroups": [""],
            "resources": ["configmaps", "endpoints", "persistentvolumeclaims",
                          "persistentvolumeclaims/status", "pods", "replicationcontrollers",
                          "replicationcontrollers/scale", "serviceaccounts", "services",
                          "services/status"]} in in_a.resource_rules
    assert len(in_a.resource_rules) > len(in_b.resource_rules)
    assert in_a.non_resource_rules == in_b.non_resource_rules
    assert any("/api" in rule["nonResourceURLs"] for rule in in_b.non_resource_rules)
    bind(rbac, "ghost", "team-b", "ghost", "alice")
    assert chain.rules_for(alice, "team-b").evaluation_error == (
        'clusterrole.rbac.authorization.k8s.io "ghost" not found')
