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
