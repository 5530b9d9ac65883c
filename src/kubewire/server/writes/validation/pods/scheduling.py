"""Where a pod may run: affinity, topology spread constraints, and the label selectors in them.

Source: kubernetes pkg/apis/core/validation/validation.go (``validateAffinity``,
``validateNodeAffinity``, ``ValidateNodeSelector``, ``ValidateNodeSelectorTerm``,
``ValidateNodeSelectorRequirement``, ``ValidateNodeFieldSelectorRequirement``,
``ValidatePreferredSchedulingTerms``, ``validatePodAffinity``/``validatePodAntiAffinity``,
``validatePodAffinityTerm``, ``validateWeightedPodAffinityTerms``,
``validateTopologySpreadConstraints`` with ``ValidateMaxSkew``, ``ValidateTopologyKey``,
``ValidateWhenUnsatisfiable``, ``ValidateSpreadConstraintNotRepeat``, ``validateMinDomains``,
``validateNodeInclusionPolicy``, ``validateMatchLabelKeysInTopologySpread``) and apimachinery
pkg/apis/meta/v1/validation (``ValidateLabelSelector`` with label values checked, as for a new
pod). Node selector requirements' values are not held to the label-value form: that check
(kubernetes PR #128212) came in v1.33. The kubernetes source read was a later snapshot; rules
that changed after v1.32 were checked against their pull requests. Not checked here: a pod
affinity term's ``matchLabelKeys``/``mismatchLabelKeys``.

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.names import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_label_value,
)
from kubewire.server.writes.validation.meta import dict_at, int_at, text_at, validate_labels
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

NOT_POSITIVE = "must be greater than zero"  # isNotPositiveErrorMsg
WEIGHT_RANGE = "must be in the range 1-100"
SCHEDULE_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")  # sets.List(supportedScheduleActions)
INCLUSION_POLICIES = ("Honor", "Ignore")  # sets.List(supportedPodTopologySpreadNodePolicies)
_NOT_OPERATOR = "not a valid selector operator"


def _items(parent: Mapping[str, JSON], key: str) -> list[dict[str, JSON]]:
    value = parent.get(key)
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _strings(parent: Mapping[str, JSON], key: str) -> list[str]:
    value = parent.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def label_name_errors(name: str, path: str) -> list[FieldError]:
    """``ValidateLabelName``."""
    return [invalid(path, name, m) for m in is_qualified_name(name)]


def label_selector_errors(selector: JSON, path: str) -> list[FieldError]:
    """``ValidateLabelSelector`` with label values checked (nothing when unset)."""
    if not isinstance(selector, dict):
        return []
    labels = dict_at(selector, "matchLabels")
    errors = validate_labels({k: v for k, v in labels.items() if isinstance(v, str)},
                             f"{path}.matchLabels")
    for i, expression in enumerate(_items(selector, "matchExpressions")):
        item = f"{path}.matchExpressions[{i}]"
        operator, values = text_at(expression, "operator"), _strings(expression, "values")
        if operator in ("In", "NotIn"):
            if not values:
                errors.append(required(f"{item}.values", "must be specified when `operator` is "
                                       "'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errors.append(forbidden(f"{item}.values", "may not be specified when `operator` "
                                        "is 'Exists' or 'DoesNotExist'"))
        else:
            errors.append(invalid(f"{item}.operator", operator, _NOT_OPERATOR))
        errors += label_name_errors(text_at(expression, "key"), f"{item}.key")
        for j, value in enumerate(values):
            errors += [invalid(f"{item}.values[{j}]", value, m)
                       for m in is_valid_label_value(value)]
    return errors


# --- node affinity ----------------------------------------------------------------------------

def _node_requirement_errors(requirement: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidateNodeSelectorRequirement`` (kube v1.32 does not check the values' form)."""
    operator, values = text_at(requirement, "operator"), _strings(requirement, "values")
    errors: list[FieldError] = []
    if operator in ("In", "NotIn"):
        if not values:
            errors.append(required(f"{path}.values", "must be specified when `operator` is "
                                   "'In' or 'NotIn'"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errors.append(forbidden(f"{path}.values", "may not be specified when `operator` is "
                                    "'Exists' or 'DoesNotExist'"))
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(required(f"{path}.values", "must be specified single value when "
                                   "`operator` is 'Lt' or 'Gt'"))
    else:
        errors.append(invalid(f"{path}.operator", operator, _NOT_OPERATOR))
    return errors + label_name_errors(text_at(requirement, "key"), f"{path}.key")


def _node_field_requirement_errors(requirement: Mapping[str, JSON],
                                   path: str) -> list[FieldError]:
    """``ValidateNodeFieldSelectorRequirement``: only ``metadata.name``, with one value."""
    operator, values = text_at(requirement, "operator"), _strings(requirement, "values")
    errors: list[FieldError] = []
    if operator in ("In", "NotIn"):
        if len(values) != 1:
            errors.append(required(f"{path}.values", "must be only one value when `operator` is "
                                   "'In' or 'NotIn' for node field selector"))
    else:
        errors.append(invalid(f"{path}.operator", operator, _NOT_OPERATOR))
    key = text_at(requirement, "key")
    if key != "metadata.name":
        return [*errors, invalid(f"{path}.key", key, "not a valid field selector key")]
    for i, value in enumerate(values):
        errors += [invalid(f"{path}.values[{i}]", value, m) for m in is_dns1123_subdomain(value)]
    return errors


def _node_term_errors(term: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidateNodeSelectorTerm``."""
    errors: list[FieldError] = []
    for j, requirement in enumerate(_items(term, "matchExpressions")):
        errors += _node_requirement_errors(requirement, f"{path}.matchExpressions[{j}]")
    for j, requirement in enumerate(_items(term, "matchFields")):
        errors += _node_field_requirement_errors(requirement, f"{path}.matchFields[{j}]")
    return errors


def _weight_errors(term: Mapping[str, JSON], path: str) -> list[FieldError]:
    weight = int_at(term, "weight") or 0
    return [] if 0 < weight <= 100 else [invalid(f"{path}.weight", weight, WEIGHT_RANGE)]


def _node_affinity_errors(affinity: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateNodeAffinity``."""
    errors: list[FieldError] = []
    required_terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required_terms, dict):  # ValidateNodeSelector
        terms_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = _items(required_terms, "nodeSelectorTerms")
        if not terms:
            errors.append(required(terms_path, "must have at least one node selector term"))
        for i, term in enumerate(terms):
            errors += _node_term_errors(term, f"{terms_path}[{i}]")
    preferred_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, term in enumerate(_items(affinity, "preferredDuringSchedulingIgnoredDuringExecution")):
        errors += _weight_errors(term, f"{preferred_path}[{i}]")
        errors += _node_term_errors(dict_at(term, "preference"),
                                    f"{preferred_path}[{i}].preference")
    return errors


# --- pod (anti-)affinity ----------------------------------------------------------------------

def _pod_affinity_term_errors(term: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validatePodAffinityTerm`` (without the label-key lists)."""
    errors = label_selector_errors(term.get("labelSelector"), f"{path}.labelSelector")
    errors += label_selector_errors(term.get("namespaceSelector"), f"{path}.namespaceSelector")
    for name in _strings(term, "namespaces"):  # kube names the path "namespace"
        errors += [invalid(f"{path}.namespace", name, m) for m in is_dns1123_label(name)]
    topology_key = text_at(term, "topologyKey")
    if not topology_key:
        errors.append(required(f"{path}.topologyKey", "can not be empty"))
    return errors + label_name_errors(topology_key, f"{path}.topologyKey")


def _pod_affinity_errors(affinity: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validatePodAffinity``/``validatePodAntiAffinity``."""
    errors: list[FieldError] = []
    required_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    for i, term in enumerate(_items(affinity, "requiredDuringSchedulingIgnoredDuringExecution")):
        errors += _pod_affinity_term_errors(term, f"{required_path}[{i}]")
    preferred_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, term in enumerate(_items(affinity, "preferredDuringSchedulingIgnoredDuringExecution")):
        errors += _weight_errors(term, f"{preferred_path}[{i}]")
        errors += _pod_affinity_term_errors(dict_at(term, "podAffinityTerm"),
                                            f"{preferred_path}[{i}].podAffinityTerm")
    return errors


def affinity_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateAffinity`` for the spec's ``affinity`` at ``path``."""
    affinity = spec.get("affinity")
    if not isinstance(affinity, dict):
        return []
    errors: list[FieldError] = []
    if isinstance(affinity.get("nodeAffinity"), dict):
        errors += _node_affinity_errors(dict_at(affinity, "nodeAffinity"), f"{path}.nodeAffinity")
    for key in ("podAffinity", "podAntiAffinity"):
        if isinstance(affinity.get(key), dict):
            errors += _pod_affinity_errors(dict_at(affinity, key), f"{path}.{key}")
    return errors


# --- topology spread --------------------------------------------------------------------------

def _match_label_keys_errors(constraint: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateMatchLabelKeysInTopologySpread``."""
    keys = _strings(constraint, "matchLabelKeys")
    if not keys:
        return []
    selector = constraint.get("labelSelector")
    errors: list[FieldError] = []
    taken: set[str] = set()
    if isinstance(selector, dict):
        taken = set(dict_at(selector, "matchLabels"))
        taken |= {text_at(e, "key") for e in _items(selector, "matchExpressions")}
    else:
        errors.append(forbidden(path, "must not be specified when labelSelector is not set"))
    for i, key in enumerate(keys):
        errors += label_name_errors(key, f"{path}[{i}]")
        if key in taken:
            errors.append(invalid(f"{path}[{i}]", key,
                                  "exists in both matchLabelKeys and labelSelector"))
    return errors


def _spread_errors(constraint: Mapping[str, JSON], rest: list[dict[str, JSON]],
                   path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    skew = int_at(constraint, "maxSkew") or 0
    if skew <= 0:
        errors.append(invalid(f"{path}.maxSkew", skew, NOT_POSITIVE))
    key, action = text_at(constraint, "topologyKey"), text_at(constraint, "whenUnsatisfiable")
    if not key:
        errors.append(required(f"{path}.topologyKey", "can not be empty"))
    if action not in SCHEDULE_ACTIONS:
        errors.append(not_supported(f"{path}.whenUnsatisfiable", action, SCHEDULE_ACTIONS))
    if any(text_at(o, "topologyKey") == key and text_at(o, "whenUnsatisfiable") == action
           for o in rest):
        errors.append(FieldError("FieldValueDuplicate",
                                 f"{path}.{{topologyKey, whenUnsatisfiable}}",
                                 f"{{{key}, {action}}}"))
    min_domains = int_at(constraint, "minDomains")
    if min_domains is not None:
        if min_domains <= 0:
            errors.append(invalid(f"{path}.minDomains", min_domains, NOT_POSITIVE))
        if action != "DoNotSchedule":
            errors.append(invalid(f"{path}.minDomains", min_domains, "can only use minDomains if "
                                  f"whenUnsatisfiable=DoNotSchedule, not {action}"))
    for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        value = constraint.get(policy)
        if isinstance(value, str) and value not in INCLUSION_POLICIES:
            errors.append(not_supported(f"{path}.{policy}", value, INCLUSION_POLICIES))
    errors += _match_label_keys_errors(constraint, f"{path}.matchLabelKeys")
    return errors + label_selector_errors(constraint.get("labelSelector"), f"{path}.labelSelector")


def topology_spread_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateTopologySpreadConstraints`` for the spec's constraints at ``path``."""
    constraints = _items(spec, "topologySpreadConstraints")
    errors: list[FieldError] = []
    for i, constraint in enumerate(constraints):
        errors += _spread_errors(constraint, constraints[i + 1:], f"{path}[{i}]")
    return errors
