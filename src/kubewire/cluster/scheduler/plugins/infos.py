"""What a Pod asks for and what a Node offers, parsed once from their dicts.

``PodInfo`` is kube's ``framework.PodInfo`` plus the pieces plugins read each time (requests
as ``computePodResourceRequest``, the non-zero requests scoring uses, tolerations, node
affinity, pod (anti-)affinity terms, spread constraints, host ports). ``NodeInfo`` is
``framework.NodeInfo``: the node's labels, taints and allocatable, and the sums of the
requests of the pods assigned to it (kept up to date by ``add_pod``/``remove_pod``, so a
filter reads one number per resource instead of summing pods).

Quantities are integers as kube's ``Resource`` holds them: cpu in millicores
(``MilliValue``, rounded up), everything else in units (``Value``, rounded up).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubewire.quantity import parse_quantity
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import LabelSelector, label_selector_from_match

Obj = Mapping[str, Any]
CPU, MEMORY, EPHEMERAL, PODS = "cpu", "memory", "ephemeral-storage", "pods"
DEFAULT_MILLI_CPU = 100  # schedutil.DefaultMilliCPURequest
DEFAULT_MEMORY = 200 * 1024 * 1024  # schedutil.DefaultMemoryRequest
NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE = "NoSchedule", "NoExecute", "PreferNoSchedule"
# Resources NodeResourcesFit does not check (it checks cpu, memory, ephemeral-storage and the
# scalar ones: extended resources, hugepages-*, attachable-volumes-*).
_NOT_SCALAR = frozenset({CPU, MEMORY, EPHEMERAL, PODS, "storage"})


def amount(resource: str, value: Any) -> int:
    """A quantity as kube's ``Resource`` holds it: millicores for cpu, units otherwise."""
    q = parse_quantity(value)
    if q is None:
        return 0
    return math.ceil(q * 1000) if resource == CPU else math.ceil(Fraction(q))


def resource_list(values: Any) -> dict[str, int]:
    """A ``ResourceList`` dict as integers."""
    if not isinstance(values, Mapping):
        return {}
    return {name: amount(name, value) for name, value in values.items()}


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value


def _requests(container: Obj) -> dict[str, int]:
    return resource_list((container.get("resources") or {}).get("requests"))


def _nonzero(requests: Mapping[str, int]) -> dict[str, int]:
    """``schedutil.GetNonzeroRequests``: cpu 100m and memory 200Mi when unset."""
    return {CPU: requests.get(CPU, DEFAULT_MILLI_CPU),
            MEMORY: requests.get(MEMORY, DEFAULT_MEMORY)}


def pod_requests(spec: Obj, nonzero: bool = False) -> dict[str, int]:
    """``resourcehelper.PodRequests`` (1.32): the sum of app containers and sidecars, against
    the largest init container (plus the sidecars started before it), plus ``overhead``.
    ``nonzero`` counts unset cpu/memory of each container as scoring's defaults."""
    def of(container: Obj) -> dict[str, int]:
        reqs = _requests(container)
        return _nonzero(reqs) if nonzero else reqs

    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        _add(total, of(container))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        reqs = of(container)
        if container.get("restartPolicy") == "Always":
            _add(total, reqs)
            _add(sidecars, reqs)
            current = dict(sidecars)
        else:
            current = dict(reqs)
            _add(current, sidecars)
        _max(init_max, current)
    _max(total, init_max)
    _add(total, resource_list(spec.get("overhead")))
    return total


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """``Toleration.ToleratesTaint``."""
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("", "Equal") and self.value == value


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


def tolerated(taint: Taint, tolerations: tuple[Toleration, ...]) -> bool:
    return any(t.tolerates(taint.key, taint.value, taint.effect) for t in tolerations)


@dataclass(frozen=True, slots=True)
class NodeRequirement:
    """One ``NodeSelectorRequirement`` (``matchExpressions`` or ``matchFields``)."""

    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        op, have = self.operator, labels.get(self.key)
        if op == "Exists":
            return have is not None
        if op == "DoesNotExist":
            return have is None
        if op == "NotIn":
            return have is None or have not in self.values
        if have is None:
            return False
        if op == "In":
            return have in self.values
        if op in ("Gt", "Lt") and len(self.values) == 1:
            try:
                left, right = int(have), int(self.values[0])
            except ValueError:
                return False
            return left > right if op == "Gt" else left < right
        return False


@dataclass(frozen=True, slots=True)
class NodeTerm:
    """A ``NodeSelectorTerm``: its expressions and fields ANDed; an empty term matches
    nothing (``nodeaffinity.NewNodeSelector``)."""

    expressions: tuple[NodeRequirement, ...]
    fields: tuple[NodeRequirement, ...]

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        if not self.expressions and not self.fields:
            return False
        return (all(r.matches(labels) for r in self.expressions)
                and all(r.matches({"metadata.name": name}) for r in self.fields))


