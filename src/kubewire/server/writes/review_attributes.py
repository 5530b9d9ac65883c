"""What an access review asks, as an authorizer sees it, and the status it gets: pure parts of
``access_reviews``, after kube v1.32's ``pkg/registry/authorization/util/helpers.go``.

- ``review_attributes``: ``ResourceAttributesFrom`` / ``NonResourceAttributesFrom`` (an empty
  version means every version, ``*``); ``spec_user`` is ``AuthorizationAttributesFrom``'s user
  (a SubjectAccessReview's user, groups, uid and extra, nothing added).
- ``selector_errors``: AuthorizeWithSelectors (beta, on in v1.32) has the selectors parsed;
  authorizers get what parsed, and ``BuildEvaluationError`` reports what did not
  (``spec.resourceAttributes.fieldSelector ignored due to parse error``, or ``partially
  ignored`` when some requirements survived). kube's own authorizers (RBAC, ABAC, AlwaysAllow,
  the privileged group) do not read selectors, so only these messages depend on them.
- ``go_spec``: the spec as kube's decode and encode leave it (Go struct order, ``omitempty``
  fields dropped when empty), which is what the answer echoes.
- ``own_pointer_structs``: the field manager's set names a Go pointer struct that the zero review
  lacks (the attributes, the selectors) as a member of its own, ``"."``, or ``{}`` when it is
  empty, as kube's managedFields show them.
- ``access_status`` / ``rules_status``: ``SubjectAccessReviewStatus`` and
  ``SubjectRulesReviewStatus`` (``allowed``, ``resourceRules``, ``nonResourceRules`` and
  ``incomplete`` are always written; the rest when set).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubewire.json_types import JSON
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.fields import parse_field_selector
from kubewire.selectors.labels import parse_label_selector
from kubewire.server.access.authn import UserInfo
from kubewire.server.access.authz import Attributes, Decision, RulesResult

__all__ = ["access_status", "build_evaluation_error", "go_spec", "own_pointer_structs",
           "review_attributes", "rules_status", "selector_errors", "spec_user"]

_LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_RESOURCE_KEYS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
_NON_RESOURCE_KEYS = ("path", "verb")


def _text(parent: Mapping[str, Any], key: str) -> str:
    value = parent.get(key)
    return value if isinstance(value, str) else ""


def _dict(value: JSON) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def spec_user(spec: Mapping[str, Any]) -> UserInfo:
    """The user a SubjectAccessReview asks about (``user.DefaultInfo`` from its spec)."""
    groups = spec.get("groups")
    extra = _dict(spec.get("extra"))
    pairs = []
    for key, values in sorted(extra.items()):
        items = values if isinstance(values, list) else []
        pairs.append((key, tuple(v for v in items if isinstance(v, str))))
    return UserInfo(
        _text(spec, "user"), _text(spec, "uid"),
        tuple(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else (),
        tuple(pairs))


def review_attributes(user: UserInfo, spec: Mapping[str, Any]) -> Attributes:
    """The attributes a (validated) review's spec describes, for ``user``."""
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return Attributes(user, _text(resource, "verb"), resource_request=True,
                          namespace=_text(resource, "namespace"),
                          api_group=_text(resource, "group"),
                          api_version=_text(resource, "version") or "*",
                          resource=_text(resource, "resource"),
                          subresource=_text(resource, "subresource"),
                          name=_text(resource, "name"))
    non_resource = _dict(spec.get("nonResourceAttributes"))
    return Attributes(user, _text(non_resource, "verb"), path=_text(non_resource, "path"))


# --- selectors ---------------------------------------------------------------------------------

def _raw_parses(raw: str, is_label: bool) -> bool:
    try:
        if is_label:
            parse_label_selector(raw)
        else:
            parse_field_selector(raw)
    except SelectorError:
        return False
    return True


def _label_requirement_ok(requirement: Mapping[str, Any]) -> bool:
    """``labelSelectorAsSelector``'s check of one requirement that validation let through:
    the operator must be one it knows (key and values were validated)."""
    return requirement.get("operator") in _LABEL_OPERATORS


