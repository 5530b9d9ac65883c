"""kube's RBAC authorizer (plugin/pkg/auth/authorizer/rbac/rbac.go) over the server's RBAC objects.

A request is allowed by the first rule, of the ClusterRoleBindings and then the request
namespace's RoleBindings whose subjects name the user (by name, group or service account:
``rbac_rules.applies_to_user``), that allows it (``rule_allows``): the reason is kube's
``RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to User "u"``. Otherwise no
opinion, with ``RBAC: <errors>`` when a binding's role could not be read (as kube's informer
listers word it: ``clusterrole.rbac.authorization.k8s.io "x" not found``), else no reason.
``rules_for`` is ``RBACAuthorizer.RulesFor``: every rule held, split into resource and
non-resource rules in the JSON shape of ``ResourceRule`` / ``NonResourceRule``.

Why not a walk over every binding per request, as kube's Go does: in Python that is a
millisecond per thousand bindings. So, per revision of the four RBAC kinds (``RbacSource.
revision``; a write to one of them starts the memos again):

- bindings are indexed by subject (``User``/``Group``/service-account user name -> positions),
  ClusterRoleBindings once and each namespace's RoleBindings the first time it is asked for
  (an index is rebuilt only when a binding of its kind changed);
- the rules a (user, groups, namespace) holds are resolved once, in kube's visiting order
  (cluster bindings first, each kind in the store's key order), with the error texts;
- decisions are kept per (user, groups, namespace, verb, group, resource, subresource, name,
  path);
- a role's rules are parsed once and shared by every user's resolved grants (8,000 users in
  distinct namespaces held 73 MB of copies of ``admin``'s rules).

Each memo is bounded by count and by bytes (``MEMO_LIMIT`` entries, or keys of ``MEMO_BYTES``
characters: past either, it starts again): a request's user, groups, namespace, name and path
are the client's to choose, each up to the request head's 1 MiB, so a count alone would let
8,192 requests with long names hold gigabytes. Pure: objects in through the ``RbacSource``
protocol, decisions out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kubewire.go_text import go_quote
from kubewire.rbac_rules import (
    RBAC_GROUP,
    SERVICE_ACCOUNT_PREFIX,
    RbacObjects,
    Rule,
    Subject,
    go_errors,
    rule_allows,
    rules_of,
)
from kubewire.server.access.authz import Attributes, Decision, RulesResult

MEMO_LIMIT = 8192
MEMO_BYTES = 4 * 1024 * 1024  # characters of keys one memo holds (about that many bytes)
NO_OPINION = Decision(allowed=False, denied=False, reason="")


Revision = tuple[int, int, int, int]
"""The newest revisions of ClusterRoleBindings, RoleBindings, ClusterRoles and Roles."""


class RbacSource(RbacObjects, Protocol):
    """Roles and bindings, and the newest revision that touched each kind (``Revision``)."""

    def revision(self) -> Revision: ...


@dataclass(frozen=True, slots=True)
class Grant:
    """The rules one binding gives, and kube's description of it (``source.String()``)."""

    source: str
    rules: tuple[Rule, ...]


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a user holds in a namespace: grants in kube's visiting order, and the errors."""

    grants: tuple[Grant, ...]
    errors: tuple[str, ...]


# subject key -> [(binding position, subject position)]
_Index = dict[tuple[str, str], list[tuple[int, int]]]
_Bindings = list[Mapping[str, Any]]


def _text(obj: Mapping[str, Any] | None, key: str) -> str:
    value = obj.get(key) if obj is not None else None
    return value if isinstance(value, str) else ""


def _subject_key(subject: Mapping[str, Any], namespace: str) -> tuple[str, str] | None:
    """The index key ``applies_to_user`` matches a subject by; None if it matches nobody."""
    kind, name = _text(subject, "kind"), _text(subject, "name")
    if kind in ("User", "Group"):
        return kind, name
    if kind == "ServiceAccount":
        sa_namespace = _text(subject, "namespace") or namespace
        return ("User", f"{SERVICE_ACCOUNT_PREFIX}{sa_namespace}:{name}") if sa_namespace \
            else None
    return None


def _index(bindings: _Bindings, namespace: str) -> _Index:
    index: _Index = {}
    for position, binding in enumerate(bindings):
        subjects = binding.get("subjects")
        if not isinstance(subjects, list):
            continue
        for subject_position, subject in enumerate(subjects):
            key = _subject_key(subject, namespace) if isinstance(subject, dict) else None
            if key is not None:
                index.setdefault(key, []).append((position, subject_position))
    return index


