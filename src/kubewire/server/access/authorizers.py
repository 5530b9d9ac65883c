"""``--authorization-mode``: kube-apiserver's authorizer chain, as its ``newForConfig`` builds it.

The chain is ``system:masters`` (the privileged-group authorizer) first, then each mode in the
order given: ``AlwaysAllow``, ``AlwaysDeny`` (no opinion, "Everything is forbidden."),
``ABAC`` (the ``--authorization-policy-file``: ``authz.Policy``) and ``RBAC``
(``rbac_authorizer``). They combine as kube's union authorizer: the first Allow or Deny
decides, with its reason; after only NoOpinions the request is refused with every non-empty
reason joined by newlines. ``rules_for`` is the union ``RulesFor`` of every mode (the
privileged-group authorizer is no rule resolver), rules concatenated in order, ``incomplete``
if any is, errors aggregated. ``Node`` and ``Webhook`` are kube modes kubewire does not serve:
the server refuses to start with them.

Startup validation is kube's ``BuiltInAuthorizationOptions.Validate`` (same texts, joined as
``utilerrors.NewAggregate`` prints several). One difference, kept so existing setups run: with
no ``--authorization-mode``, kubewire uses ``ABAC`` when a policy file is given and
``AlwaysAllow`` otherwise, where kube-apiserver (default ``AlwaysAllow``) refuses a policy
file without mode ABAC ("cannot specify --authorization-policy-file without mode ABAC", which
kubewire also says when the modes are given and lack ABAC).

Pure: modes, policies and an ``RbacSource`` in, decisions out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from kubewire.go_text import go_quote
from kubewire.rbac_rules import go_errors
from kubewire.server.access.authn import UserInfo
from kubewire.server.access.authz import (
    MASTERS,
    NO_POLICY_MATCHED,
    Attributes,
    Decision,
    Policy,
    RulesResult,
    forbidden,
)
from kubewire.server.access.rbac_authorizer import RbacAuthorizer, RbacSource

ALWAYS_ALLOW, ALWAYS_DENY, ABAC, RBAC, NODE, WEBHOOK = (
    "AlwaysAllow", "AlwaysDeny", "ABAC", "RBAC", "Node", "Webhook")
KUBE_MODES = (ALWAYS_ALLOW, ALWAYS_DENY, ABAC, WEBHOOK, RBAC, NODE)  # modes.go's choices
SERVED_MODES = (ALWAYS_ALLOW, ALWAYS_DENY, ABAC, RBAC)
EVERYTHING_FORBIDDEN = "Everything is forbidden."
ALLOW = Decision(allowed=True, denied=False, reason="")
NO_OPINION = Decision(allowed=False, denied=False, reason="")
_READONLY_ORDER = ("get", "list", "watch")  # abac.go getVerbs


class AuthorizationModeError(ValueError):
    """An ``--authorization-mode`` kube-apiserver (or kubewire) would refuse to start with."""


class ModeAuthorizer(Protocol):
    """One authorizer of the chain."""

    def decide(self, attrs: Attributes) -> Decision: ...


class RuleResolver(Protocol):
    """An authorizer that can list what a user may do (``authorizer.RuleResolver``)."""

    def rules_for(self, user: UserInfo, namespace: str) -> RulesResult: ...


def parse_modes(text: str, policy_file_given: bool) -> tuple[str, ...]:
    """The modes of ``--authorization-mode`` (comma-separated, as pflag's StringSlice reads
    it), validated; "" is kubewire's default (see the module docstring)."""
    if not text:
        return (ABAC,) if policy_file_given else (ALWAYS_ALLOW,)
    modes = text.split(",")
    errors: list[str] = []
    for mode in modes:
        if mode not in KUBE_MODES:
            errors.append(f"authorization-mode {go_quote(mode)} is not a valid mode")
        if mode == ABAC and not policy_file_given:
            errors.append("authorization-mode ABAC's authorization policy file not passed")
        if mode in (NODE, WEBHOOK):
            errors.append(f"authorization-mode {go_quote(mode)} is not supported by kubewire "
                          f"(it serves {', '.join(SERVED_MODES)})")
    if policy_file_given and ABAC not in modes:
        errors.append("cannot specify --authorization-policy-file without mode ABAC")
    if len(set(modes)) != len(modes):
        listed = "[" + " ".join(go_quote(m) for m in modes) + "]"
        errors.append(f"authorization-mode {listed} has mode specified more than once")
    if errors:
        raise AuthorizationModeError(go_errors(errors))
    return tuple(modes)


class PrivilegedGroups:
    """``NewPrivilegedGroups(system:masters)``: members may do everything."""

    def decide(self, attrs: Attributes) -> Decision:
        return ALLOW if MASTERS in attrs.user.groups else NO_OPINION


