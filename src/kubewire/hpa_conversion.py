"""HorizontalPodAutoscaler between autoscaling/v2 (the stored version) and autoscaling/v1 (pure).

Written by hand after kube v1.32 ``pkg/apis/autoscaling/v1/conversion.go`` and
``pkg/apis/autoscaling/annotations.go``: v1 carries one CPU utilization target
(``spec.targetCPUUtilizationPercentage``, ``status.currentCPUUtilizationPercentage``) and keeps
what v2 says beyond it in four annotations, JSON of the v1 metric types (the v2beta1 layout:
``targetAverageUtilization``, ``metricName``, ...) for metrics, current metrics and conditions,
and of kube's *internal* behavior type (no json tags: Go field names) for behavior. Going to
v1, round-trip annotations already on the object are dropped before the new ones are set; going
to v2 they are read (a value Go cannot decode is ignored) and dropped. A v1 object without any
metric gets kube's implicit default, CPU at 80% utilization, in the conversion (the v1
defaulter cannot see the annotations).

Objects are JSON dicts; keys come out in Go struct order with Go's ``omitempty`` rules, so a
converted object reads as kube writes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from kubewire.go_print import go_json
from kubewire.json_types import JSON

V1 = "autoscaling/v1"
V2 = "autoscaling/v2"
KIND = "HorizontalPodAutoscaler"
METRIC_SPECS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
METRIC_STATUSES_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
ROUND_TRIP_ANNOTATIONS = (METRIC_SPECS_ANNOTATION, BEHAVIOR_ANNOTATION,
                          METRIC_STATUSES_ANNOTATION, CONDITIONS_ANNOTATION)
DEFAULT_CPU_UTILIZATION = 80  # autoscaling.DefaultCPUUtilization
_RESOURCE, _CPU = "Resource", "cpu"
_SOURCES = ("object", "pods", "resource", "containerResource", "external")

Obj = dict[str, Any]


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _put(out: Obj, key: str, value: Any) -> None:
    """Set ``key`` unless ``value`` is None (a nil pointer under ``omitempty``)."""
    if value is not None:
        out[key] = value


def _go_json(value: Any) -> str:
    """``json.Marshal`` of the v1 types (Go structs): ``go_print.go_json`` with each dict's
    keys in the order built here, which is the structs' field order."""
    return go_json(value, sort_keys=False)


def _label_selector(value: Any) -> Any:
    """A ``metav1.LabelSelector`` in its struct order for ``_go_json``: ``matchLabels`` (a Go
    map, so its keys sorted), then ``matchExpressions`` (key, operator, values); both
    ``omitempty``. None stays None (a nil pointer)."""
    if not isinstance(value, dict):
        return value
    out: Obj = {}
    labels = value.get("matchLabels")
    if isinstance(labels, dict) and labels:
        out["matchLabels"] = {k: labels[k] for k in sorted(labels)}
    expressions = value.get("matchExpressions")
    if isinstance(expressions, list) and expressions:
        out["matchExpressions"] = [_requirement(e) for e in expressions]
    return out


def _requirement(value: Any) -> Any:
    """A ``LabelSelectorRequirement``: key and operator always, values ``omitempty``."""
    if not isinstance(value, dict):
        return value
    out: Obj = {"key": value.get("key", ""), "operator": value.get("operator", "")}
    if value.get("values"):
        out["values"] = value["values"]
    return out


def _ref(ref: Any) -> Obj:
    """A CrossVersionObjectReference (kind and name without omitempty)."""
    ref = _d(ref)
    out: Obj = {"kind": ref.get("kind", ""), "name": ref.get("name", "")}
    _put(out, "apiVersion", ref.get("apiVersion") or None)
    return out


def _identifier(name: Any, selector: Any) -> Obj:
    out: Obj = {"name": name if isinstance(name, str) else ""}
    _put(out, "selector", selector)
    return out


def _target(kind: str, value: Any = None, average: Any = None, utilization: Any = None) -> Obj:
    out: Obj = {"type": kind}
    _put(out, "value", value)
    _put(out, "averageValue", average)
    _put(out, "averageUtilization", utilization)
    return out


def _current(value: Any = None, average: Any = None, utilization: Any = None) -> Obj:
    out: Obj = {}
    _put(out, "value", value)
    _put(out, "averageValue", average)
    _put(out, "averageUtilization", utilization)
    return out


