"""batch/v1 Job and CronJob validation, after kube v1.32 ``pkg/apis/batch/validation``.

``validate_job`` is ``ValidateJob`` (create) plus ``ValidateJobUpdate`` (update) with the
options ``pkg/registry/batch/job/strategy.go`` passes (prefixed labels required when the
stored Job has them; scheduling directives of the template mutable while a Job is suspended
and never started; elastic Indexed Jobs on); ``validate_job_status`` is the status strategy's
``ValidateJobUpdateStatus`` with the ``JobManagedBy`` options (beta, on in v1.32).
``validate_cron_job`` is ``ValidateCronJobCreate`` / ``ValidateCronJobUpdate``; the schedule is
parsed as robfig/cron v3's ``ParseStandard`` does (``cron_schedule``).

Known difference: an immutable pod template's error value is Go's ``%#v`` of the whole
internal ``core.PodTemplateSpec``; kubewire names the type without its fields.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from functools import lru_cache

from kubewire.go_text import GoLiteral
from kubewire.json_types import JSON
from kubewire.names import is_dns1123_label
from kubewire.resources import Resource
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import label_selector_from_match
from kubewire.server.patch.json_patch import json_equal
from kubewire.server.writes.batch_strategy import (
    CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
)
from kubewire.server.writes.validation.apps import go_label_selector, go_string_map
from kubewire.server.writes.validation.cron_schedule import cron_schedule_error
from kubewire.server.writes.validation.ingress_class import domain_prefixed_path_errors
from kubewire.server.writes.validation.meta import (
    dict_at,
    validate_annotations,
    validate_labels,
)
from kubewire.server.writes.validation.pods.scheduling import label_selector_errors
from kubewire.server.writes.validation.pods.spec import validate_pod_spec
from kubewire.status import FieldError, invalid, not_supported, required

NEGATIVE = "must be greater than or equal to 0"  # apimachinery IsNegativeErrorMsg
IMMUTABLE = "field is immutable"
MAX_PARALLELISM_INDEXED = 100_000
MAX_FAILED_INDEXES = 100_000
COMPLETIONS_SOFT_LIMIT = 100_000
PARALLELISM_LIMIT_HIGH_COMPLETIONS = 10_000
MAX_FAILED_INDEXES_HIGH_COMPLETIONS = 10_000
MAX_POD_FAILURE_POLICY_RULES = 20
MAX_EXIT_CODE_VALUES = 255
MAX_POD_CONDITION_PATTERNS = 20
MAX_MANAGED_BY = 63
MAX_SUCCESS_POLICY_RULES = 20
MAX_SUCCEEDED_INDEXES = 64 * 1024
CRON_JOB_NAME_MAX = 52  # DNS1035LabelMaxLength - 11: the controller's -<timestamp> suffix
_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")  # sets.List: sorted
_OPERATORS = ("In", "NotIn")
_CONDITION_STATUSES = ("False", "True", "Unknown")
_REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")
_CONCURRENCY = ("Allow", "Forbid", "Replace")
_TZ_PART = re.compile(r"^[A-Za-z.\-_0-9+]{1,14}$")
_TEMPLATE_LITERAL = GoLiteral("core.PodTemplateSpec{...}")


def _omit(path: str, detail: str) -> FieldError:
    """``field.Invalid(path, field.OmitValueType{}, detail)``: no value in the message."""
    return FieldError("FieldValueInvalid", path, detail=detail)


def _int(parent: Mapping[str, JSON], key: str) -> int | None:
    value = parent.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _nonnegative(parent: Mapping[str, JSON], key: str, path: str) -> list[FieldError]:
    value = _int(parent, key)
    return [invalid(f"{path}.{key}", value, NEGATIVE)] if value is not None and value < 0 else []


def _dicts(value: JSON) -> list[dict[str, JSON]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _labels(meta: Mapping[str, JSON]) -> dict[str, str] | None:
    labels = meta.get("labels")
    return ({k: v for k, v in labels.items() if isinstance(v, str)}
            if isinstance(labels, dict) else None)


# --- Job -------------------------------------------------------------------------------------

def _has_label(labels: dict[str, str] | None, key: str, expected: str) -> list[FieldError]:
    """core validation ``ValidateHasLabel`` on the template's metadata."""
    path = f"spec.template.metadata.labels[{key}]"
    if labels is None or key not in labels:
        return [required(path, f"must be '{expected}'")]
    if labels[key] != expected:
        return [invalid(path, go_string_map(labels), f"must be '{expected}'")]
    return []


