"""Simulated resource usage of a pod and its containers: the one rule the server's
``metrics.k8s.io`` (PodMetrics, NodeMetrics; ``kubectl top``) and the cluster wing read.

No container runs, so usage is declared: a pod's usage of a resource is its annotation
``kubewire.io/<resource>-usage`` (a quantity for the whole pod: ``kubewire.io/cpu-usage:
300m``), else ``DEFAULT_USAGE_FRACTION`` of the sum of its containers' requests. A container's
share is the pod's usage split by the containers' requests (evenly without any).
``container_usages`` gives whole units as metrics-server reports them (nanocores, bytes) with
the remainder of the split spread so that the containers sum to the pod's usage exactly.

Core module: pure functions; imports only ``kubewire.quantity``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

from kubewire.quantity import parse_quantity

USAGE_ANNOTATION = "kubewire.io/{resource}-usage"
DEFAULT_USAGE_FRACTION = Fraction(1, 2)  # a pod without an annotation uses half its requests
RESOURCES = ("cpu", "memory")  # what metrics-server reports
# The unit a reported amount counts: cpu in nanocores, memory in bytes (metrics-server's
# NewScaledQuantity(nanocores, -9) and NewQuantity(bytes, BinarySI)).
UNITS: Mapping[str, Fraction] = {"cpu": Fraction(1, 10**9), "memory": Fraction(1)}


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _containers(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [_d(c) for c in _d(pod.get("spec")).get("containers") or ()]


@lru_cache(maxsize=4096)
def _parsed(text: str) -> Fraction | None:
    """``parse_quantity`` of a text (the same few request texts recur across many pods)."""
    return parse_quantity(text)


def _quantity(value: Any) -> Fraction | None:
    return _parsed(value) if isinstance(value, str) else parse_quantity(value)


def request_of(container: Mapping[str, Any], resource: str) -> Fraction | None:
    """A container's request of ``resource``; None without one."""
    return _quantity(_d(_d(container.get("resources")).get("requests")).get(resource))


def pod_usage(pod: Mapping[str, Any], resource: str) -> Fraction:
    """The pod's simulated usage of ``resource`` (cores, bytes)."""
    annotations = _d(_d(pod.get("metadata")).get("annotations"))
    given = _quantity(annotations.get(USAGE_ANNOTATION.format(resource=resource)))
    if given is not None and given >= 0:
        return given
    return sum((request_of(c, resource) or Fraction(0) for c in _containers(pod)),
               Fraction(0)) * DEFAULT_USAGE_FRACTION


def _shares(total: Fraction, containers: Sequence[Mapping[str, Any]],
            resource: str) -> list[Fraction]:
    requests = [request_of(c, resource) or Fraction(0) for c in containers]
    whole = sum(requests, Fraction(0))
    if whole == 0:
        return [total / len(containers)] * len(containers)
    return [total * r / whole for r in requests]


def container_usage(pod: Mapping[str, Any], resource: str, container: str) -> Fraction | None:
    """A container's share of the pod's usage; None when the pod has no such container."""
    containers = _containers(pod)
    names = [c.get("name") for c in containers]
    if container not in names:
        return None
    return _shares(pod_usage(pod, resource), containers, resource)[names.index(container)]


def _whole_units(total: Fraction, shares: list[Fraction], unit: Fraction) -> list[int]:
    """Shares in whole units summing to ``floor(total)``: floors, then one more unit each
    to the largest remainders (so a pod's containers add up to the pod)."""
    floors = [math.floor(s / unit) for s in shares]
    left = math.floor(total / unit) - sum(floors)
    order = sorted(range(len(shares)), key=lambda i: -(shares[i] / unit - floors[i]))
    for i in order[:max(left, 0)]:
        floors[i] += 1
    return floors


def container_usages(pod: Mapping[str, Any]) -> list[tuple[str, dict[str, int]]]:
    """Every container's usage in whole units (``UNITS``): [(name, {resource: amount})]."""
    containers = _containers(pod)
    if not containers:
        return []
    out: list[tuple[str, dict[str, int]]] = [(str(c.get("name") or ""), {}) for c in containers]
    for resource in RESOURCES:
        total = pod_usage(pod, resource)
        if len(containers) == 1:  # the whole pod (most pods): no split
            out[0][1][resource] = math.floor(total / UNITS[resource])
            continue
        for (_, usage), amount in zip(out, _whole_units(
                total, _shares(total, containers, resource), UNITS[resource]), strict=True):
            usage[resource] = amount
    return out
