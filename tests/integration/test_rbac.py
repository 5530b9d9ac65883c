"""RBAC objects with real clients: a chart-like manifest set through kubectl (apply, re-apply,
get, delete), kube's Tables, and escalation prevention for a user who is not an admin (its
requests authorized by an ABAC policy file, then by RBAC: ``--authorization-mode ABAC,RBAC``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubewire
from tests.integration import kubectl as cli
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, get, ok, wait_for

pytestmark = cli.needs_kubectl
GROUP = "rbac.authorization.k8s.io"

CHART = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: app, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: app-reader, namespace: default}
rules:
- apiGroups: [""]
  resources: ["pods", "configmaps"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: app-reader, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: app-reader}
subjects:
- {kind: ServiceAccount, name: app, namespace: default}
- {kind: User, name: jane, apiGroup: rbac.authorization.k8s.io}
- {kind: Group, name: devs, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: app-aggregate}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {app.example.com/aggregate: "true"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: app-leases
  labels: {app.example.com/aggregate: "true"}
rules:
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: app-aggregate}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: app-aggregate}
subjects:
- {kind: ServiceAccount, name: app, namespace: default}
"""
NAMES = ["serviceaccount/app", "role.rbac.authorization.k8s.io/app-reader",
         "rolebinding.rbac.authorization.k8s.io/app-reader",
         "clusterrole.rbac.authorization.k8s.io/app-aggregate",
         "clusterrole.rbac.authorization.k8s.io/app-leases",
         "clusterrolebinding.rbac.authorization.k8s.io/app-aggregate"]


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def versions(server: ServerThread) -> dict[str, str]:
    out = cli.ok(server, "get", "-f", "-", "-o", "json", stdin=CHART)
    return {item["metadata"]["name"] + item["kind"]: item["metadata"]["resourceVersion"]
            for item in json.loads(out)["items"]}


def test_chart_applies_reapplies_and_deletes(server: ServerThread) -> None:
    out = cli.ok(server, "apply", "-f", "-", stdin=CHART)
    assert out.splitlines() == [f"{n} created" for n in NAMES]
    wait_for(lambda: role_of(server, "app-aggregate")["rules"], what="aggregated")
    before = versions(server)
    out = cli.ok(server, "apply", "-f", "-", stdin=CHART)
    assert out.splitlines() == [f"{n} unchanged" for n in NAMES]
    assert versions(server) == before  # nothing written
    # server-side apply: the same manifests, twice, change nothing either
    cli.ok(server, "apply", "--server-side", "-f", "-", stdin=CHART)
    after_ssa = versions(server)
    cli.ok(server, "apply", "--server-side", "-f", "-", stdin=CHART)
    assert versions(server) == after_ssa
    out = cli.ok(server, "delete", "-f", "-", stdin=CHART)
    assert len(out.splitlines()) == len(NAMES)
    gone = cli.run(server, "get", "-f", "-", stdin=CHART)
    assert gone.returncode != 0 and gone.stdout == ""


def test_tables_as_kubectl_prints_them(server: ServerThread) -> None:
    cli.ok(server, "apply", "-f", "-", stdin=CHART)
    roles = rows(cli.ok(server, "get", "roles"))
    assert roles[0] == ["NAME", "CREATED", "AT"] and roles[1][0] == "app-reader"
    bindings = rows(cli.ok(server, "get", "rolebindings", "-o", "wide"))
    assert bindings[0] == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert bindings[1][:2] == ["app-reader", "Role/app-reader"]
    assert bindings[1][3:] == ["jane", "devs", "default/app"]
    cluster = rows(cli.ok(server, "get", "clusterrolebinding", "app-aggregate"))
    assert cluster[0] == ["NAME", "ROLE", "AGE"]
    assert cluster[1][:2] == ["app-aggregate", "ClusterRole/app-aggregate"]
    assert rows(cli.ok(server, "get", "clusterrole", "app-leases"))[0] == [
        "NAME", "CREATED", "AT"]


