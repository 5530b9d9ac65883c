"""Rule resolution, coverage and escalation decisions (kubewire.rbac_rules, access/rbac_escalation),
against kube's cases (policy_comparator_test.go, rule_test.go, escalation_check.go)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from kubewire.rbac_rules import (
    Rule,
    RuleResolver,
    compact_rules,
    confirm_no_escalation,
    covers,
    rule_allows,
)
from kubewire.server.access.rbac_escalation import (
    AGGREGATION_MESSAGE,
    Check,
    Write,
    check_binding_write,
    check_role_write,
    only_gc_fields_changed,
)

G = "rbac.authorization.k8s.io"


def rule(verbs: str, groups: str = "", resources: str = "", names: str = "",
         urls: str = "") -> Rule:
    def split(text: str) -> tuple[str, ...]:
        return tuple(text.split(",")) if text else ()

    groups_t = ("",) if groups == "" and resources else split(groups)
    return Rule(split(verbs), groups_t, split(resources), split(names), split(urls))


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()


@dataclass
class Objects:
    roles: dict[tuple[str, str], dict[str, Any]]
    cluster_roles: dict[str, dict[str, Any]]
    bindings: list[dict[str, Any]]
    cluster_bindings: list[dict[str, Any]]

    def role(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.roles.get((namespace, name))

    def cluster_role(self, name: str) -> Mapping[str, Any] | None:
        return self.cluster_roles.get(name)

    def role_bindings(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return [b for b in self.bindings if b["metadata"]["namespace"] == namespace]

    def cluster_role_bindings(self) -> Iterable[Mapping[str, Any]]:
        return self.cluster_bindings


def as_json(*rules: Rule) -> list[dict[str, list[str]]]:
    return [r.to_json() for r in rules]


def binding(name: str, kind: str, role: str, subjects: list[dict[str, str]],
            namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "roleRef": {"apiGroup": G, "kind": kind, "name": role},
            "subjects": subjects}


POD_READER = rule("get,list,watch", "", "pods")
OBJECTS = Objects(
    roles={("team", "pod-reader"): {"rules": as_json(POD_READER)},
           ("team", "secrets"): {"rules": as_json(rule("get", "", "secrets"))}},
    cluster_roles={"node-reader": {"rules": as_json(rule("get", "", "nodes"))},
                   "bind-view": {"rules": as_json(rule("bind", G, "clusterroles",
                                                       "view"))},
                   "view": {"rules": as_json(rule("get,list", "", "pods,configmaps"))},
                   "edit": {"rules": as_json(rule("*", "", "pods"))},
                   "escalator": {"rules": as_json(rule("escalate", G, "roles"))}},
    bindings=[binding("read", "Role", "pod-reader", [{"kind": "User", "name": "dev"}], "team"),
              binding("sa", "Role", "secrets",
                      [{"kind": "ServiceAccount", "name": "app"}], "team"),
              binding("gone", "Role", "missing", [{"kind": "User", "name": "dev"}], "team"),
              binding("other", "ClusterRole", "edit", [{"kind": "User", "name": "dev"}],
                      "elsewhere")],
    cluster_bindings=[binding("nodes", "ClusterRole", "node-reader",
                              [{"kind": "Group", "name": "devs"}])],
)
RESOLVER = RuleResolver(OBJECTS)


def test_rules_for_follows_bindings_and_reports_missing_roles() -> None:
    rules, errors = RESOLVER.rules_for(User("dev", ("devs",)), "team")
    assert rules == [rule("get", "", "nodes"), POD_READER]
    assert errors == ['roles.rbac.authorization.k8s.io "missing" not found']
    assert RESOLVER.rules_for(User("dev"), "")[0] == []  # cluster scope: cluster bindings only
    # a ServiceAccount subject without a namespace is the binding's
    sa = User("system:serviceaccount:team:app")
    assert RESOLVER.rules_for(sa, "team")[0] == [rule("get", "", "secrets")]
    assert RESOLVER.rules_for(User("system:serviceaccount:other:app"), "team")[0] == []


@pytest.mark.parametrize(("owner", "servant", "ok"), [
    ([rule("*", "*", "*")], [rule("get", "", "pods")], True),
    ([rule("get", "", "pods")], [rule("get,list", "", "pods")], False),
    ([rule("get", "", "pods")], [rule("get", "", "pods", "a")], True),
    ([rule("get", "", "pods", "a")], [rule("get", "", "pods")], False),
    ([rule("get", "", "pods", "a,b")], [rule("get", "", "pods", "b")], True),
    ([rule("get", "", "*/status")], [rule("get", "", "pods/status")], True),
    ([rule("get", "", "*/status")], [rule("get", "", "pods")], False),
    ([rule("get", urls="/api/*")], [rule("get", urls="/api/v1")], True),
    ([rule("get", urls="/api")], [rule("get", urls="/apis")], False),
    ([rule("get", "apps", "deployments")], [rule("get", "*", "deployments")], False),
])
def test_covers(owner: list[Rule], servant: list[Rule], ok: bool) -> None:
    assert covers(owner, servant)[0] is ok


def test_compact_joins_simple_rules_verbs() -> None:
    missing = covers([], [rule("get,list", "", "pods"), rule("get", "", "pods", "x")])[1]
    assert compact_rules(missing) == [rule("get", "", "pods", "x"), rule("get,list", "", "pods")]


def test_escalation_message_is_kubes() -> None:
    message = confirm_no_escalation(RESOLVER, User("dev", ("devs", "system:authenticated")),
                                    "team", [rule("get,create", "", "pods,secrets")])
    assert message == (
        'user "dev" (groups=["devs" "system:authenticated"]) is attempting to grant RBAC '
        "permissions not currently held:\n"
        '{APIGroups:[""], Resources:["pods"], Verbs:["create"]}\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "create"]}'
        '; resolution errors: [roles.rbac.authorization.k8s.io "missing" not found]')
    assert confirm_no_escalation(RESOLVER, User("dev", ("devs",)), "team",
                                 [rule("get", "", "pods"), rule("get", "", "nodes")]) == ""


@dataclass(frozen=True)
class Attrs:
    verb: str
    resource_request: bool = True
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


@pytest.mark.parametrize(("attrs", "allowed"), [
    (Attrs("get", resource="pods"), True),
    (Attrs("get", resource="pods", subresource="log"), False),
    (Attrs("delete", resource="pods"), False),
    (Attrs("get", api_group="apps", resource="pods"), False),
    (Attrs("get", resource_request=False, path="/healthz"), False),
])
def test_rule_allows(attrs: Attrs, allowed: bool) -> None:
    assert rule_allows(attrs, POD_READER) is allowed
    assert rule_allows(Attrs("get", resource="pods", subresource="log"),
                       rule("get", "", "*/log"))
    assert rule_allows(Attrs("get", resource_request=False, path="/healthz/ping"),
                       rule("get", urls="/healthz/*"))


def never(check: Check) -> bool:
    return False


def test_role_write_needs_held_rules_or_escalate() -> None:
    dev = User("dev", ("devs",))
    role = {"metadata": {"name": "r", "namespace": "team"},
            "rules": as_json(rule("get,delete", "", "pods"))}
    refused = check_role_write(RESOLVER, dev, never, Write("roles", "team", "", role))
    assert refused is not None and refused.code == 403
    assert refused.message == (
        'roles.rbac.authorization.k8s.io "r" is forbidden: user "dev" (groups=["devs"]) is '
        "attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}'
        '; resolution errors: [roles.rbac.authorization.k8s.io "missing" not found]')
    assert refused.details == {"name": "r", "group": G, "kind": "roles"}
    held = {**role, "rules": as_json(rule("get", "", "pods"))}
    assert check_role_write(RESOLVER, dev, never, Write("roles", "team", "", held)) is None
    asked: list[Check] = []

    def escalate(check: Check) -> bool:
        asked.append(check)
        return check.verb == "escalate"

    assert check_role_write(RESOLVER, dev, escalate, Write("roles", "team", "r", role)) is None
    assert asked == [Check("escalate", "team", G, "roles", "r")]
    admin = User("root", ("system:masters",))
    assert check_role_write(RESOLVER, admin, never, Write("roles", "team", "", role)) is None
    # an update that changes only what the garbage collector changes is never checked
    owned = {**role, "metadata": {**role["metadata"], "finalizers": ["x"]}}
    assert check_role_write(RESOLVER, dev, never, Write("roles", "team", "r", owned, role)) is None
    assert only_gc_fields_changed(owned, role) and not only_gc_fields_changed(owned, None)


def test_aggregation_rule_needs_full_authority() -> None:
    user = User("dev", ("devs",))
    aggregated = {"metadata": {"name": "agg"}, "rules": [],
                  "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}}
    refused = check_role_write(RESOLVER, user, never, Write("clusterroles", "", "", aggregated))
    assert refused is not None
    assert refused.message == ('clusterroles.rbac.authorization.k8s.io "agg" is forbidden: '
                               + AGGREGATION_MESSAGE)
    # an update of an aggregated role needs it too (kube checks the old object as well), unless
    # it only changes what the garbage collector changes
    relabelled = {**aggregated, "metadata": {"name": "agg", "labels": {"x": "y"}}}
    refused = check_role_write(RESOLVER, user, never,
                               Write("clusterroles", "", "agg", relabelled, aggregated))
    assert refused is not None and refused.message.endswith(AGGREGATION_MESSAGE)
    plain = {"metadata": {"name": "agg"}, "rules": []}
    assert check_role_write(RESOLVER, user, never,
                            Write("clusterroles", "", "agg", plain, aggregated)) is not None
    finalized = {**aggregated, "metadata": {"name": "agg", "finalizers": ["f"]}}
    assert check_role_write(RESOLVER, user, never,
                            Write("clusterroles", "", "agg", finalized, aggregated)) is None
    empty = {**aggregated, "aggregationRule": {"clusterRoleSelectors": []}}
    assert check_role_write(RESOLVER, user, never,
                            Write("clusterroles", "", "", empty, None)) is None


def test_binding_write_needs_held_rules_or_bind() -> None:
    dev = User("dev", ("devs",))
    to_edit = binding("b", "ClusterRole", "edit", [{"kind": "User", "name": "x"}], "team")
    refused = check_binding_write(RESOLVER, dev, never, Write("rolebindings", "team", "", to_edit))
    assert refused is not None
    assert refused.message.startswith(
        'rolebindings.rbac.authorization.k8s.io "b" is forbidden: user "dev" (groups=["devs"]) '
        "is attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["pods"], Verbs:["*"]}')
    to_reader = binding("b", "Role", "pod-reader", [{"kind": "User", "name": "x"}], "team")
    assert check_binding_write(RESOLVER, dev, never,
                               Write("rolebindings", "team", "", to_reader)) is None
    asked: list[Check] = []

    def bind(check: Check) -> bool:
        asked.append(check)
        return True

    assert check_binding_write(RESOLVER, dev, bind,
                               Write("rolebindings", "team", "", to_edit)) is None
    assert asked == [Check("bind", "team", G, "clusterroles", "edit")]
    missing = binding("b", "ClusterRole", "nope", [], "")
    refused = check_binding_write(RESOLVER, dev, never,
                                  Write("clusterrolebindings", "", "", missing))
    assert refused is not None and refused.message == (
        'clusterrolebindings.rbac.authorization.k8s.io "b" is forbidden: '
        'clusterroles.rbac.authorization.k8s.io "nope" not found')