def _matches(index: _Index, user: Subject) -> list[tuple[int, int]]:
    """The positions of the bindings naming ``user``, in order, each with the first of its
    subjects that does (kube's ``appliesTo``)."""
    first: dict[int, int] = {}
    for key in (("User", user.name), *(("Group", g) for g in user.groups)):
        for position, subject_position in index.get(key, ()):
            seen = first.get(position)
            if seen is None or subject_position < seen:
                first[position] = subject_position
    return sorted(first.items())


def describe_subject(subject: Mapping[str, Any], binding_namespace: str) -> str:
    """rule.go ``describeSubject``."""
    kind, name = _text(subject, "kind"), _text(subject, "name")
    if kind == "ServiceAccount":
        namespace = _text(subject, "namespace") or binding_namespace
        return f"{kind} {go_quote(name + '/' + namespace)}"
    return f"{kind} {go_quote(name)}"


def describe_binding(binding: Mapping[str, Any], subject: Mapping[str, Any],
                     namespace: str) -> str:
    """``clusterRoleBindingDescriber`` / ``roleBindingDescriber``."""
    meta = binding.get("metadata")
    name = _text(meta if isinstance(meta, dict) else None, "name")
    ref = binding.get("roleRef")
    role_ref = ref if isinstance(ref, dict) else {}
    kind, role = _text(role_ref, "kind"), _text(role_ref, "name")
    if namespace:
        return (f"RoleBinding {go_quote(name + '/' + namespace)} of {kind} {go_quote(role)} "
                f"to {describe_subject(subject, namespace)}")
    return (f"ClusterRoleBinding {go_quote(name)} of {kind} {go_quote(role)} "
            f"to {describe_subject(subject, '')}")