def _field_requirement_ok(requirement: Mapping[str, Any]) -> bool:
    """``fieldSelectorAsSelector``: one value, with ``In`` or ``NotIn`` (Exists and
    DoesNotExist are not supported yet, unknown operators are not operators)."""
    values = requirement.get("values")
    count = len(values) if isinstance(values, list) else 0
    return count == 1 and requirement.get("operator") in ("In", "NotIn")


def _selector_outcome(selector: JSON, is_label: bool) -> str | None:
    """None when the selector (if any) parsed whole, else "ignored" or "partially ignored"."""
    if not isinstance(selector, dict):
        return None
    raw = _text(selector, "rawSelector")
    requirements = selector.get("requirements")
    requirements = [r for r in requirements if isinstance(r, dict)] if isinstance(
        requirements, list) else []
    if requirements:  # the requirements win over a raw selector
        check = _label_requirement_ok if is_label else _field_requirement_ok
        kept = sum(1 for r in requirements if check(r))
        if kept == len(requirements):
            return None
        return "partially ignored" if kept else "ignored"
    if raw and not _raw_parses(raw, is_label):
        return "ignored"
    return None


def selector_errors(spec: Mapping[str, Any]) -> list[str]:
    """``BuildEvaluationError``'s selector parts, field selector first."""
    attributes = spec.get("resourceAttributes")
    if not isinstance(attributes, dict):
        return []
    out: list[str] = []
    for key, is_label in (("fieldSelector", False), ("labelSelector", True)):
        outcome = _selector_outcome(attributes.get(key), is_label)
        if outcome is not None:
            out.append(f"spec.resourceAttributes.{key} {outcome} due to parse error")
    return out


def build_evaluation_error(decision: Decision, spec: Mapping[str, Any]) -> str:
    """``BuildEvaluationError``: the authorizer's error, then the selectors', joined."""
    parts = [decision.evaluation_error] if decision.evaluation_error else []
    return "; ".join(parts + selector_errors(spec))


# --- the answer --------------------------------------------------------------------------------

def _go_strings(value: JSON) -> list[str] | None:
    """A ``[]string`` decoded and encoded again: None when empty (``omitempty``)."""
    if not isinstance(value, list) or not value:
        return None
    return [v for v in value if isinstance(v, str)]


def _go_requirements(value: JSON) -> list[dict[str, JSON]] | None:
    """``[]metav1.{Field,Label}SelectorRequirement``: key and operator always, values when set."""
    if not isinstance(value, list) or not value:
        return None
    out: list[dict[str, JSON]] = []
    for item in value:
        requirement = _dict(item)
        entry: dict[str, JSON] = {"key": _text(requirement, "key"),
                                  "operator": _text(requirement, "operator")}
        values = _go_strings(requirement.get("values"))
        if values is not None:
            entry["values"] = list(values)
        out.append(entry)
    return out


def _go_selector(value: JSON) -> dict[str, JSON]:
    selector = _dict(value)
    out: dict[str, JSON] = {}
    if _text(selector, "rawSelector"):
        out["rawSelector"] = _text(selector, "rawSelector")
    requirements = _go_requirements(selector.get("requirements"))
    if requirements is not None:
        out["requirements"] = list(requirements)
    return out


def _go_attributes(value: dict[str, Any], keys: tuple[str, ...]) -> dict[str, JSON]:
    """Resource or non-resource attributes: their strings when set, then the selectors."""
    out: dict[str, JSON] = {key: value[key] for key in keys if _text(value, key)}
    if keys is _RESOURCE_KEYS:
        for key in ("fieldSelector", "labelSelector"):
            if isinstance(value.get(key), dict):
                out[key] = _go_selector(value[key])
    return out


