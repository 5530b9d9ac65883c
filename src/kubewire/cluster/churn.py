"""The churn plan behind ``kubewire simulate``: which write to make next, and when.

Pure: a seeded ``random.Random`` picks each operation (create, scale, update, delete) and kind
(Deployment, Pod, Service, ConfigMap) by the mix weights, among the operations that are possible
now (nothing to scale before a Deployment exists; no create once ``max_objects`` are held), and
builds the object or patch to send. The plan tracks what exists from the outcomes the runner
reports back (``settle``), so an operation that failed does not count as done. ``due(i)`` is when
the i-th operation is due at the chosen rate (open loop: a slow answer does not slow the pace).
Written here rather than taken from a load tool because the operations are kube objects with
kube's shapes (an image change on a Deployment is a rollout) and the tool must run against any
server through ``kubewire.client``. The runner is ``churn_runner``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

KINDS = ("Deployment", "Pod", "Service", "ConfigMap")
OPS = ("create", "scale", "update", "delete")
API_VERSIONS = {"Deployment": "apps/v1", "Pod": "v1", "Service": "v1", "ConfigMap": "v1"}
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "kubewire-simulate"
RUN_LABEL = "kubewire.io/simulate-run"
IMAGES = ("nginx:1.27", "nginx:1.26", "nginx:1.25", "busybox:1.36", "registry.k8s.io/pause:3.10")
DEFAULT_OP_WEIGHTS = {"create": 4.0, "scale": 2.0, "update": 2.0, "delete": 2.0}
DEFAULT_KIND_WEIGHTS = {"Deployment": 2.0, "Pod": 1.0, "Service": 1.0, "ConfigMap": 2.0}
MAX_REPLICAS = 5


def parse_weights(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """``create=4,delete=1`` → weights for ``names`` (unnamed ones keep 0; names match
    case-insensitively). ``ValueError`` for an unknown name, a bad number or all zero."""
    lower = {n.lower(): n for n in names}
    out = dict.fromkeys(names, 0.0)
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        name = lower.get(key.strip().lower())
        if not sep or name is None:
            raise ValueError(f"expected NAME=WEIGHT with NAME one of {', '.join(names)}: {part}")
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"not a number: {part}") from None
        if not weight >= 0 or weight == float("inf"):
            raise ValueError(f"a weight is a finite number, 0 or more: {part}")
        out[name] = weight
    if not any(out.values()):
        raise ValueError("at least one weight must be above 0")
    return out


@dataclass(frozen=True, slots=True)
class ChurnOptions:
    """What to do: at ``rate`` operations a second, in ``namespaces``, holding at most
    ``max_objects`` objects (all kinds together), for ``duration`` seconds (None: until
    stopped) or ``max_ops`` operations (None: no limit)."""

    rate: float = 10.0
    namespaces: tuple[str, ...] = ("default",)
    max_objects: int = 100
    duration: float | None = None
    max_ops: int | None = None
    seed: int = 0
    run_id: str = "0"
    op_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_OP_WEIGHTS))
    kind_weights: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_KIND_WEIGHTS))


@dataclass(frozen=True, slots=True)
class Op:
    """One write: ``verb`` create (``body``), patch (``body`` a strategic merge patch: scale,
    update) or delete; ``op`` is what the plan meant (create/scale/update/delete)."""

    op: str
    kind: str
    namespace: str
    name: str
    body: Obj | None = None

    @property
    def api_version(self) -> str:
        return API_VERSIONS[self.kind]


def labels(run_id: str, app: str) -> dict[str, str]:
    """Every object the plan makes carries these (``--cleanup`` finds them by the first two)."""
    return {MANAGED_BY: MANAGER, RUN_LABEL: run_id, "app": app}


def selector(run_id: str | None = None) -> str:
    """The label selector of the objects ``kubewire simulate`` made (of one run, if given)."""
    return f"{MANAGED_BY}={MANAGER}" + (f",{RUN_LABEL}={run_id}" if run_id else "")


def _container(image: str) -> Obj:
    return {"name": "app", "image": image}


def manifest(kind: str, namespace: str, name: str, run_id: str, rng: random.Random) -> Obj:
    """A small object of ``kind`` such as ``kubectl create`` would make."""
    meta: Obj = {"name": name, "namespace": namespace, "labels": labels(run_id, name)}
    image = rng.choice(IMAGES)
    if kind == "Deployment":
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "replicas": rng.randint(1, 3),
            "selector": {"matchLabels": {"app": name}},
            # the pods carry only ``app``: ours are the objects the plan made, not their pods
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [_container(image)]}}}}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"containers": [_container(image)]}}
    if kind == "Service":
        return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {
            "selector": {"app": name},
            "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}}
    if kind == "ConfigMap":
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                "data": {"version": "0", "value": f"{rng.getrandbits(32):08x}"}}
    raise ValueError(f"unknown kind {kind}")


def update_patch(kind: str, rng: random.Random, step: int) -> Obj:
    """A strategic merge patch that changes ``kind``'s content: a new image (a Deployment's is
    a rollout), a ConfigMap's data, a Service's annotation."""
    image = rng.choice(IMAGES)
    if kind == "Deployment":
        return {"spec": {"template": {"spec": {"containers": [_container(image)]}}}}
    if kind == "Pod":
        return {"spec": {"containers": [_container(image)]}}
    if kind == "ConfigMap":
        return {"data": {"version": str(step), "value": f"{rng.getrandbits(32):08x}"}}
    return {"metadata": {"annotations": {"kubewire.io/simulate-step": str(step)}}}


class ChurnPlan:
    """The sequence of operations for one run; ``next()`` the next one, ``settle()`` its
    outcome (an object counts against the bound from its create's sending until its delete's
    answer, so the server never holds more than the bound whatever the answers' order)."""

    def __init__(self, options: ChurnOptions) -> None:
        if options.rate <= 0:
            raise ValueError("the rate must be above 0")
        if not options.namespaces:
            raise ValueError("at least one namespace")
        self.options = options
        self.rng = random.Random(options.seed)
        self.live: dict[str, list[tuple[str, str]]] = {k: [] for k in KINDS}
        self.pending_creates = 0
        self.busy: set[tuple[str, str, str]] = set()
        self.issued = 0
        self._names = 0

    def held(self) -> int:
        """Objects that exist or whose create is in flight (the bound counts both)."""
        return sum(len(v) for v in self.live.values()) + self.pending_creates

    def due(self, index: int) -> float:
        """Seconds after the start that operation ``index`` (from 0) is due."""
        return index / self.options.rate

    def done(self, due: float) -> bool:
        """Whether the run is over before a slot ``due`` seconds after the start (the slot is
        at or past the duration, or ``max_ops`` were issued)."""
        o = self.options
        return ((o.duration is not None and due >= o.duration)
                or (o.max_ops is not None and self.issued >= o.max_ops))

    def _choices(self) -> list[tuple[str, str, float]]:
        o = self.options
        out: list[tuple[str, str, float]] = []
        for kind in KINDS:
            kw = o.kind_weights.get(kind, 0.0)
            if kw <= 0:
                continue
            free = [x for x in self.live[kind] if (kind, *x) not in self.busy]
            for op in OPS:
                w = o.op_weights.get(op, 0.0) * kw
                if w <= 0:
                    continue
                if op == "create" and self.held() >= o.max_objects:
                    continue
                if op != "create" and not free:
                    continue
                if op == "scale" and kind != "Deployment":
                    continue
                out.append((op, kind, w))
        return out

    def next(self) -> Op | None:
        """The next operation, or None when none is possible now (at the bound with
        nothing to delete, say): the runner skips that slot."""
        choices = self._choices()
        if not choices:
            return None
        total = sum(w for _, _, w in choices)
        pick = self.rng.random() * total
        op, kind, _ = choices[-1]
        for o, k, w in choices:
            if pick < w:
                op, kind = o, k
                break
            pick -= w
        self.issued += 1
        run = self.options.run_id
        if op == "create":
            self._names += 1
            namespace = self.rng.choice(self.options.namespaces)
            name = f"sim-{run}-{kind.lower()[:6]}-{self._names}"
            self.pending_creates += 1
            return Op("create", kind, namespace, name,
                      manifest(kind, namespace, name, run, self.rng))
        free = [x for x in self.live[kind] if (kind, *x) not in self.busy]
        namespace, name = self.rng.choice(free)
        self.busy.add((kind, namespace, name))
        if op == "delete":  # held until the answer: the server never holds more than the bound
            return Op("delete", kind, namespace, name)
        if op == "scale":
            return Op("scale", kind, namespace, name,
                      {"spec": {"replicas": self.rng.randint(0, MAX_REPLICAS)}})
        return Op("update", kind, namespace, name, update_patch(kind, self.rng, self.issued))

    def settle(self, op: Op, ok: bool, gone: bool = False) -> None:
        """The answer to ``op``: ``ok`` whether it succeeded, ``gone`` whether the server said
        the object does not exist (404: someone else deleted it; forget it)."""
        key = (op.namespace, op.name)
        self.busy.discard((op.kind, *key))
        if op.op == "create":
            self.pending_creates -= 1
            if ok:
                self.live[op.kind].append(key)
        elif (gone or (ok and op.op == "delete")) and key in self.live[op.kind]:
            self.live[op.kind].remove(key)
