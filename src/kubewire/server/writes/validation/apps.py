"""apps/v1 validation: Deployments, ReplicaSets, StatefulSets, DaemonSets and
ControllerRevisions, kube's rules in kube's order.

Source: kubernetes pkg/apis/apps/validation/validation.go (``ValidateDeploymentSpec``,
``ValidateReplicaSetSpec``, ``ValidatePodTemplateSpecForReplicaSet``, ``ValidateStatefulSetSpec``,
``ValidateStatefulSetUpdate``, ``ValidateDaemonSetSpec``, ``ValidateDaemonSetSpecUpdate``,
``ValidateControllerRevision``, the ``*StatusUpdate`` functions) and the
pkg/registry/apps/*/strategy.go files (selectors are immutable in apps/v1). A template's pod
spec gets the Pod rules under ``spec.template.spec`` (``pod_validation``); a StatefulSet's does
not (kube leaves it unvalidated: ``ValidatePodTemplateSpecForStatefulSet``).

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from kubewire.go_text import GoLiteral, go_quote
from kubewire.json_types import JSON
from kubewire.names import regex_error
from kubewire.resources import Resource
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import label_selector_from_match
from kubewire.server.patch.json_patch import json_equal
from kubewire.server.writes.lifecycle import semantic_equal
from kubewire.server.writes.validation.meta import (
    dict_at,
    int_at,
    validate_annotations,
    validate_labels,
)
from kubewire.server.writes.validation.pods.scheduling import label_selector_errors
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


def _selector_matches(selector: JSON, labels: Mapping[str, JSON] | None,
                      errors: list[FieldError]) -> bool:
    """Whether ``LabelSelectorAsSelector(selector)`` matches (a nil selector selects nothing,
    an empty one everything); an unparseable selector is reported and counts as a match."""
    if not isinstance(selector, dict):
        return False
    try:
        parsed = label_selector_from_match(selector)
    except SelectorError:
        errors.append(invalid("spec.selector", go_label_selector(selector),
                              "invalid label selector"))
        return True
    return parsed.is_empty or parsed.matches(labels or {})


def _template_errors(template: Mapping[str, JSON], selector: JSON,
                     path: str, kind: str = "ReplicaSet") -> list[FieldError]:
    """``ValidatePodTemplateSpecForReplicaSet`` with ``ValidatePodTemplateSpec``."""
    meta = dict_at(template, "metadata")
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else None
    errors: list[FieldError] = []
    # an empty selector matches everything; it is reported on its own
    if not _selector_matches(selector, labels, errors):
        errors.append(invalid(f"{path}.metadata.labels", go_string_map(labels),
                              "`selector` does not match template `labels`"))
    errors += pod_template_errors(template, path, kind)
    return errors


def pod_template_errors(template: Mapping[str, JSON], path: str,
                         kind: str) -> list[FieldError]:
    """``ValidatePodTemplateSpec`` and the workloads' restartPolicy and deadline rules."""
    meta = dict_at(template, "metadata")
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else None
    errors = validate_labels(labels or {}, f"{path}.labels")
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
        errors.append(forbidden(f"{path}.spec.activeDeadlineSeconds",
                                f"activeDeadlineSeconds in {kind} is not Supported"))
    return errors


