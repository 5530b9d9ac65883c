"""Role, ClusterRole, RoleBinding and ClusterRoleBinding validation, in kube's order.

Source: kubernetes pkg/apis/rbac/validation/validation.go (``ValidateRole``,
``ValidateClusterRole``, ``validatePolicyRule``, ``ValidateRoleBinding``,
``ValidateClusterRoleBinding``, ``validateRoleBindingSubject`` and the ``*Update`` variants:
``roleRef`` may not change). Object metadata (names are path segments,
``minimalNameRequirements``) is checked by the generic meta rules from the registry entry.

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.go_text import GoLiteral, go_quote, go_string_slice
from kubewire.json_types import JSON
from kubewire.names import is_dns1123_subdomain, is_path_segment_name
from kubewire.resources import Resource
from kubewire.status import FieldError, invalid, not_supported, required

GROUP = "rbac.authorization.k8s.io"
SERVICE_ACCOUNT_KIND, USER_KIND, GROUP_KIND = "ServiceAccount", "User", "Group"


def _strings(rule: Mapping[str, JSON], key: str) -> list[str]:
    value = rule.get(key)
    return [str(v) for v in value] if isinstance(value, list) else []


def _text(obj: Mapping[str, JSON], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def validate_policy_rule(rule: Mapping[str, JSON], namespaced: bool,
                         path: str) -> list[FieldError]:
    """``validatePolicyRule``: verbs required; non-resource URLs only in ClusterRoles and never
    beside resources; resource rules need an API group and a resource, and resource names at
    most one resource."""
    errors: list[FieldError] = []
    if not _strings(rule, "verbs"):
        errors.append(required(f"{path}.verbs", "verbs must contain at least one value"))
    urls = _strings(rule, "nonResourceURLs")
    if urls:
        shown = go_string_slice(urls)
        if namespaced:
            errors.append(invalid(f"{path}.nonResourceURLs", shown,
                                  "namespaced rules cannot apply to non-resource URLs"))
        if _strings(rule, "apiGroups") or _strings(rule, "resources") \
                or _strings(rule, "resourceNames"):
            errors.append(invalid(f"{path}.nonResourceURLs", shown,
                                  "rules cannot apply to both regular resources and "
                                  "non-resource URLs"))
        return errors
    if not _strings(rule, "apiGroups"):
        errors.append(required(f"{path}.apiGroups",
                               "resource rules must supply at least one api group"))
    resources = _strings(rule, "resources")
    if not resources:
        errors.append(required(f"{path}.resources",
                               "resource rules must supply at least one resource"))
    if _strings(rule, "resourceNames") and len(resources) > 1:
        errors.append(required(f"{path}.resourceNames",
                               "resource names cannot apply to multiple resources"))
    return errors


def _validate_rules(obj: Mapping[str, JSON], namespaced: bool) -> list[FieldError]:
    rules = obj.get("rules")
    errors: list[FieldError] = []
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        if isinstance(rule, dict):
            errors += validate_policy_rule(rule, namespaced, f"rules[{i}]")
    return errors


def validate_role(resource: Resource, obj: Mapping[str, JSON],
                  old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateRole`` / ``ValidateRoleUpdate`` (nothing more on update)."""
    return _validate_rules(obj, True)


def validate_cluster_role(resource: Resource, obj: Mapping[str, JSON],
                          old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateClusterRole`` / ``ValidateClusterRoleUpdate``."""
    return _validate_rules(obj, False)


def go_role_ref(ref: Mapping[str, JSON]) -> GoLiteral:
    """An internal ``rbac.RoleRef`` as Go's ``%#v`` prints it."""
    return GoLiteral(f"rbac.RoleRef{{APIGroup:{go_quote(_text(ref, 'apiGroup'))}, "
                     f"Kind:{go_quote(_text(ref, 'kind'))}, Name:{go_quote(_text(ref, 'name'))}}}")


def _validate_subject(subject: Mapping[str, JSON], namespaced: bool,
                      path: str) -> list[FieldError]:
    """``validateRoleBindingSubject``."""
    errors: list[FieldError] = []
    name, kind, group = _text(subject, "name"), _text(subject, "kind"), _text(subject, "apiGroup")
    if not name:
        errors.append(required(f"{path}.name"))
    if kind == SERVICE_ACCOUNT_KIND:
        if name:
            errors += [invalid(f"{path}.name", name, m) for m in is_dns1123_subdomain(name)]
        if group:
            errors.append(not_supported(f"{path}.apiGroup", group, [""]))
        if not namespaced and not _text(subject, "namespace"):
            errors.append(required(f"{path}.namespace"))
    elif kind in (USER_KIND, GROUP_KIND):
        if not name:
            word = "user" if kind == USER_KIND else "group"
            errors.append(invalid(f"{path}.name", name, f"{word} name cannot be empty"))
        if group != GROUP:
            errors.append(not_supported(f"{path}.apiGroup", group, [GROUP]))
    else:
        errors.append(not_supported(f"{path}.kind", kind,
                                    [SERVICE_ACCOUNT_KIND, USER_KIND, GROUP_KIND]))
    return errors


def _validate_binding(obj: Mapping[str, JSON], old: Mapping[str, JSON] | None,
                      namespaced: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    raw_ref = obj.get("roleRef")
    ref: Mapping[str, JSON] = raw_ref if isinstance(raw_ref, dict) else {}
    api_group, kind, name = _text(ref, "apiGroup"), _text(ref, "kind"), _text(ref, "name")
    if api_group != GROUP:
        errors.append(not_supported("roleRef.apiGroup", api_group, [GROUP]))
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if kind not in kinds:
        errors.append(not_supported("roleRef.kind", kind, kinds))
    if not name:
        errors.append(required("roleRef.name"))
    else:
        errors += [invalid("roleRef.name", name, m) for m in is_path_segment_name(name)]
    subjects = obj.get("subjects")
    for i, subject in enumerate(subjects if isinstance(subjects, list) else []):
        if isinstance(subject, dict):
            errors += _validate_subject(subject, namespaced, f"subjects[{i}]")
    if old is not None:
        raw_old = old.get("roleRef")
        old_ref: Mapping[str, JSON] = raw_old if isinstance(raw_old, dict) else {}
        if any(_text(ref, k) != _text(old_ref, k) for k in ("apiGroup", "kind", "name")):
            errors.append(invalid("roleRef", go_role_ref(ref), "cannot change roleRef"))
    return errors


def validate_role_binding(resource: Resource, obj: Mapping[str, JSON],
                          old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateRoleBinding`` / ``ValidateRoleBindingUpdate``."""
    return _validate_binding(obj, old, True)


def validate_cluster_role_binding(resource: Resource, obj: Mapping[str, JSON],
                                  old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateClusterRoleBinding`` / ``ValidateClusterRoleBindingUpdate``."""
    return _validate_binding(obj, old, False)