# --- metric specs and statuses, v1 (v2beta1 layout) <-> v2 ------------------------------------

def _spec_v1_to_v2(metric: Obj) -> Obj:
    out: Obj = {"type": metric.get("type", "")}
    if isinstance(metric.get("object"), dict):
        src = metric["object"]
        average = src.get("averageValue")
        out["object"] = {
            "describedObject": _ref(src.get("target")),
            "target": _target("Value" if average is None else "AverageValue",
                              src.get("targetValue", "0"), average),
            "metric": _identifier(src.get("metricName"), src.get("selector"))}
    if isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        out["pods"] = {"metric": _identifier(src.get("metricName"), src.get("selector")),
                       "target": _target("AverageValue",
                                         average=src.get("targetAverageValue", "0"))}
    for key in ("resource", "containerResource"):
        if isinstance(metric.get(key), dict):
            src = metric[key]
            utilization = src.get("targetAverageUtilization")
            converted: Obj = {"name": src.get("name", ""), "target": _target(
                "AverageValue" if utilization is None else "Utilization",
                average=src.get("targetAverageValue"), utilization=utilization)}
            if key == "containerResource":
                converted["container"] = src.get("container", "")
            out[key] = converted
    if isinstance(metric.get("external"), dict):
        src = metric["external"]
        value = src.get("targetValue")
        out["external"] = {
            "metric": _identifier(src.get("metricName"), src.get("metricSelector")),
            "target": _target("AverageValue" if value is None else "Value", value,
                              src.get("targetAverageValue"))}
    return out


def _spec_v2_to_v1(metric: Obj) -> Obj:
    out: Obj = {"type": metric.get("type", "")}
    if isinstance(metric.get("object"), dict):
        src = metric["object"]
        target, ident = _d(src.get("target")), _d(src.get("metric"))
        obj: Obj = {"target": _ref(src.get("describedObject")),
                    "metricName": ident.get("name", ""),
                    "targetValue": target.get("value", "0")}
        _put(obj, "selector", _label_selector(ident.get("selector")))
        _put(obj, "averageValue", target.get("averageValue"))
        out["object"] = obj
    if isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        target, ident = _d(src.get("target")), _d(src.get("metric"))
        pods: Obj = {"metricName": ident.get("name", ""),
                     "targetAverageValue": target.get("averageValue", "0")}
        _put(pods, "selector", _label_selector(ident.get("selector")))
        out["pods"] = pods
    for key in ("resource", "containerResource"):
        if isinstance(metric.get(key), dict):
            src = metric[key]
            target = _d(src.get("target"))
            converted: Obj = {"name": src.get("name", "")}
            _put(converted, "targetAverageUtilization", target.get("averageUtilization"))
            _put(converted, "targetAverageValue", target.get("averageValue"))
            if key == "containerResource":
                converted["container"] = src.get("container", "")
            out[key] = converted
    if isinstance(metric.get("external"), dict):
        src = metric["external"]
        target, ident = _d(src.get("target")), _d(src.get("metric"))
        external: Obj = {"metricName": ident.get("name", "")}
        _put(external, "metricSelector", _label_selector(ident.get("selector")))
        _put(external, "targetValue", target.get("value"))
        _put(external, "targetAverageValue", target.get("averageValue"))
        out["external"] = external
    return out


def _status_v1_to_v2(metric: Obj) -> Obj:
    out: Obj = {"type": metric.get("type", "")}
    if isinstance(metric.get("object"), dict):
        src = metric["object"]
        out["object"] = {"metric": _identifier(src.get("metricName"), src.get("selector")),
                         "current": _current(src.get("currentValue", "0"),
                                             src.get("averageValue")),
                         "describedObject": _ref(src.get("target"))}
    if isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        out["pods"] = {"metric": _identifier(src.get("metricName"), src.get("selector")),
                       "current": _current(average=src.get("currentAverageValue", "0"))}
    for key in ("resource", "containerResource"):
        if isinstance(metric.get(key), dict):
            src = metric[key]
            converted: Obj = {"name": src.get("name", ""), "current": _current(
                average=src.get("currentAverageValue", "0"),
                utilization=src.get("currentAverageUtilization"))}
            if key == "containerResource":
                converted["container"] = src.get("container", "")
            out[key] = converted
    if isinstance(metric.get("external"), dict):
        src = metric["external"]
        out["external"] = {
            "metric": _identifier(src.get("metricName"), src.get("metricSelector")),
            "current": _current(src.get("currentValue", "0"), src.get("currentAverageValue"))}
    return out


