"""The DaemonSet controller's pure decisions (kube's ``pkg/controller/daemon``
``daemon_controller.go``, ``update.go`` and ``util/daemonset_util.go``): which nodes should run
a daemon pod, the pod a node gets, the rolling-update budget, and status."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubewire.cluster.controllers import pod_state
from kubewire.cluster.controllers.history import REVISION_HASH_LABEL, controller_ref

Obj = dict[str, Any]
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "NoExecute"
# AddOrUpdateDaemonPodTolerations: (key, effect), operator Exists, no tolerationSeconds
DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", NO_EXECUTE),
    ("node.kubernetes.io/unreachable", NO_EXECUTE),
    ("node.kubernetes.io/disk-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/memory-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/pid-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/unschedulable", NO_SCHEDULE),
)
OMIT_EMPTY = ("numberAvailable", "numberUnavailable", "updatedNumberScheduled")
NETWORK_UNAVAILABLE = ("node.kubernetes.io/network-unavailable", NO_SCHEDULE)


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def template_spec(ds: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}


# --- tolerations and eligibility --------------------------------------------------------

def daemon_tolerations(pod_spec: Mapping[str, Any]) -> list[Obj]:
    """The template's tolerations with the DaemonSet's automatic ones added (replacing any with
    the same key and effect, as ``AddOrUpdateTolerationInPodSpec`` does)."""
    wanted = list(DAEMON_TOLERATIONS)
    if pod_spec.get("hostNetwork"):
        wanted.append(NETWORK_UNAVAILABLE)
    tolerations = [dict(t) for t in pod_spec.get("tolerations") or []]
    for key, effect in wanted:
        toleration = {"key": key, "operator": "Exists", "effect": effect}
        for i, old in enumerate(tolerations):
            if old.get("key") == key and old.get("effect") == effect:
                tolerations[i] = toleration
                break
        else:
            tolerations.append(toleration)
    return tolerations


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``Toleration.ToleratesTaint``."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]],
                effects: tuple[str, ...]) -> bool:
    return any(t.get("effect") in effects and not any(tolerates(o, t) for o in tolerations)
               for t in taints)


def _requirement(req: Mapping[str, Any], values_of: Mapping[str, str]) -> bool:
    """One ``NodeSelectorRequirement`` against labels (or fields)."""
    key, op = req.get("key", ""), req.get("operator", "")
    values = [str(v) for v in req.get("values") or []]
    present = key in values_of
    value = values_of.get(key, "")
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """A ``NodeSelectorTerm``: every expression and field requirement holds (an empty term
    matches nothing)."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    labels = labels_of(node)
    node_fields = {"metadata.name": name_of(node)}
    return all(_requirement(e, labels) for e in exprs) and all(
        _requirement(f, node_fields) for f in fields)


