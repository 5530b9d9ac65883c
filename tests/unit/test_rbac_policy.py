"""The bootstrap policy's data and kube's reconciliation and aggregation decisions
(controllers/rbac_policy: reconciliation's computeReconciledRole/RoleBinding in union mode,
clusterroleaggregation's syncClusterRole)."""

from __future__ import annotations

from typing import Any

from kubewire.server.controllers.rbac_policy import (
    AUTOUPDATE,
    aggregated_rules,
    default_cluster_role_bindings,
    default_cluster_roles,
    default_role_bindings,
    default_roles,
    reconcile_binding,
    reconcile_role,
    same_rules,
)

G = "rbac.authorization.k8s.io"
GET_PODS = {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}
LIST_PODS = {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}


def role(name: str, rules: Any, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": f"{G}/v1", "kind": "ClusterRole",
            "metadata": {"name": name, **meta}, "rules": rules}


def test_every_default_is_labelled_annotated_and_bound_to_a_default_role() -> None:
    roles = {r["metadata"]["name"]: r for r in default_cluster_roles()}
    assert {"cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user",
            "system:public-info-viewer", "system:monitoring", "system:aggregate-to-admin",
            "system:aggregate-to-edit", "system:aggregate-to-view"} <= set(roles)
    for obj in [*roles.values(), *default_cluster_role_bindings()]:
        meta = obj["metadata"]
        assert meta["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
        assert meta["annotations"] == {AUTOUPDATE: "true"}
    for binding in default_cluster_role_bindings():
        assert binding["roleRef"]["name"] in roles
    for name, label in (("admin", None), ("edit", "admin"), ("view", "edit")):
        labels = roles[name]["metadata"]["labels"]
        assert (labels.get(f"{G}/aggregate-to-{label}") == "true") if label else True
        assert roles[name]["rules"] is None
    assert default_cluster_roles() is not default_cluster_roles()  # fresh copies


def test_reconcile_role_adds_what_is_missing_and_keeps_the_users() -> None:
    expected = role("r", [GET_PODS, LIST_PODS], labels={"a": "1"},
                    annotations={AUTOUPDATE: "true"})
    assert reconcile_role(expected, expected)[0] == "none"
    users = role("r", [GET_PODS, {"verbs": ["get"], "nonResourceURLs": ["/x"]}],
                 labels={"a": "mine"})
    operation, result = reconcile_role(users, expected)
    assert operation == "update"
    assert result["rules"] == [*users["rules"], LIST_PODS]
    assert result["metadata"]["labels"] == {"a": "mine"}  # the object's own values win
    assert result["metadata"]["annotations"] == {AUTOUPDATE: "true"}
    protected = role("r", [], annotations={AUTOUPDATE: "false"})
    assert reconcile_role(protected, expected) == ("none", protected)
    # aggregation selectors: missing ones added, an unexpected rule removed
    selector = {"matchLabels": {"x": "y"}}
    aggregated = {**expected, "aggregationRule": {"clusterRoleSelectors": [selector]}}
    operation, result = reconcile_role(expected, aggregated)
    assert operation == "update" and result["aggregationRule"] == aggregated["aggregationRule"]
    operation, result = reconcile_role(aggregated, expected)
    assert operation == "update" and "aggregationRule" not in result


def test_reconcile_binding() -> None:
    expected = default_cluster_role_bindings()[0]
    assert reconcile_binding(expected, expected)[0] == "none"
    extra = {"kind": "User", "name": "me", "apiGroup": G}
    mine = {**expected, "subjects": [extra]}
    operation, result = reconcile_binding(mine, expected)
    assert operation == "update" and result["subjects"] == [extra, *expected["subjects"]]
    moved = {**expected, "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "other"}}
    operation, result = reconcile_binding(moved, expected)
    assert operation == "recreate" and result["roleRef"] == expected["roleRef"]


def test_aggregated_rules_in_name_order_without_repeats() -> None:
    b = role("b", [GET_PODS, LIST_PODS])
    a = role("a", [LIST_PODS, {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"],
                               "resourceNames": []}])
    agg = role("agg", [GET_PODS])
    # per selector, by name; the role itself skipped; a rule equal but for [] vs absent once
    rules = aggregated_rules("agg", [[("b", b), ("a", a), ("agg", agg)], [("b", b)]])
    assert rules == [LIST_PODS, a["rules"][1]]
    assert same_rules(None, []) and same_rules([GET_PODS], [{**GET_PODS, "resourceNames": []}])
    assert not same_rules([GET_PODS], [LIST_PODS])


# --- kube's whole default policy (rbac_bootstrap_policy.json, tools/gen_rbac_policy.py) ---------

def by_name(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs}


def test_the_policy_has_kubes_roles_and_bindings() -> None:
    roles, bindings = default_cluster_roles(), default_cluster_role_bindings()
    assert (len(roles), len(bindings), len(default_roles()), len(default_role_bindings())) == (
        64, 45, 7, 7)
    names = by_name(roles)
    assert {"system:kube-controller-manager", "system:kube-scheduler", "system:node",
            "system:node-proxier", "system:volume-scheduler", "system:heapster",
            "system:kube-dns", "system:kube-aggregator", "system:persistent-volume-provisioner",
            "system:auth-delegator", "system:node-bootstrapper", "system:node-problem-detector",
            "system:kubelet-api-admin", "system:service-account-issuer-discovery",
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            "system:certificates.k8s.io:kubelet-serving-approver",
            "system:certificates.k8s.io:legacy-unknown-approver",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            } <= set(names)
    # v1.32's default feature gates register none of these controllers
    assert not {"system:controller:resource-claim-controller",
                "system:controller:selinux-warning-controller",
                "system:controller:service-cidrs-controller",
                "system:controller:podcertificaterequestcleaner"} & set(names)
    # every controller role is bound to its kube-system service account, and only it
    controllers = {n for n in names if n.startswith("system:controller:")}
    assert len(controllers) == 33
    bound = {b["metadata"]["name"]: b for b in bindings
             if b["metadata"]["name"].startswith("system:controller:")}
    assert set(bound) == controllers
    for name, binding in bound.items():
        assert binding["roleRef"] == {"apiGroup": G, "kind": "ClusterRole", "name": name}
        assert binding["subjects"] == [{"kind": "ServiceAccount",
                                        "name": name.removeprefix("system:controller:"),
                                        "namespace": "kube-system"}]
    # kube leaves system:node unbound (the Node authorizer grants nodes their part)
    assert "subjects" not in by_name(bindings)["system:node"]
    for obj in [*roles, *bindings, *default_roles(), *default_role_bindings()]:
        meta = obj["metadata"]
        assert meta["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
        assert meta["annotations"] == {AUTOUPDATE: "true"}
        assert "creationTimestamp" not in meta


def test_rules_are_kubes_text() -> None:
    """A few roles against kube's testdata, as printed there (controller-roles.yaml,
    cluster-roles.yaml, namespace-roles.yaml)."""
    roles = by_name(default_cluster_roles())
    core = [""]
    events = {"verbs": ["create", "patch", "update"], "apiGroups": ["", "events.k8s.io"],
              "resources": ["events"]}
    assert roles["system:controller:replicaset-controller"]["rules"] == [
        {"verbs": ["get", "list", "update", "watch"], "apiGroups": ["apps", "extensions"],
         "resources": ["replicasets"]},
        {"verbs": ["update"], "apiGroups": ["apps", "extensions"],
         "resources": ["replicasets/status"]},
        {"verbs": ["update"], "apiGroups": ["apps", "extensions"],
         "resources": ["replicasets/finalizers"]},
        {"verbs": ["create", "delete", "list", "patch", "watch"], "apiGroups": core,
         "resources": ["pods"]},
        events]
    scheduler = roles["system:kube-scheduler"]["rules"]
    assert {"verbs": ["create"], "apiGroups": core,
            "resources": ["bindings", "pods/binding"]} in scheduler
    assert {"verbs": ["get", "update"], "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"], "resourceNames": ["kube-scheduler"]} in scheduler
    assert len(scheduler) == 18
    assert roles["system:node-proxier"]["rules"] == [
        {"verbs": ["list", "watch"], "apiGroups": core, "resources": ["endpoints", "services"]},
        {"verbs": ["get", "list", "watch"], "apiGroups": core, "resources": ["nodes"]},
        events,
        {"verbs": ["list", "watch"], "apiGroups": ["discovery.k8s.io"],
         "resources": ["endpointslices"]}]
    assert roles["system:certificates.k8s.io:kube-apiserver-client-approver"]["rules"] == [
        {"verbs": ["approve"], "apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
         "resourceNames": ["kubernetes.io/kube-apiserver-client"]}]
    namespaced = {(r["metadata"]["namespace"], r["metadata"]["name"]): r
                  for r in default_roles()}
    assert sorted(namespaced) == [
        ("kube-public", "system:controller:bootstrap-signer"),
        ("kube-system", "extension-apiserver-authentication-reader"),
        ("kube-system", "system::leader-locking-kube-controller-manager"),
        ("kube-system", "system::leader-locking-kube-scheduler"),
        ("kube-system", "system:controller:bootstrap-signer"),
        ("kube-system", "system:controller:cloud-provider"),
        ("kube-system", "system:controller:token-cleaner")]
    assert namespaced["kube-system", "system::leader-locking-kube-scheduler"]["rules"][2:] == [
        {"verbs": ["create", "get", "list", "update", "watch"],
         "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]},
        {"verbs": ["create", "get", "list", "update", "watch"],
         "apiGroups": ["coordination.k8s.io"], "resources": ["leasecandidates"]}]
    locking = {(b["metadata"]["namespace"], b["metadata"]["name"]): b
               for b in default_role_bindings()}
    assert locking["kube-system", "system::leader-locking-kube-controller-manager"][
        "subjects"] == [
        {"kind": "User", "apiGroup": G, "name": "system:kube-controller-manager"},
        {"kind": "ServiceAccount", "name": "kube-controller-manager", "namespace": "kube-system"},
        {"kind": "ServiceAccount", "name": "leader-election-controller",
         "namespace": "kube-system"}]


def test_the_committed_json_is_what_the_generator_makes() -> None:
    """tools/gen_rbac_policy.py over the testdata copies in ../shared (skipped without them):
    the package's JSON is not edited by hand."""
    import importlib.util
    from pathlib import Path

    import pytest

    tool = Path(__file__).resolve().parents[2] / "tools" / "gen_rbac_policy.py"
    spec = importlib.util.spec_from_file_location("gen_rbac_policy", tool)
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    if not gen.DEFAULT_SOURCE.is_dir():
        pytest.skip(f"no {gen.DEFAULT_SOURCE}")
    assert gen.OUTPUT.read_text() == gen.render(gen.build(gen.DEFAULT_SOURCE))