def _generated_selector_errors(job: Mapping[str, JSON], prefixed: bool) -> list[FieldError]:
    """``validateGeneratedSelector``."""
    spec, meta = dict_at(job, "spec"), dict_at(job, "metadata")
    selector = spec.get("selector")
    if spec.get("manualSelector") is True or not isinstance(selector, dict):
        return []
    uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
    errors = [] if uid else [required("metadata.uid")]
    labels = _labels(dict_at(dict_at(spec, "template"), "metadata"))
    errors += _has_label(labels, LEGACY_CONTROLLER_UID_LABEL, uid)
    errors += _has_label(labels, LEGACY_JOB_NAME_LABEL, name)
    expected = {LEGACY_CONTROLLER_UID_LABEL: uid, LEGACY_JOB_NAME_LABEL: name}
    if prefixed:
        errors += _has_label(labels, CONTROLLER_UID_LABEL, uid)
        errors += _has_label(labels, JOB_NAME_LABEL, name)
        expected |= {CONTROLLER_UID_LABEL: uid, JOB_NAME_LABEL: name}
    try:
        matches = label_selector_from_match(selector).matches(expected)
    except SelectorError:
        matches = True  # LabelSelectorAsSelector failed: reported by ValidateLabelSelector
    if not matches:
        errors.append(invalid("spec.selector", go_label_selector(selector),
                              "`selector` not auto-generated"))
    return errors