def test_role_ref_is_immutable_and_rules_are_validated(server: ServerThread) -> None:
    cli.ok(server, "apply", "-f", "-", stdin=CHART)
    done = cli.run(server, "patch", "rolebinding", "app-reader", "--type=merge",
                   "-p", '{"roleRef":{"name":"other"}}')
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'The RoleBinding "app-reader" is invalid: roleRef: Invalid value: '
        'rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"Role", Name:"other"}: '
        "cannot change roleRef")
    bad = {"apiVersion": f"{GROUP}/v1", "kind": "Role", "metadata": {"name": "bad"},
           "rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}
    done = cli.run(server, "create", "-f", "-", stdin=json.dumps(bad))
    assert done.stderr.strip() == (
        'The Role "bad" is invalid: rules[0].nonResourceURLs: Invalid value: '
        '[]string{"/healthz"}: namespaced rules cannot apply to non-resource URLs')


# --- escalation ----------------------------------------------------------------------------------

POLICY = [  # dev may write RoleBindings in "team" (and read what kubectl reads); nothing else
    {"user": "dev", "namespace": "team", "resource": "rolebindings", "apiGroup": "*"},
    {"user": "dev", "nonResourcePath": "*", "readonly": True},
]


def abac_file(path: Path) -> Path:
    path.write_text("".join(json.dumps({
        "apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy",
        "spec": spec}) + "\n" for spec in POLICY))
    return path


def cluster_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": rules}


def role_binding(name: str, kind: str, role: str, user: str = "someone",
                 namespace: str = "team") -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role},
            "subjects": [{"kind": "User", "name": user, "apiGroup": GROUP}]}


def kubectl_as(config: Path, *args: str, stdin: str | None = None,
               ) -> subprocess.CompletedProcess[str]:
    return cli.run(config, *args, stdin=stdin)


@pytest.fixture
def escalation_server(tmp_path: Path) -> Any:
    # ABAC lets dev write bindings in team; RBAC, after it, what the bindings grant (``bind``)
    with kubewire.Server(users={"dev": ["devs"]}, authorization_mode="ABAC,RBAC",
                         authorization_policy_file=abac_file(tmp_path / "abac.jsonl")) as server:
        server.apply_sync([
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
            cluster_role("pods-view", [{"apiGroups": [""], "resources": ["pods"],
                                        "verbs": ["get", "list"]}]),
            cluster_role("pods-edit", [{"apiGroups": [""], "resources": ["pods"],
                                        "verbs": ["*"]}]),
            cluster_role("bind-pods-view", [{"apiGroups": [GROUP], "resources": ["clusterroles"],
                                             "verbs": ["bind"], "resourceNames": ["pods-view"]}]),
        ])
        yield server


def test_binding_a_role_not_held_is_refused_with_kubes_text(escalation_server: Any) -> None:
    server = escalation_server
    dev = server.kubeconfig_for("dev")
    body = yaml.safe_dump(role_binding("view", "ClusterRole", "pods-view"))
    done = kubectl_as(dev, "create", "-f", "-", stdin=body)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": '
        'rolebindings.rbac.authorization.k8s.io "view" is forbidden: user "dev" '
        '(groups=["devs" "system:authenticated"]) is attempting to grant RBAC permissions not '
        "currently held:\n"
        '{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}')
    # the admin lets dev bind pods-view (verb bind on that one ClusterRole): allowed
    server.apply_sync({"apiVersion": f"{GROUP}/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": "dev-binds"},
                       "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole",
                                   "name": "bind-pods-view"},
                       "subjects": [{"kind": "User", "name": "dev", "apiGroup": GROUP}]})
    done = kubectl_as(dev, "create", "-f", "-", stdin=body)
    assert done.returncode == 0, done.stderr
    edit = yaml.safe_dump(role_binding("edit", "ClusterRole", "pods-edit"))
    done = kubectl_as(dev, "create", "-f", "-", stdin=edit)
    assert done.returncode == 1 and "Verbs:[\"*\"]" in done.stderr
    # dev holds pods-edit's rules in team once bound to it there: it may bind it too
    server.apply_sync(role_binding("dev-edits", "ClusterRole", "pods-edit", user="dev"))
    done = kubectl_as(dev, "create", "-f", "-", stdin=edit)
    assert done.returncode == 0, done.stderr
    # a binding to a role that does not exist: kube's NotFound text inside the 403
    ghost = yaml.safe_dump(role_binding("ghost", "Role", "nope"))
    done = kubectl_as(dev, "create", "-f", "-", stdin=ghost)
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        'rolebindings.rbac.authorization.k8s.io "ghost" is forbidden: '
        'roles.rbac.authorization.k8s.io "nope" not found')
    # the admin (system:masters) binds anything
    server.apply_sync(role_binding("admin-made", "ClusterRole", "pods-edit", user="x"))


