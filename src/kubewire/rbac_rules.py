"""RBAC rules as kube resolves and compares them: who holds which rules, and does one set of
rules cover another. Pure: objects (decoded JSON) in, decisions out, through the ``RbacObjects``
protocol, so the escalation checks of the write path, an RBAC authorizer (access) and the
bootstrap policy's reconciliation (controllers) share it: hence a core module.

Sources (kubernetes v1.32): pkg/registry/rbac/validation/rule.go (``DefaultRuleResolver``:
``VisitRulesFor``, ``GetRoleReferenceRules``, ``appliesToUser``, ``ConfirmNoEscalation``'s
message), policy_compact.go (``CompactRules``), component-helpers auth/rbac/validation
policy_comparator.go (``Covers``, ``BreakdownRule``, ``ruleCovers``), pkg/apis/rbac/v1
evaluation_helpers.go (``VerbMatches``, ``ResourceMatches``, ..., ``CompactString``) and
plugin/pkg/auth/authorizer/rbac/rbac.go (``RuleAllows``).

Written by hand: the logic is small, and kube's exact texts (missing rules as ``%q`` of Go
string slices, sorted) are part of the wire contract.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kubewire.go_text import go_quote

RBAC_GROUP = "rbac.authorization.k8s.io"
VERB_ALL = API_GROUP_ALL = RESOURCE_ALL = NON_RESOURCE_ALL = "*"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``rbacv1.PolicyRule``; empty tuples where the JSON has none."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, rule: Mapping[str, Any]) -> Rule:
        def strings(key: str) -> tuple[str, ...]:
            value = rule.get(key)
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        return cls(strings("verbs"), strings("apiGroups"), strings("resources"),
                   strings("resourceNames"), strings("nonResourceURLs"))

    def to_json(self) -> dict[str, list[str]]:
        """The rule as the API writes it (only the lists that are set, in Go's field order)."""
        out: dict[str, list[str]] = {"verbs": list(self.verbs)}
        for key, values in (("apiGroups", self.api_groups), ("resources", self.resources),
                            ("resourceNames", self.resource_names),
                            ("nonResourceURLs", self.non_resource_urls)):
            if values:
                out[key] = list(values)
        return out

    def compact_string(self) -> str:
        """``CompactString``: ``{APIGroups:[""], Resources:["pods"], Verbs:["get"]}``."""
        parts = [f"{label}:{_go_slice(values)}" for label, values in (
            ("APIGroups", self.api_groups), ("Resources", self.resources),
            ("NonResourceURLs", self.non_resource_urls), ("ResourceNames", self.resource_names),
            ("Verbs", self.verbs)) if values]
        return "{" + ", ".join(parts) + "}"


def _go_slice(values: Sequence[str]) -> str:
    """A ``[]string`` as Go's ``%q`` prints it: ``["a" "b"]``."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"


def rules_of(obj: Mapping[str, Any] | None) -> tuple[Rule, ...]:
    """A Role's or ClusterRole's ``rules``."""
    raw = obj.get("rules") if obj is not None else None
    return tuple(Rule.from_json(r) for r in raw if isinstance(r, dict)) \
        if isinstance(raw, list) else ()


# --- covering (escalation) ---------------------------------------------------------------------

def breakdown(rule: Rule) -> list[Rule]:
    """``BreakdownRule``: one rule per (group, resource, verb[, name]) and per (URL, verb)."""
    out: list[Rule] = []
    for group in rule.api_groups:
        for resource in rule.resources:
            for verb in rule.verbs:
                if rule.resource_names:
                    out += [Rule((verb,), (group,), (resource,), (name,))
                            for name in rule.resource_names]
                else:
                    out.append(Rule((verb,), (group,), (resource,)))
    for url in rule.non_resource_urls:
        out += [Rule((verb,), non_resource_urls=(url,)) for verb in rule.verbs]
    return out


def _resources_cover(owner: Sequence[str], wanted: Sequence[str]) -> bool:
    if RESOURCE_ALL in owner or set(wanted) <= set(owner):
        return True
    for path in wanted:
        if path in owner:
            continue
        if "/" not in path:
            return False
        if "*/" + path.split("/", 1)[1] not in owner:
            return False
    return True


def _url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def rule_covers(owner: Rule, sub: Rule) -> bool:
    """``ruleCovers``: does ``owner`` allow everything the broken-down ``sub`` does."""
    verbs = VERB_ALL in owner.verbs or set(sub.verbs) <= set(owner.verbs)
    groups = API_GROUP_ALL in owner.api_groups or set(sub.api_groups) <= set(owner.api_groups)
    resources = _resources_cover(owner.resources, sub.resources)
    urls = all(any(_url_covers(o, path) for o in owner.non_resource_urls)
               for path in sub.non_resource_urls)
    if not sub.resource_names:
        names = not owner.resource_names
    else:
        names = not owner.resource_names or set(sub.resource_names) <= set(owner.resource_names)
    return verbs and groups and resources and names and urls


def covers(owner: Sequence[Rule], servant: Iterable[Rule]) -> tuple[bool, list[Rule]]:
    """``Covers``: whether ``owner`` covers every rule of ``servant``, and what it misses
    (broken down to single verbs, resources and names)."""
    missing = [sub for rule in servant for sub in breakdown(rule)
               if not any(rule_covers(o, sub) for o in owner)]
    return not missing, missing


def compact_rules(rules: Sequence[Rule]) -> list[Rule]:
    """``CompactRules``: simple rules (one group, one resource, verbs alone) of one
    group/resource joined into one rule with all their verbs."""
    compacted: list[Rule] = []
    simple: dict[tuple[str, str], Rule] = {}
    for rule in rules:
        if (rule.resource_names or rule.non_resource_urls or len(rule.api_groups) != 1
                or len(rule.resources) != 1):
            compacted.append(rule)
            continue
        key = (rule.api_groups[0], rule.resources[0])
        seen = simple.get(key)
        simple[key] = rule if seen is None else Rule(seen.verbs + rule.verbs, seen.api_groups,
                                                      seen.resources)
    return compacted + list(simple.values())


# --- matching one request (the authorizer) -----------------------------------------------------

class RequestAttributes(Protocol):
    """What ``rule_allows`` reads of a request (``authorizer.Attributes``)."""

    @property
    def verb(self) -> str: ...
    @property
    def resource_request(self) -> bool: ...
    @property
    def api_group(self) -> str: ...
    @property
    def resource(self) -> str: ...
    @property
    def subresource(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...


def _resource_matches(rule: Rule, combined: str, subresource: str) -> bool:
    for owned in rule.resources:
        if owned in (RESOURCE_ALL, combined):
            return True
        if subresource and len(owned) == len(subresource) + 2 and owned.startswith("*/") \
                and owned.endswith(subresource):
            return True
    return False


def _url_matches(rule: Rule, path: str) -> bool:
    return any(url in (NON_RESOURCE_ALL, path)
               or (url.endswith("*") and path.startswith(url.rstrip("*")))
               for url in rule.non_resource_urls)


def rule_allows(attrs: RequestAttributes, rule: Rule) -> bool:
    """``RuleAllows``: does ``rule`` allow the request."""
    if not (VERB_ALL in rule.verbs or attrs.verb in rule.verbs):
        return False
    if not attrs.resource_request:
        return _url_matches(rule, attrs.path)
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    return ((API_GROUP_ALL in rule.api_groups or attrs.api_group in rule.api_groups)
            and _resource_matches(rule, combined, attrs.subresource)
            and (not rule.resource_names or attrs.name in rule.resource_names))


# --- who holds what ----------------------------------------------------------------------------

class RbacObjects(Protocol):
    """Roles and bindings as the server holds them now (the watch caches)."""

    def role(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def cluster_role(self, name: str) -> Mapping[str, Any] | None: ...

    def role_bindings(self, namespace: str) -> Iterable[Mapping[str, Any]]: ...

    def cluster_role_bindings(self) -> Iterable[Mapping[str, Any]]: ...


class Subject(Protocol):
    """The user rules are resolved for (``user.Info``)."""

    @property
    def name(self) -> str: ...
    @property
    def groups(self) -> tuple[str, ...]: ...


class ResolutionError(Exception):
    """A binding whose role cannot be read: kube's NotFound text, kept with the partial rules
    (rules are additive, so the found ones still count)."""


def _text(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def applies_to_user(user: Subject, subject: Mapping[str, Any], namespace: str) -> bool:
    """``appliesToUser``: a User by name, a Group by membership, a ServiceAccount by its
    username (its namespace defaulting to the binding's)."""
    kind, name = _text(subject, "kind"), _text(subject, "name")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = _text(subject, "namespace") or namespace
        return bool(sa_namespace) and user.name == f"{SERVICE_ACCOUNT_PREFIX}{sa_namespace}:{name}"
    return False


def _applies(user: Subject, binding: Mapping[str, Any], namespace: str) -> bool:
    subjects = binding.get("subjects")
    return isinstance(subjects, list) and any(
        isinstance(s, dict) and applies_to_user(user, s, namespace) for s in subjects)


class RuleResolver:
    """``DefaultRuleResolver`` over ``RbacObjects``."""

    def __init__(self, objects: RbacObjects) -> None:
        self.objects = objects

    def role_reference_rules(self, role_ref: Mapping[str, Any],
                             namespace: str) -> tuple[Rule, ...]:
        """``GetRoleReferenceRules``: the rules of a binding's role; ``ResolutionError`` with
        kube's NotFound text when it does not exist."""
        kind, name = _text(role_ref, "kind"), _text(role_ref, "name")
        if kind == "Role":
            role = self.objects.role(namespace, name) if namespace else None
            if role is None:
                raise ResolutionError(f"roles.{RBAC_GROUP} {go_quote(name)} not found")
            return rules_of(role)
        if kind == "ClusterRole":
            cluster_role = self.objects.cluster_role(name)
            if cluster_role is None:
                raise ResolutionError(f"clusterroles.{RBAC_GROUP} {go_quote(name)} not found")
            return rules_of(cluster_role)
        raise ResolutionError(f"unsupported role reference kind: {go_quote(kind)}")

    def visit_rules_for(self, user: Subject,
                        namespace: str) -> Iterator[tuple[Rule | None, str]]:
        """``VisitRulesFor``: each rule the user holds in ``namespace`` (cluster role bindings
        first, then the namespace's role bindings) as ``(rule, "")``, and each resolution
        error as ``(None, text)``. Stop iterating to short-circuit."""
        bindings: list[tuple[Mapping[str, Any], str]] = [
            (b, "") for b in self.objects.cluster_role_bindings()]
        if namespace:
            bindings += [(b, namespace) for b in self.objects.role_bindings(namespace)]
        for binding, binding_namespace in bindings:
            if not _applies(user, binding, binding_namespace):
                continue
            role_ref = binding.get("roleRef")
            try:
                rules = self.role_reference_rules(
                    role_ref if isinstance(role_ref, dict) else {}, binding_namespace)
            except ResolutionError as err:
                yield None, str(err)
                continue
            for rule in rules:
                yield rule, ""

    def rules_for(self, user: Subject, namespace: str) -> tuple[list[Rule], list[str]]:
        """``RulesFor``: every rule the user holds in ``namespace``, and the errors met."""
        rules: list[Rule] = []
        errors: list[str] = []
        for rule, error in self.visit_rules_for(user, namespace):
            if rule is not None:
                rules.append(rule)
            if error:
                errors.append(error)
        return rules, errors

    def allows(self, user: Subject, namespace: str, attrs: RequestAttributes) -> bool:
        """Whether a rule the user holds in ``namespace`` allows the request (the RBAC
        authorizer's decision, without its reasons)."""
        return any(rule is not None and rule_allows(attrs, rule)
                   for rule, _ in self.visit_rules_for(user, namespace))


def go_errors(errors: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one error alone, else ``[a, b]``."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def confirm_no_escalation(resolver: RuleResolver, user: Subject, namespace: str,
                          rules: Sequence[Rule]) -> str:
    """``ConfirmNoEscalation``: "" when the rules the user holds in ``namespace`` cover
    ``rules``, else kube's message naming the missing ones (compacted, sorted, one a line)."""
    owned, errors = resolver.rules_for(user, namespace)
    ok, missing = covers(owned, rules)
    if ok:
        return ""
    described = sorted({rule.compact_string() for rule in compact_rules(missing)})
    groups = _go_slice(user.groups)
    message = (f"user {go_quote(user.name)} (groups={groups}) is attempting to grant RBAC "
               "permissions not currently held:\n" + "\n".join(described))
    if errors:
        message += f"; resolution errors: [{go_errors(errors)}]"
    return message
