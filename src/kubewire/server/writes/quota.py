"""ResourceQuota's arithmetic: what an object costs, which quotas it meets, and kube's verdicts.

Written by hand from kube v1.32: the evaluators of ``pkg/quota/v1/evaluator/core`` (pods,
services, persistentvolumeclaims) and apiserver's ``pkg/quota/v1/generic`` (``count/<resource>``
object counts for every other kind, with kube's legacy names ``configmaps``, ``secrets``,
``resourcequotas``, ``replicationcontrollers``), and ``CheckRequest`` of apiserver's
``pkg/admission/plugin/resourcequota/controller.go`` with its 403 texts (``exceeded quota: ...``,
``failed quota: ...: must specify ...``, ``status unknown for quota: ...``). ``calculate_used``
is the quota controller's ``syncResourceQuota`` (``status.hard`` is ``spec.hard``, ``used`` the
sum over the namespace's objects, masked to the hard names).

Pure: objects in, usage lists and messages out. A usage list maps resource names to
``quantity_text.Amount``s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from kubewire.quantity_text import ONE, ZERO, Amount, add, amount_of, canonical, subtract
from kubewire.times import parse_time

Usage = dict[str, Amount]

POD_COMPUTE = ("cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
               "requests.ephemeral-storage", "limits.cpu", "limits.memory",
               "limits.ephemeral-storage", "pods")
POD_NAMES = frozenset(("count/pods", *POD_COMPUTE))
# the names a quota on cpu or memory makes every container state (pods.go validationSet)
_MUST_SPECIFY = frozenset(("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu",
                           "limits.memory"))
_LEGACY_COUNT = {"services": "services", "configmaps": "configmaps", "secrets": "secrets",
                 "persistentvolumeclaims": "persistentvolumeclaims",
                 "replicationcontrollers": "replicationcontrollers",
                 "resourcequotas": "resourcequotas"}
_STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
_POD_SCOPES = frozenset(("Terminating", "NotTerminating", "BestEffort", "NotBestEffort",
                         "PriorityClass", "CrossNamespacePodAffinity"))


def count_name(group: str, plural: str) -> str:
    """``ObjectCountQuotaResourceNameFor``: ``count/pods``, ``count/deployments.apps``."""
    return f"count/{plural}.{group}" if group else f"count/{plural}"


# --- usage lists ---------------------------------------------------------------------------------

def add_usage(left: Mapping[str, Amount], right: Mapping[str, Amount]) -> Usage:
    out = dict(left)
    for key, value in right.items():
        out[key] = add(out[key], value) if key in out else value
    return out


def mask(usage: Mapping[str, Amount], names: Iterable[str]) -> Usage:
    wanted = set(names)
    return {k: v for k, v in usage.items() if k in wanted}


def pretty(usage: Mapping[str, Amount]) -> str:
    """``prettyPrint``: ``name=quantity`` sorted by name, joined with commas."""
    return ",".join(f"{key}={canonical(usage[key])}" for key in sorted(usage))


def usage_of_list(items: Mapping[str, Any] | None) -> Usage:
    """A ResourceList (``{"cpu": "100m"}``) as a usage list; unparsable values are left out."""
    out: Usage = {}
    for key, value in (items or {}).items() if isinstance(items, dict) else ():
        amount = amount_of(value)
        if amount is not None:
            out[str(key)] = amount
    return out


def as_resource_list(usage: Mapping[str, Amount]) -> dict[str, str]:
    return {key: canonical(usage[key]) for key in sorted(usage)}


# --- evaluators ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Evaluator:
    """How quota sees one resource: ``kind`` is ``pods``, ``services``,
    ``persistentvolumeclaims`` or ``count`` (an object count of ``names``)."""

    group: str
    plural: str
    kind: str
    names: frozenset[str]

    def matching(self, hard: Iterable[str]) -> list[str]:
        """``MatchingResources``: the hard names this evaluator accounts for."""
        return [name for name in hard if name in self.names or self._prefixed(name)]

    def _prefixed(self, name: str) -> bool:
        if self.kind == "pods":  # hugepages and extended resources
            return name.startswith(("hugepages-", "requests.hugepages-")) or \
                _extended_request(name)
        return self.kind == "persistentvolumeclaims" and _STORAGE_CLASS_SUFFIX in name

    def handles_update(self) -> bool:
        """Services and claims are charged again on update (a type or size change); pods and
        object counts only on create."""
        return self.kind in ("services", "persistentvolumeclaims")

    def usage(self, obj: Mapping[str, Any], now: datetime) -> Usage:
        if self.kind == "pods":
            return pod_usage(obj, now)
        if self.kind == "services":
            return service_usage(obj)
        if self.kind == "persistentvolumeclaims":
            return claim_usage(obj)
        return dict.fromkeys(self.names, ONE)

    def matches_scope(self, scope: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
        """A scope selector requirement; only pods have scopes (MatchesNoScopeFunc)."""
        return self.kind == "pods" and pod_matches_scope(scope, obj)


def evaluator_for(group: str, plural: str) -> Evaluator:
    if not group and plural == "pods":
        return Evaluator(group, plural, "pods", POD_NAMES)
    names = {count_name(group, plural)}
    if not group and plural in _LEGACY_COUNT:
        names.add(_LEGACY_COUNT[plural])
    if not group and plural == "services":
        return Evaluator(group, plural, "services",
                         frozenset(names | {"services.loadbalancers", "services.nodeports"}))
    if not group and plural == "persistentvolumeclaims":
        return Evaluator(group, plural, "persistentvolumeclaims",
                         frozenset(names | {"requests.storage"}))
    return Evaluator(group, plural, "count", frozenset(names))


def _extended_request(name: str) -> bool:
    # isExtendedResourceNameForQuota: requests.<a non-native name> (native: no domain, or one
    # of kubernetes.io)
    if not name.startswith("requests."):
        return False
    rest = name[len("requests."):]
    return "/" in rest and not rest.split("/", 1)[0].endswith("kubernetes.io")


def _containers(spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = spec.get(key)
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


def _resources(container: Mapping[str, Any], which: str) -> Usage:
    resources = container.get("resources")
    return usage_of_list(resources.get(which) if isinstance(resources, dict) else None)


def _max_usage(left: Usage, right: Usage) -> Usage:
    out = dict(left)
    for key, value in right.items():
        if key not in out or value.value > out[key].value:
            out[key] = value
    return out


def pod_totals(pod: Mapping[str, Any], which: str) -> Usage:
    """``resourcehelper.PodRequests``/``PodLimits``: the containers' sum, at least each init
    container's (sidecars, restartPolicy Always, add to the sum), plus the pod overhead."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    total: Usage = {}
    for container in _containers(spec, "containers"):
        total = add_usage(total, _resources(container, which))
    sidecars: Usage = {}
    init_max: Usage = {}
    for container in _containers(spec, "initContainers"):
        own = _resources(container, which)
        if container.get("restartPolicy") == "Always":
            sidecars = add_usage(sidecars, own)
            init_max = _max_usage(init_max, sidecars)
        else:
            init_max = _max_usage(init_max, add_usage(own, sidecars))
    total = _max_usage(add_usage(total, sidecars), init_max)
    overhead = usage_of_list(spec.get("overhead") if isinstance(spec.get("overhead"), dict)
                             else None)
    return add_usage(total, overhead) if overhead else total