def _requirements(items: Any) -> tuple[NodeRequirement, ...]:
    out = []
    for item in items or ():
        if isinstance(item, Mapping):
            out.append(NodeRequirement(str(item.get("key", "")), str(item.get("operator", "")),
                                       tuple(str(v) for v in item.get("values") or ())))
    return tuple(out)


def node_term(term: Any) -> NodeTerm:
    term = term if isinstance(term, Mapping) else {}
    return NodeTerm(_requirements(term.get("matchExpressions")),
                    _requirements(term.get("matchFields")))


NamespaceLabels = Mapping[str, Mapping[str, str]]  # namespace name -> its labels


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A ``PodAffinityTerm`` resolved against the pod that carries it (kube's
    ``AffinityTerm``): the listed ``namespaces`` (the pod's own when neither a list nor a
    selector is given) and the namespaces ``ns_selector`` selects (``{}``: every one)."""

    selector: LabelSelector
    namespaces: frozenset[str]
    ns_selector: LabelSelector | None
    topology_key: str
    weight: int = 0

    def matches(self, pod: PodInfo, ns_labels: NamespaceLabels) -> bool:
        """``AffinityTerm.Matches``: namespace (listed or selected) and labels."""
        if pod.namespace not in self.namespaces and (
                self.ns_selector is None
                or not self.ns_selector.matches(ns_labels.get(pod.namespace, {}))):
            return False
        return self.selector.matches(pod.labels)


def _selector(sel: Any, labels: Mapping[str, str], match_keys: Any = None,
              mismatch_keys: Any = None) -> LabelSelector:
    """A term's selector with ``matchLabelKeys``/``mismatchLabelKeys`` merged in (as the API
    server merges them for affinity, and PodTopologySpread does); nil selects nothing."""
    if not isinstance(sel, Mapping):
        return _NOTHING
    try:
        base = label_selector_from_match(sel)
    except SelectorError:
        return _NOTHING
    extra: dict[str, Any] = {"matchExpressions": []}
    for key in match_keys or ():
        if key in labels:
            extra["matchExpressions"].append(
                {"key": key, "operator": "In", "values": [labels[key]]})
    for key in mismatch_keys or ():
        if key in labels:
            extra["matchExpressions"].append(
                {"key": key, "operator": "NotIn", "values": [labels[key]]})
    if not extra["matchExpressions"]:
        return base
    try:
        more = label_selector_from_match(extra)
    except SelectorError:
        return base
    return LabelSelector(base.requirements + more.requirements)


_NOTHING = LabelSelector(label_selector_from_match(
    {"matchExpressions": [{"key": "kubewire.internal/nothing", "operator": "Exists"},
                          {"key": "kubewire.internal/nothing", "operator": "DoesNotExist"}]}
).requirements)


def _pod_terms(items: Any, namespace: str, labels: Mapping[str, str],
               weighted: bool = False) -> tuple[PodAffinityTerm, ...]:
    out = []
    for item in items or ():
        if not isinstance(item, Mapping):
            continue
        weight = int(item.get("weight") or 0) if weighted else 0
        term = item.get("podAffinityTerm") if weighted else item
        if not isinstance(term, Mapping):
            continue
        namespaces = frozenset(str(n) for n in term.get("namespaces") or ())
        ns_selector: LabelSelector | None = None
        raw = term.get("namespaceSelector")
        if isinstance(raw, Mapping):
            try:
                ns_selector = label_selector_from_match(raw)
            except SelectorError:
                ns_selector = _NOTHING
        elif not namespaces:
            namespaces = frozenset({namespace})
        out.append(PodAffinityTerm(
            _selector(term.get("labelSelector"), labels, term.get("matchLabelKeys"),
                      term.get("mismatchLabelKeys")),
            namespaces, ns_selector, str(term.get("topologyKey") or ""), weight))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A ``TopologySpreadConstraint`` with its selector (``matchLabelKeys`` merged)."""

    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule
    selector: LabelSelector
    min_domains: int
    honor_affinity: bool  # nodeAffinityPolicy (default Honor)
    honor_taints: bool  # nodeTaintsPolicy (default Ignore)


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or "0.0.0.0" in (self.ip, other.ip)