def fits_affinity(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """nodeSelector and required node affinity (``GetRequiredNodeAffinity().Match``)."""
    labels = labels_of(node)
    selector = pod_spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return True
    return any(term_matches(t, node) for t in required.get("nodeSelectorTerms") or [])


def should_run(ds: Mapping[str, Any], node: Mapping[str, Any]) -> tuple[bool, bool]:
    """``NodeShouldRunDaemonPod``: (should run a new pod, should keep an existing one)."""
    pod_spec = template_spec(ds)
    wanted_node = pod_spec.get("nodeName")
    if wanted_node and wanted_node != name_of(node):
        return False, False
    if not fits_affinity(pod_spec, node):
        return False, False
    taints = (node.get("spec") or {}).get("taints") or []
    tolerations = daemon_tolerations(pod_spec)
    if untolerated(taints, tolerations, (NO_SCHEDULE, NO_EXECUTE)):
        return False, not untolerated(taints, tolerations, (NO_EXECUTE,))
    return True, True


def _conditions_without_heartbeats(node: Mapping[str, Any]) -> list[tuple[str, str, str, str,
                                                                         str]]:
    conditions = (node.get("status") or {}).get("conditions") or []
    return sorted((str(c.get("type")), str(c.get("status")), str(c.get("reason")),
                   str(c.get("message")), str(c.get("lastTransitionTime")))
                  for c in conditions)


def node_update_ignorable(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """``shouldIgnoreNodeUpdate``: the same conditions apart from heartbeat times, and
    nothing else changed but the resourceVersion (and kubewire's managedFields stamps)."""
    if _conditions_without_heartbeats(old) != _conditions_without_heartbeats(new):
        return False

    def rest(node: Mapping[str, Any]) -> Obj:
        meta = {k: v for k, v in (node.get("metadata") or {}).items()
                if k not in ("resourceVersion", "managedFields")}
        status = {k: v for k, v in (node.get("status") or {}).items() if k != "conditions"}
        return {**node, "metadata": meta, "status": status}

    return rest(old) == rest(new)


# --- pods ------------------------------------------------------------------------------

def new_pod(ds: Mapping[str, Any], node_name: str, hash_: str) -> Obj:
    """``CreatePodTemplate`` + ``ReplaceDaemonSetPodNodeNameNodeAffinity``: the template with
    the revision labels, the tolerations and a required node affinity for exactly this node."""
    meta = ds.get("metadata") or {}
    template = copy.deepcopy(dict((ds.get("spec") or {}).get("template") or {}))
    pmeta = dict(template.get("metadata") or {})
    pmeta.pop("creationTimestamp", None)
    labels = dict(pmeta.get("labels") or {})
    labels[REVISION_HASH_LABEL] = hash_
    labels[TEMPLATE_GENERATION_LABEL] = str(meta.get("generation") or 0)
    pmeta.update({"generateName": f"{meta.get('name', '')}-", "labels": labels,
                  "namespace": meta.get("namespace"), "ownerReferences": [controller_ref(ds)]})
    pod_spec = dict(template.get("spec") or {})
    pod_spec["tolerations"] = daemon_tolerations(pod_spec)
    affinity = dict(pod_spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    affinity["nodeAffinity"] = node_affinity
    pod_spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pmeta, "spec": pod_spec}


def target_node(pod: Mapping[str, Any]) -> str:
    """``GetTargetNodeName``: ``spec.nodeName``, else the node of the metadata.name term."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution")) or {})
    for term in required.get("nodeSelectorTerms") or []:
        for req in term.get("matchFields") or []:
            values = req.get("values") or []
            if req.get("key") == "metadata.name" and req.get("operator") == "In" \
                    and len(values) == 1:
                return str(values[0])
    return ""


def terminating(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def ready(pod: Mapping[str, Any]) -> bool:
    return pod_state.ready(pod)


def availability(ds: Mapping[str, Any], now: float) -> Callable[[Mapping[str, Any]], bool]:
    """``IsPodAvailable`` with the set's ``minReadySeconds`` at ``now`` (not terminating)."""
    min_ready = pod_state.min_ready_seconds(ds)

    def available(pod: Mapping[str, Any]) -> bool:
        return not terminating(pod) and pod_state.available(pod, min_ready, now)

    return available


def is_updated(pod: Mapping[str, Any], hash_: str, generation: int) -> bool:
    """``IsPodUpdated``: the template generation label or the hash label is current."""
    labels = labels_of(pod)
    return (labels.get(TEMPLATE_GENERATION_LABEL) == str(generation)
            or labels.get(REVISION_HASH_LABEL) == hash_)


def oldest_first(pods: Iterable[Obj]) -> list[Obj]:
    return sorted(pods, key=lambda p: ((p.get("metadata") or {}).get("creationTimestamp") or "",
                                       name_of(p)))


@dataclass(slots=True)
class FailedPodBackoff:
    """``flowcontrol.Backoff`` for failed daemon pods per (set, node): the first kill is
    immediate, each further one waits a delay that doubles from ``initial_s`` to ``max_s``
    (reset after ``2 * max_s`` without failures)."""

    initial_s: float = 1.0
    max_s: float = 900.0
    entries: dict[str, tuple[float, float]] = field(default_factory=dict)  # delay, last

    def in_backoff(self, key: str, now: float) -> float:
        """Seconds still to wait before the next kill (0: go ahead)."""
        entry = self.entries.get(key)
        if entry is None:
            return 0.0
        delay, last = entry
        return max(0.0, last + delay - now)

    def next(self, key: str, now: float) -> None:
        """Record a kill at ``now``; the next one waits longer."""
        entry = self.entries.get(key)
        if entry is None or now - entry[1] > 2 * self.max_s:
            self.entries[key] = (self.initial_s, now)
        else:
            self.entries[key] = (min(self.max_s, entry[0] * 2), now)
        if len(self.entries) > 10000:  # bounded: forget the oldest
            oldest = min(self.entries, key=lambda k: self.entries[k][1])
            del self.entries[oldest]


# --- rolling update ----------------------------------------------------------------------

def int_or_percent(value: Any, total: int, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``."""
    if value is None:
        return 0
    if isinstance(value, str) and value.endswith("%"):
        scaled = int(value[:-1]) * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return int(value)


def surge_and_unavailable(ds: Mapping[str, Any], desired: int) -> tuple[int, int]:
    """``unavailableCount``/``surgeCount``: the budgets of a rolling update (unavailable at
    least 1 when surge is 0)."""
    rolling = (((ds.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {})
    surge = int_or_percent(rolling.get("maxSurge", 0), desired, True)
    unavailable = int_or_percent(rolling.get("maxUnavailable", 1), desired, True)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _surge_node(old: list[Obj], new: list[Obj],
                available: Callable[[Mapping[str, Any]], bool]) -> tuple[list[Obj], bool, int]:
    """One node of a surging update: (pods to delete, whether to start a new pod, 1 when it
    is surging with old and new pods both there)."""
    if new and any(available(p) for p in new):
        return old, False, 0
    if old and not new:
        if any(available(p) for p in old):
            return [], True, 0
        return old, False, 0  # nothing available to protect: replace at once
    return [], False, 1 if old and new else 0


@dataclass(frozen=True, slots=True)
class RollPlan:
    """What one rolling-update round does: pods to delete, nodes to get a new pod."""

    delete: list[Obj]
    create_on: list[str]


def roll(ds: Mapping[str, Any], node_pods: Mapping[str, list[Obj]], hash_: str,
         now: float) -> RollPlan:
    """``rollingUpdate``: with no surge, delete old pods (unavailable ones at once, available
    ones while fewer than maxUnavailable nodes are unavailable); with surge, start a new pod
    beside an available old one while fewer than maxSurge are surging, and delete the old pod
    once the new one is available."""
    generation = int((ds.get("metadata") or {}).get("generation") or 0)
    surge, max_unavailable = surge_and_unavailable(ds, len(node_pods))
    available = availability(ds, now)
    delete: list[Obj] = []
    create_on: list[str] = []
    unavailable = 0
    candidates: list[Obj] = []
    surging = 0
    for node, pods in sorted(node_pods.items()):
        live = [p for p in pods if not terminating(p)]
        new = [p for p in live if is_updated(p, hash_, generation)]
        old = [p for p in live if not is_updated(p, hash_, generation)]
        if not any(available(p) for p in live):
            unavailable += 1
        if surge == 0:
            for pod in old:
                if available(pod):
                    candidates.append(pod)
                else:
                    delete.append(pod)
            continue
        gone, start, surging_here = _surge_node(old, new, available)
        delete.extend(gone)
        if start:
            create_on.append(node)
        surging += surging_here
    if surge == 0:
        room = max(0, max_unavailable - unavailable)
        delete.extend(candidates[:room])
        return RollPlan(delete, [])
    return RollPlan(delete, create_on[:max(0, surge - surging)])


# --- status ------------------------------------------------------------------------------

def status(ds: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]],
           node_pods: Mapping[str, list[Obj]], hash_: str, now: float) -> Obj:
    """``updateDaemonSetStatus``."""
    available = availability(ds, now)
    generation = int((ds.get("metadata") or {}).get("generation") or 0)
    desired = current = ready_n = available_n = updated = misscheduled = 0
    for node in nodes:
        run, _ = should_run(ds, node)
        pods = oldest_first(node_pods.get(name_of(node)) or [])
        if run:
            desired += 1
            if pods:
                current += 1
                pod = pods[0]
                if ready(pod):
                    ready_n += 1
                    if available(pod):
                        available_n += 1
                if is_updated(pod, hash_, generation):
                    updated += 1
        elif pods:
            misscheduled += 1
    out: Obj = {"currentNumberScheduled": current, "numberMisscheduled": misscheduled,
                "desiredNumberScheduled": desired, "numberReady": ready_n,
                "observedGeneration": generation, "updatedNumberScheduled": updated,
                "numberAvailable": available_n,
                "numberUnavailable": desired - available_n}
    for key in OMIT_EMPTY:
        if out[key] == 0:
            out[key] = None  # omitempty in kube: a merge patch drops it
    return out
