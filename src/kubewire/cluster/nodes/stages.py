"""kwok's ``Stage`` (``kwok.x-k8s.io/v1alpha1``), read as kwok writes it, and the choice of stage.

A Stage says, for one kind (``spec.resourceRef``), which objects it applies to (``spec.selector``:
``matchLabels``, ``matchAnnotations``, ``matchExpressions`` whose keys are jq expressions, see
``query``), how long to wait (``spec.delay``: ``durationMilliseconds``, ``durationFrom``,
``jitterDurationMilliseconds``, ``jitterDurationFrom``; the wait is uniform between duration and
jitter, as kwok's ``lifecycle.Delay``) and what to do then (``spec.next``: ``statusTemplate``,
``event``, ``finalizers``, ``delete``; or ``spec.steps``, read the same way). ``spec.weight``
chooses among several matching stages.

kwok renders ``statusTemplate`` with Go templates; ``gotemplate`` renders the part of Go's
template language kwok's own stage files use. The stages built in (``default_pod_stages``) keep
kwok's data form for selectors and delays, but their status comes from ``pod_status`` builders
(``Next.status_builder``, named in ``statusBuilder``) rather than a template: they write what a
real kubelet writes (§13.2 of the reference: ``PodReadyToStartContainers``, ``containerID``,
``imageID``, ``started``, the ``ContainerCreating`` step), which kwok's fast templates omit.

Pure: no I/O.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import yaml

from kubewire.cluster.nodes.query import Query, QueryError, compile_query

Obj = dict[str, Any]
API_VERSION = "kwok.x-k8s.io/v1alpha1"
OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
MAX_STAGES = 256  # a stage file is configuration, but still bounded
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class StageError(ValueError):
    """A Stage that cannot be read (the message names the stage and field)."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: Query
    operator: str
    values: tuple[str, ...]

    def matches(self, obj: Obj) -> bool:
        found = [v for v in self.key(obj) if v is not None]
        if self.operator == "Exists":
            return bool(found)
        if self.operator == "DoesNotExist":
            return not found
        hit = any(_text(v) in self.values for v in found)
        return hit if self.operator == "In" else not hit


