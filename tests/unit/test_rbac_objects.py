"""RBAC kinds as data: kube's validation texts (pkg/apis/rbac/validation), the v1 defaulters
(subjects' and roleRef's apiGroup) and the binding Table cells (printers.go printRoleBinding)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubewire.resources import REGISTRY, Resource
from kubewire.server.tables.columns import column_definitions, row_cells
from kubewire.server.writes.defaults import apply_kind_defaults
from kubewire.server.writes.validation.kinds import validate_kind

GROUP = "rbac.authorization.k8s.io"
NOW = datetime(2025, 3, 10, 12, 0, 0, tzinfo=UTC)


def res(plural: str) -> Resource:
    found = REGISTRY.lookup(GROUP, "v1", plural)
    assert found is not None
    return found


def texts(plural: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [str(e) for e in validate_kind(res(plural), obj, old)]


def binding(kind: str = "ClusterRole", name: str = "view", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": "b"}, "roleRef": {"apiGroup": GROUP, "kind": kind, "name": name},
            **extra}


def test_policy_rules_in_kube_order() -> None:
    role = {"metadata": {"name": "r"}, "rules": [
        {"nonResourceURLs": ["/healthz"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["a", "b"], "resourceNames": ["x"]},
        {"verbs": ["get"]},
        {"verbs": ["get"], "nonResourceURLs": ["/x"], "resources": ["pods"]},
    ]}
    assert texts("roles", role) == [
        'rules[0].nonResourceURLs: Invalid value: []string{"/healthz"}: namespaced rules '
        "cannot apply to non-resource URLs",
        "rules[1].verbs: Required value: verbs must contain at least one value",
        "rules[1].resourceNames: Required value: resource names cannot apply to multiple "
        "resources",
        "rules[2].apiGroups: Required value: resource rules must supply at least one api group",
        "rules[2].resources: Required value: resource rules must supply at least one resource",
        'rules[3].nonResourceURLs: Invalid value: []string{"/x"}: namespaced rules cannot '
        "apply to non-resource URLs",
        'rules[3].nonResourceURLs: Invalid value: []string{"/x"}: rules cannot apply to both '
        "regular resources and non-resource URLs",
    ]
    cluster_role = {"metadata": {"name": "r"}, "rules": [
        {"nonResourceURLs": ["/healthz", "/metrics"], "verbs": ["get"]}]}
    assert texts("clusterroles", cluster_role) == []
    assert texts("clusterroles", {"metadata": {"name": "r"}, "rules": None}) == []


def test_binding_role_ref_and_subjects() -> None:
    subjects = [{"kind": "ServiceAccount", "name": "Bad_Name", "apiGroup": "x"},
                {"kind": "User", "name": "", "apiGroup": ""},
                {"kind": "Robot", "name": "r"}]
    assert texts("clusterrolebindings", binding("Role", "", subjects=subjects)) == [
        'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"',
        "roleRef.name: Required value",
        'subjects[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must '
        "consist of lower case alphanumeric characters, '-' or '.', and must start and end "
        "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        'subjects[0].apiGroup: Unsupported value: "x": supported values: ""',
        "subjects[0].namespace: Required value",
        "subjects[1].name: Required value",
        'subjects[1].name: Invalid value: "": user name cannot be empty',
        'subjects[1].apiGroup: Unsupported value: "": supported values: '
        '"rbac.authorization.k8s.io"',
        'subjects[2].kind: Unsupported value: "Robot": supported values: "ServiceAccount", '
        '"User", "Group"',
    ]
    # a RoleBinding may name a Role, and its ServiceAccount subjects need no namespace
    sa = [{"kind": "ServiceAccount", "name": "app"}]
    assert texts("rolebindings", binding("Role", "r", subjects=sa)) == []
    assert texts("rolebindings", {"metadata": {"name": "b"},
                                  "roleRef": {"apiGroup": "x", "kind": "Pod", "name": "a/b"}}) == [
        'roleRef.apiGroup: Unsupported value: "x": supported values: '
        '"rbac.authorization.k8s.io"',
        'roleRef.kind: Unsupported value: "Pod": supported values: "Role", "ClusterRole"',
        "roleRef.name: Invalid value: \"a/b\": may not contain '/'",
    ]


def test_role_ref_cannot_change() -> None:
    old = binding(name="view")
    assert texts("rolebindings", binding(name="view"), old) == []
    assert texts("clusterrolebindings", binding(name="edit"), old) == [
        'roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", '
        'Kind:"ClusterRole", Name:"edit"}: cannot change roleRef']


def test_subject_and_role_ref_api_groups_are_defaulted() -> None:
    obj = {"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
           "subjects": [{"kind": "User", "name": "u"}, {"kind": "Group", "name": "g"},
                        {"kind": "ServiceAccount", "name": "s", "namespace": "n"},
                        {"kind": "Robot", "name": "r"}]}
    for plural in ("rolebindings", "clusterrolebindings"):
        out = apply_kind_defaults(res(plural), obj)
        assert out["roleRef"]["apiGroup"] == GROUP
        assert [s.get("apiGroup") for s in out["subjects"]] == [GROUP, GROUP, None, None]
        assert apply_kind_defaults(res(plural), out) == out
    assert "apiGroup" not in obj["roleRef"]  # the input is untouched


def test_binding_table_cells() -> None:
    obj = binding(subjects=[
        {"kind": "User", "name": "jane"}, {"kind": "Group", "name": "devs"},
        {"kind": "User", "name": "joe"},
        {"kind": "ServiceAccount", "name": "app", "namespace": "default"}])
    obj["metadata"]["creationTimestamp"] = "2025-03-10T11:59:00Z"
    for plural in ("rolebindings", "clusterrolebindings"):
        names = [(c["name"], c["priority"]) for c in column_definitions(res(plural))]
        assert names == [("Name", 0), ("Role", 0), ("Age", 0), ("Users", 1), ("Groups", 1),
                         ("ServiceAccounts", 1)]
        assert row_cells(res(plural), obj, NOW) == [
            "b", "ClusterRole/view", "60s", "jane, joe", "devs", "default/app"]
    for plural in ("roles", "clusterroles"):
        assert [c["name"] for c in column_definitions(res(plural))] == ["Name", "Created At"]


@pytest.mark.parametrize("plural", ["roles", "rolebindings", "clusterroles",
                                    "clusterrolebindings"])
def test_rbac_entries(plural: str) -> None:
    entry = res(plural)
    assert entry.id == f"{GROUP}/{plural}"
    assert entry.namespaced == (plural in ("roles", "rolebindings"))
    assert entry.allow_create_on_update and entry.allow_unconditional_update
    assert entry.name_rule == "path" and entry.generation == "none"