def _status_v2_to_v1(metric: Obj) -> Obj:
    out: Obj = {"type": metric.get("type", "")}
    if isinstance(metric.get("object"), dict):
        src = metric["object"]
        current, ident = _d(src.get("current")), _d(src.get("metric"))
        obj: Obj = {"target": _ref(src.get("describedObject")),
                    "metricName": ident.get("name", ""),
                    "currentValue": current.get("value", "0")}
        _put(obj, "selector", _label_selector(ident.get("selector")))
        _put(obj, "averageValue", current.get("averageValue"))
        out["object"] = obj
    if isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        current, ident = _d(src.get("current")), _d(src.get("metric"))
        pods: Obj = {"metricName": ident.get("name", ""),
                     "currentAverageValue": current.get("averageValue", "0")}
        _put(pods, "selector", _label_selector(ident.get("selector")))
        out["pods"] = pods
    for key in ("resource", "containerResource"):
        if isinstance(metric.get(key), dict):
            src = metric[key]
            current = _d(src.get("current"))
            converted: Obj = {"name": src.get("name", "")}
            _put(converted, "currentAverageUtilization", current.get("averageUtilization"))
            converted["currentAverageValue"] = current.get("averageValue", "0")
            if key == "containerResource":
                converted["container"] = src.get("container", "")
            out[key] = converted
    if isinstance(metric.get("external"), dict):
        src = metric["external"]
        current, ident = _d(src.get("current")), _d(src.get("metric"))
        external: Obj = {"metricName": ident.get("name", "")}
        _put(external, "metricSelector", _label_selector(ident.get("selector")))
        external["currentValue"] = current.get("value", "0")
        _put(external, "currentAverageValue", current.get("averageValue"))
        out["external"] = external
    return out


def _condition(condition: Obj) -> Obj:
    """A HorizontalPodAutoscalerCondition (same fields in v1 and v2; a zero time is null)."""
    out: Obj = {"type": condition.get("type", ""), "status": condition.get("status", ""),
                "lastTransitionTime": condition.get("lastTransitionTime")}
    _put(out, "reason", condition.get("reason") or None)
    _put(out, "message", condition.get("message") or None)
    return out


# --- behavior: kube's internal type, encoded with Go field names ------------------------------

_RULE_FIELDS = (("stabilizationWindowSeconds", "StabilizationWindowSeconds"),
                ("selectPolicy", "SelectPolicy"), ("policies", "Policies"))
_POLICY_FIELDS = (("type", "Type"), ("value", "Value"), ("periodSeconds", "PeriodSeconds"))


def _behavior_internal(behavior: Obj) -> Obj:
    """``json.Marshal`` of the internal HorizontalPodAutoscalerBehavior (nil pointers: null)."""
    def rules(value: Any) -> Obj | None:
        if not isinstance(value, dict):
            return None
        policies = value.get("policies")
        return {
            "StabilizationWindowSeconds": value.get("stabilizationWindowSeconds"),
            "SelectPolicy": value.get("selectPolicy"),
            "Policies": None if not isinstance(policies, list) else [
                {"Type": _d(p).get("type", ""), "Value": _d(p).get("value", 0),
                 "PeriodSeconds": _d(p).get("periodSeconds", 0)} for p in policies]}
    return {"ScaleUp": rules(behavior.get("scaleUp")),
            "ScaleDown": rules(behavior.get("scaleDown"))}


def _go_field(obj: Obj, name: str) -> Any:
    """``json.Unmarshal``'s field match: exact, else case-insensitive."""
    if name in obj:
        return obj[name]
    folded = name.casefold()
    return next((v for k, v in obj.items() if k.casefold() == folded), None)