def _pod_template_errors(template: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidatePodTemplateSpec``: the template's labels, annotations and pod spec."""
    meta = dict_at(template, "metadata")
    errors = validate_labels(_labels(meta) or {}, f"{path}.labels")
    annotations = meta.get("annotations")
    errors += validate_annotations(annotations if isinstance(annotations, dict) else {},
                                   f"{path}.annotations")
    errors += validate_pod_spec(dict_at(template, "spec"), f"{path}.spec")
    return errors


def _indexed_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    completions, parallelism = _int(spec, "completions"), _int(spec, "parallelism")
    max_failed, per_index = _int(spec, "maxFailedIndexes"), _int(spec, "backoffLimitPerIndex")
    if completions is None:
        errors.append(required(f"{path}.completions", "when completion mode is Indexed"))
    if parallelism is not None and parallelism > MAX_PARALLELISM_INDEXED:
        errors.append(invalid(f"{path}.parallelism", parallelism,
                              f"must be less than or equal to {MAX_PARALLELISM_INDEXED} when "
                              "completion mode is Indexed"))
    if completions is not None and max_failed is not None and max_failed > completions:
        errors.append(invalid(f"{path}.maxFailedIndexes", max_failed,
                              "must be less than or equal to completions"))
    if max_failed is not None and max_failed > MAX_FAILED_INDEXES:
        errors.append(invalid(f"{path}.maxFailedIndexes", max_failed,
                              f"must be less than or equal to {MAX_FAILED_INDEXES}"))
    if completions is not None and completions > COMPLETIONS_SOFT_LIMIT and per_index is not None:
        high = (f"when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff "
                "limit per index")
        if max_failed is None:
            errors.append(required(f"{path}.maxFailedIndexes", "must be specified when "
                                   f"completions is above {COMPLETIONS_SOFT_LIMIT}"))
        if parallelism is not None and parallelism > PARALLELISM_LIMIT_HIGH_COMPLETIONS:
            errors.append(invalid(f"{path}.parallelism", parallelism, "must be less than or "
                                  f"equal to {PARALLELISM_LIMIT_HIGH_COMPLETIONS} {high}"))
        if max_failed is not None and max_failed > MAX_FAILED_INDEXES_HIGH_COMPLETIONS:
            errors.append(invalid(f"{path}.maxFailedIndexes", max_failed, "must be less than "
                                  f"or equal to {MAX_FAILED_INDEXES_HIGH_COMPLETIONS} {high}"))
    return errors


def _exit_codes_errors(codes: Mapping[str, JSON], path: str,
                       containers: set[str]) -> list[FieldError]:
    """``validatePodFailurePolicyRuleOnExitCodes``."""
    errors: list[FieldError] = []
    operator = codes.get("operator")
    if not operator:
        errors.append(required(f"{path}.operator", 'valid values: ["In" "NotIn"]'))
    elif operator not in _OPERATORS:
        errors.append(not_supported(f"{path}.operator", operator, _OPERATORS))
    name = codes.get("containerName")
    if isinstance(name, str) and name not in containers:
        errors.append(invalid(f"{path}.containerName", name, "must be one of the container or "
                              "initContainer names in the pod template"))
    return errors + _exit_code_values_errors(codes, operator, f"{path}.values")


def _exit_code_values_errors(codes: Mapping[str, JSON], operator: JSON,
                             path: str) -> list[FieldError]:
    raw = codes.get("values")
    values = [v for v in raw if isinstance(v, int)] if isinstance(raw, list) else []
    shown = GoLiteral("[]int32{" + ", ".join(str(v) for v in values) + "}"
                      if raw is not None else "[]int32(nil)")
    errors: list[FieldError] = []
    if not values:
        errors.append(invalid(path, shown, "at least one value is required"))
    elif len(values) > MAX_EXIT_CODE_VALUES:
        errors.append(FieldError("FieldValueTooMany", path, len(values),
                                 f"must have at most {MAX_EXIT_CODE_VALUES} items"))
    seen: set[int] = set()
    for j, value in enumerate(values):
        if operator == "In" and value == 0:
            errors.append(invalid(f"{path}[{j}]", value, "must not be 0 for the In operator"))
        if value in seen:
            errors.append(FieldError("FieldValueDuplicate", f"{path}[{j}]", value))
        seen.add(value)
    if values != sorted(values):
        errors.append(invalid(path, shown, "must be ordered"))
    return errors


def _pod_conditions_errors(patterns: list[dict[str, JSON]], path: str) -> list[FieldError]:
    from kubewire.server.writes.validation.pods.scheduling import label_name_errors
    errors: list[FieldError] = []
    if len(patterns) > MAX_POD_CONDITION_PATTERNS:
        errors.append(FieldError("FieldValueTooMany", path, len(patterns),
                                 f"must have at most {MAX_POD_CONDITION_PATTERNS} items"))
    for j, pattern in enumerate(patterns):
        errors += label_name_errors(str(pattern.get("type") or ""), f"{path}[{j}].type")
        status = pattern.get("status")
        if not status:
            errors.append(required(f"{path}[{j}].status",
                                   'valid values: ["False" "True" "Unknown"]'))
        elif status not in _CONDITION_STATUSES:
            errors.append(not_supported(f"{path}[{j}].status", status, _CONDITION_STATUSES))
    return errors


def _pod_failure_policy_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validatePodFailurePolicy``."""
    rules = _dicts(dict_at(spec, "podFailurePolicy").get("rules"))
    errors: list[FieldError] = []
    if len(rules) > MAX_POD_FAILURE_POLICY_RULES:
        errors.append(FieldError("FieldValueTooMany", f"{path}.rules", len(rules),
                                 f"must have at most {MAX_POD_FAILURE_POLICY_RULES} items"))
    pod = dict_at(dict_at(spec, "template"), "spec")
    containers = {str(c.get("name")) for key in ("containers", "initContainers")
                  for c in _dicts(pod.get(key))}
    for i, rule in enumerate(rules):
        errors += _failure_rule_errors(spec, rule, f"{path}.rules[{i}]", containers)
    return errors


def _failure_rule_errors(spec: Mapping[str, JSON], rule: Mapping[str, JSON], rule_path: str,
                         containers: set[str]) -> list[FieldError]:
    """``validatePodFailurePolicyRule``."""
    errors: list[FieldError] = []
    action = rule.get("action")
    if not action:
        errors.append(required(f"{rule_path}.action",
                               'valid values: ["Count" "FailIndex" "FailJob" "Ignore"]'))
    elif action == "FailIndex":
        if spec.get("backoffLimitPerIndex") is None:
            errors.append(invalid(f"{rule_path}.action", action,
                                  "requires the backoffLimitPerIndex to be set"))
    elif action not in _ACTIONS:
        errors.append(not_supported(f"{rule_path}.action", action, _ACTIONS))
    codes = rule.get("onExitCodes")
    patterns = _dicts(rule.get("onPodConditions"))
    if isinstance(codes, dict):
        errors += _exit_codes_errors(codes, f"{rule_path}.onExitCodes", containers)
    if patterns:
        errors += _pod_conditions_errors(patterns, f"{rule_path}.onPodConditions")
    if isinstance(codes, dict) and patterns:
        errors.append(_omit(rule_path, "specifying both OnExitCodes and OnPodConditions is "
                                       "not supported"))
    if not isinstance(codes, dict) and not patterns:
        errors.append(_omit(rule_path, "specifying one of OnExitCodes and OnPodConditions "
                                       "is required"))
    return errors


def parse_index_interval(text: str, completions: int) -> tuple[int, int]:
    """``parseIndexInterval``; raises ValueError with kube's text."""
    limits = text.split("-")
    if len(limits) > 2:
        raise ValueError(f'the fragment "{text}" violates the requirement that an index '
                         "interval can have at most two parts separated by '-'")
    bounds = []
    for part in limits:
        if not re.fullmatch(r"[+-]?[0-9]+", part):
            raise ValueError(f'cannot convert string to integer for index: "{part}"')
        if int(part) >= completions:
            raise ValueError(f'too large index: "{part}"')
        bounds.append(int(part))
    if len(bounds) == 2 and bounds[0] >= bounds[1]:
        raise ValueError(f"non-increasing order, previous: {bounds[0]}, current: {bounds[1]}")
    return bounds[0], bounds[-1]


def indexes_total(text: str, completions: int) -> int:
    """``validateIndexesFormat``: the number of indexes; raises ValueError."""
    if not text:
        return 0
    last: int | None = None
    total = 0
    for interval in text.split(","):
        low, high = parse_index_interval(interval, completions)
        if last is not None and last >= low:
            raise ValueError(f"non-increasing order, previous: {last}, current: {low}")
        total += high - low + 1
        last = high
    return total


def _success_policy_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateSuccessPolicy`` (the Job is Indexed, so completions is set or reported)."""
    rules = _dicts(dict_at(spec, "successPolicy").get("rules"))
    errors: list[FieldError] = []
    if not rules:
        errors.append(required(f"{path}.rules", "at least one rules must be specified when the "
                                                "successPolicy is specified"))
    if len(rules) > MAX_SUCCESS_POLICY_RULES:
        errors.append(FieldError("FieldValueTooMany", f"{path}.rules", len(rules),
                                 f"must have at most {MAX_SUCCESS_POLICY_RULES} items"))
    completions = _int(spec, "completions") or 0
    for i, rule in enumerate(rules):
        errors += _success_rule_errors(rule, f"{path}.rules[{i}]", completions)
    return errors


def _success_rule_errors(rule: Mapping[str, JSON], rule_path: str,
                         completions: int) -> list[FieldError]:
    """``validateSuccessPolicyRule``."""
    errors: list[FieldError] = []
    indexes, count = rule.get("succeededIndexes"), _int(rule, "succeededCount")
    if count is None and indexes is None:
        errors.append(required(rule_path, "at least one of succeededCount or succeededIndexes "
                                          "must be specified"))
    total = 0
    if isinstance(indexes, str):
        if len(indexes) > MAX_SUCCEEDED_INDEXES:
            errors.append(FieldError("FieldValueTooLong", f"{rule_path}.succeededIndexes",
                                     detail=f"may not be more than {MAX_SUCCEEDED_INDEXES} "
                                            "bytes"))
        try:
            total = indexes_total(indexes, completions)
        except ValueError as err:
            errors.append(invalid(f"{rule_path}.succeededIndexes", indexes,
                                  f"error parsing succeededIndexes: {err}"))
    if count is None:
        return errors
    count_path = f"{rule_path}.succeededCount"
    if count < 0:
        errors.append(invalid(count_path, count, NEGATIVE))
    if count > completions:
        errors.append(invalid(count_path, count, f"must be less than or equal to {completions} "
                                                 "(the number of specified completions)"))
    if isinstance(indexes, str) and count > total:
        errors.append(invalid(count_path, count, f"must be less than or equal to {total} (the "
                              "number of indexes in the specified succeededIndexes field)"))
    return errors


def _managed_by_errors(value: str, path: str) -> list[FieldError]:
    """``IsDomainPrefixedPath`` and the length limit."""
    errors = domain_prefixed_path_errors(value, path)
    if len(value) > MAX_MANAGED_BY:
        errors.append(FieldError("FieldValueTooLong", path,
                                 detail=f"may not be more than {MAX_MANAGED_BY} bytes"))
    return errors


def _job_spec_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateJobSpec`` (shared by Jobs and CronJobs' job templates)."""
    return (_job_count_errors(spec, path) + _job_policy_errors(spec, path)
            + _pod_template_errors(dict_at(spec, "template"), f"{path}.template")
            + _restart_policy_errors(spec, path))


def _job_count_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit",
                "ttlSecondsAfterFinished", "backoffLimitPerIndex"):
        errors += _nonnegative(spec, key, path)
    if _int(spec, "maxFailedIndexes") is not None:
        errors += _nonnegative(spec, "maxFailedIndexes", path)
        if spec.get("backoffLimitPerIndex") is None:
            errors.append(required(f"{path}.backoffLimitPerIndex",
                                   "when maxFailedIndexes is specified"))
    managed_by = spec.get("managedBy")
    if isinstance(managed_by, str):
        errors += _managed_by_errors(managed_by, f"{path}.managedBy")
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        errors.append(not_supported(f"{path}.completionMode", mode, ("NonIndexed", "Indexed")))
    if mode == "Indexed":
        errors += _indexed_errors(spec, path)
    if mode is None or mode == "NonIndexed":
        for key in ("backoffLimitPerIndex", "maxFailedIndexes"):
            if _int(spec, key) is not None:
                errors.append(invalid(f"{path}.{key}", _int(spec, key),
                                      "requires indexed completion mode"))
    return errors


