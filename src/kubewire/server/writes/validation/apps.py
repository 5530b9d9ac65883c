"""Deployment validation: kube's ``ValidateDeploymentSpec`` rules, in kube's order.

Source: kubernetes pkg/apis/apps/validation/validation.go (``ValidateDeploymentSpec``,
``ValidatePodTemplateSpecForReplicaSet``, ``ValidateDeploymentStrategy``,
``ValidateRollingUpdateDeployment``) and pkg/registry/apps/deployment/strategy.go (the selector
is immutable in apps/v1). The template's pod spec gets the Pod rules under
``spec.template.spec`` (``pod_validation``).

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubewire.go_text import GoLiteral, go_quote
from kubewire.json_types import JSON
from kubewire.names import regex_error
from kubewire.resources import Resource
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import label_selector_from_match
from kubewire.server.writes.validation.meta import (
    dict_at,
    int_at,
    validate_annotations,
    validate_labels,
)
from kubewire.server.writes.validation.pods.spec import validate_pod_spec
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

NEGATIVE = "must be greater than or equal to 0"  # apimachinery IsNegativeErrorMsg
PERCENT_ERROR = regex_error("a valid percent string must be a numeric string followed by an "
                            "ending '%'", "[0-9]+%", "1%", "93%")
STRATEGY_TYPES = ("Recreate", "RollingUpdate")


def go_string_map(labels: Mapping[str, JSON] | None) -> GoLiteral:
    """A ``map[string]string`` as Go's ``%#v`` prints it (keys sorted)."""
    if labels is None:
        return GoLiteral("map[string]string(nil)")
    inner = ", ".join(f"{go_quote(k)}:{go_quote(str(v))}" for k, v in sorted(labels.items()))
    return GoLiteral(f"map[string]string{{{inner}}}")


def go_label_selector(selector: Mapping[str, JSON] | None) -> GoLiteral:
    """A ``*metav1.LabelSelector`` as a field error prints it (``%#v`` of the struct)."""
    if selector is None:
        return GoLiteral("null")
    match = selector.get("matchLabels")
    labels = go_string_map(match if isinstance(match, dict) else None).text
    requirements = []
    for item in selector.get("matchExpressions") or []:
        if not isinstance(item, dict):
            continue
        values = item.get("values")
        shown = ("[]string{" + ", ".join(go_quote(str(v)) for v in values) + "}"
                 if isinstance(values, list) else "[]string(nil)")
        key, operator = go_quote(str(item.get("key", ""))), go_quote(str(item.get("operator", "")))
        requirements.append(f"v1.LabelSelectorRequirement{{Key:{key}, Operator:{operator}, "
                            f"Values:{shown}}}")
    expressions = ("[]v1.LabelSelectorRequirement{" + ", ".join(requirements) + "}"
                   if selector.get("matchExpressions") is not None
                   else "[]v1.LabelSelectorRequirement(nil)")
    return GoLiteral(f"v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}")


def go_int_or_string(value: JSON) -> GoLiteral:
    """An ``intstr.IntOrString`` as ``%#v`` prints it (its String method needs a pointer)."""
    if isinstance(value, str):
        return GoLiteral(f"intstr.IntOrString{{Type:1, IntVal:0, StrVal:{go_quote(value)}}}")
    number = value if isinstance(value, int) else 0
    return GoLiteral(f'intstr.IntOrString{{Type:0, IntVal:{number}, StrVal:""}}')


def _nonnegative(path: str, value: int | None) -> list[FieldError]:
    return [invalid(path, value, NEGATIVE)] if value is not None and value < 0 else []


def _percent(value: JSON) -> tuple[int, bool]:
    """``getPercentValue``/``getIntOrPercentValue``: (value, is a percent)."""
    if isinstance(value, str):
        match = re.fullmatch(r"([0-9]+)%", value)
        return (int(match.group(1)), True) if match else (0, True)
    return (value if isinstance(value, int) else 0), False


def _positive_int_or_percent(path: str, value: JSON) -> list[FieldError]:
    if isinstance(value, str):
        ok = re.fullmatch(r"[0-9]+%", value) is not None
        return [] if ok else [invalid(path, go_int_or_string(value), PERCENT_ERROR)]
    return _nonnegative(path, value if isinstance(value, int) else None)