# --- the default roles and bindings, and aggregation ---------------------------------------------

CLUSTER_ROLES = f"/apis/{GROUP}/v1/clusterroles"
BINDINGS = f"/apis/{GROUP}/v1/clusterrolebindings"
DEFAULT_ROLES = {"admin", "cluster-admin", "edit", "view", "system:aggregate-to-admin",
                 "system:aggregate-to-edit", "system:aggregate-to-view", "system:discovery",
                 "system:basic-user", "system:public-info-viewer", "system:monitoring"}


def role_of(server: ServerThread, name: str) -> dict[str, Any]:
    return get(server, f"{CLUSTER_ROLES}/{name}")


def test_defaults_are_there_after_start(server: ServerThread) -> None:
    names = {item["metadata"]["name"] for item in get(server, CLUSTER_ROLES)["items"]}
    assert names >= DEFAULT_ROLES
    admin = role_of(server, "cluster-admin")
    assert admin["metadata"]["annotations"] == {
        "rbac.authorization.kubernetes.io/autoupdate": "true"}
    assert admin["metadata"]["labels"] == {"kubernetes.io/bootstrapping": "rbac-defaults"}
    assert admin["rules"] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                              {"verbs": ["*"], "nonResourceURLs": ["*"]}]
    edit = role_of(server, "edit")
    assert edit["aggregationRule"] == {"clusterRoleSelectors": [
        {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}]}
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    # aggregated: view's rules (aggregate-to-view) are in edit, edit's in admin
    view_rules = role_of(server, "view")["rules"]
    assert view_rules == role_of(server, "system:aggregate-to-view")["rules"]
    assert all(rule in edit["rules"] for rule in view_rules)
    assert all(rule in role_of(server, "admin")["rules"] for rule in edit["rules"])
    bindings = {b["metadata"]["name"]: b for b in get(server, BINDINGS)["items"]}
    assert bindings["cluster-admin"]["subjects"] == [
        {"kind": "Group", "apiGroup": GROUP, "name": "system:masters"}]
    assert [s["name"] for s in bindings["system:public-info-viewer"]["subjects"]] == [
        "system:authenticated", "system:unauthenticated"]
    assert bindings["system:monitoring"]["roleRef"]["name"] == "system:monitoring"


