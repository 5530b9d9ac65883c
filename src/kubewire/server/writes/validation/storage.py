"""ResourceQuota, LimitRange, PersistentVolumeClaim, PersistentVolume and StorageClass
validation, with kube's messages.

Written by hand from kube v1.32 ``pkg/apis/core/validation/validation.go``
(``ValidateResourceQuota``/``Update``, ``ValidateLimitRange``, ``ValidatePersistentVolumeClaim``/
``Update``, ``ValidatePersistentVolume``/``Update``) and ``pkg/apis/storage/validation``
(``ValidateStorageClass``/``Update``). Quantities in ``Invalid value`` are printed as Go's
``%#v`` prints a ``resource.Quantity`` where kube passes the struct, and as their text where it
passes ``String()``. Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubewire.go_text import GoLiteral, go_quote
from kubewire.json_types import JSON
from kubewire.names import is_dns1123_subdomain, is_qualified_name
from kubewire.quantity import parse_quantity
from kubewire.quantity_text import Amount, amount_of, canonical, format_of
from kubewire.resources import Resource
from kubewire.server.writes.validation.meta import dict_at, text_at
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

IMMUTABLE = "field is immutable"
NEGATIVE = "must be greater than or equal to 0"
NOT_INTEGER = "must be an integer"
_STANDARD_QUOTA = frozenset((
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers"))
_INTEGER_RESOURCES = frozenset((
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers"))
_SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
           "CrossNamespacePodAffinity")
_POD_COMPUTE = frozenset(("cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu",
                          "requests.memory"))
_ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
_VOLUME_MODES = ("Block", "Filesystem")
_RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
_LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")
_PV_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "hostPath", "glusterfs", "nfs", "rbd",
               "iscsi", "cinder", "cephfs", "fc", "flocker", "flexVolume", "azureFile",
               "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "portworxVolume",
               "scaleIO", "local", "storageos", "csi")
_QUANTITY_PARTS = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$")
_BINARY_POWERS = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_POWERS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
                   "E": 18}
_PROVISIONER_MAX = 63  # storage validation maxProvisionerLength


# --- quantities ----------------------------------------------------------------------------------

def go_quantity(text: str) -> GoLiteral:
    """A ``resource.Quantity`` as ``%#v`` prints the one decoding ``text`` made: its int64
    amount and scale, no big decimal, the text cached when it was canonical, its format."""
    match = _QUANTITY_PARTS.match(text.strip())
    fmt = format_of(text)
    sign, whole, fraction, suffix = match.groups() if match else ("", "0", "", "")
    fraction = fraction or ""
    digits = int((whole or "0") + fraction) * (-1 if sign == "-" else 1)
    if fmt == "BinarySI":
        value, scale = digits * 1024 ** _BINARY_POWERS.get(suffix, 0), -len(fraction)
    elif fmt == "DecimalExponent":
        exponent = int(suffix[1:] or 0) if suffix[:1] in ("e", "E") else 0
        value, scale = digits, exponent - len(fraction)
    else:
        value, scale = digits, _DECIMAL_POWERS.get(suffix, 0) - len(fraction)
    amount = amount_of(text)
    cached = text if amount is not None and canonical(amount) == text else ""
    return GoLiteral(f"resource.Quantity{{i:resource.int64Amount{{value:{value}, "
                     f"scale:{scale}}}, d:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, "
                     f"s:{go_quote(cached)}, Format:{go_quote(fmt)}}}")


def _quantities(values: JSON) -> dict[str, tuple[str, Amount]]:
    out: dict[str, tuple[str, Amount]] = {}
    for key, value in (values.items() if isinstance(values, dict) else ()):
        amount = amount_of(value)
        if amount is not None:
            out[str(key)] = (value if isinstance(value, str) else canonical(amount), amount)
    return out


# --- ResourceQuota -------------------------------------------------------------------------------

def _quota_list(values: JSON, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for name, (text, amount) in sorted(_quantities(values).items()):
        at = f"{path}[{name}]"
        if "/" not in name and name not in _STANDARD_QUOTA \
                and not name.startswith(("hugepages-", "requests.hugepages-")):
            errors.append(invalid(at, GoLiteral(name), "must be a standard resource for quota"))
        if amount.value < 0:
            errors.append(invalid(at, canonical(amount), NEGATIVE))
        if (name in _INTEGER_RESOURCES or ("/" in name and not name.startswith("count/")
                                           and "kubernetes.io/" not in name)) \
                and (amount.value * 1000).denominator == 1 and (amount.value * 1000) % 1000:
            errors.append(invalid(at, go_quantity(text), NOT_INTEGER))
    return errors


def _scope_valid_for(scope: str, name: str) -> bool:
    # helper.IsResourceQuotaScopeValidForResource
    if scope == "BestEffort":
        return name == "pods"
    if scope in _SCOPES:
        return name == "pods" or name in _POD_COMPUTE
    return True  # an unknown scope is "unsupported scope" already


def _go_scopes(scopes: list[str]) -> GoLiteral:
    return GoLiteral("[]core.ResourceQuotaScope{" + ", ".join(go_quote(s) for s in scopes) + "}")


def _quota_scopes(spec: Mapping[str, JSON]) -> list[FieldError]:
    raw = spec.get("scopes")
    scopes = [s for s in raw if isinstance(s, str)] if isinstance(raw, list) else []
    if not scopes:
        return []
    errors: list[FieldError] = []
    hard = sorted(dict_at(spec, "hard"))
    for scope in scopes:
        if scope not in _SCOPES:
            errors.append(invalid("spec.scopes", _go_scopes(scopes), "unsupported scope"))
        for name in hard:
            if name in _STANDARD_QUOTA and not _scope_valid_for(scope, name):
                errors.append(invalid("spec.scopes", _go_scopes(scopes),
                                      "unsupported scope applied to resource"))
    for pair in (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")):
        if all(s in scopes for s in pair):
            errors.append(invalid("spec.scopes", _go_scopes(scopes), "conflicting scopes"))
    return errors


def validate_resource_quota(resource: Resource, obj: Mapping[str, JSON],
                            old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    spec, status = dict_at(obj, "spec"), dict_at(obj, "status")
    errors = _quota_list(spec.get("hard"), "spec.hard") + _quota_scopes(spec)
    errors += _quota_list(status.get("hard"), "status.hard")
    errors += _quota_list(status.get("used"), "status.used")
    if old is not None:
        old_spec = dict_at(old, "spec")
        new_scopes = spec.get("scopes") or []
        if new_scopes != (old_spec.get("scopes") or []):
            scopes = [s for s in new_scopes if isinstance(s, str)] \
                if isinstance(new_scopes, list) else []
            errors.append(invalid("spec.scopes", _go_scopes(scopes), IMMUTABLE))
    return errors


# --- LimitRange ----------------------------------------------------------------------------------

def _limit_item(item: Mapping[str, JSON], at: str) -> list[FieldError]:
    errors: list[FieldError] = []
    kind = text_at(item, "type")
    if kind == "Pod":
        if dict_at(item, "default"):
            errors.append(forbidden(f"{at}.default", "may not be specified when `type` is 'Pod'"))
        if dict_at(item, "defaultRequest"):
            errors.append(forbidden(f"{at}.defaultRequest",
                                    "may not be specified when `type` is 'Pod'"))
    lists = {key: _quantities(item.get(key)) for key in
             ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")}
    if kind == "Pod":
        lists["default"], lists["defaultRequest"] = {}, {}
    if kind == "PersistentVolumeClaim" and "storage" not in lists["min"] \
            and "storage" not in lists["max"]:
        errors.append(required(f"{at}.limits", "either minimum or maximum storage value is "
                                               "required, but neither was provided"))
    for key, values in lists.items():
        for name, (_, amount) in sorted(values.items()):
            if amount.value < 0:
                errors.append(invalid(f"{at}.{key}[{name}]", canonical(amount), NEGATIVE))
    names = sorted({name for values in lists.values() for name in values})
    for name in names:
        errors += _limit_bounds(lists, name, at)
    return errors


def _limit_bounds(lists: Mapping[str, Mapping[str, tuple[str, Amount]]], name: str,
                  at: str) -> list[FieldError]:
    errors: list[FieldError] = []
    low, high = lists["min"].get(name), lists["max"].get(name)
    default, request = lists["default"].get(name), lists["defaultRequest"].get(name)
    ratio = lists["maxLimitRequestRatio"].get(name)

    def text(entry: tuple[str, Amount]) -> str:
        return canonical(entry[1])

    if low and high and low[1].value > high[1].value:
        errors.append(invalid(f"{at}.min[{name}]", go_quantity(low[0]),
                              f"min value {text(low)} is greater than max value {text(high)}"))
    if request and low and low[1].value > request[1].value:
        errors.append(invalid(f"{at}.defaultRequest[{name}]", go_quantity(request[0]),
                              f"min value {text(low)} is greater than default request value "
                              f"{text(request)}"))
    if request and high and request[1].value > high[1].value:
        errors.append(invalid(f"{at}.defaultRequest[{name}]", go_quantity(request[0]),
                              f"default request value {text(request)} is greater than max "
                              f"value {text(high)}"))
    if request and default and request[1].value > default[1].value:
        errors.append(invalid(f"{at}.defaultRequest[{name}]", go_quantity(request[0]),
                              f"default request value {text(request)} is greater than default "
                              f"limit value {text(default)}"))
    if default and low and low[1].value > default[1].value:
        errors.append(invalid(f"{at}.default[{name}]", go_quantity(low[0]),
                              f"min value {text(low)} is greater than default value "
                              f"{text(default)}"))
    if default and high and default[1].value > high[1].value:
        errors.append(invalid(f"{at}.default[{name}]", go_quantity(high[0]),
                              f"default value {text(default)} is greater than max value "
                              f"{text(high)}"))
    if ratio:
        errors += _ratio_bounds(ratio, low, high, f"{at}.maxLimitRequestRatio[{name}]")
    return errors


def _ratio_bounds(ratio: tuple[str, Amount], low: tuple[str, Amount] | None,
                  high: tuple[str, Amount] | None, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    text = canonical(ratio[1])
    if ratio[1].value < 1:
        errors.append(invalid(path, go_quantity(ratio[0]), f"ratio {text} is less than 1"))
    if low and high and low[1].value != 0:
        limit = high[1].value / low[1].value
        if ratio[1].value > limit:
            errors.append(invalid(path, go_quantity(ratio[0]),
                                  f"ratio {text} is greater than max/min = {float(limit):f}"))
    return errors


def _limit_type(kind: str, path: str) -> list[FieldError]:
    """``validateLimitRangeTypeName``: a qualified name, and one of kube's types unless it has
    a domain."""
    problems = [invalid(path, kind, m) for m in is_qualified_name(kind)]
    if not problems and "/" not in kind and kind not in _LIMIT_TYPES:
        problems.append(invalid(path, kind, "must be a standard limit type or fully qualified"))
    return problems


def validate_limit_range(resource: Resource, obj: Mapping[str, JSON],
                         old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    items = dict_at(obj, "spec").get("limits")
    for i, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, dict):
            continue
        at = f"spec.limits[{i}]"
        kind = text_at(item, "type")
        errors += _limit_type(kind, f"{at}.type")
        if kind in seen:
            errors.append(FieldError("FieldValueDuplicate", f"{at}.type", kind))
        seen.add(kind)
        errors += _limit_item(item, at)
    return errors


# --- PersistentVolumeClaim and PersistentVolume --------------------------------------------------

def _access_modes(spec: Mapping[str, JSON], path: str, detail: str) -> list[FieldError]:
    raw = spec.get("accessModes")
    modes = [m for m in raw if isinstance(m, str)] if isinstance(raw, list) else []
    if not modes:
        return [required(path, detail)]
    errors = [not_supported(path, m, _ACCESS_MODES) for m in modes if m not in _ACCESS_MODES]
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        errors.append(forbidden(path, "may not use ReadWriteOncePod with other access modes"))
    return errors


def _class_name(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    name = spec.get("storageClassName")
    if isinstance(name, str) and name:
        return [invalid(path, name, problem) for problem in is_dns1123_subdomain(name)]
    return []


def _volume_mode(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    mode = spec.get("volumeMode")
    if isinstance(mode, str) and mode not in _VOLUME_MODES:
        return [not_supported(path, mode, _VOLUME_MODES)]
    return []


def validate_persistent_volume_claim(resource: Resource, obj: Mapping[str, JSON],
                                     old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    spec = dict_at(obj, "spec")
    errors = _access_modes(spec, "spec.accessModes", "at least 1 access mode is required")
    requests = dict_at(dict_at(spec, "resources"), "requests")
    storage = parse_quantity(requests.get("storage")) if "storage" in requests else None
    if "storage" not in requests:
        errors.append(required("spec.resources[storage]"))
    elif storage is not None and storage <= 0:
        amount = amount_of(requests["storage"])
        errors.append(invalid("spec.resources[storage]",
                              canonical(amount) if amount else "0", "must be greater than zero"))
    errors += _class_name(spec, "spec.storageClassName")
    errors += _volume_mode(spec, "spec.volumeMode")
    if old is not None:
        errors += _claim_update(obj, old)
    return errors


def _claim_update(new: Mapping[str, JSON], old: Mapping[str, JSON]) -> list[FieldError]:
    new_spec, old_spec = dict(dict_at(new, "spec")), dict(dict_at(old, "spec"))
    if not old_spec.get("volumeName"):  # the binder sets volumeName once
        old_spec["volumeName"] = new_spec.get("volumeName")
    if old_spec.get("storageClassName") is None:  # set once, from nil (a default class)
        old_spec["storageClassName"] = new_spec.get("storageClassName")
    bound = text_at(dict_at(new, "status"), "phase") == "Bound"
    old_size = amount_of(dict_at(dict_at(old_spec, "resources"), "requests").get("storage"))
    new_size = amount_of(dict_at(dict_at(new_spec, "resources"), "requests").get("storage"))
    if bound:  # bound claims may change their requested size and attributes class
        for spec in (new_spec, old_spec):
            resources = dict(dict_at(spec, "resources"))
            resources["requests"] = {k: v for k, v in dict_at(resources, "requests").items()
                                     if k != "storage"}
            spec["resources"] = resources
            spec.pop("volumeAttributesClassName", None)
    errors: list[FieldError] = []
    if _semantic(new_spec) != _semantic(old_spec):
        errors.append(forbidden("spec", "spec is immutable after creation except "
                                        "resources.requests and volumeAttributesClassName for "
                                        "bound claims"))
    if old_size is not None and new_size is not None and new_size.value < old_size.value:
        capacity = amount_of(dict_at(dict_at(old, "status"), "capacity").get("storage"))
        # RecoverVolumeExpansionFailure (beta, on): shrinking is allowed down to, not to, the
        # capacity the claim has
        if capacity is None or new_size.value <= capacity.value:
            errors.append(forbidden("spec.resources.requests.storage",
                                    "field can not be less than status.capacity"))
    return errors


def _semantic(value: Any) -> Any:
    """Quantities compared by value, as ``apiequality.Semantic`` compares them."""
    if isinstance(value, dict):
        return {k: _semantic(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    if isinstance(value, str):
        amount = parse_quantity(value)
        return ("q", amount) if amount is not None and value[:1].isdigit() else value
    return value


def validate_persistent_volume(resource: Resource, obj: Mapping[str, JSON],
                               old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    spec = dict_at(obj, "spec")
    errors = _access_modes(spec, "spec.accessModes", "")
    capacity = dict_at(spec, "capacity")
    if not capacity:
        errors.append(required("spec.capacity"))
    sources = [s for s in _PV_SOURCES if isinstance(spec.get(s), dict)]
    if not sources:
        errors.append(required("spec", "must specify a volume type"))
    elif len(sources) > 1:
        errors.append(forbidden(f"spec.{sources[1]}", "may not specify more than 1 volume type"))
    host_path = spec.get("hostPath")
    if isinstance(host_path, dict) and not text_at(host_path, "path"):
        errors.append(required("spec.hostPath.path"))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if isinstance(policy, str) and policy and policy not in _RECLAIM_POLICIES:
        errors.append(not_supported("spec.persistentVolumeReclaimPolicy", policy,
                                    _RECLAIM_POLICIES))
    errors += _class_name(spec, "spec.storageClassName")
    errors += _volume_mode(spec, "spec.volumeMode")
    if old is not None:
        old_mode = dict_at(old, "spec").get("volumeMode")
        if spec.get("volumeMode") != old_mode:
            errors.append(invalid("volumeMode", spec.get("volumeMode"), IMMUTABLE))
    return errors


# --- StorageClass --------------------------------------------------------------------------------

def validate_storage_class(resource: Resource, obj: Mapping[str, JSON],
                           old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    errors: list[FieldError] = []
    provisioner = text_at(obj, "provisioner")
    if not provisioner:
        errors.append(required("provisioner"))
    elif len(provisioner) > _PROVISIONER_MAX:
        errors.append(FieldError("FieldValueTooLong", "provisioner", provisioner,
                                 f"may not be more than {_PROVISIONER_MAX} bytes"))
    policy = obj.get("reclaimPolicy")
    if isinstance(policy, str) and policy not in ("Delete", "Retain"):
        errors.append(not_supported("reclaimPolicy", policy, ("Delete", "Retain")))
    mode = obj.get("volumeBindingMode")
    if mode is None:
        errors.append(required("volumeBindingMode"))
    elif mode not in ("Immediate", "WaitForFirstConsumer"):
        errors.append(not_supported("volumeBindingMode", mode,
                                    ("Immediate", "WaitForFirstConsumer")))
    return errors if old is None else errors + _storage_class_update(obj, old)


def _storage_class_update(obj: Mapping[str, JSON], old: Mapping[str, JSON]) -> list[FieldError]:
    errors: list[FieldError] = []
    provisioner, policy = text_at(obj, "provisioner"), obj.get("reclaimPolicy")
    mode = obj.get("volumeBindingMode")
    if (obj.get("parameters") or {}) != (old.get("parameters") or {}):
        errors.append(forbidden("parameters", "updates to parameters are forbidden."))
    if provisioner != text_at(old, "provisioner"):
        errors.append(forbidden("provisioner", "updates to provisioner are forbidden."))
    if policy != old.get("reclaimPolicy"):
        errors.append(forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
    if mode != old.get("volumeBindingMode"):
        errors.append(invalid("volumeBindingMode", mode, IMMUTABLE))
    return errors


__all__ = ["go_quantity", "validate_limit_range", "validate_persistent_volume",
           "validate_persistent_volume_claim", "validate_resource_quota",
           "validate_storage_class"]