class AlwaysAllow:
    def decide(self, attrs: Attributes) -> Decision:
        return ALLOW

    def rules_for(self, user: UserInfo, namespace: str) -> RulesResult:
        return RulesResult([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                           [{"verbs": ["*"], "nonResourceURLs": ["*"]}], False, "")


class AlwaysDeny:
    def decide(self, attrs: Attributes) -> Decision:
        return Decision(allowed=False, denied=False, reason=EVERYTHING_FORBIDDEN)

    def rules_for(self, user: UserInfo, namespace: str) -> RulesResult:
        return RulesResult([], [], False, "")


class AbacAuthorizer:
    """``abac.PolicyList``: allowed when a policy line matches, else no opinion."""

    def __init__(self, policies: Sequence[Policy]) -> None:
        self.policies = tuple(policies)

    def decide(self, attrs: Attributes) -> Decision:
        if any(policy.allows(attrs) for policy in self.policies):
            return ALLOW
        return Decision(allowed=False, denied=False, reason=NO_POLICY_MATCHED)

    def rules_for(self, user: UserInfo, namespace: str) -> RulesResult:
        """``PolicyList.RulesFor``: each matching line whose namespace is ``*`` or
        ``namespace`` gives its resource and its path, with ``*`` or the read-only verbs."""
        resource_rules: list[dict[str, Any]] = []
        non_resource_rules: list[dict[str, Any]] = []
        for policy in self.policies:
            if not policy.subject_matches(user) or policy.namespace not in ("*", namespace):
                continue
            verbs = list(_READONLY_ORDER) if policy.readonly else ["*"]
            if policy.resource:
                resource_rules.append({"verbs": verbs, "apiGroups": [policy.api_group],
                                       "resources": [policy.resource]})
            if policy.non_resource_path:
                non_resource_rules.append({"verbs": list(verbs),
                                           "nonResourceURLs": [policy.non_resource_path]})
        return RulesResult(resource_rules, non_resource_rules, False, "")


class Chain:
    """The union of the privileged-group authorizer and the modes' authorizers, in order:
    what ``Access.authorizer`` is. ``authorize`` and ``check`` are the forms the filters use."""

    def __init__(self, modes: Sequence[str], authorizers: Sequence[ModeAuthorizer],
                 resolvers: Sequence[RuleResolver]) -> None:
        self.modes = tuple(modes)
        self.authorizers = (PrivilegedGroups(), *authorizers)
        self.resolvers = tuple(resolvers)

    def decide(self, attrs: Attributes) -> Decision:
        """``unionAuthzHandler.Authorize``."""
        reasons: list[str] = []
        errors: list[str] = []
        for authorizer in self.authorizers:
            decision = authorizer.decide(attrs)
            if decision.allowed or decision.denied:
                return decision
            if decision.evaluation_error:
                errors.append(decision.evaluation_error)
            if decision.reason:
                reasons.append(decision.reason)
        return Decision(allowed=False, denied=False, reason="\n".join(reasons),
                        evaluation_error=go_errors(errors) if errors else "")

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        decision = self.decide(attrs)
        return decision.allowed, decision.reason

    def check(self, attrs: Attributes) -> None:
        decision = self.decide(attrs)
        if not decision.allowed:
            raise forbidden(attrs, decision.reason)

    def rules_for(self, user: UserInfo, namespace: str) -> RulesResult:
        """``unionAuthzRulesHandler.RulesFor``."""
        resource_rules: list[dict[str, Any]] = []
        non_resource_rules: list[dict[str, Any]] = []
        incomplete = False
        errors: list[str] = []
        for resolver in self.resolvers:
            found = resolver.rules_for(user, namespace)
            resource_rules += found.resource_rules
            non_resource_rules += found.non_resource_rules
            incomplete = incomplete or found.incomplete
            if found.evaluation_error:
                errors.append(found.evaluation_error)
        return RulesResult(resource_rules, non_resource_rules, incomplete,
                           go_errors(errors) if errors else "")


def build_chain(modes: Sequence[str], policies: Sequence[Policy] | None,
                rbac: RbacSource | None) -> Chain:
    """The chain for validated ``modes`` (``parse_modes``); ``policies`` for ABAC, ``rbac``
    (the server's RBAC objects) for RBAC."""
    authorizers: list[ModeAuthorizer] = []
    resolvers: list[RuleResolver] = []
    for mode in modes:
        one: AlwaysAllow | AlwaysDeny | AbacAuthorizer | RbacAuthorizer
        if mode == ALWAYS_ALLOW:
            one = AlwaysAllow()
        elif mode == ALWAYS_DENY:
            one = AlwaysDeny()
        elif mode == ABAC:
            if policies is None:
                raise AuthorizationModeError(
                    "authorization-mode ABAC's authorization policy file not passed")
            one = AbacAuthorizer(policies)
        elif mode == RBAC:
            if rbac is None:
                raise AuthorizationModeError("authorization-mode RBAC needs the server's "
                                             "RBAC objects")
            one = RbacAuthorizer(rbac)
        else:
            raise AuthorizationModeError(f"authorization-mode {go_quote(mode)} is not a "
                                         "valid mode")
        authorizers.append(one)
        resolvers.append(one)
    return Chain(modes, authorizers, resolvers)