def _compute_usage(requests: Usage, limits: Usage) -> Usage:
    """``podComputeUsageHelper``."""
    out: Usage = {"pods": ONE}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = requests[name]
            out[f"requests.{name}"] = requests[name]
        if name in limits:
            out[f"limits.{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            out[name] = value
            out[f"requests.{name}"] = value
        elif "/" in name and not name.split("/", 1)[0].endswith("kubernetes.io") \
                and not name.startswith("requests."):
            out[f"requests.{name}"] = value
    return out


def pod_counts_compute(pod: Mapping[str, Any], now: datetime) -> bool:
    """``QuotaV1Pod``: terminal pods, and pods past their deletion's grace, are not charged."""
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    assert isinstance(status, dict)
    if status.get("phase") in ("Failed", "Succeeded"):
        return False
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    deleted, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if isinstance(deleted, str) and isinstance(grace, int):
        when = parse_time(deleted)
        if when is not None and now > when + timedelta(seconds=grace):
            return False
    return True


def pod_usage(pod: Mapping[str, Any], now: datetime) -> Usage:
    """``PodUsageFunc``: ``count/pods`` always, compute resources while the pod runs."""
    usage: Usage = {"count/pods": ONE}
    if not pod_counts_compute(pod, now):
        return usage
    return add_usage(usage, _compute_usage(pod_totals(pod, "requests"),
                                           pod_totals(pod, "limits")))


def _best_effort(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    for key in ("initContainers", "containers"):
        for container in _containers(spec, key):
            for which in ("requests", "limits"):
                for name, value in _resources(container, which).items():
                    if name in ("cpu", "memory") and value.value != 0:
                        return False
    return True


def pod_matches_scope(scope: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """``podMatchesScopeFunc``."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    name = scope.get("scopeName")
    deadline = spec.get("activeDeadlineSeconds")
    terminating = isinstance(deadline, int) and deadline >= 0
    if name == "Terminating":
        return terminating
    if name == "NotTerminating":
        return not terminating
    if name == "BestEffort":
        return _best_effort(pod)
    if name == "NotBestEffort":
        return not _best_effort(pod)
    if name == "PriorityClass":
        class_name = str(spec.get("priorityClassName") or "")
        operator = scope.get("operator")
        values = scope.get("values") if isinstance(scope.get("values"), list) else []
        assert isinstance(values, list)
        if operator == "Exists":
            return bool(class_name)
        if operator == "DoesNotExist":
            return not class_name
        if operator == "In":
            return bool(class_name) and class_name in values
        if operator == "NotIn":
            return not class_name or class_name not in values
    return False


def service_usage(service: Mapping[str, Any]) -> Usage:
    """The service evaluator: one service, a load balancer, its node ports."""
    spec = service.get("spec") if isinstance(service.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    usage: Usage = {"count/services": ONE, "services": ONE,
                    "services.loadbalancers": ZERO, "services.nodeports": ZERO}
    ports = spec.get("ports") if isinstance(spec.get("ports"), list) else []
    assert isinstance(ports, list)
    kind = spec.get("type")
    if kind == "NodePort":
        usage["services.nodeports"] = Amount(Fraction(len(ports)))
    elif kind == "LoadBalancer":
        usage["services.loadbalancers"] = ONE
        if spec.get("allocateLoadBalancerNodePorts") is not False:
            usage["services.nodeports"] = Amount(Fraction(len(ports)))
    return usage


def claim_usage(claim: Mapping[str, Any]) -> Usage:
    """The persistentvolumeclaims evaluator: the claim, its storage request (the larger of the
    request and the allocated size) also under its class's names."""
    spec = claim.get("spec") if isinstance(claim.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    usage: Usage = {"count/persistentvolumeclaims": ONE, "persistentvolumeclaims": ONE}
    resources = spec.get("resources") if isinstance(spec.get("resources"), dict) else {}
    assert isinstance(resources, dict)
    request = usage_of_list(resources.get("requests")).get("storage")
    status = claim.get("status") if isinstance(claim.get("status"), dict) else {}
    assert isinstance(status, dict)
    allocated = usage_of_list(status.get("allocatedResources")).get("storage")
    if allocated is not None and (request is None or allocated.value > request.value):
        request = allocated
    class_name = str(spec.get("storageClassName") or "")
    if class_name:
        usage[f"{class_name}{_STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = ONE
    if request is not None:
        usage["requests.storage"] = request
        if class_name:
            usage[f"{class_name}{_STORAGE_CLASS_SUFFIX}requests.storage"] = request
    return usage


# --- admission ------------------------------------------------------------------------------------

def scope_selectors(quota: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``getScopeSelectorsFromQuota``: ``spec.scopes`` as Exists requirements, then the
    selector's expressions."""
    spec = quota.get("spec") if isinstance(quota.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    out: list[Mapping[str, Any]] = [{"scopeName": s, "operator": "Exists"}
                                    for s in spec.get("scopes") or [] if isinstance(s, str)]
    selector = spec.get("scopeSelector")
    if isinstance(selector, dict):
        out += [e for e in selector.get("matchExpressions") or [] if isinstance(e, dict)]
    return out


def _status_list(quota: Mapping[str, Any], key: str) -> Usage:
    status = quota.get("status")
    return usage_of_list(status.get(key) if isinstance(status, dict) else None)


def quota_name(quota: Mapping[str, Any]) -> str:
    meta = quota.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, dict) else ""


def missing_requests(required: Iterable[str], pod: Mapping[str, Any]) -> str | None:
    """The pod evaluator's ``Constraints``: with cpu or memory under quota, every container
    states them; ``must specify limits.cpu for: a,b; requests.memory for: a``."""
    wanted = set(required) & _MUST_SPECIFY
    if not wanted:
        return None
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    missing: dict[str, set[str]] = {}
    for key in ("containers", "initContainers"):
        for container in _containers(spec, key):
            have = _compute_usage(_resources(container, "requests"),
                                  _resources(container, "limits"))
            for name in wanted - set(have):
                missing.setdefault(name, set()).add(str(container.get("name") or ""))
    if not missing:
        return None
    parts = [f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing)]
    return "must specify " + "; ".join(parts)


class QuotaRefused(Exception):
    """An admission refusal; ``str`` is kube's text after ``<resource> "<name>" is forbidden: ``."""


@dataclass(frozen=True, slots=True)
class Charge:
    """A quota whose ``status.used`` the admitted object changes: its name and new used list."""

    name: str
    used: dict[str, str]


def _interesting(quotas: list[Mapping[str, Any]], evaluator: Evaluator,
                 obj: Mapping[str, Any]) -> list[tuple[str, Usage, Usage]]:
    """The quotas that restrict ``obj``: (name, hard, used); refusals for a pod missing
    requests a quota needs and for a quota whose usage is not known yet."""
    interesting = []
    for resource_quota in quotas:
        hard = _status_list(resource_quota, "hard")
        restricted = evaluator.matching(hard)
        if not restricted:
            continue
        if not all(evaluator.matches_scope(s, obj) for s in scope_selectors(resource_quota)):
            continue
        name = quota_name(resource_quota)
        problem = missing_requests(restricted, obj) if evaluator.kind == "pods" else None
        if problem is not None:
            raise QuotaRefused(f"failed quota: {name}: {problem}")
        used = _status_list(resource_quota, "used")
        if any(r not in used for r in restricted):
            raise QuotaRefused(f"status unknown for quota: {name}, resources: "
                               + ",".join(sorted(restricted)))
        interesting.append((name, hard, used))
    return interesting


def _delta(evaluator: Evaluator, obj: Mapping[str, Any], old: Mapping[str, Any] | None,
           now: datetime) -> Usage:
    """What the write adds: the object's usage, less the old object's on an update (never
    below zero), zeros dropped."""
    delta = evaluator.usage(obj, now)
    negative = sorted(k for k, v in delta.items() if v.value < 0)
    if negative:
        raise QuotaRefused("quota usage is negative for resource(s): " + ",".join(negative))
    if old is not None and (old.get("metadata") or {}).get("resourceVersion"):
        previous = evaluator.usage(old, now)
        delta = {k: (subtract(v, previous[k]) if k in previous else v) for k, v in delta.items()}
        delta = {k: (v if v.value >= 0 else ZERO) for k, v in delta.items()}
    return {k: v for k, v in delta.items() if v.value != 0}


def check_request(quotas: list[Mapping[str, Any]], evaluator: Evaluator, obj: Mapping[str, Any],
                  old: Mapping[str, Any] | None, now: datetime) -> list[Charge]:
    """``CheckRequest`` for a create (``old`` None) or update: the quotas to charge, or
    ``QuotaRefused`` with kube's message."""
    interesting = _interesting(quotas, evaluator, obj)
    if not interesting:
        return []
    delta = _delta(evaluator, obj, old, now)
    charges = []
    for name, hard, used in interesting:
        requested = mask(delta, hard)
        new_used = add_usage(used, requested)
        exceeded = sorted(k for k in requested if new_used[k].value > hard[k].value)
        if exceeded:
            raise QuotaRefused(
                f"exceeded quota: {name}, requested: {pretty(mask(requested, exceeded))}, "
                f"used: {pretty(mask(used, exceeded))}, limited: {pretty(mask(hard, exceeded))}")
        if requested:
            charges.append(Charge(name, as_resource_list(new_used)))
    return charges


# --- the quota controller ------------------------------------------------------------------------

def calculate_used(quota: Mapping[str, Any], evaluators: Iterable[Evaluator],
                   objects_of: Any, now: datetime,
                   totals: dict[tuple[str, str, str], Usage] | None = None) -> dict[str, Any]:
    """``syncResourceQuota``'s new status: ``{"hard": spec.hard, "used": ...}``.
    ``objects_of(evaluator)`` gives the namespace's objects of the evaluator's resource.
    ``totals`` (one dict for the quotas of one namespace) keeps each kind's summed usage under
    the same scopes, so many quotas over many objects cost one pass, not one each."""
    spec = quota.get("spec") if isinstance(quota.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    hard_raw = spec.get("hard") if isinstance(spec.get("hard"), dict) else {}
    assert isinstance(hard_raw, dict)
    hard = usage_of_list(hard_raw)
    used = _status_list(quota, "used")
    selectors = scope_selectors(quota)
    scopes = json.dumps(selectors, sort_keys=True, default=str)
    for evaluator in evaluators:
        matched = evaluator.matching(hard)
        if not matched:
            continue
        key = (evaluator.group, evaluator.plural, scopes)
        summed = totals.get(key) if totals is not None else None
        if summed is None:
            summed = {}
            for obj in objects_of(evaluator):
                if all(evaluator.matches_scope(s, obj) for s in selectors):
                    summed = add_usage(summed, evaluator.usage(obj, now))
            if totals is not None:
                totals[key] = summed
        total = add_usage(dict.fromkeys(matched, ZERO), summed)
        used.update(mask(total, matched))
    used = mask(used, hard)
    status = {"hard": as_resource_list(hard), "used": as_resource_list(used)}
    return {key: value for key, value in status.items() if value}  # omitempty maps


__all__ = ["Charge", "Evaluator", "QuotaRefused", "Usage", "calculate_used", "check_request",
           "claim_usage", "count_name", "evaluator_for", "pod_usage", "pretty", "service_usage"]
