"""kube's whole default RBAC policy, reconciled at start (the ``rbac/bootstrap-roles`` hook):
every ClusterRole, ClusterRoleBinding, and the Roles and RoleBindings of ``kube-system`` and
``kube-public`` are there, a second start writes none of them, and under ``--authorization-mode
RBAC`` kube's components get what the defaults grant them (``kubectl auth can-i`` as the
scheduler, a controller's service account, and a node, which gets only the RBAC part: kubewire
has no Node authorizer and the ``system:node`` binding has no subjects, as in kube)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kubewire.server.controllers.rbac_policy import (
    default_cluster_role_bindings,
    default_cluster_roles,
    default_role_bindings,
    default_roles,
)
from tests.integration import kubectl as cli
from tests.integration.harness import ServerThread
from tests.integration.wire import get

pytestmark = cli.needs_kubectl
GROUP = "rbac.authorization.k8s.io"
KINDS = {"clusterroles": default_cluster_roles, "clusterrolebindings":
         default_cluster_role_bindings, "roles": default_roles,
         "rolebindings": default_role_bindings}


def versions(server: ServerThread) -> dict[tuple[str, str, str], str]:
    """Every default object's resourceVersion, by (plural, namespace, name)."""
    out = {}
    for plural, defaults in KINDS.items():
        for expected in defaults():
            meta = expected["metadata"]
            ns = meta.get("namespace", "")
            where = f"namespaces/{ns}/" if ns else ""
            obj = get(server, f"/apis/{GROUP}/v1/{where}{plural}/{meta['name']}")
            out[plural, ns, meta["name"]] = obj["metadata"]["resourceVersion"]
    return out


def test_start_creates_the_whole_policy_and_restart_writes_nothing(
        make_server: Callable[..., ServerThread], tmp_path: Path) -> None:
    first = make_server(data_dir=tmp_path / "data")
    names = cli.ok(first, "get", "clusterroles", "-o", "name").split()
    assert sorted(names) == sorted(f"clusterrole.{GROUP}/{r['metadata']['name']}"
                                   for r in default_cluster_roles())
    assert {"clusterrole.rbac.authorization.k8s.io/system:kube-scheduler",
            "clusterrole.rbac.authorization.k8s.io/system:controller:replicaset-controller",
            "clusterrole.rbac.authorization.k8s.io/system:node"} <= set(names)
    bindings = cli.ok(first, "get", "clusterrolebindings", "-o", "name").split()
    assert len(bindings) == len(default_cluster_role_bindings())
    listed = json.loads(cli.ok(first, "get", "roles,rolebindings", "-A", "-o", "json"))
    assert sorted((o["kind"], o["metadata"]["namespace"], o["metadata"]["name"])
                  for o in listed["items"]) == sorted(
        (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"])
        for o in [*default_roles(), *default_role_bindings()])
    reader = get(first, f"/apis/{GROUP}/v1/namespaces/kube-system/roles/"
                        "extension-apiserver-authentication-reader")
    assert reader["rules"] == [{"verbs": ["get", "list", "watch"], "apiGroups": [""],
                                "resources": ["configmaps"],
                                "resourceNames": ["extension-apiserver-authentication"]}]
    node = get(first, f"/apis/{GROUP}/v1/clusterrolebindings/system:node")
    assert "subjects" not in node and node["roleRef"]["name"] == "system:node"
    before = versions(first)
    first.stop()
    again = make_server(data_dir=tmp_path / "data")
    assert versions(again) == before  # reconciled, nothing to write


def can_i(server: ServerThread, *args: str) -> str:
    reply = cli.run(server, "auth", "can-i", *args)
    return reply.stdout.strip()


def rules_table(server: ServerThread, *args: str) -> list[list[str]]:
    out = cli.ok(server, "auth", "can-i", "--list", *args)
    return [line.split() for line in out.splitlines()[1:]]


def test_kubes_components_get_what_the_defaults_grant(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(insecure_http=False, authorization_mode="RBAC")
    scheduler = rules_table(server, "--as", "system:kube-scheduler")
    assert ["pods/binding", "[]", "[]", "[create]"] in scheduler
    assert ["bindings", "[]", "[]", "[create]"] in scheduler
    assert can_i(server, "create", "pods", "--subresource=binding", "-n", "default",
                 "--as", "system:kube-scheduler") == "yes"
    assert can_i(server, "delete", "nodes", "--as", "system:kube-scheduler") == "no"
    rs = "system:serviceaccount:kube-system:replicaset-controller"
    assert can_i(server, "create", "pods", "-n", "team-x", "--as", rs) == "yes"
    assert can_i(server, "update", "replicasets.apps", "--subresource=status", "-A",
                 "--as", rs) == "yes"
    assert can_i(server, "create", "secrets", "-n", "default", "--as", rs) == "no"
    # the controller-manager's leader lock is a Role in kube-system
    kcm = "system:kube-controller-manager"
    assert can_i(server, "update", "leases.coordination.k8s.io", "-n", "kube-system",
                 "--as", kcm) == "yes"


def test_a_node_gets_only_what_rbac_gives_it(make_server: Callable[..., ServerThread]) -> None:
    """kube answers a node's requests with the Node authorizer first (its rules are
    ``system:node``'s, scoped to the node's own objects); kubewire has none, and RBAC's
    ``system:node`` binding has no subjects, so a node may do what any authenticated user may."""
    server = make_server(insecure_http=False, authorization_mode="RBAC")
    node = ("--as", "system:node:x", "--as-group", "system:nodes")
    for verb, resource, sub in (("get", "nodes", ""), ("create", "nodes", ""),
                                ("get", "secrets", ""), ("update", "pods", "status"),
                                ("create", "serviceaccounts", "token")):
        answer = can_i(server, verb, resource, f"--subresource={sub}", "-n", "default", *node)
        assert answer == "no", (verb, resource, sub)
    assert can_i(server, "create", "selfsubjectaccessreviews.authorization.k8s.io",
                 *node) == "yes"
    resources = {row[0] for row in rules_table(server, *node) if not row[0].startswith("[")}
    assert resources == {"selfsubjectreviews.authentication.k8s.io",
                         "selfsubjectaccessreviews.authorization.k8s.io",
                         "selfsubjectrulesreviews.authorization.k8s.io"}