def go_spec(spec: Mapping[str, Any], *, subject: bool) -> dict[str, JSON]:
    """A SubjectAccessReviewSpec (``subject``) or SelfSubjectAccessReviewSpec as kube echoes
    it."""
    out: dict[str, JSON] = {}
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict):
        out["resourceAttributes"] = _go_attributes(resource, _RESOURCE_KEYS)
    if isinstance(non_resource, dict):
        out["nonResourceAttributes"] = _go_attributes(non_resource, _NON_RESOURCE_KEYS)
    if not subject:
        return out
    if _text(spec, "user"):
        out["user"] = _text(spec, "user")
    groups = _go_strings(spec.get("groups"))
    if groups is not None:
        out["groups"] = list(groups)
    extra = spec.get("extra")
    if isinstance(extra, dict) and extra:
        out["extra"] = {key: (list(_go_strings(values) or []) if isinstance(values, list)
                              else None) for key, values in sorted(extra.items())}
    if _text(spec, "uid"):
        out["uid"] = _text(spec, "uid")
    return out


_POINTER_STRUCTS: dict[str, tuple[str, ...]] = {
    "resourceAttributes": ("fieldSelector", "labelSelector"), "nonResourceAttributes": ()}


def _own_member(fields: dict[str, JSON], key: str) -> dict[str, JSON]:
    """``fields`` with ``f:<key>`` a member (``{}`` alone, or ``"."`` among its children),
    keys in FieldsV1's order ("." first, then by name); returns that member's node."""
    node = fields.get("f:" + key)
    node = {".": {}, **node} if isinstance(node, dict) and node else {}
    fields["f:" + key] = node
    ordered = sorted(fields.items(), key=lambda item: (item[0] != ".", item[0]))
    fields.clear()
    fields.update(ordered)
    return node


def own_pointer_structs(fields_v1: JSON, spec: Mapping[str, JSON]) -> None:
    """Mark the review's pointer structs that ``spec`` sets as members in ``fields_v1`` (a
    managedFields entry's set, changed in place)."""
    if not isinstance(fields_v1, dict):
        return
    spec_fields = fields_v1.setdefault("f:spec", {})
    if not isinstance(spec_fields, dict):
        return
    for key, inner in _POINTER_STRUCTS.items():
        value = spec.get(key)
        if not isinstance(value, dict):
            continue
        node = _own_member(spec_fields, key)
        for child in inner:
            if isinstance(value.get(child), dict):
                _own_member(node, child)
    if not spec_fields:
        del fields_v1["f:spec"]


def access_status(decision: Decision, spec: Mapping[str, Any]) -> dict[str, JSON]:
    """``SubjectAccessReviewStatus`` for ``decision`` (kube's field order)."""
    status: dict[str, JSON] = {"allowed": decision.allowed}
    if decision.denied:
        status["denied"] = True
    if decision.reason:
        status["reason"] = decision.reason
    evaluation_error = build_evaluation_error(decision, spec)
    if evaluation_error:
        status["evaluationError"] = evaluation_error
    return status


def rules_status(result: RulesResult) -> dict[str, JSON]:
    """``SubjectRulesReviewStatus`` (``getResourceRules``/``getNonResourceRules``: each rule's
    lists as the resolver gave them, empty ones left out)."""
    resource_rules: list[JSON] = []
    for rule in result.resource_rules:
        item: dict[str, JSON] = {"verbs": list(rule.get("verbs") or [])}
        for key in ("apiGroups", "resources", "resourceNames"):
            if rule.get(key):
                item[key] = list(rule[key])
        resource_rules.append(item)
    non_resource_rules: list[JSON] = []
    for rule in result.non_resource_rules:
        item = {"verbs": list(rule.get("verbs") or [])}
        if rule.get("nonResourceURLs"):
            item["nonResourceURLs"] = list(rule["nonResourceURLs"])
        non_resource_rules.append(item)
    status: dict[str, JSON] = {"resourceRules": resource_rules,
                               "nonResourceRules": non_resource_rules,
                               "incomplete": result.incomplete}
    if result.evaluation_error:
        status["evaluationError"] = result.evaluation_error
    return status