def _job_policy_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """The pod failure, success and pod replacement policies."""
    errors: list[FieldError] = []
    has_failure_policy = isinstance(spec.get("podFailurePolicy"), dict)
    if has_failure_policy:
        errors += _pod_failure_policy_errors(spec, f"{path}.podFailurePolicy")
    if isinstance(spec.get("successPolicy"), dict):
        if spec.get("completionMode") != "Indexed":
            errors.append(invalid(f"{path}.successPolicy", GoLiteral("batch.SuccessPolicy{...}"),
                                  "requires indexed completion mode"))
        else:
            errors += _success_policy_errors(spec, f"{path}.successPolicy")
    replacement = spec.get("podReplacementPolicy")
    allowed = ("Failed",) if has_failure_policy else _REPLACEMENT_POLICIES
    if isinstance(replacement, str) and replacement not in allowed:
        errors.append(not_supported(f"{path}.podReplacementPolicy", replacement, allowed))
    return errors


def _restart_policy_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    restart = dict_at(dict_at(spec, "template"), "spec").get("restartPolicy") or ""
    restart_path = f"{path}.template.spec.restartPolicy"
    if restart in ("Always", ""):
        return [required(restart_path, 'valid values: "OnFailure", "Never"')]
    if restart not in ("OnFailure", "Never"):
        return [not_supported(restart_path, restart, ("OnFailure", "Never"))]
    if isinstance(spec.get("podFailurePolicy"), dict) and restart != "Never":
        return [invalid(restart_path, restart,
                        'only "Never" is supported when podFailurePolicy is specified')]
    return []