@dataclass(frozen=True, slots=True)
class Selector:
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    expressions: tuple[Requirement, ...] = ()

    def matches(self, obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        return (all(labels.get(k) == v for k, v in self.labels.items())
                and all(annotations.get(k) == v for k, v in self.annotations.items())
                and all(r.matches(obj) for r in self.expressions))


@dataclass(frozen=True, slots=True)
class Delay:
    duration_ms: int = 0
    duration_from: Query | None = None
    jitter_ms: int | None = None
    jitter_from: Query | None = None

    def seconds(self, obj: Obj, now: float, rng: random.Random) -> float:
        """kwok's delay: the duration (or ``durationFrom``), raised uniformly towards the jitter
        (or ``jitterDurationFrom``) when that is larger."""
        base = _from(self.duration_from, obj, now)
        duration = base if base is not None else self.duration_ms / 1000
        jitter = _from(self.jitter_from, obj, now)
        if jitter is None and self.jitter_ms is not None:
            jitter = self.jitter_ms / 1000
        if jitter is not None and jitter > duration:
            return max(0.0, rng.uniform(duration, jitter))
        return max(0.0, duration)


@dataclass(frozen=True, slots=True)
class EventSpec:
    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Finalizers:
    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    empty: bool = False


@dataclass(frozen=True, slots=True)
class Next:
    status_template: str | None = None
    status_builder: str | None = None  # built-in stages: a ``pod_status`` builder's name
    event: EventSpec | None = None
    finalizers: Finalizers | None = None
    delete: bool = False


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    api_group: str
    kind: str
    selector: Selector
    delay: Delay
    next: Next
    weight: int = 0

    def matches(self, obj: Obj) -> bool:
        return self.selector.matches(obj)


def parse_go_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (``"1m30s"``, ``"250ms"``, ``"-2s"``) in seconds."""
    raw = text.strip()
    sign = -1.0 if raw.startswith("-") else 1.0
    raw = raw.lstrip("+-")
    if raw == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(raw):
        found = _DURATION.match(raw, pos)
        if not found:
            raise ValueError(f"time: invalid duration {text!r}")
        total += float(found.group(1)) * _UNIT_S[found.group(2)]
        pos = found.end()
    if not raw:
        raise ValueError(f"time: invalid duration {text!r}")
    return sign * total


def _from(query: Query | None, obj: Obj, now: float) -> float | None:
    """kwok's ``durationFrom``: a time (the wait until it) or a Go duration string."""
    if query is None:
        return None
    for value in query(obj):
        if not isinstance(value, str) or not value:
            continue
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() - now
        except ValueError:
            pass
        try:
            return parse_go_duration(value)
        except ValueError:
            continue
    return None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


# --- reading ----------------------------------------------------------------------------------


def load_stages(text: str) -> list[Stage]:
    """Every ``Stage`` document of a YAML stream (other kinds are skipped, as ``kwok`` skips
    the non-Stage documents of a configuration file)."""
    stages = []
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as err:
        raise StageError(f"stage file is not YAML: {err}") from err
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "Stage":
            stages.append(parse_stage(doc))
            if len(stages) > MAX_STAGES:
                raise StageError(f"more than {MAX_STAGES} stages")
    return stages


def parse_stage(doc: Mapping[str, Any]) -> Stage:
    name = str((doc.get("metadata") or {}).get("name") or "")
    if doc.get("apiVersion") != API_VERSION:
        raise StageError(f"stage {name!r}: apiVersion must be {API_VERSION}")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise StageError(f"stage {name!r}: spec is required")
    ref = spec.get("resourceRef") or {}
    kind = str(ref.get("kind") or "")
    if not kind:
        raise StageError(f"stage {name!r}: spec.resourceRef.kind is required")
    try:
        selector = _selector(spec.get("selector") or {})
        delay = _delay(spec.get("delay") or {})
    except QueryError as err:
        raise StageError(f"stage {name!r}: {err}") from err
    steps = spec.get("steps")
    raw_next = spec.get("next") or {}
    if steps and not raw_next:
        raw_next = _merge_steps(name, steps)
    return Stage(name, str(ref.get("apiGroup") or "v1"), kind, selector, delay,
                 _next(name, raw_next), int(spec.get("weight") or 0))


def _selector(raw: Mapping[str, Any]) -> Selector:
    expressions = []
    for item in raw.get("matchExpressions") or ():
        operator = item.get("operator")
        if operator not in OPERATORS:
            raise QueryError(f"unsupported operator {operator!r}")
        expressions.append(Requirement(compile_query(str(item.get("key") or "")), operator,
                                       tuple(_text(v) for v in item.get("values") or ())))
    return Selector({str(k): str(v) for k, v in (raw.get("matchLabels") or {}).items()},
                    {str(k): str(v) for k, v in (raw.get("matchAnnotations") or {}).items()},
                    tuple(expressions))


def _expression_from(raw: Any) -> Query | None:
    if not isinstance(raw, dict) or not raw.get("expressionFrom"):
        return None
    return compile_query(str(raw["expressionFrom"]))


def _delay(raw: Mapping[str, Any]) -> Delay:
    jitter = raw.get("jitterDurationMilliseconds")
    return Delay(int(raw.get("durationMilliseconds") or 0),
                 _expression_from(raw.get("durationFrom")), None if jitter is None else int(jitter),
                 _expression_from(raw.get("jitterDurationFrom")))


def _next(name: str, raw: Mapping[str, Any]) -> Next:
    event = raw.get("event")
    finalizers = raw.get("finalizers")
    if raw.get("patches"):
        raise StageError(f"stage {name!r}: next.patches is not supported (use statusTemplate)")
    return Next(
        status_template=raw.get("statusTemplate"),
        status_builder=raw.get("statusBuilder"),
        event=None if not event else EventSpec(str(event.get("type") or "Normal"),
                                               str(event.get("reason") or ""),
                                               str(event.get("message") or "")),
        finalizers=None if not finalizers else Finalizers(
            tuple(f["value"] for f in finalizers.get("add") or ()),
            tuple(f["value"] for f in finalizers.get("remove") or ()),
            bool(finalizers.get("empty"))),
        delete=bool(raw.get("delete")))


def _merge_steps(name: str, steps: Sequence[Mapping[str, Any]]) -> Obj:
    """``spec.steps`` as one ``next`` (status-template patches, an event, finalizers, delete)."""
    merged: Obj = {}
    for step in steps:
        patch = step.get("patch")
        if patch:
            if patch.get("subresource") != "status" or patch.get("root") not in (None, "status"):
                raise StageError(f"stage {name!r}: only status patches are supported in steps")
            merged["statusTemplate"] = patch.get("template")
        for key in ("event", "finalizers", "delete"):
            if step.get(key):
                merged[key] = step[key]
    return merged


def choose(stages: Iterable[Stage], obj: Obj, rng: random.Random) -> Stage | None:
    """The stage for ``obj``: the first matching one, or a weighted choice when several match
    with weights (kwok's choice)."""
    matching = [s for s in stages if s.matches(obj)]
    if len(matching) <= 1:
        return matching[0] if matching else None
    weighted = [s for s in matching if s.weight > 0]
    if not weighted:
        return matching[0]
    return rng.choices(weighted, weights=[s.weight for s in weighted])[0]


# --- the built-in stages ----------------------------------------------------------------------

ANNOTATION_RUN = "kubewire.io/run-duration"  # a Go duration: containers exit after it
ANNOTATION_EXIT = "kubewire.io/exit-code"  # the exit code they exit with (default 0)
ANNOTATION_NOT_READY = "kubewire.io/not-ready"  # "true": readiness probes fail
ANNOTATION_TERMINATION = "kubewire.io/termination-duration"  # how long SIGTERM takes
ANNOTATION_LIVENESS = "kubewire.io/liveness-fail"  # "true": liveness probes fail (restarts)
NOT_DELETED = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
DELETED = {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
NOT_TERMINAL = {"key": ".status.phase", "operator": "NotIn", "values": ["Succeeded", "Failed"]}
TERMINAL = {"key": ".status.phase", "operator": "In", "values": ["Succeeded", "Failed"]}
RUNNING = {"key": ".status.phase", "operator": "In", "values": ["Running"]}
READY_TRUE = {"key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
              "operator": "In", "values": ["True"]}
READY_FALSE = {**READY_TRUE, "values": ["False"]}
READY_FALSE_UNREADY = {"key": '.status.conditions.[] | select( .type == "Ready" ) | .reason',
                       "operator": "In", "values": ["ContainersNotReady"]}
NOT_READY_ANNOTATED = {"key": f'.metadata.annotations["{ANNOTATION_NOT_READY}"]',
                       "operator": "In", "values": ["true"]}
RUN_ONCE = {"key": ".spec.restartPolicy", "operator": "In", "values": ["Never", "OnFailure"]}


def _stage(name: str, expressions: list[Obj], next_: Obj, delay: Obj | None = None) -> Obj:
    return {"apiVersion": API_VERSION, "kind": "Stage", "metadata": {"name": name},
            "spec": {"resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                     "selector": {"matchExpressions": expressions},
                     "delay": delay or {}, "next": next_}}


DEFAULT_POD_STAGES: tuple[Obj, ...] = (
    # the kubelet's first status: Pending, ContainerCreating, hostIP, startTime
    _stage("pod-create", [NOT_DELETED, {"key": ".status.startTime", "operator": "DoesNotExist"}],
           {"statusBuilder": "pending"}),
    # sandbox, pulls, containers started: Running (Ready unless readiness is made to fail)
    _stage("pod-ready", [NOT_DELETED, {"key": ".status.phase", "operator": "In",
                                       "values": ["Pending"]},
                         {"key": ".status.startTime", "operator": "Exists"}],
           {"statusBuilder": "running"},
           {"durationMilliseconds": 100, "jitterDurationMilliseconds": 400}),
    # kwok's pod-complete: a Job's pod exits 0 once it runs
    _stage("pod-complete", [NOT_DELETED, RUNNING, RUN_ONCE,
                            {"key": ".metadata.ownerReferences.[].kind", "operator": "In",
                             "values": ["Job"]}],
           {"statusBuilder": "exited"},
           {"durationMilliseconds": 1000, "durationFrom": {
               "expressionFrom": f'.metadata.annotations["{ANNOTATION_RUN}"]'}}),
    # any pod told how long its containers run (then they exit: done, failed or restarted)
    _stage("pod-run", [NOT_DELETED, RUNNING,
                       {"key": f'.metadata.annotations["{ANNOTATION_RUN}"]',
                        "operator": "Exists"}],
           {"statusBuilder": "exited"},
           {"durationFrom": {"expressionFrom": f'.metadata.annotations["{ANNOTATION_RUN}"]'}}),
    # readiness probes start failing (annotated), or pass again (annotation gone)
    _stage("pod-unready", [NOT_DELETED, RUNNING, READY_TRUE, NOT_READY_ANNOTATED],
           {"statusBuilder": "readiness"}, {"durationMilliseconds": 100}),
    _stage("pod-ready-again", [NOT_DELETED, RUNNING, READY_FALSE, READY_FALSE_UNREADY,
                               {**NOT_READY_ANNOTATED, "operator": "NotIn"}],
           {"statusBuilder": "readiness"}, {"durationMilliseconds": 100}),
    # liveness probes fail (annotated): the kubelet kills and restarts the containers
    _stage("pod-liveness-fail", [NOT_DELETED, RUNNING,
                                 {"key": f'.metadata.annotations["{ANNOTATION_LIVENESS}"]',
                                  "operator": "In", "values": ["true"]}],
           {"statusBuilder": "liveness_failed"},
           {"durationMilliseconds": 1000, "jitterDurationMilliseconds": 2000}),
    # graceful deletion: SIGTERM, containers exit, the terminal phase is written
    _stage("pod-terminate", [DELETED, NOT_TERMINAL], {"statusBuilder": "terminated"},
           {"durationMilliseconds": 100, "jitterDurationMilliseconds": 300,
            "durationFrom": {"expressionFrom":
                             f'.metadata.annotations["{ANNOTATION_TERMINATION}"]'}}),
    # then the kubelet deletes it with grace 0 (a UID precondition; finalizers are left alone)
    _stage("pod-delete", [DELETED, TERMINAL], {"delete": True}),
)


def default_pod_stages() -> list[Stage]:
    return [parse_stage(doc) for doc in DEFAULT_POD_STAGES]
