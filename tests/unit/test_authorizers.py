"""The authorizer chain (``access/authorizers.py``) and the RBAC authorizer
(``access/rbac_authorizer.py``): kube's union, privileged group, AlwaysDeny, ABAC and RBAC
decisions, reasons and ``RulesFor``, over RBAC objects held in dicts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from kubewire.server.access.authn import UserInfo
from kubewire.server.access.authorizers import (
    AuthorizationModeError,
    Chain,
    build_chain,
    parse_modes,
)
from kubewire.server.access.authz import Attributes, Decision, Policy, RulesResult

GROUP = "rbac.authorization.k8s.io"
ALICE = UserInfo("alice", groups=("devs", "system:authenticated"))
KINDS = ("clusterrolebindings", "rolebindings", "clusterroles", "roles")
SA = UserInfo("system:serviceaccount:team:robot", groups=("system:serviceaccounts",))


class Objects:
    """``RbacSource`` over dicts; ``revision`` moves with every ``put``."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.revisions = dict.fromkeys(KINDS, 0)
        self.reads: dict[str, int] = dict.fromkeys(KINDS[:2], 0)  # listings of bindings

    def put(self, plural: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.items[(plural, meta.get("namespace", ""), meta["name"])] = obj
        self.revisions[plural] = max(self.revisions.values()) + 1

    def revision(self) -> tuple[int, int, int, int]:
        a, b, c, d = (self.revisions[kind] for kind in KINDS)
        return a, b, c, d

    def role(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.items.get(("roles", namespace, name))

    def cluster_role(self, name: str) -> Mapping[str, Any] | None:
        return self.items.get(("clusterroles", "", name))

    def _all(self, plural: str, namespace: str) -> Iterable[Mapping[str, Any]]:
        self.reads[plural] += 1
        return [obj for (p, ns, _), obj in sorted(self.items.items(), key=lambda kv: kv[0])
                if p == plural and ns == namespace]

    def role_bindings(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return self._all("rolebindings", namespace)

    def cluster_role_bindings(self) -> Iterable[Mapping[str, Any]]:
        return self._all("clusterrolebindings", "")


def role(plural: str, name: str, rules: list[dict[str, Any]], namespace: str = "") -> tuple[
        str, dict[str, Any]]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return plural, {"metadata": meta, "rules": rules}


def binding(name: str, role_kind: str, role_name: str, subjects: list[dict[str, Any]],
            namespace: str = "") -> tuple[str, dict[str, Any]]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return ("rolebindings" if namespace else "clusterrolebindings",
            {"metadata": meta, "roleRef": {"apiGroup": GROUP, "kind": role_kind,
                                           "name": role_name}, "subjects": subjects})


def user(name: str) -> dict[str, Any]:
    return {"kind": "User", "apiGroup": GROUP, "name": name}


def group(name: str) -> dict[str, Any]:
    return {"kind": "Group", "apiGroup": GROUP, "name": name}


PODS_READ = [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]


@pytest.fixture
def objects() -> Objects:
    store = Objects()
    for plural, obj in (
            role("clusterroles", "pods-read", PODS_READ),
            role("clusterroles", "metrics", [{"nonResourceURLs": ["/metrics", "/logs/*"],
                                               "verbs": ["get"]}]),
            role("roles", "cm", [{"apiGroups": [""], "resources": ["configmaps"],
                                  "resourceNames": ["app"], "verbs": ["update"]}],
                 namespace="team"),
            binding("devs-read", "ClusterRole", "pods-read", [user("x"), group("devs")],
                    namespace="team"),
            binding("alice-cm", "Role", "cm", [user("alice")], namespace="team"),
            binding("alice-metrics", "ClusterRole", "metrics", [user("alice")]),
            binding("robot", "ClusterRole", "pods-read",
                    [{"kind": "ServiceAccount", "name": "robot"}], namespace="team")):
        store.put(plural, obj)
    return store


def attrs(who: UserInfo, verb: str, resource: str = "", namespace: str = "", *,
          name: str = "", subresource: str = "", group_: str = "", path: str = "") -> Attributes:
    return Attributes(user=who, verb=verb, path=path, resource_request=bool(resource),
                      namespace=namespace, api_group=group_, resource=resource,
                      subresource=subresource, name=name)


def rbac(objects: Objects, modes: str = "RBAC") -> Chain:
    return build_chain(parse_modes(modes, False), None, objects)


def test_rbac_allows_with_kubes_reasons(objects: Objects) -> None:
    chain = rbac(objects)
    assert chain.decide(attrs(ALICE, "list", "pods", "team")) == Decision(
        True, False, 'RBAC: allowed by RoleBinding "devs-read/team" of ClusterRole "pods-read" '
        'to Group "devs"')
    assert chain.decide(attrs(ALICE, "get", "pods", "team", subresource="log")).allowed
    assert chain.decide(attrs(ALICE, "update", "configmaps", "team", name="app")) == Decision(
        True, False, 'RBAC: allowed by RoleBinding "alice-cm/team" of Role "cm" to User "alice"')
    assert chain.decide(attrs(ALICE, "get", path="/logs/x")) == Decision(
        True, False, 'RBAC: allowed by ClusterRoleBinding "alice-metrics" of ClusterRole '
        '"metrics" to User "alice"')
    assert chain.decide(attrs(SA, "get", "pods", "team")) == Decision(
        True, False, 'RBAC: allowed by RoleBinding "robot/team" of ClusterRole "pods-read" to '
        'ServiceAccount "robot/team"')


def test_rbac_has_no_opinion_elsewhere(objects: Objects) -> None:
    chain = rbac(objects)
    for refused in (attrs(ALICE, "list", "pods", "other"), attrs(ALICE, "list", "pods"),
                    attrs(ALICE, "watch", "pods", "team"),
                    attrs(ALICE, "update", "configmaps", "team", name="other"),
                    attrs(ALICE, "get", "pods", "team", subresource="exec"),
                    attrs(ALICE, "get", path="/healthz"),
                    attrs(UserInfo("bob"), "list", "pods", "team")):
        assert chain.decide(refused) == Decision(False, False, ""), refused
    assert chain.authorize(attrs(ALICE, "list", "pods", "other")) == (False, "")


def test_missing_roles_are_the_reason_in_the_listers_words(objects: Objects) -> None:
    chain = rbac(objects)
    objects.put(*binding("ghost", "ClusterRole", "ghost", [user("alice")], namespace="team"))
    assert chain.decide(attrs(ALICE, "delete", "pods", "team")) == Decision(
        False, False, 'RBAC: clusterrole.rbac.authorization.k8s.io "ghost" not found')
    objects.put(*binding("nope", "Role", "nope", [group("devs")], namespace="team"))
    assert chain.decide(attrs(ALICE, "delete", "pods", "team")).reason == (
        'RBAC: [clusterrole.rbac.authorization.k8s.io "ghost" not found, '
        'role.rbac.authorization.k8s.io "nope" not found]')
    # errors do not stop a rule elsewhere from allowing
    assert chain.decide(attrs(ALICE, "list", "pods", "team")).allowed
    result = chain.rules_for(ALICE, "team")
    assert result.evaluation_error == (
        '[clusterrole.rbac.authorization.k8s.io "ghost" not found, '
        'role.rbac.authorization.k8s.io "nope" not found]')


def test_an_rbac_change_is_seen_at_once_and_reads_are_memoized(objects: Objects) -> None:
    chain = rbac(objects)
    refused = attrs(UserInfo("bob"), "list", "pods", "team")
    assert not chain.decide(refused).allowed
    assert objects.reads == {"clusterrolebindings": 1, "rolebindings": 1}
    for _ in range(5):
        chain.decide(refused)
        chain.decide(attrs(ALICE, "list", "pods", "team"))
    assert objects.reads == {"clusterrolebindings": 1, "rolebindings": 1}  # once per revision
    objects.put(*binding("bob", "ClusterRole", "pods-read", [user("bob")]))
    assert chain.decide(refused) == Decision(
        True, False, 'RBAC: allowed by ClusterRoleBinding "bob" of ClusterRole "pods-read" to '
        'User "bob"')
    # a ClusterRoleBinding changed: only those are read again
    assert objects.reads == {"clusterrolebindings": 2, "rolebindings": 1}
    objects.put(*binding("carol", "ClusterRole", "pods-read", [user("carol")], namespace="x"))
    assert chain.decide(refused).allowed  # a RoleBinding elsewhere: the namespaces' again
    assert objects.reads == {"clusterrolebindings": 2, "rolebindings": 2}
    # a role's change is seen too
    objects.put(*role("clusterroles", "pods-read", []))
    assert not chain.decide(refused).allowed


def test_first_matching_subject_names_the_binding(objects: Objects) -> None:
    objects.put(*binding("both", "ClusterRole", "pods-read", [group("devs"), user("alice")]))
    assert rbac(objects).decide(attrs(ALICE, "get", "pods", "x")).reason == (
        'RBAC: allowed by ClusterRoleBinding "both" of ClusterRole "pods-read" to Group "devs"')


def test_union_order_and_reasons(objects: Objects) -> None:
    denied = attrs(ALICE, "list", "pods", "other")
    assert rbac(objects, "RBAC,AlwaysDeny").decide(denied) == Decision(
        False, False, "Everything is forbidden.")
    assert rbac(objects, "AlwaysDeny,RBAC").decide(attrs(ALICE, "list", "pods", "team")).allowed
    assert rbac(objects, "AlwaysDeny,AlwaysAllow").decide(denied) == Decision(True, False, "")
    objects.put(*binding("ghost", "ClusterRole", "ghost", [user("alice")]))
    policies = [Policy(user="bob", namespace="*", resource="*", api_group="*")]
    chain = build_chain(parse_modes("ABAC,RBAC,AlwaysDeny", True), policies, objects)
    assert chain.decide(denied).reason == (
        "No policy matched.\nRBAC: clusterrole.rbac.authorization.k8s.io \"ghost\" not found\n"
        "Everything is forbidden.")
    assert chain.decide(attrs(UserInfo("bob"), "delete", "pods", "x")).allowed
    # system:masters comes first, whatever the modes
    admin = UserInfo("root", groups=("system:masters",))
    assert rbac(objects, "AlwaysDeny").decide(attrs(admin, "delete", "nodes")) == Decision(
        True, False, "")


def test_rules_for_is_the_union_of_each_mode(objects: Objects) -> None:
    assert rbac(objects).rules_for(ALICE, "team") == RulesResult(
        # cluster bindings first, then the namespace's, each in key (name) order
        [{"verbs": ["update"], "apiGroups": [""], "resources": ["configmaps"],
          "resourceNames": ["app"]},
         {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"]}],
        [{"verbs": ["get"], "nonResourceURLs": ["/metrics", "/logs/*"]}], False, "")
    everything = RulesResult([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                             [{"verbs": ["*"], "nonResourceURLs": ["*"]}], False, "")
    assert rbac(objects, "AlwaysAllow").rules_for(ALICE, "team") == everything
    assert rbac(objects, "AlwaysDeny").rules_for(ALICE, "team") == RulesResult([], [], False, "")
    policies = [Policy(group="devs", namespace="team", resource="pods", api_group="",
                       readonly=True),
                Policy(user="alice", namespace="*", non_resource_path="/api/*"),
                Policy(user="bob", namespace="*", resource="*", api_group="*")]
    chain = build_chain(parse_modes("ABAC,AlwaysAllow", True), policies, None)
    result = chain.rules_for(ALICE, "team")
    assert result.resource_rules == [
        {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},
        *everything.resource_rules]
    assert result.non_resource_rules == [{"verbs": ["*"], "nonResourceURLs": ["/api/*"]},
                                         *everything.non_resource_rules]


def test_parse_modes_as_kube_validates() -> None:
    assert parse_modes("", False) == ("AlwaysAllow",)
    assert parse_modes("", True) == ("ABAC",)
    assert parse_modes("RBAC,ABAC", True) == ("RBAC", "ABAC")
    for text, policy, message in (
            ("rbac", False, 'authorization-mode "rbac" is not a valid mode'),
            ("RBAC, AlwaysDeny", False, 'authorization-mode " AlwaysDeny" is not a valid mode'),
            ("ABAC", False, "authorization-mode ABAC's authorization policy file not passed"),
            ("RBAC", True, "cannot specify --authorization-policy-file without mode ABAC"),
            ("RBAC,RBAC", False,
             'authorization-mode ["RBAC" "RBAC"] has mode specified more than once'),
            ("Node,RBAC", False, 'authorization-mode "Node" is not supported by kubewire (it '
             "serves AlwaysAllow, AlwaysDeny, ABAC, RBAC)")):
        with pytest.raises(AuthorizationModeError) as err:
            parse_modes(text, policy)
        assert str(err.value) == message, text