def _full_job_spec_errors(spec: Mapping[str, JSON]) -> list[FieldError]:
    """``ValidateJobSpec``: the spec's rules, the selector, the selector against the labels."""
    errors = _job_spec_errors(spec, "spec")
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        errors.append(required("spec.selector"))
        return errors  # LabelSelectorAsSelector(nil) is Nothing: no mismatch reported
    errors += label_selector_errors(selector, "spec.selector")
    labels = _labels(dict_at(dict_at(spec, "template"), "metadata"))
    try:
        matches = label_selector_from_match(selector).matches(labels or {})
    except SelectorError:
        matches = True
    if not matches:
        errors.append(invalid("spec.template.metadata.labels", go_string_map(labels),
                              "`selector` does not match template `labels`"))
    return errors


def _template_update_errors(spec: Mapping[str, JSON], old_spec: Mapping[str, JSON],
                            old_job: Mapping[str, JSON]) -> list[FieldError]:
    """``validatePodTemplateUpdate``: the template is immutable but for scheduling directives
    of a Job suspended and never started."""
    template, old_template = dict_at(spec, "template"), dict_at(old_spec, "template")
    suspended = old_spec.get("suspend") is True
    started = dict_at(old_job, "status").get("startTime") is not None
    if suspended and not started:
        old_template = _with_scheduling_of(old_template, template)
    if _semantic_equal(template, old_template):
        return []
    return [invalid("spec.template", _TEMPLATE_LITERAL, IMMUTABLE)]


def _with_scheduling_of(old: dict[str, JSON], new: dict[str, JSON]) -> dict[str, JSON]:
    """The old template with the new one's node affinity, node selector, tolerations,
    scheduling gates, labels and annotations (what a suspended Job may change)."""
    old_meta, new_meta = dict(dict_at(old, "metadata")), dict_at(new, "metadata")
    for key in ("labels", "annotations"):
        old_meta[key] = new_meta.get(key)
    old_spec, new_spec = dict(dict_at(old, "spec")), dict_at(new, "spec")
    for key in ("nodeSelector", "tolerations", "schedulingGates"):
        old_spec[key] = new_spec.get(key)
    old_affinity, new_affinity = old_spec.get("affinity"), new_spec.get("affinity")
    if new_affinity is None and isinstance(old_affinity, dict):
        rest = {k: v for k, v in old_affinity.items() if k != "nodeAffinity"}
        old_spec["affinity"] = rest or None
    elif isinstance(new_affinity, dict):
        base = old_affinity if isinstance(old_affinity, dict) else {}
        old_spec["affinity"] = {**base, "nodeAffinity": new_affinity.get("nodeAffinity")}
    return {**old, "metadata": old_meta, "spec": old_spec}


def _is_empty(value: JSON) -> bool:
    return value is None or (isinstance(value, dict | list) and not value)


def _semantic_equal(a: JSON, b: JSON) -> bool:
    """apiequality.Semantic.DeepEqual on JSON: absent, null, {} and [] are all equal."""
    if _is_empty(a) and _is_empty(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return all(_semantic_equal(a.get(k), b.get(k)) for k in a.keys() | b.keys())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_semantic_equal(x, y) for x, y in zip(a, b, strict=True))
    return json_equal(a, b)