def validate_deployment(resource: Resource, obj: Mapping[str, JSON],
                        old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """Errors for creating (``old`` None) or updating a Deployment."""
    spec = dict_at(obj, "spec")
    errors = _nonnegative("spec.replicas", int_at(spec, "replicas"))
    selector = spec.get("selector")
    errors += _selector_errors(selector, "deployment")
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


# --- ReplicaSet -------------------------------------------------------------------------------

def _selector_errors(selector: JSON, kind: str) -> list[FieldError]:
    """Required, else ``ValidateLabelSelector`` (label values checked) and then ``empty
    selector is invalid for <kind>`` (kube's wording per kind)."""
    if not isinstance(selector, dict):
        return [required("spec.selector")]
    errors = label_selector_errors(selector, "spec.selector")
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        errors.append(invalid("spec.selector", go_label_selector(selector),
                              f"empty selector is invalid for {kind}"))
    return errors


def validate_replica_set(resource: Resource, obj: Mapping[str, JSON],
                         old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateReplicaSetSpec`` (create and update); the selector is immutable in apps/v1
    (replicaset/strategy.go ``ValidateUpdate``)."""
    spec = dict_at(obj, "spec")
    errors = _nonnegative("spec.replicas", int_at(spec, "replicas"))
    errors += _nonnegative("spec.minReadySeconds", int_at(spec, "minReadySeconds"))
    selector = spec.get("selector")
    errors += _selector_errors(selector, "deployment")  # sic: kube's ReplicaSet text
    errors += _template_errors(dict_at(spec, "template"), selector, "spec.template")
    if old is not None:
        errors += _immutable_selector(selector, dict_at(old, "spec").get("selector"))
    return errors


def _immutable_selector(selector: JSON, old_selector: JSON) -> list[FieldError]:
    if old_selector == selector:
        return []
    return [invalid("spec.selector", go_label_selector(
        selector if isinstance(selector, dict) else None), "field is immutable")]


def _status_counts(status: Mapping[str, JSON], names: tuple[str, ...]) -> list[FieldError]:
    return [e for name in names for e in _nonnegative(f"status.{name}", int_at(status, name))]


def _not_above(status: Mapping[str, JSON], names: tuple[str, ...], limit: str,
               message: str) -> list[FieldError]:
    top = int_at(status, limit) or 0
    return [invalid(f"status.{name}", int_at(status, name) or 0, message)
            for name in names if (int_at(status, name) or 0) > top]


_ABOVE_REPLICAS = "cannot be greater than status.replicas"


def validate_replica_set_status(resource: Resource, obj: Mapping[str, JSON],
                                old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateReplicaSetStatusUpdate``."""
    status = dict_at(obj, "status")
    errors = _status_counts(status, ("replicas", "fullyLabeledReplicas", "readyReplicas",
                                     "availableReplicas", "observedGeneration"))
    errors += _not_above(status, ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"),
                         "replicas", _ABOVE_REPLICAS)
    errors += _not_above(status, ("availableReplicas",), "readyReplicas",
                         "cannot be greater than readyReplicas")
    return errors


def _collision_count(obj: Mapping[str, JSON], old: Mapping[str, JSON] | None) -> list[FieldError]:
    """``IsDecremented(status.collisionCount)``: set before, and now lower or unset."""
    if old is None:
        return []
    before = int_at(dict_at(old, "status"), "collisionCount")
    now = int_at(dict_at(obj, "status"), "collisionCount")
    if before is None or (now is not None and now >= before):
        return []
    return [invalid("status.collisionCount", now or 0, "cannot be decremented")]


def validate_deployment_status(resource: Resource, obj: Mapping[str, JSON],
                               old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateDeploymentStatusUpdate``: a status write is not checked against the spec."""
    status = dict_at(obj, "status")
    errors = _status_counts(status, ("observedGeneration", "replicas", "updatedReplicas",
                                     "readyReplicas", "availableReplicas",
                                     "unavailableReplicas", "collisionCount"))
    errors += _not_above(status, ("updatedReplicas", "readyReplicas", "availableReplicas"),
                         "replicas", _ABOVE_REPLICAS)
    errors += _not_above(status, ("availableReplicas",), "readyReplicas",
                         "cannot be greater than readyReplicas")
    return errors + _collision_count(obj, old)


# --- StatefulSet ------------------------------------------------------------------------------

POD_MANAGEMENT_POLICIES = ("OrderedReady", "Parallel")
RETENTION_POLICIES = ("Retain", "Delete")
_STS_MUTABLE = ("replicas", "template", "updateStrategy", "minReadySeconds", "ordinals",
                "persistentVolumeClaimRetentionPolicy")
_GO_POINTER = "0xc000a2c000"  # a Go pointer as %#v prints it; kube's address varies per call


def _go_sts_rolling_update(rolling: Mapping[str, JSON]) -> str:
    unavailable = rolling.get("maxUnavailable")
    shown = ("(*intstr.IntOrString)(nil)" if unavailable is None
             else f"(*intstr.IntOrString)({_GO_POINTER})")
    return f"apps.RollingUpdateStatefulSetStrategy{{Partition:{int_at(rolling, 'partition') or 0}" \
           f", MaxUnavailable:{shown}}}"


def _go_update_strategy(go_type: str, rolling_type: str, strategy: Mapping[str, JSON]) -> str:
    rolling = "nil" if strategy.get("rollingUpdate") is None else _GO_POINTER
    return f"apps.{go_type}{{Type:{go_quote(text_of(strategy.get('type')))}, " \
           f"RollingUpdate:(*apps.{rolling_type})({rolling})}}"


def text_of(value: JSON) -> str:
    return value if isinstance(value, str) else ""


def _stateful_set_strategy_errors(strategy: Mapping[str, JSON]) -> list[FieldError]:
    path = "spec.updateStrategy"
    kind = strategy.get("type")
    rolling = strategy.get("rollingUpdate")
    if not kind:
        return [required(path)]
    if kind == "OnDelete":
        if isinstance(rolling, dict):
            return [invalid(f"{path}.rollingUpdate", GoLiteral(_go_sts_rolling_update(rolling)),
                            "only allowed for updateStrategy 'RollingUpdate'")]
        return []
    if kind == "RollingUpdate":
        if not isinstance(rolling, dict):
            return []
        errors = _nonnegative(f"{path}.rollingUpdate.partition", int_at(rolling, "partition"))
        unavailable = rolling.get("maxUnavailable")
        if unavailable is not None:
            at = f"{path}.rollingUpdate.maxUnavailable"
            errors += _positive_int_or_percent(at, unavailable)
            value, is_percent = _percent(unavailable)
            if value == 0:
                errors.append(invalid(at, go_int_or_string(unavailable), "cannot be 0"))
            if is_percent and value > 100:
                errors.append(invalid(at, go_int_or_string(unavailable),
                                      "must not be greater than 100%"))
        return errors
    shown = _go_update_strategy("StatefulSetUpdateStrategy", "RollingUpdateStatefulSetStrategy",
                                strategy)
    return [invalid(path, GoLiteral(shown), "must be 'RollingUpdate' or 'OnDelete'")]


def _stateful_set_spec_errors(spec: Mapping[str, JSON]) -> list[FieldError]:
    """``ValidateStatefulSetSpec``."""
    errors: list[FieldError] = []
    policy = spec.get("podManagementPolicy")
    if not policy:
        errors.append(required("spec.podManagementPolicy"))
    elif policy not in POD_MANAGEMENT_POLICIES:
        errors.append(invalid("spec.podManagementPolicy", policy,
                              "must be 'OrderedReady' or 'Parallel'"))
    errors += _stateful_set_strategy_errors(dict_at(spec, "updateStrategy"))
    retention = spec.get("persistentVolumeClaimRetentionPolicy")
    if isinstance(retention, dict):
        for key in ("whenDeleted", "whenScaled"):
            value = text_of(retention.get(key))
            if value not in RETENTION_POLICIES:
                errors.append(not_supported(f"spec.persistentVolumeClaimRetentionPolicy.{key}",
                                            value, RETENTION_POLICIES))
    errors += _nonnegative("spec.replicas", int_at(spec, "replicas"))
    errors += _nonnegative("spec.minReadySeconds", int_at(spec, "minReadySeconds"))
    ordinals = spec.get("ordinals")
    if isinstance(ordinals, dict):
        errors += _nonnegative("spec.ordinals.start", int_at(ordinals, "start"))
    selector = spec.get("selector")
    errors += _selector_errors(selector, "statefulset")
    return errors + _stateful_set_template_errors(selector, dict_at(spec, "template"))


def _stateful_set_template_errors(selector: JSON,
                                  template: Mapping[str, JSON]) -> list[FieldError]:
    """``ValidatePodTemplateSpecForStatefulSet``: labels and annotations, not the pod spec;
    then the restartPolicy and deadline rules."""
    errors: list[FieldError] = []
    meta = dict_at(template, "metadata")
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else None
    selector_errors: list[FieldError] = []
    matches = _selector_matches(selector, labels, selector_errors)
    if selector_errors:  # LabelSelectorAsSelector failed: kube's Invalid has no detail
        errors.append(invalid("spec.selector", go_label_selector(
            selector if isinstance(selector, dict) else None)))
    else:
        if not matches:  # a nil selector selects nothing (labels.Nothing is not Empty)
            errors.append(invalid("spec.template.metadata.labels", go_string_map(labels),
                                  "`selector` does not match template `labels`"))
        errors += validate_labels(labels or {}, "spec.template.labels")
        annotations = meta.get("annotations")
        errors += validate_annotations(annotations if isinstance(annotations, dict) else {},
                                       "spec.template.annotations")
    pod_spec = dict_at(template, "spec")
    restart = pod_spec.get("restartPolicy") or "Always"
    if restart != "Always":
        errors.append(not_supported("spec.template.spec.restartPolicy", restart, ("Always",)))
    if int_at(pod_spec, "activeDeadlineSeconds") is not None:
        errors.append(forbidden("spec.template.spec.activeDeadlineSeconds",
                                "activeDeadlineSeconds in StatefulSet is not Supported"))
    return errors


def validate_stateful_set(resource: Resource, obj: Mapping[str, JSON],
                          old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateStatefulSet`` / ``ValidateStatefulSetUpdate``: on update only replicas,
    ordinals, template, updateStrategy, persistentVolumeClaimRetentionPolicy and
    minReadySeconds may change."""
    spec = dict_at(obj, "spec")
    errors = _stateful_set_spec_errors(spec)
    if old is not None:
        old_spec = dict_at(old, "spec")
        kept = {k: v for k, v in spec.items() if k not in _STS_MUTABLE}
        old_kept = {k: v for k, v in old_spec.items() if k not in _STS_MUTABLE}
        if not semantic_equal(kept, old_kept):
            errors.append(forbidden("spec", "updates to statefulset spec for fields other than "
                                    "'replicas', 'ordinals', 'template', 'updateStrategy', "
                                    "'persistentVolumeClaimRetentionPolicy' and "
                                    "'minReadySeconds' are forbidden"))
    return errors


def validate_stateful_set_status(resource: Resource, obj: Mapping[str, JSON],
                                 old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateStatefulSetStatusUpdate``."""
    status = dict_at(obj, "status")
    errors = _status_counts(status, ("replicas", "readyReplicas", "currentReplicas",
                                     "updatedReplicas", "availableReplicas"))
    errors += _status_counts(status, ("observedGeneration", "collisionCount"))
    errors += _not_above(status, ("readyReplicas", "currentReplicas", "updatedReplicas",
                                  "availableReplicas"), "replicas", _ABOVE_REPLICAS)
    errors += _not_above(status, ("availableReplicas",), "readyReplicas",
                         "cannot be greater than status.readyReplicas")
    return errors + _collision_count(obj, old)


# --- DaemonSet --------------------------------------------------------------------------------

def _daemon_set_strategy_errors(strategy: Mapping[str, JSON]) -> list[FieldError]:
    """``ValidateDaemonSetUpdateStrategy`` and ``ValidateRollingUpdateDaemonSet``."""
    path = "spec.updateStrategy"
    kind = strategy.get("type")
    if kind == "OnDelete":
        return []
    if kind != "RollingUpdate":
        shown = _go_update_strategy("DaemonSetUpdateStrategy", "RollingUpdateDaemonSet",
                                    strategy)
        return [not_supported(path, GoLiteral(shown), ("RollingUpdate", "OnDelete"))]
    rolling = strategy.get("rollingUpdate")
    if not isinstance(rolling, dict):
        return [required(f"{path}.rollingUpdate")]
    path += ".rollingUpdate"
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errors = _positive_int_or_percent(f"{path}.maxUnavailable", unavailable)
    errors += _positive_int_or_percent(f"{path}.maxSurge", surge)
    for name, value in (("maxUnavailable", unavailable), ("maxSurge", surge)):
        number, is_percent = _percent(value)
        if is_percent and number > 100:
            errors.append(invalid(f"{path}.{name}", go_int_or_string(value),
                                  "must not be greater than 100%"))
    has_unavailable, has_surge = _percent(unavailable)[0] != 0, _percent(surge)[0] != 0
    if has_unavailable and has_surge:
        errors.append(invalid(f"{path}.maxSurge", go_int_or_string(surge),
                              "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        errors.append(required(f"{path}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return errors


def validate_daemon_set(resource: Resource, obj: Mapping[str, JSON],
                        old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateDaemonSet`` / ``ValidateDaemonSetUpdate``; the selector is immutable in apps/v1
    (daemonset/strategy.go). kube's templateGeneration checks cannot fail: the strategy sets
    it (``lifecycle``), at least 1 on create and the stored one (+1) on update."""
    spec = dict_at(obj, "spec")
    errors: list[FieldError] = []
    selector = spec.get("selector")
    errors += label_selector_errors(selector, "spec.selector")
    template = dict_at(spec, "template")
    meta = dict_at(template, "metadata")
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else None
    unparsed: list[FieldError] = []  # kube skips the match when the selector does not parse
    if not _selector_matches(selector, labels, unparsed) and not unparsed:
        errors.append(invalid("spec.template.metadata.labels", go_string_map(labels),
                              "`selector` does not match template `labels`"))
    if isinstance(selector, dict) and not selector.get("matchLabels") and \
            not selector.get("matchExpressions"):
        errors.append(invalid("spec.selector", go_label_selector(selector),
                              "empty selector is invalid for daemonset"))
    errors += pod_template_errors(template, "spec.template", "DaemonSet")
    errors += _nonnegative("spec.minReadySeconds", int_at(spec, "minReadySeconds"))
    errors += _daemon_set_strategy_errors(dict_at(spec, "updateStrategy"))
    errors += _nonnegative("spec.revisionHistoryLimit", int_at(spec, "revisionHistoryLimit"))
    if old is not None:
        errors += _immutable_selector(selector, dict_at(old, "spec").get("selector"))
    return errors


def validate_daemon_set_status(resource: Resource, obj: Mapping[str, JSON],
                               old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateDaemonSetStatusUpdate``."""
    status = dict_at(obj, "status")
    errors = _status_counts(status, (
        "currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled",
        "numberReady", "observedGeneration", "updatedNumberScheduled", "numberAvailable",
        "numberUnavailable", "collisionCount"))
    return errors + _collision_count(obj, old)


# --- ControllerRevision -----------------------------------------------------------------------

def _go_raw_extension(data: JSON) -> GoLiteral:
    """The internal ``runtime.Unknown`` a ControllerRevision's data decodes to, as ``%#v``
    (``Convert_runtime_RawExtension_To_runtime_Object`` marks it JSON); its bytes as Go
    marshals a patched object: compact, keys sorted."""
    raw = json.dumps(data, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode()
    shown = ", ".join(f"0x{b:x}" for b in raw)
    return GoLiteral('runtime.Unknown{TypeMeta:runtime.TypeMeta{APIVersion:"", Kind:""}, '
                     f'Raw:[]uint8{{{shown}}}, ContentEncoding:"", '
                     'ContentType:"application/json"}')


def validate_controller_revision(resource: Resource, obj: Mapping[str, JSON],
                                 old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateControllerRevision`` / ``ValidateControllerRevisionUpdate``: data is required
    and immutable, revision non-negative (kube lets revision change)."""
    errors: list[FieldError] = []
    data = obj.get("data")
    if data is None:
        errors.append(required("data", "data is mandatory"))
    revision = obj.get("revision")
    if isinstance(revision, int) and not isinstance(revision, bool):
        errors += _nonnegative("revision", revision)
    if old is not None and not json_equal(data, old.get("data")):
        errors.append(invalid("data", GoLiteral("null") if data is None
                              else _go_raw_extension(data), "field is immutable"))
    return errors