def test_restart_reconciles_defaults_as_kube_does(make_server: Any, tmp_path: Path) -> None:
    first = make_server(data_dir=tmp_path / "data")
    ok(call(first, "DELETE", f"{CLUSTER_ROLES}/system:monitoring"))
    ok(call(first, "DELETE", f"{BINDINGS}/system:discovery"))
    # an autoupdate role a user trimmed gets its missing rules back; one marked
    # autoupdate=false keeps the user's version
    ok(call(first, "PATCH", f"{CLUSTER_ROLES}/system:public-info-viewer",
            [{"op": "replace", "path": "/rules", "value": [
                {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
                {"verbs": ["get"], "nonResourceURLs": ["/custom"]}]}]))
    ok(call(first, "PATCH", f"{CLUSTER_ROLES}/system:basic-user", {
        "metadata": {"annotations": {"rbac.authorization.kubernetes.io/autoupdate": "false"}},
        "rules": [{"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                   "resources": ["selfsubjectaccessreviews"]}]}))
    untouched = role_of(first, "cluster-admin")["metadata"]["resourceVersion"]
    first.stop()
    again = make_server(data_dir=tmp_path / "data")
    assert role_of(again, "system:monitoring")["rules"][0]["nonResourceURLs"][0] == "/healthz"
    assert get(again, f"{BINDINGS}/system:discovery")["subjects"][0]["name"] == (
        "system:authenticated")
    urls = [r["nonResourceURLs"] for r in role_of(again, "system:public-info-viewer")["rules"]]
    assert urls == [["/healthz"], ["/custom"], ["/livez"], ["/readyz"], ["/version"],
                    ["/version/"]]
    assert role_of(again, "system:basic-user")["rules"] == [
        {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
         "resources": ["selfsubjectaccessreviews"]}]
    assert role_of(again, "cluster-admin")["metadata"]["resourceVersion"] == untouched


def test_aggregation_follows_labelled_roles(server: ServerThread) -> None:
    cli.ok(server, "apply", "-f", "-", stdin=CHART)
    leases = [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
               "verbs": ["get", "update"]}]
    wait_for(lambda: role_of(server, "app-aggregate")["rules"] == leases, what="aggregated")
    more = {"apiVersion": f"{GROUP}/v1", "kind": "ClusterRole",
            "metadata": {"name": "app-config",
                         "labels": {"app.example.com/aggregate": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
                      *leases]}
    create(server, CLUSTER_ROLES, more)
    both = [more["rules"][0], *leases]  # app-config sorts first; the shared rule once
    wait_for(lambda: role_of(server, "app-aggregate")["rules"] == both, what="a new role")
    ok(call(server, "PATCH", f"{CLUSTER_ROLES}/app-leases",
            {"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]}))
    changed = [more["rules"][0], *leases, {"apiGroups": [""], "resources": ["secrets"],
                                           "verbs": ["list"]}]
    wait_for(lambda: role_of(server, "app-aggregate")["rules"] == changed, what="a change")
    ok(call(server, "DELETE", f"{CLUSTER_ROLES}/app-config"))
    wait_for(lambda: role_of(server, "app-aggregate")["rules"] == changed[2:],
             what="a deletion")
    # re-applying the chart (which leaves the aggregate's rules to the controller) puts
    # app-leases back, and the aggregate follows
    cli.ok(server, "apply", "-f", "-", stdin=CHART)
    wait_for(lambda: role_of(server, "app-aggregate")["rules"] == leases, what="re-applied")


def test_aggregation_is_a_controller_manager_controller(make_server: Any) -> None:
    server = make_server(controllers=("*", "-clusterrole-aggregation"))
    cli.ok(server, "apply", "-f", "-", stdin=CHART)
    assert role_of(server, "app-aggregate").get("rules") is None
    # the defaults are the API server's: made without the controller, unaggregated
    assert role_of(server, "admin")["rules"] is None


def test_kubectl_create_and_auth_reconcile(server: ServerThread) -> None:
    """kubectl's typed create commands (protobuf bodies) and ``auth reconcile``."""
    assert cli.ok(server, "create", "role", "reader", "--verb=get,list",
                  "--resource=pods,deployments.apps", "--resource-name=web") == (
        "role.rbac.authorization.k8s.io/reader created\n")
    role = get(server, f"/apis/{GROUP}/v1/namespaces/default/roles/reader")
    assert role["rules"] == [
        {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"],
         "resourceNames": ["web"]},
        {"verbs": ["get", "list"], "apiGroups": ["apps"], "resources": ["deployments"],
         "resourceNames": ["web"]}]
    cli.ok(server, "create", "rolebinding", "rb", "--role=reader", "--user=jane",
           "--group=devs", "--serviceaccount=default:app")
    binding = get(server, f"/apis/{GROUP}/v1/namespaces/default/rolebindings/rb")
    assert binding["subjects"] == [
        {"kind": "User", "apiGroup": GROUP, "name": "jane"},
        {"kind": "Group", "apiGroup": GROUP, "name": "devs"},
        {"kind": "ServiceAccount", "name": "app", "namespace": "default"}]
    cli.ok(server, "create", "clusterrole", "logs", "--verb=get", "--non-resource-url=/logs/*")
    cli.ok(server, "create", "clusterrole", "agg", "--aggregation-rule=a=b")
    cli.ok(server, "create", "clusterrolebinding", "crb", "--clusterrole=logs", "--user=bob")
    done = cli.run(server, "auth", "reconcile", "-f", "-", stdin=CHART)  # explains on stderr
    assert done.returncode == 0, done.stderr
    assert "clusterrolebinding.rbac.authorization.k8s.io/app-aggregate reconciled" in done.stdout
    assert get(server, f"{BINDINGS}/app-aggregate")["roleRef"]["name"] == "app-aggregate"