@dataclass(slots=True)
class PodInfo:
    """A Pod as the scheduler reads it."""

    key: str
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    priority: int
    scheduler_name: str
    node_name: str
    gated: bool
    terminating: bool
    preempt_never: bool
    requests: dict[str, int]
    nonzero: dict[str, int]
    tolerations: tuple[Toleration, ...]
    node_selector: dict[str, str]
    required_terms: tuple[NodeTerm, ...] | None  # None: no required node affinity
    preferred_terms: tuple[tuple[int, NodeTerm], ...]
    affinity: tuple[PodAffinityTerm, ...]
    anti_affinity: tuple[PodAffinityTerm, ...]
    preferred_affinity: tuple[PodAffinityTerm, ...]
    preferred_anti_affinity: tuple[PodAffinityTerm, ...]
    spread: tuple[SpreadConstraint, ...]
    host_ports: tuple[HostPort, ...]
    obj: Obj = field(repr=False)
    # the hot numbers as attributes (filters and scores read them for every node)
    cpu: int = 0
    memory: int = 0
    ephemeral: int = 0
    nz_cpu: int = 0
    nz_memory: int = 0
    scalars: bool = False  # requests anything but cpu, memory, ephemeral-storage
    node_names: frozenset[str] | None = None  # NodeAffinity's PreFilterResult

    def __post_init__(self) -> None:
        self.node_names = prefilter_node_names(self.required_terms)
        self.cpu = self.requests.get(CPU, 0)
        self.memory = self.requests.get(MEMORY, 0)
        self.ephemeral = self.requests.get(EPHEMERAL, 0)
        self.nz_cpu = self.nonzero.get(CPU, 0)
        self.nz_memory = self.nonzero.get(MEMORY, 0)
        self.scalars = any(v for k, v in self.requests.items()
                           if k not in (CPU, MEMORY, EPHEMERAL, PODS))

    def matches_node_affinity(self, labels: Mapping[str, str], name: str) -> bool:
        """``nodeSelector`` and the required node affinity (``RequiredNodeAffinity.Match``)."""
        for key, value in self.node_selector.items():
            if labels.get(key) != value:
                return False
        if self.required_terms is None:
            return True
        return any(term.matches(labels, name) for term in self.required_terms)


def prefilter_node_names(terms: tuple[NodeTerm, ...] | None) -> frozenset[str] | None:
    """NodeAffinity's PreFilter: when every required term names nodes (``matchFields``
    ``metadata.name In``, intersected within a term), only those nodes (the union) can fit,
    as for DaemonSet pods; None: any node may."""
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        in_term: set[str] | None = None
        for req in term.fields:
            if req.key == "metadata.name" and req.operator == "In":
                in_term = set(req.values) if in_term is None else in_term & set(req.values)
        if in_term is None:
            return None  # this term may match any node: the terms are ORed
        names |= in_term
    return frozenset(names) if names else None


