"""The LimitRanger admission plugin: defaults from a namespace's LimitRanges, then their bounds.

Written by hand from kube v1.32 ``plugin/pkg/admission/limitranger/admission.go``:

- ``default_pod`` (``PodMutateLimitFunc``, pods on create): each container and init container
  gets the ``Container`` items' ``default`` limits and ``defaultRequest`` requests it does not
  state, and the pod the ``kubernetes.io/limit-ranger`` annotation saying what was set
  (``LimitRanger plugin set: cpu, memory request for container app; cpu limit for ...``);
- ``pod_problems`` (``PodValidateLimitFunc``): ``Container`` items bound each container,
  ``Pod`` items the pod's totals, with kube's texts (``minimum cpu usage per Container is 100m,
  but request is 50m``, ``maximum memory usage per Pod is 1Gi.  No limit is specified``, ``cpu
  max limit to request ratio per Container is 2, but provided ratio is 4.000000``);
- ``claim_problems`` (``PersistentVolumeClaimValidateLimitFunc``): a claim's storage request
  within the ``PersistentVolumeClaim`` items' min and max.

Resource names are visited in sorted order (Go ranges over maps at random). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubewire.quantity_text import Amount, canonical
from kubewire.server.writes.quota import Usage, pod_totals, usage_of_list

ANNOTATION = "kubernetes.io/limit-ranger"


def _items(limit_ranges: Iterable[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for limit_range in limit_ranges:
        spec = limit_range.get("spec")
        for item in (spec.get("limits") or []) if isinstance(spec, dict) else []:
            if isinstance(item, dict) and item.get("type") == kind:
                out.append(item)
    return out


def _containers(pod: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    spec = pod.get("spec")
    out: list[tuple[str, dict[str, Any]]] = []
    if not isinstance(spec, dict):
        return out
    for key, label in (("containers", "container"), ("initContainers", "init container")):
        for container in spec.get(key) or []:
            if isinstance(container, dict):
                out.append((label, container))
    return out


def default_pod(pod: dict[str, Any], limit_ranges: Iterable[Mapping[str, Any]]) -> None:
    """Fill the pod's containers' unstated requests and limits in place (``PodMutateLimitFunc``
    for each LimitRange in turn, each writing the annotation)."""
    for limit_range in limit_ranges:
        limits: dict[str, Any] = {}
        requests: dict[str, Any] = {}
        for item in _items([limit_range], "Container"):  # defaultContainerResourceRequirements
            limits.update(item.get("default") or {})
            requests.update(item.get("defaultRequest") or {})
        notes: list[str] = []
        for label, container in _containers(pod):
            resources = container.get("resources")
            if not isinstance(resources, dict):
                resources = container["resources"] = {}
            set_requests = _merge(resources, "requests", requests)
            set_limits = _merge(resources, "limits", limits)
            name = container.get("name") or ""
            if set_requests:
                notes.append(f"{', '.join(sorted(set_requests))} request for {label} {name}")
            if set_limits:
                notes.append(f"{', '.join(sorted(set_limits))} limit for {label} {name}")
        if notes:
            meta = pod.setdefault("metadata", {})
            annotations = meta.get("annotations")
            if not isinstance(annotations, dict):
                annotations = meta["annotations"] = {}
            annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def _merge(resources: dict[str, Any], which: str, defaults: Mapping[str, Any]) -> list[str]:
    current = resources.get(which)
    current = dict(current) if isinstance(current, dict) else {}
    added = [key for key in defaults if key not in current]
    for key in added:
        current[key] = defaults[key]
    if added:
        resources[which] = current
    return added


def _min(kind: str, name: str, enforced: Amount, requests: Usage, limits: Usage) -> str | None:
    text = canonical(enforced)
    request, limit = requests.get(name), limits.get(name)
    if request is None:
        return f"minimum {name} usage per {kind} is {text}.  No request is specified"
    if request.value < enforced.value:
        return f"minimum {name} usage per {kind} is {text}, but request is {canonical(request)}"
    if limit is not None and limit.value < enforced.value:
        return f"minimum {name} usage per {kind} is {text}, but limit is {canonical(limit)}"
    return None


def _max(kind: str, name: str, enforced: Amount, requests: Usage, limits: Usage) -> str | None:
    text = canonical(enforced)
    request, limit = requests.get(name), limits.get(name)
    if limit is None:
        return f"maximum {name} usage per {kind} is {text}.  No limit is specified"
    if limit.value > enforced.value:
        return f"maximum {name} usage per {kind} is {text}, but limit is {canonical(limit)}"
    if request is not None and request.value > enforced.value:
        return f"maximum {name} usage per {kind} is {text}, but request is {canonical(request)}"
    return None


def _ratio(kind: str, name: str, enforced: Amount, requests: Usage, limits: Usage) -> str | None:
    text = canonical(enforced)
    request, limit = requests.get(name), limits.get(name)
    if request is None or request.value == 0:
        return (f"{name} max limit to request ratio per {kind} is {text}, but no request is "
                "specified or request is 0")
    if limit is None or limit.value == 0:
        return (f"{name} max limit to request ratio per {kind} is {text}, but no limit is "
                "specified or limit is 0")
    observed = limit.value / request.value
    if observed > enforced.value:
        return (f"{name} max limit to request ratio per {kind} is {text}, but provided ratio "
                f"is {float(observed):f}")
    return None


def _bounds(item: Mapping[str, Any], kind: str, requests: Usage, limits: Usage) -> list[str]:
    problems = []
    for key, check in (("min", _min), ("max", _max), ("maxLimitRequestRatio", _ratio)):
        bounds = usage_of_list(item.get(key))
        for name in sorted(bounds):
            problem = check(kind, name, bounds[name], requests, limits)
            if problem is not None:
                problems.append(problem)
    return problems


def pod_problems(pod: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]]) -> list[str]:
    """``PodValidateLimitFunc`` over every LimitRange."""
    ranges = list(limit_ranges)
    problems = []
    for item in _items(ranges, "Container"):
        for _, container in _containers(pod):
            resources = container.get("resources")
            resources = resources if isinstance(resources, dict) else {}
            problems += _bounds(item, "Container", usage_of_list(resources.get("requests")),
                                usage_of_list(resources.get("limits")))
    for item in _items(ranges, "Pod"):
        problems += _bounds(item, "Pod", pod_totals(pod, "requests"), pod_totals(pod, "limits"))
    return problems


def claim_problems(claim: Mapping[str, Any],
                   limit_ranges: Iterable[Mapping[str, Any]]) -> list[str]:
    """``PersistentVolumeClaimValidateLimitFunc``: min against the request (a claim's limits
    are not user input), max against the request (``maxRequestConstraint``)."""
    spec = claim.get("spec")
    resources = spec.get("resources") if isinstance(spec, dict) else None
    requests = usage_of_list(resources.get("requests") if isinstance(resources, dict) else None)
    problems = []
    kind = "PersistentVolumeClaim"
    for item in _items(limit_ranges, kind):
        minimum = usage_of_list(item.get("min"))
        for name in sorted(minimum):
            problem = _min(kind, name, minimum[name], requests, {})
            if problem is not None:
                problems.append(problem)
        maximum = usage_of_list(item.get("max"))
        for name in sorted(maximum):
            request, text = requests.get(name), canonical(maximum[name])
            if request is None:
                problems.append(f"maximum {name} usage per {kind} is {text}.  No request is "
                                "specified")
            elif request.value > maximum[name].value:
                problems.append(f"maximum {name} usage per {kind} is {text}, but request is "
                                f"{canonical(request)}")
    return problems


def aggregate(problems: list[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message alone, several in brackets
    (repeats dropped)."""
    unique = list(dict.fromkeys(problems))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


__all__ = ["ANNOTATION", "aggregate", "claim_problems", "default_pod", "pod_problems"]