def _strategy_errors(strategy: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidateDeploymentStrategy``."""
    kind = strategy.get("type")
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        return [] if rolling is None else [forbidden(
            f"{path}.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'")]
    if kind != "RollingUpdate":
        return [not_supported(path, GoLiteral(_go_strategy(strategy)), STRATEGY_TYPES)]
    if not isinstance(rolling, dict):
        return [required(f"{path}.rollingUpdate", "this should be defaulted and never be nil")]
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errors = _positive_int_or_percent(f"{path}.rollingUpdate.maxUnavailable", unavailable)
    errors += _positive_int_or_percent(f"{path}.rollingUpdate.maxSurge", surge)
    value, is_percent = _percent(unavailable)
    if value == 0 and _percent(surge)[0] == 0:
        errors.append(invalid(f"{path}.rollingUpdate.maxUnavailable",
                              go_int_or_string(unavailable), "may not be 0 when `maxSurge` is 0"))
    if is_percent and value > 100:
        errors.append(invalid(f"{path}.rollingUpdate.maxUnavailable",
                              go_int_or_string(unavailable), "must not be greater than 100%"))
    return errors


def _go_strategy(strategy: Mapping[str, JSON]) -> str:
    kind = strategy.get("type")
    return f"apps.DeploymentStrategy{{Type:{go_quote(str(kind or ''))}, RollingUpdate:(*apps." \
           "RollingUpdateDeployment)(nil)}"


def _template_errors(template: Mapping[str, JSON], selector: JSON,
                     path: str) -> list[FieldError]:
    """``ValidatePodTemplateSpecForReplicaSet`` with ``ValidatePodTemplateSpec``."""
    meta = dict_at(template, "metadata")
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else None
    errors: list[FieldError] = []
    matches = False
    if isinstance(selector, dict):
        try:
            parsed = label_selector_from_match(selector)
            # an empty selector matches everything; it is reported on its own
            matches = parsed.is_empty or parsed.matches(labels or {})
        except SelectorError:
            matches = True
            errors.append(invalid("spec.selector", go_label_selector(selector),
                                  "invalid label selector"))
    if not matches:  # a nil selector selects nothing (labels.Nothing)
        errors.append(invalid(f"{path}.metadata.labels", go_string_map(labels),
                              "`selector` does not match template `labels`"))
    errors += validate_labels(labels or {}, f"{path}.labels")
    annotations = meta.get("annotations")
    errors += validate_annotations(annotations if isinstance(annotations, dict) else {},
                                   f"{path}.annotations")
    spec = dict_at(template, "spec")
    errors += validate_pod_spec(spec, f"{path}.spec")
    restart = spec.get("restartPolicy") or "Always"
    if restart != "Always":
        errors.append(not_supported(f"{path}.spec.restartPolicy", restart, ("Always",)))
    deadline = int_at(spec, "activeDeadlineSeconds")
    if deadline is not None:
        errors.append(invalid(f"{path}.spec.activeDeadlineSeconds", deadline,
                              "activeDeadlineSeconds in ReplicaSet is not Supported"))
    return errors


def validate_deployment(resource: Resource, obj: Mapping[str, JSON],
                        old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """Errors for creating (``old`` None) or updating a Deployment."""
    spec = dict_at(obj, "spec")
    errors = _nonnegative("spec.replicas", int_at(spec, "replicas"))
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        errors.append(required("spec.selector"))
    elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
        errors.append(invalid("spec.selector", go_label_selector(selector),
                              "empty selector is invalid for deployment"))
    errors += _template_errors(dict_at(spec, "template"), selector, "spec.template")
    errors += _strategy_errors(dict_at(spec, "strategy"), "spec.strategy")
    min_ready = int_at(spec, "minReadySeconds") or 0
    errors += _nonnegative("spec.minReadySeconds", min_ready)
    errors += _nonnegative("spec.revisionHistoryLimit", int_at(spec, "revisionHistoryLimit"))
    deadline = int_at(spec, "progressDeadlineSeconds")
    if deadline is not None:
        errors += _nonnegative("spec.progressDeadlineSeconds", deadline)
        if deadline <= min_ready:
            errors.append(invalid("spec.progressDeadlineSeconds", deadline,
                                  "must be greater than minReadySeconds"))
    if old is not None:
        old_selector = dict_at(old, "spec").get("selector")
        if old_selector != selector:  # apps/v1 strategy: the selector is immutable
            errors.append(invalid("spec.selector", go_label_selector(
                selector if isinstance(selector, dict) else None), "field is immutable"))
    return errors
