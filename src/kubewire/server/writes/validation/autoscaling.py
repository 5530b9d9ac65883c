"""autoscaling HorizontalPodAutoscaler validation, after kube v1.32
``pkg/apis/autoscaling/validation`` (``ValidateHorizontalPodAutoscaler``,
``ValidateHorizontalPodAutoscalerUpdate``, ``ValidateHorizontalPodAutoscalerStatusUpdate``).

kube validates its internal type, whose layout is autoscaling/v2's: an autoscaling/v1 object is
converted first (``kubewire.hpa_conversion``), so a v1 ``targetCPUUtilizationPercentage`` of 0
is reported at ``spec.metrics[0].resource.target.averageUtilization``, as kube does.
``minReplicas`` may be 0 only when the stored object already has 0 (the HPAScaleToZero gate is
off in v1.32).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from kubewire.hpa_conversion import as_v2
from kubewire.json_types import JSON
from kubewire.names import is_dns1123_label, is_path_segment_name
from kubewire.quantity import parse_quantity
from kubewire.resources import Resource
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

MAX_PERIOD_SECONDS = 1800
MAX_STABILIZATION_WINDOW_SECONDS = 3600
_SOURCE_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")  # sorted
_SOURCE_FIELDS = {"Object": "object", "Pods": "pods", "Resource": "resource",
                  "External": "external", "ContainerResource": "containerResource"}
# the order validateMetricSpec looks at the members in
_PRESENT_ORDER = ("object", "external", "pods", "resource", "containerResource")
_TARGET_TYPES = ("Utilization", "Value", "AverageValue")
_SELECT_POLICIES = ("Disabled", "Max", "Min")  # sets.List: sorted
_POLICY_TYPES = ("Percent", "Pods")
NEGATIVE = "must be greater than or equal to 0"


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _positive(quantity: Any) -> bool:
    parsed = parse_quantity(quantity)
    return parsed is not None and parsed > Fraction(0)


def _ref_errors(ref: Any, path: str) -> list[FieldError]:
    """``ValidateCrossVersionObjectReference``."""
    ref = _d(ref)
    errors: list[FieldError] = []
    for key in ("kind", "name"):
        value = ref.get(key)
        if not isinstance(value, str) or not value:
            errors.append(required(f"{path}.{key}"))
        else:
            errors += [invalid(f"{path}.{key}", value, m) for m in is_path_segment_name(value)]
    return errors


def _identifier_errors(ident: Any, path: str) -> list[FieldError]:
    name = _d(ident).get("name")
    if not isinstance(name, str) or not name:
        return [required(f"{path}.name", "must specify a metric name")]
    return [invalid(f"{path}.name", name, m) for m in is_path_segment_name(name)]


def _target_errors(target: Any, path: str) -> list[FieldError]:
    """``validateMetricTarget``."""
    target = _d(target)
    errors: list[FieldError] = []
    kind = target.get("type") or ""
    if not kind:
        errors.append(required(f"{path}.type", "must specify a metric target type"))
    if kind not in _TARGET_TYPES:
        errors.append(invalid(f"{path}.type", kind,
                              "must be either Utilization, Value, or AverageValue"))
    for key in ("value", "averageValue"):
        if target.get(key) is not None and not _positive(target[key]):
            errors.append(invalid(f"{path}.{key}", str(target[key]), "must be positive"))
    utilization = _int(target.get("averageUtilization"))
    if utilization is not None and utilization < 1:
        errors.append(invalid(f"{path}.averageUtilization", utilization,
                              "must be greater than 0"))
    return errors


def _resource_name_errors(name: str, path: str) -> list[FieldError]:
    """``ValidateContainerResourceName`` for the names HPAs use (qualified resource names)."""
    problems = is_path_segment_name(name)
    return [invalid(path, name, m) for m in problems]


def _utilization_source_errors(src: dict[str, Any], path: str) -> list[FieldError]:
    target = _d(src.get("target"))
    errors = _target_errors(target, f"{path}.target")
    if target.get("averageUtilization") is None and target.get("averageValue") is None:
        errors.append(required(f"{path}.target.averageUtilization",
                               "must set either a target raw value or a target utilization"))
    if target.get("averageUtilization") is not None and target.get("averageValue") is not None:
        errors.append(forbidden(f"{path}.target.averageValue",
                                "may not set both a target raw value and a target utilization"))
    return errors


def _object_errors(src: dict[str, Any], path: str) -> list[FieldError]:
    target = _d(src.get("target"))
    errors = _ref_errors(src.get("describedObject"), f"{path}.describedObject")
    errors += _identifier_errors(src.get("metric"), f"{path}.metric")
    errors += _target_errors(target, f"{path}.target")
    if target.get("value") is None and target.get("averageValue") is None:
        errors.append(required(f"{path}.target.averageValue",
                               "must set either a target value or averageValue"))
    return errors


def _external_errors(src: dict[str, Any], path: str) -> list[FieldError]:
    target = _d(src.get("target"))
    errors = _identifier_errors(src.get("metric"), f"{path}.metric")
    errors += _target_errors(target, f"{path}.target")
    if target.get("value") is None and target.get("averageValue") is None:
        errors.append(required(f"{path}.target.averageValue",
                               "must set either a target value for metric or a per-pod target"))
    if target.get("value") is not None and target.get("averageValue") is not None:
        errors.append(forbidden(f"{path}.target.value", "may not set both a target value for "
                                "metric and a per-pod target"))
    return errors


def _pods_errors(src: dict[str, Any], path: str) -> list[FieldError]:
    target = _d(src.get("target"))
    errors = _identifier_errors(src.get("metric"), f"{path}.metric")
    errors += _target_errors(target, f"{path}.target")
    if target.get("averageValue") is None:
        errors.append(required(f"{path}.target.averageValue",
                               "must specify a positive target averageValue"))
    return errors


def _resource_errors(src: dict[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if not src.get("name"):
        errors.append(required(f"{path}.name", "must specify a resource name"))
    return errors + _utilization_source_errors(src, path)


def _container_resource_errors(src: dict[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    name, container = src.get("name"), src.get("container")
    if not isinstance(name, str) or not name:
        errors.append(required(f"{path}.name", "must specify a resource name"))
    else:
        errors += _resource_name_errors(name, f"{path}.name")
    if not isinstance(container, str) or not container:
        errors.append(required(f"{path}.container", "must specify a container"))
    else:
        errors += [invalid(f"{path}.container", container, m)
                   for m in is_dns1123_label(container)]
    return errors + _utilization_source_errors(src, path)


_SOURCE_RULES: dict[str, Callable[[dict[str, Any], str], list[FieldError]]] = {
    "object": _object_errors, "external": _external_errors, "pods": _pods_errors,
    "resource": _resource_errors, "containerResource": _container_resource_errors}


def _metric_errors(metric: dict[str, Any], path: str) -> list[FieldError]:
    """``validateMetricSpec``."""
    errors: list[FieldError] = []
    kind = metric.get("type") or ""
    if not kind:
        errors.append(required(f"{path}.type", "must specify a metric source type"))
    if kind not in _SOURCE_TYPES:
        errors.append(not_supported(f"{path}.type", kind, _SOURCE_TYPES))
    present = [m for m in _PRESENT_ORDER if metric.get(m) is not None]
    if present:
        errors += _SOURCE_RULES[present[0]](_d(metric[present[0]]), f"{path}.{present[0]}")
    expected = _SOURCE_FIELDS.get(kind, "")
    if expected and metric.get(expected) is None:
        errors.append(required(f"{path}.{expected}",
                               "must populate information for the given metric source"))
    if not expected:
        errors.append(not_supported(f"{path}.type", kind, _SOURCE_TYPES))
    if len(present) != 1:
        errors += [forbidden(f"{path}.{m}", "must populate the given metric source only")
                   for m in sorted(present) if m != expected]
    return errors


def _rules_errors(rules: Any, path: str) -> list[FieldError]:
    """``validateScalingRules``."""
    if not isinstance(rules, dict):
        return []
    errors: list[FieldError] = []
    window = _int(rules.get("stabilizationWindowSeconds"))
    if window is not None and window < 0:
        errors.append(invalid(f"{path}.stabilizationWindowSeconds", window,
                              "must be greater than or equal to zero"))
    if window is not None and window > MAX_STABILIZATION_WINDOW_SECONDS:
        errors.append(invalid(f"{path}.stabilizationWindowSeconds", window,
                              f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"))
    select = rules.get("selectPolicy")
    if select is not None and select not in _SELECT_POLICIES:
        errors.append(not_supported(f"{path}.selectPolicy", select, _SELECT_POLICIES))
    policies = rules.get("policies")
    policies = policies if isinstance(policies, list) else []
    if not policies:
        errors.append(required(f"{path}.policies", "must specify at least one Policy"))
    for i, policy in enumerate(_d(p) for p in policies):
        errors += _policy_errors(policy, f"{path}.policies[{i}]")
    return errors


def _policy_errors(policy: dict[str, Any], path: str) -> list[FieldError]:
    """``validateScalingPolicy``."""
    errors: list[FieldError] = []
    kind = policy.get("type") or ""
    if kind not in _POLICY_TYPES:
        errors.append(not_supported(f"{path}.type", kind, _POLICY_TYPES))
    value, period = _int(policy.get("value")) or 0, _int(policy.get("periodSeconds")) or 0
    if value <= 0:
        errors.append(invalid(f"{path}.value", value, "must be greater than zero"))
    if period <= 0:
        errors.append(invalid(f"{path}.periodSeconds", period, "must be greater than zero"))
    if period > MAX_PERIOD_SECONDS:
        errors.append(invalid(f"{path}.periodSeconds", period,
                              f"must be less than or equal to {MAX_PERIOD_SECONDS}"))
    return errors


def _spec_errors(spec: dict[str, Any], lower_bound: int) -> list[FieldError]:
    """``validateHorizontalPodAutoscalerSpec``."""
    errors: list[FieldError] = []
    low, high = _int(spec.get("minReplicas")), _int(spec.get("maxReplicas")) or 0
    if low is not None and low < lower_bound:
        errors.append(invalid("spec.minReplicas", low,
                              f"must be greater than or equal to {lower_bound}"))
    if high < 1:
        errors.append(invalid("spec.maxReplicas", high, "must be greater than 0"))
    if low is not None and high < low:
        errors.append(invalid("spec.maxReplicas", high,
                              "must be greater than or equal to `minReplicas`"))
    errors += _ref_errors(spec.get("scaleTargetRef"), "spec.scaleTargetRef")
    metrics = [_d(m) for m in spec.get("metrics") or ()] \
        if isinstance(spec.get("metrics"), list) else []
    for i, metric in enumerate(metrics):
        errors += _metric_errors(metric, f"spec.metrics[{i}]")
    if low == 0 and not any(m.get("type") in ("Object", "External") for m in metrics):
        errors.append(forbidden("spec.metrics", "must specify at least one Object or External "
                                "metric to support scaling to zero replicas"))
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        errors += _rules_errors(behavior.get("scaleUp"), "spec.behavior.scaleUp")
        errors += _rules_errors(behavior.get("scaleDown"), "spec.behavior.scaleDown")
    return errors


def validate_horizontal_pod_autoscaler(resource: Resource, obj: Mapping[str, JSON],
                                       old: Mapping[str, JSON] | None = None,
                                       ) -> list[FieldError]:
    """``ValidateHorizontalPodAutoscaler``/``...Update``'s spec rules (either version)."""
    spec = _d(as_v2(obj).get("spec"))
    old_min = _int(_d(as_v2(old).get("spec")).get("minReplicas")) if old is not None else None
    return _spec_errors(spec, 0 if old_min == 0 else 1)


def validate_horizontal_pod_autoscaler_status(resource: Resource, obj: Mapping[str, JSON],
                                              old: Mapping[str, JSON] | None = None,
                                              ) -> list[FieldError]:
    """``ValidateHorizontalPodAutoscalerStatusUpdate``: the replica counts are not negative."""
    status = _d(as_v2(obj).get("status"))
    errors: list[FieldError] = []
    for key in ("currentReplicas", "desiredReplicas"):
        value = _int(status.get(key))
        if value is not None and value < 0:
            errors.append(invalid(f"status.{key}", value, NEGATIVE))
    return errors