def _immutable(spec: Mapping[str, JSON], old_spec: Mapping[str, JSON], key: str,
               shown: JSON = None) -> list[FieldError]:
    new_value, old_value = spec.get(key), old_spec.get(key)
    if _semantic_equal(new_value, old_value):
        return []
    value = new_value if shown is None else shown
    return [invalid(f"spec.{key}", "null" if value is None else value, IMMUTABLE)]


def validate_job(resource: Resource, obj: Mapping[str, JSON],
                 old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateJob``; on update also ``ValidateJobUpdate``'s immutable fields."""
    spec, meta = dict_at(obj, "spec"), dict_at(obj, "metadata")
    prefixed = True
    if old is not None:  # validationOptionsForJob: only when the stored Job has them
        old_labels = _labels(dict_at(dict_at(dict_at(old, "spec"), "template"),
                                     "metadata")) or {}
        prefixed = JOB_NAME_LABEL in old_labels and CONTROLLER_UID_LABEL in old_labels
    errors = _generated_selector_errors(obj, prefixed)
    errors += _full_job_spec_errors(spec)
    completions = _int(spec, "completions")
    if spec.get("completionMode") == "Indexed" and completions is not None and completions > 0:
        name = str(meta.get("name") or "")
        hostname = f"{name}-{completions - 1}"
        if is_dns1123_label(hostname):
            errors.append(invalid("metadata.name", name, "will not able to create pod with "
                                  f"invalid DNS label: {hostname}"))
    if old is None:
        return errors
    old_spec = dict_at(old, "spec")
    errors += _full_job_spec_errors(spec)  # ValidateJobSpecUpdate validates the spec again
    errors += _completions_update_errors(spec, old_spec)
    selector = spec.get("selector")
    errors += _immutable(spec, old_spec, "selector",
                         go_label_selector(selector) if isinstance(selector, dict) else None)
    errors += _template_update_errors(spec, old_spec, old)
    for key in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy",
                "successPolicy"):
        shown = GoLiteral(f"batch.{key[0].upper()}{key[1:]}{{...}}") \
            if key in ("podFailurePolicy", "successPolicy") else None
        errors += _immutable(spec, old_spec, key, shown)
    return errors


def _completions_update_errors(spec: Mapping[str, JSON],
                               old_spec: Mapping[str, JSON]) -> list[FieldError]:
    """``validateCompletions`` with elastic Indexed Jobs (on in v1.32)."""
    if spec.get("completionMode") != "Indexed":
        return _immutable(spec, old_spec, "completions")
    completions = _int(spec, "completions")
    if completions == _int(old_spec, "completions") or completions is None:
        return []
    if completions != _int(spec, "parallelism"):
        return [invalid("spec.completions", completions,
                        "can only be modified in tandem with spec.parallelism")]
    return []


