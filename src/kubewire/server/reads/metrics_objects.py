"""metrics.k8s.io/v1beta1 objects (PodMetrics, NodeMetrics) and their Tables, from pods and
nodes and their simulated usage (``kubewire.simulated_usage``), as metrics-server v0.7 writes
them (``pkg/api/pod.go``, ``node.go``, ``pkg/storage``): metadata is the name, namespace,
labels and a ``creationTimestamp`` of now; ``timestamp`` is when the sample was taken,
``window`` the interval it covers; cpu in nanocores and memory in bytes, in Go's canonical
quantity text. Only Running pods have metrics (metrics-server scrapes running containers), and
only Ready nodes (a kubelet that answers); a node's usage is the sum of its Running pods'
plus ``NODE_BASE`` (the system's own use), as a kubelet's summary reports the whole node.

Pure: dicts in, dicts out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from kubewire.quantity import parse_quantity
from kubewire.quantity_text import Amount, Format, canonical
from kubewire.simulated_usage import RESOURCES, UNITS, container_usages

Obj = dict[str, Any]
API_VERSION = "metrics.k8s.io/v1beta1"
WINDOW = "15s"  # metrics-server's --metric-resolution (15s): the span one sample covers
NODE_BASE = {"cpu": 50 * 10**6, "memory": 128 * 2**20}  # nanocores, bytes: the node's own use
_FORMAT: dict[str, Format] = {"cpu": "DecimalSI", "memory": "BinarySI"}


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


@lru_cache(maxsize=16384)
def quantity(resource: str, amount: int) -> str:
    """A usage amount (nanocores, bytes) as metrics-server writes it (``1916003n``,
    ``13068Ki``)."""
    return canonical(Amount(Fraction(amount) * UNITS[resource],
                            _FORMAT.get(resource, "DecimalSI")))


def has_metrics(pod: Mapping[str, Any]) -> bool:
    """Whether metrics-server would report the pod: Running (its containers run)."""
    return _d(pod.get("status")).get("phase") == "Running"


def node_has_metrics(node: Mapping[str, Any]) -> bool:
    """Whether metrics-server would report the node: its kubelet answers (Ready True)."""
    return any(_d(c).get("type") == "Ready" and _d(c).get("status") == "True"
               for c in _d(node.get("status")).get("conditions") or ())


def _meta(obj: Mapping[str, Any], now: str, *, namespaced: bool) -> Obj:
    meta = _d(obj.get("metadata"))
    out: Obj = {"name": meta.get("name", "")}
    if namespaced:
        out["namespace"] = meta.get("namespace", "")
    out["creationTimestamp"] = now
    if meta.get("labels"):
        out["labels"] = meta["labels"]
    return out


@dataclass(frozen=True, slots=True)
class PodUsage:
    """What a pod contributes to the metrics API: whether it has metrics, its node, its
    containers as PodMetrics lists them, and its total (nanocores, bytes)."""

    running: bool
    node: str
    containers: list[Obj]
    total: dict[str, int]


def pod_usage(pod: Mapping[str, Any]) -> PodUsage:
    """The pod's ``PodUsage`` (a function of the pod alone: callers may keep it per revision)."""
    usages = container_usages(pod)
    containers = [{"name": name, "usage": {r: quantity(r, usage[r]) for r in RESOURCES}}
                  for name, usage in usages]
    total = {r: sum(usage[r] for _, usage in usages) for r in RESOURCES}
    return PodUsage(has_metrics(pod), str(_d(pod.get("spec")).get("nodeName") or ""),
                    containers, total)


def pod_metrics(meta: Mapping[str, Any], usage: PodUsage, now: str) -> Obj:
    """The PodMetrics of a pod with metrics, from its ``metadata`` (name, namespace, labels)."""
    return {"kind": "PodMetrics", "apiVersion": API_VERSION,
            "metadata": _meta({"metadata": meta}, now, namespaced=True), "timestamp": now,
            "window": WINDOW, "containers": usage.containers}


def node_usage(pods: Iterable[PodUsage]) -> dict[str, int]:
    """A node's usage (nanocores, bytes): ``NODE_BASE`` plus its Running pods'."""
    total = dict(NODE_BASE)
    for pod in pods:
        if pod.running:
            for resource in RESOURCES:
                total[resource] += pod.total[resource]
    return total


def node_metrics(node: Mapping[str, Any], usage: Mapping[str, int], now: str) -> Obj:
    """The NodeMetrics of a node with ``usage`` (``node_usage`` of the pods bound to it)."""
    return {"kind": "NodeMetrics", "apiVersion": API_VERSION,
            "metadata": _meta(node, now, namespaced=False), "timestamp": now, "window": WINDOW,
            "usage": {r: quantity(r, usage[r]) for r in RESOURCES}}


def metrics_list(kind: str, items: list[Obj]) -> Obj:
    """A PodMetricsList/NodeMetricsList (items without their own type meta, as Go lists)."""
    stripped = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")}
                for item in items]
    return {"kind": f"{kind}List", "apiVersion": API_VERSION, "metadata": {},
            "items": stripped}


def _usage_of(item: Mapping[str, Any]) -> dict[str, str]:
    if "usage" in item:
        return dict(_d(item.get("usage")))
    sums: dict[str, Amount] = {}
    for container in item.get("containers") or ():
        for resource, text in _d(_d(container).get("usage")).items():
            amount = Amount(parse_quantity(text) or Fraction(0),
                            _FORMAT.get(resource, "DecimalSI"))
            prior = sums.get(resource)
            sums[resource] = amount if prior is None else Amount(prior.value + amount.value,
                                                                 prior.format)
    return {r: canonical(a) for r, a in sums.items()}


def metrics_table(items: list[Obj], api_version: str, include_object: str) -> Obj:
    """metrics-server's Table (``addPodMetricsToTable``/``addNodeMetricsToTable``): Name, one
    quantity column per resource (sorted), Window; a row's object as the request asked."""
    table: Obj = {"kind": "Table", "apiVersion": api_version, "metadata": {},
                  "columnDefinitions": [], "rows": []}
    names: list[str] | None = None
    for item in items:
        usage = _usage_of(item)
        if names is None:
            names = sorted(usage)
            table["columnDefinitions"] = (
                [{"name": "Name", "type": "string", "format": "name",
                  "description": "Name of the resource", "priority": 0}]
                + [{"name": n, "type": "string", "format": "quantity", "description": "",
                    "priority": 0} for n in names]
                + [{"name": "Window", "type": "string", "format": "duration",
                    "description": "", "priority": 0}])
        cells: list[Any] = [_d(item.get("metadata")).get("name", "")]
        cells += [usage.get(n, "0") for n in names] + [item.get("window", "")]
        row: Obj = {"cells": cells}
        if include_object == "Object":
            row["object"] = item
        elif include_object == "Metadata":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": api_version,
                             "metadata": item.get("metadata")}
        table["rows"].append(row)
    return table