def rule_infos(rules: list[Rule]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``RBACAuthorizer.RulesFor``'s split: a rule with resources is a ``ResourceRule``, one
    with URLs a ``NonResourceRule`` (a rule with both is both), as their JSON (omitempty)."""
    resource_rules: list[dict[str, Any]] = []
    non_resource_rules: list[dict[str, Any]] = []
    for rule in rules:
        if rule.resources:
            info: dict[str, Any] = {"verbs": list(rule.verbs)}
            for key, values in (("apiGroups", rule.api_groups), ("resources", rule.resources),
                                ("resourceNames", rule.resource_names)):
                if values:
                    info[key] = list(values)
            resource_rules.append(info)
        if rule.non_resource_urls:
            non_resource_rules.append({"verbs": list(rule.verbs),
                                       "nonResourceURLs": list(rule.non_resource_urls)})
    return resource_rules, non_resource_rules


V = TypeVar("V")


def _key_size(key: object) -> int:
    """The characters a memo key holds (its strings and tuples of strings; 8 for the rest)."""
    if isinstance(key, str):
        return len(key)
    if isinstance(key, tuple):
        return sum(_key_size(part) for part in key)
    return 8


class _Memo(Generic[V]):
    """A dict bounded by entries and by the characters of its keys: past either bound it
    starts again (every entry is cheap to work out again)."""

    def __init__(self) -> None:
        self.items: dict[Any, V] = {}
        self.size = 0  # characters of the keys held

    def get(self, key: Any) -> V | None:
        return self.items.get(key)

    def put(self, key: Any, value: V) -> V:
        size = _key_size(key)
        if len(self.items) >= MEMO_LIMIT or self.size + size > MEMO_BYTES:
            self.clear()
        if size <= MEMO_BYTES:
            self.items[key] = value
            self.size += size
        return value

    def clear(self) -> None:
        self.items.clear()
        self.size = 0

    def __len__(self) -> int:
        return len(self.items)


class RbacAuthorizer:
    """``RBACAuthorizer``: ``decide`` (Allow or NoOpinion) and ``rules_for``."""

    def __init__(self, objects: RbacSource) -> None:
        self.objects = objects
        self._revision: Revision | None = None
        self._cluster: tuple[_Bindings, _Index] | None = None
        self._namespaced: _Memo[tuple[_Bindings, _Index]] = _Memo()
        self._resolved: _Memo[Resolved] = _Memo()
        self._decisions: _Memo[Decision] = _Memo()
        # a role's parsed rules, by the identity of the role object the source handed out
        # (kept, so the identity stays its own): every resolved user shares them
        self._rules: _Memo[tuple[Mapping[str, Any], tuple[Rule, ...]]] = _Memo()

    def _current(self) -> None:
        """Forget everything when an RBAC object changed since it was worked out."""
        revision = self.objects.revision()
        seen = self._revision
        if revision != seen:
            if seen is None or revision[0] != seen[0]:
                self._cluster = None  # a ClusterRoleBinding changed
            if seen is None or revision[1] != seen[1]:
                self._namespaced.clear()  # a RoleBinding changed
            self._revision = revision
            self._resolved.clear()
            self._decisions.clear()
            self._rules.clear()

    def _bindings(self, namespace: str) -> tuple[_Bindings, _Index]:
        if not namespace:
            if self._cluster is None:
                bindings = list(self.objects.cluster_role_bindings())
                self._cluster = bindings, _index(bindings, "")
            return self._cluster
        found = self._namespaced.get(namespace)
        if found is None:
            bindings = list(self.objects.role_bindings(namespace))
            found = self._namespaced.put(namespace, (bindings, _index(bindings, namespace)))
        return found

    def _role_rules(self, role_ref: Mapping[str, Any], namespace: str) -> tuple[Rule, ...]:
        """``GetRoleReferenceRules`` over informer listers: their NotFound names the resource
        in the singular (``role.rbac.authorization.k8s.io "x" not found``)."""
        kind, name = _text(role_ref, "kind"), _text(role_ref, "name")
        if kind == "Role":
            role = self.objects.role(namespace, name) if namespace else None
            if role is None:
                raise LookupError(f"role.{RBAC_GROUP} {go_quote(name)} not found")
            return self._parsed(role)
        if kind == "ClusterRole":
            cluster_role = self.objects.cluster_role(name)
            if cluster_role is None:
                raise LookupError(f"clusterrole.{RBAC_GROUP} {go_quote(name)} not found")
            return self._parsed(cluster_role)
        raise LookupError(f"unsupported role reference kind: {go_quote(kind)}")

    def _parsed(self, role: Mapping[str, Any]) -> tuple[Rule, ...]:
        found = self._rules.get(id(role))
        if found is not None and found[0] is role:
            return found[1]
        return self._rules.put(id(role), (role, rules_of(role)))[1]

    def resolve(self, user: Subject, namespace: str) -> Resolved:
        """``VisitRulesFor`` without the visitor: every grant and error, in kube's order."""
        self._current()
        key = (user.name, tuple(user.groups), namespace)
        found = self._resolved.get(key)
        if found is not None:
            return found
        grants: list[Grant] = []
        errors: list[str] = []
        for scope in ("", namespace) if namespace else ("",):
            bindings, index = self._bindings(scope)
            for position, subject_position in _matches(index, user):
                binding = bindings[position]
                ref = binding.get("roleRef")
                try:
                    rules = self._role_rules(ref if isinstance(ref, dict) else {}, scope)
                except LookupError as err:
                    errors.append(str(err.args[0]))
                    continue
                subject = binding["subjects"][subject_position]
                grants.append(Grant(describe_binding(binding, subject, scope), rules))
        return self._resolved.put(key, Resolved(tuple(grants), tuple(errors)))

    def decide(self, attrs: Attributes) -> Decision:
        self._current()
        user = attrs.user
        key = (user.name, user.groups, attrs.namespace, attrs.verb, attrs.resource_request,
               attrs.api_group, attrs.resource, attrs.subresource, attrs.name,
               "" if attrs.resource_request else attrs.path)
        found = self._decisions.get(key)
        if found is not None:
            return found
        resolved = self.resolve(user, attrs.namespace)
        decision = NO_OPINION
        for grant in resolved.grants:
            if any(rule_allows(attrs, rule) for rule in grant.rules):
                decision = Decision(allowed=True, denied=False,
                                    reason=f"RBAC: allowed by {grant.source}")
                break
        else:
            if resolved.errors:
                decision = Decision(allowed=False, denied=False,
                                    reason=f"RBAC: {go_errors(resolved.errors)}")
        return self._decisions.put(key, decision)

    def rules_for(self, user: Subject, namespace: str) -> RulesResult:
        resolved = self.resolve(user, namespace)
        resource_rules, non_resource_rules = rule_infos(
            [rule for grant in resolved.grants for rule in grant.rules])
        return RulesResult(resource_rules, non_resource_rules, False,
                           go_errors(resolved.errors) if resolved.errors else "")