def _behavior_v2(decoded: Any) -> Obj | None:
    """The v2 behavior a behavior annotation decodes to; None when Go's decode fails or both
    rules are nil (kube's ``behavior != HorizontalPodAutoscalerBehavior{}`` check)."""
    if not isinstance(decoded, dict):
        return None

    def rules(value: Any) -> Obj | None:
        if not isinstance(value, dict):
            return None
        out: Obj = {}
        for key, go_name in _RULE_FIELDS[:2]:
            _put(out, key, _go_field(value, go_name))
        policies = _go_field(value, "Policies")
        if isinstance(policies, list):
            out["policies"] = [{key: _go_field(_d(p), go) if _go_field(_d(p), go) is not None
                                else ("" if key == "type" else 0) for key, go in _POLICY_FIELDS}
                               for p in policies]
        return out
    up, down = rules(_go_field(decoded, "ScaleUp")), rules(_go_field(decoded, "ScaleDown"))
    if up is None and down is None:
        return None
    out: Obj = {}
    _put(out, "scaleUp", up)
    _put(out, "scaleDown", down)
    return out


def _decode(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _is_cpu(metric: Obj) -> bool:
    return (metric.get("type") == _RESOURCE and isinstance(metric.get("resource"), dict)
            and metric["resource"].get("name") == _CPU)


def _cpu_metric(utilization: Any) -> Obj:
    return {"type": _RESOURCE, "resource": {"name": _CPU, "target": _target(
        "Utilization", utilization=utilization)}}


def _without_round_trip(annotations: Any) -> Obj | None:
    """``DropRoundTripHorizontalPodAutoscalerAnnotations``."""
    if not isinstance(annotations, dict):
        return None
    return {k: v for k, v in annotations.items() if k not in ROUND_TRIP_ANNOTATIONS}


def _meta_with(obj: Mapping[str, JSON], annotations: Obj | None) -> Obj:
    meta = dict(_d(obj.get("metadata")))
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return meta


def drop_round_trip_annotations(obj: dict[str, JSON]) -> None:
    """What v2's conversions do to an object's metadata (in place): no round-trip annotation
    survives (v2 round-trips to kube's internal type without them)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict) \
            and any(k in meta["annotations"] for k in ROUND_TRIP_ANNOTATIONS):
        kept = _without_round_trip(meta["annotations"])
        if kept:
            meta["annotations"] = kept
        else:
            del meta["annotations"]


# --- whole objects ---------------------------------------------------------------------------

def v2_to_v1(obj: Mapping[str, JSON]) -> dict[str, JSON]:
    """``Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler``."""
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    metrics = [_d(m) for m in spec.get("metrics") or () if isinstance(m, dict)]
    current = [_d(m) for m in status.get("currentMetrics") or () if isinstance(m, dict)]
    conditions = [_d(c) for c in status.get("conditions") or () if isinstance(c, dict)]
    annotations = _without_round_trip(_d(obj.get("metadata")).get("annotations"))
    others = [_spec_v2_to_v1(m) for m in metrics
              if not (_is_cpu(m) and _d(m["resource"].get("target")).get("averageUtilization")
                      is not None)]
    added: Obj = {}
    if others:
        added[METRIC_SPECS_ANNOTATION] = _go_json(others)
    if current:
        added[METRIC_STATUSES_ANNOTATION] = _go_json([_status_v2_to_v1(m) for m in current])
    if isinstance(spec.get("behavior"), dict):
        added[BEHAVIOR_ANNOTATION] = _go_json(_behavior_internal(spec["behavior"]))
    if conditions:
        added[CONDITIONS_ANNOTATION] = _go_json([_condition(c) for c in conditions])
    if added:
        annotations = {**(annotations or {}), **added}
    v1_spec: Obj = {"scaleTargetRef": _ref(spec.get("scaleTargetRef"))}
    _put(v1_spec, "minReplicas", spec.get("minReplicas"))
    v1_spec["maxReplicas"] = spec.get("maxReplicas", 0)
    cpu = next((m for m in metrics if _is_cpu(m)), None)
    if cpu is not None:
        _put(v1_spec, "targetCPUUtilizationPercentage",
             _d(cpu["resource"].get("target")).get("averageUtilization"))
    v1_status: Obj = {}
    _put(v1_status, "observedGeneration", status.get("observedGeneration"))
    _put(v1_status, "lastScaleTime", status.get("lastScaleTime"))
    v1_status["currentReplicas"] = status.get("currentReplicas", 0)
    v1_status["desiredReplicas"] = status.get("desiredReplicas", 0)
    for metric in current:  # the last CPU utilization wins, as kube's loop has it
        if metric.get("type") == _RESOURCE and _d(metric.get("resource")).get("name") == _CPU:
            utilization = _d(metric["resource"].get("current")).get("averageUtilization")
            _put(v1_status, "currentCPUUtilizationPercentage", utilization)
    out: Obj = {"kind": KIND, "apiVersion": V1, "metadata": _meta_with(obj, annotations),
                "spec": v1_spec, "status": v1_status}
    return out


def v1_to_v2(obj: Mapping[str, JSON]) -> dict[str, JSON]:
    """``Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler``."""
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    annotations = _d(_d(obj.get("metadata")).get("annotations"))
    metrics: list[Obj] = []
    if spec.get("targetCPUUtilizationPercentage") is not None:
        metrics = [_cpu_metric(spec["targetCPUUtilizationPercentage"])]
    others = _decode(annotations.get(METRIC_SPECS_ANNOTATION))
    if METRIC_SPECS_ANNOTATION in annotations and isinstance(others, list):
        metrics = [_spec_v1_to_v2(_d(m)) for m in others] + metrics[:1]
    behavior = _behavior_v2(_decode(annotations.get(BEHAVIOR_ANNOTATION)))
    current: list[Obj] = []
    if status.get("currentCPUUtilizationPercentage") is not None:
        current = [{"type": _RESOURCE, "resource": {"name": _CPU, "current": _current(
            utilization=status["currentCPUUtilizationPercentage"])}}]
    statuses = _decode(annotations.get(METRIC_STATUSES_ANNOTATION))
    if isinstance(statuses, list):
        current = [_status_v1_to_v2(_d(m)) for m in statuses]
    if not metrics:
        metrics = [_cpu_metric(DEFAULT_CPU_UTILIZATION)]
    conditions: list[Obj] | None = None
    decoded = _decode(annotations.get(CONDITIONS_ANNOTATION))
    if isinstance(decoded, list):
        conditions = [_condition(_d(c)) for c in decoded]
    v2_spec: Obj = {"scaleTargetRef": _ref(spec.get("scaleTargetRef"))}
    _put(v2_spec, "minReplicas", spec.get("minReplicas"))
    v2_spec["maxReplicas"] = spec.get("maxReplicas", 0)
    v2_spec["metrics"] = metrics
    _put(v2_spec, "behavior", behavior)
    v2_status: Obj = {}
    _put(v2_status, "observedGeneration", status.get("observedGeneration"))
    _put(v2_status, "lastScaleTime", status.get("lastScaleTime"))
    _put(v2_status, "currentReplicas", status.get("currentReplicas") or None)
    v2_status["desiredReplicas"] = status.get("desiredReplicas", 0)
    v2_status["currentMetrics"] = current or None
    _put(v2_status, "conditions", conditions or None)
    meta = _meta_with(obj, _without_round_trip(obj_annotations(obj)))
    return {"kind": KIND, "apiVersion": V2, "metadata": meta, "spec": v2_spec,
            "status": v2_status}


def obj_annotations(obj: Mapping[str, JSON]) -> Obj | None:
    """The object's annotations, None without a map."""
    annotations = _d(obj.get("metadata")).get("annotations")
    return dict(annotations) if isinstance(annotations, dict) else None


def as_v2(obj: Mapping[str, JSON]) -> Mapping[str, JSON]:
    """``obj`` in autoscaling/v2 (itself when it is already)."""
    return v1_to_v2(obj) if obj.get("apiVersion") == V1 else obj


def v2_as_go(obj: Mapping[str, JSON]) -> dict[str, JSON]:
    """A written v2 object as Go encodes it: its status's ``desiredReplicas`` and
    ``currentMetrics`` have no omitempty (a status without them gets 0 and null)."""
    out = dict(obj)
    status = out.get("status")
    if isinstance(status, dict) and ("desiredReplicas" not in status
                                     or "currentMetrics" not in status):
        status = dict(status)
        status.setdefault("desiredReplicas", 0)
        status.setdefault("currentMetrics", None)
        out["status"] = status
    return out


CONVERTERS: Mapping[tuple[tuple[str, str], tuple[str, str]],
                    Callable[[Mapping[str, JSON]], dict[str, JSON]]] = {
    ((V2, KIND), (V1, KIND)): v2_to_v1,
    ((V1, KIND), (V2, KIND)): v1_to_v2,
}