def validate_job_status(resource: Resource, obj: Mapping[str, JSON],
                        old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateJobUpdateStatus`` with the options the status strategy passes when
    ``JobManagedBy`` is on: the counters, terminal conditions and timestamps."""
    if old is None:
        return []
    return (_status_counter_errors(dict_at(obj, "status")) + _status_state_errors(obj, old)
            + _status_transition_errors(obj, old))


def _status_counter_errors(status: Mapping[str, JSON]) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in ("active", "succeeded", "failed", "ready", "terminating"):
        errors += _nonnegative(status, key, "status")
    uncounted = dict_at(status, "uncountedTerminatedPods")
    seen: set[str] = set()
    for key in ("succeeded", "failed"):
        items = uncounted.get(key)
        for i, uid in enumerate(items if isinstance(items, list) else []):
            path = f"status.uncountedTerminatedPods.{key}[{i}]"
            if uid == "":
                errors.append(invalid(path, uid, "must not be empty"))
            elif uid in seen:
                errors.append(FieldError("FieldValueDuplicate", path, uid))
            else:
                seen.add(str(uid))
    return errors


def _conditions(job: Mapping[str, JSON]) -> set[str]:
    """The types of the Job's conditions whose status is True."""
    return {str(c.get("type")) for c in _dicts(dict_at(job, "status").get("conditions"))
            if c.get("status") == "True"}


def _status_state_errors(obj: Mapping[str, JSON], old: Mapping[str, JSON]) -> list[FieldError]:
    """``validateJobStatus``'s rules, each checked when its fields changed."""
    now, before = _conditions(obj), _conditions(old)
    status, old_status = dict_at(obj, "status"), dict_at(old, "status")
    changed = {kind for kind in ("Complete", "Failed", "FailureTarget")
               if (kind in now) != (kind in before)}
    finished = bool(now & {"Complete", "Failed"})
    finished_changed = finished != bool(before & {"Complete", "Failed"})
    start, completion = status.get("startTime"), status.get("completionTime")
    completion_changed = completion != old_status.get("completionTime")
    start_changed = start != old_status.get("startTime")
    complete = "Complete" in now
    errors: list[FieldError] = []
    for other in ("Failed", "FailureTarget"):
        if changed & {"Complete", other} and complete and other in now:
            errors.append(_omit("status.conditions",
                                f"cannot set Complete=True and {other}=true conditions"))
    if ("Complete" in changed or completion_changed) and completion is not None and not complete:
        errors.append(invalid("status.completionTime", completion, "cannot set completionTime "
                              "when there is no Complete=True condition"))
    if ("Complete" in changed or completion_changed) and completion is None and complete:
        errors.append(required("status.completionTime",
                               "completionTime is required for Complete jobs"))
    if (start_changed or completion_changed) and isinstance(start, str) \
            and isinstance(completion, str) and completion < start:
        errors.append(invalid("status.completionTime", completion,
                              "completionTime cannot be set before startTime"))
    active = _int(status, "active") or 0
    if (finished_changed or active != (_int(old_status, "active") or 0)) and active > 0 \
            and finished:
        errors.append(invalid("status.active", active, "active>0 is invalid for finished job"))
    if (finished_changed or start_changed) and start is None and finished:
        errors.append(required("status.startTime", "startTime is required for finished job"))
    return errors + _success_criteria_errors(obj, now)


def _success_criteria_errors(obj: Mapping[str, JSON], now: set[str]) -> list[FieldError]:
    errors = [_omit("status.conditions",
                    f"cannot set SuccessCriteriaMet=True and {other}=true conditions")
              for other in ("Failed", "FailureTarget")
              if "SuccessCriteriaMet" in now and other in now]
    if isinstance(dict_at(obj, "spec").get("successPolicy"), dict) \
            and "SuccessCriteriaMet" not in now and "Complete" in now:
        errors.append(_omit("status.conditions", "cannot set Complete=True for Job with "
                                                 "SuccessPolicy unless SuccessCriteriaMet=True"))
    return errors


def _status_transition_errors(obj: Mapping[str, JSON],
                              old: Mapping[str, JSON]) -> list[FieldError]:
    """``ValidateJobStatusUpdate``'s comparisons with the stored status."""
    now, before = _conditions(obj), _conditions(old)
    status, old_status = dict_at(obj, "status"), dict_at(old, "status")
    errors = [_omit("status.conditions", f"cannot disable the terminal {kind}=True condition")
              for kind in ("Failed", "Complete", "FailureTarget")
              if kind in before and kind not in now]
    if (_int(status, "failed") or 0) < (_int(old_status, "failed") or 0):
        errors.append(invalid("status.failed", _int(status, "failed") or 0,
                              "cannot decrease the failed counter"))
    spec = dict_at(obj, "spec")
    scalable = spec.get("completionMode") == "Indexed" and \
        spec.get("completions") == spec.get("parallelism")
    if not scalable and (_int(status, "succeeded") or 0) < (_int(old_status, "succeeded") or 0):
        errors.append(invalid("status.succeeded", _int(status, "succeeded") or 0,
                              "cannot decrease the succeeded counter"))
    completion, old_completion = status.get("completionTime"), old_status.get("completionTime")
    if completion is not None and old_completion is not None and completion != old_completion:
        errors.append(invalid("status.completionTime", completion,
                              "completionTime cannot be mutated"))
    old_start = old_status.get("startTime")
    if old_start is not None and old_start != status.get("startTime") \
            and spec.get("suspend") is not True:
        errors.append(required("status.startTime",
                               "startTime cannot be removed for unsuspended job"))
    if "SuccessCriteriaMet" in before and "SuccessCriteriaMet" not in now:
        errors.append(_omit("status.conditions",
                            "cannot disable the SuccessCriteriaMet=True condition"))
    if "Complete" in before and "SuccessCriteriaMet" not in before \
            and "SuccessCriteriaMet" in now:
        errors.append(_omit("status.conditions", "cannot set SuccessCriteriaMet=True for Job "
                                                 "already has Complete=true conditions"))
    return errors


# --- CronJob -----------------------------------------------------------------------------------

@lru_cache(maxsize=512)
def time_zone_error(name: str) -> str:
    """Go's ``time.LoadLocation`` error text for ``name`` ("" when it loads)."""
    if name in ("", "UTC", "Local"):
        return ""
    if ".." in name or name.startswith(("/", "\\")):
        return "time: invalid location name"
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return f"unknown time zone {name}"
    return ""


def _time_zone_errors(value: JSON, path: str) -> list[FieldError]:
    """``validateTimeZone``."""
    if not isinstance(value, str):
        return []
    if not value:
        return [invalid(path, value, "timeZone must be nil or non-empty string")]
    for part in value.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.fullmatch(part):
            return [invalid(path, value, f"unknown time zone {value}")]
    errors: list[FieldError] = []
    if value.lower() == "local":
        errors.append(invalid(path, value, "timeZone must be an explicit time zone as defined "
                                           "in https://www.iana.org/time-zones"))
    problem = time_zone_error(value)
    if problem:
        errors.append(invalid(path, value, problem))
    return errors


def _schedule_errors(schedule: str, allow_tz: bool, time_zone: JSON) -> list[FieldError]:
    """``validateScheduleFormat``."""
    errors: list[FieldError] = []
    problem = cron_schedule_error(schedule, time_zone_error)
    if problem:
        errors.append(invalid("spec.schedule", schedule, problem))
    if allow_tz and "TZ" in schedule and time_zone is not None:
        errors.append(invalid("spec.schedule", schedule,
                              "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
    elif not allow_tz and "TZ" in schedule:
        errors.append(invalid("spec.schedule", schedule,
                              "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
    return errors


def validate_cron_job(resource: Resource, obj: Mapping[str, JSON],
                      old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateCronJobCreate`` (``old`` None) or ``ValidateCronJobUpdate``."""
    spec = dict_at(obj, "spec")
    old_spec = dict_at(old, "spec") if old is not None else None
    errors: list[FieldError] = []
    schedule = spec.get("schedule")
    if not isinstance(schedule, str) or not schedule:
        errors.append(required("spec.schedule"))
    else:
        allow_tz = old_spec is not None and "TZ" in str(old_spec.get("schedule") or "")
        errors += _schedule_errors(schedule, allow_tz, spec.get("timeZone"))
    errors += _nonnegative(spec, "startingDeadlineSeconds", "spec")
    if old_spec is None or old_spec.get("timeZone") != spec.get("timeZone"):
        errors += _time_zone_errors(spec.get("timeZone"), "spec.timeZone")
    policy = spec.get("concurrencyPolicy") or ""
    if policy == "":
        errors.append(required("spec.concurrencyPolicy"))
    elif policy not in _CONCURRENCY:
        errors.append(not_supported("spec.concurrencyPolicy", policy, _CONCURRENCY))
    job_spec = dict_at(dict_at(spec, "jobTemplate"), "spec")
    errors += _job_spec_errors(job_spec, "spec.jobTemplate.spec")
    selector = job_spec.get("selector")
    if isinstance(selector, dict):
        errors.append(invalid("spec.jobTemplate.spec.selector", go_label_selector(selector),
                              "`selector` will be auto-generated"))
    if job_spec.get("manualSelector") is True:
        errors.append(not_supported("spec.jobTemplate.spec.manualSelector", True,
                                    ("nil", "false")))
    errors += _nonnegative(spec, "successfulJobsHistoryLimit", "spec")
    errors += _nonnegative(spec, "failedJobsHistoryLimit", "spec")
    name = str(dict_at(obj, "metadata").get("name") or "")
    if old is None and len(name) > CRON_JOB_NAME_MAX:
        errors.append(invalid("metadata.name", name, "must be no more than 52 characters"))
    return errors


# --- warnings ----------------------------------------------------------------------------------

def _name_warnings(obj: Mapping[str, JSON]) -> list[str]:
    name = str(dict_at(obj, "metadata").get("name") or "")
    problems = is_dns1123_label(name)
    if not problems:
        return []
    return ["metadata.name: this is used in Pod names and hostnames, which can result in "
            f"surprising behavior; a DNS label is recommended: [{' '.join(problems)}]"]


def _job_spec_warnings(spec: Mapping[str, JSON], path: str) -> list[str]:
    """``WarningsForJobSpec`` (its pod template warnings are not kubewire's)."""
    if spec.get("completionMode") == "Indexed" and \
            (_int(spec, "completions") or 0) > COMPLETIONS_SOFT_LIMIT and \
            (_int(spec, "parallelism") or 0) > PARALLELISM_LIMIT_HIGH_COMPLETIONS:
        return [f"{path}: In Indexed Jobs with a number of completions higher than 10^5 and a "
                "parallelism higher than 10^4, Kubernetes might not be able to track "
                "completedIndexes when a big number of indexes fail"]
    return []


def job_create_warnings(obj: Mapping[str, JSON]) -> list[str]:
    """job/strategy.go ``WarningsOnCreate``."""
    return _name_warnings(obj) + _job_spec_warnings(dict_at(obj, "spec"), "spec")


def cron_job_create_warnings(obj: Mapping[str, JSON]) -> list[str]:
    """cronjob/strategy.go ``WarningsOnCreate``."""
    spec = dict_at(obj, "spec")
    warnings = _name_warnings(obj) + _job_spec_warnings(
        dict_at(dict_at(spec, "jobTemplate"), "spec"), "spec.jobTemplate.spec")
    if "TZ" in str(spec.get("schedule") or ""):
        warnings.append("cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
    return warnings