def pod_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_info(obj: Obj) -> PodInfo:
    """Parse a Pod dict once."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    namespace = str(meta.get("namespace") or "")
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    affinity = spec.get("affinity") or {}
    node_aff = affinity.get("nodeAffinity") or {}
    required = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    required_terms = (None if not isinstance(required, Mapping)
                      else tuple(node_term(t) for t in required.get("nodeSelectorTerms") or ()))
    preferred = tuple(
        (int(p.get("weight") or 0), node_term(p.get("preference")))
        for p in node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        if isinstance(p, Mapping))
    pod_aff = affinity.get("podAffinity") or {}
    anti = affinity.get("podAntiAffinity") or {}
    tolerations = tuple(
        Toleration(str(t.get("key") or ""), str(t.get("operator") or ""),
                   str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in spec.get("tolerations") or () if isinstance(t, Mapping))
    spread = []
    for c in spec.get("topologySpreadConstraints") or ():
        if not isinstance(c, Mapping):
            continue
        spread.append(SpreadConstraint(
            int(c.get("maxSkew") or 1), str(c.get("topologyKey") or ""),
            c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule",
            _selector(c.get("labelSelector"), labels, c.get("matchLabelKeys")),
            int(c.get("minDomains") or 1),
            c.get("nodeAffinityPolicy", "Honor") != "Ignore",
            c.get("nodeTaintsPolicy", "Ignore") == "Honor"))
    ports = []
    for container in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ()):
        for port in (container.get("ports") or ()) if isinstance(container, Mapping) else ():
            if isinstance(port, Mapping) and int(port.get("hostPort") or 0) > 0:
                ports.append(HostPort(str(port.get("hostIP") or "0.0.0.0"),
                                      str(port.get("protocol") or "TCP"), int(port["hostPort"])))
    requests = pod_requests(spec)
    return PodInfo(
        key=f"{namespace}/{meta.get('name', '')}", namespace=namespace,
        name=str(meta.get("name") or ""), uid=str(meta.get("uid") or ""), labels=labels,
        priority=int(spec.get("priority") or 0),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        node_name=str(spec.get("nodeName") or ""),
        gated=bool(spec.get("schedulingGates")),
        terminating=meta.get("deletionTimestamp") is not None,
        preempt_never=spec.get("preemptionPolicy") == "Never",
        requests=requests, nonzero=pod_requests(spec, nonzero=True),
        tolerations=tolerations,
        node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
        required_terms=required_terms, preferred_terms=preferred,
        affinity=_pod_terms(pod_aff.get("requiredDuringSchedulingIgnoredDuringExecution"),
                            namespace, labels),
        anti_affinity=_pod_terms(anti.get("requiredDuringSchedulingIgnoredDuringExecution"),
                                 namespace, labels),
        preferred_affinity=_pod_terms(
            pod_aff.get("preferredDuringSchedulingIgnoredDuringExecution"), namespace, labels,
            weighted=True),
        preferred_anti_affinity=_pod_terms(
            anti.get("preferredDuringSchedulingIgnoredDuringExecution"), namespace, labels,
            weighted=True),
        spread=tuple(spread), host_ports=tuple(ports), obj=obj)


@dataclass(slots=True)
class NodeInfo:
    """A Node and the pods assigned to it (``framework.NodeInfo``)."""

    name: str
    labels: dict[str, str]
    unschedulable: bool
    hard_taints: tuple[Taint, ...]  # NoSchedule and NoExecute
    soft_taints: tuple[Taint, ...]  # PreferNoSchedule
    allocatable: dict[str, int]
    requested: dict[str, int] = field(default_factory=dict)
    nonzero: dict[str, int] = field(default_factory=lambda: {CPU: 0, MEMORY: 0})
    pods: dict[str, PodInfo] = field(default_factory=dict)
    ports: list[HostPort] = field(default_factory=list)
    with_affinity: int = 0  # pods here with any pod (anti-)affinity
    # the hot numbers as attributes: allocatable, and what the pods here request
    alloc_cpu: int = 0
    alloc_memory: int = 0
    alloc_ephemeral: int = 0
    alloc_pods: int = 0
    cpu: int = 0
    memory: int = 0
    ephemeral: int = 0
    nz_cpu: int = 0
    nz_memory: int = 0

    def __post_init__(self) -> None:
        self.set_allocatable(self.allocatable)

    def set_allocatable(self, allocatable: dict[str, int]) -> None:
        self.allocatable = allocatable
        self.alloc_cpu = allocatable.get(CPU, 0)
        self.alloc_memory = allocatable.get(MEMORY, 0)
        self.alloc_ephemeral = allocatable.get(EPHEMERAL, 0)
        self.alloc_pods = allocatable.get(PODS, 0)

    def _sync(self) -> None:
        self.cpu = self.requested.get(CPU, 0)
        self.memory = self.requested.get(MEMORY, 0)
        self.ephemeral = self.requested.get(EPHEMERAL, 0)
        self.nz_cpu = self.nonzero.get(CPU, 0)
        self.nz_memory = self.nonzero.get(MEMORY, 0)

    def add_pod(self, pod: PodInfo) -> None:
        if pod.key in self.pods:
            self.remove_pod(pod.key)
        self.pods[pod.key] = pod
        _add(self.requested, pod.requests)
        _add(self.nonzero, pod.nonzero)
        self._sync()
        self.ports.extend(pod.host_ports)
        if has_pod_affinity(pod):
            self.with_affinity += 1

    def remove_pod(self, key: str) -> PodInfo | None:
        pod = self.pods.pop(key, None)
        if pod is None:
            return None
        for name, value in pod.requests.items():
            self.requested[name] = self.requested.get(name, 0) - value
        for name, value in pod.nonzero.items():
            self.nonzero[name] = self.nonzero.get(name, 0) - value
        self._sync()
        for port in pod.host_ports:
            self.ports.remove(port)
        if has_pod_affinity(pod):
            self.with_affinity -= 1
        return pod

    def scalar_names(self) -> list[str]:
        return [n for n in self.allocatable if n not in _NOT_SCALAR]


def has_pod_affinity(pod: PodInfo) -> bool:
    return bool(pod.affinity or pod.anti_affinity or pod.preferred_affinity
                or pod.preferred_anti_affinity)


def node_info(obj: Obj) -> NodeInfo:
    """Parse a Node dict (pods are added separately)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    taints = [Taint(str(t.get("key") or ""), str(t.get("value") or ""),
                    str(t.get("effect") or ""))
              for t in spec.get("taints") or () if isinstance(t, Mapping)]
    return NodeInfo(
        name=str(meta.get("name") or ""),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        unschedulable=bool(spec.get("unschedulable")),
        hard_taints=tuple(t for t in taints if t.effect in (NO_SCHEDULE, NO_EXECUTE)),
        soft_taints=tuple(t for t in taints if t.effect == PREFER_NO_SCHEDULE),
        allocatable=resource_list(status.get("allocatable")))
