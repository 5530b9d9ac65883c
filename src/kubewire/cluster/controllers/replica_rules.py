"""The ReplicaSet controller's pure decisions, as kube v1.32 makes them.

- which kind it runs on (``ReplicaKind``): ReplicaSets, or ReplicationControllers as kube's
  replication manager sees them through its adapter (``pkg/controller/replication``: the
  ReplicaSet controller on RCs converted to ReplicaSets, the RC's label-map selector becoming
  ``matchLabels``);

- which pods count (``controller.FilterActivePods``), which are ready and available
  (``podutil.IsPodReady`` / ``IsPodAvailable`` with minReadySeconds);
- which pods a scale-down deletes first (``getPodsToDelete`` sorting by
  ``controller.ActivePodsWithRanks.Less``, with ``LogarithmicScaleDown`` and ``PodDeletionCost``
  on, as in 1.32);
- a pod from a template (``controller.GetPodFromTemplate``);
- the status a sync writes (``replica_set_utils.go`` ``calculateStatus``) and the
  ``ReplicaFailure`` condition;
- the pod index a sync reads its candidates from (``controller.PodControllerUIDIndex``: a pod
  under its controller's UID, an orphan under its namespace), so a sync visits its own pods
  and the orphans it may adopt rather than every pod of the namespace.

Objects are plain dicts as the API serves them; times are RFC 3339 strings or epoch seconds.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import LabelSelector, label_selector_from_match

Obj = dict[str, Any]
BURST_REPLICAS = 500  # replicaset.BurstReplicas
SLOW_START_INITIAL_BATCH = 1  # controller.SlowStartInitialBatchSize
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}
CONTROLLER_UID_INDEX = "controllerUID"  # controller.PodControllerUIDIndex
_ORPHAN_PREFIX = "orphan/"  # UIDs hold no "/": an orphan key cannot name a controller


@dataclass(frozen=True, slots=True)
class ReplicaKind:
    """The owner kind one replica controller runs on, and the names it goes by.

    ``controller``: the component (kube-controller-manager's ``--controllers`` name);
    ``event_source``: its recorder's component (``replicaset-controller``; kube's replication
    manager records as ``replication-controller``); ``selector_is_map``: ``spec.selector`` is a
    label map (a ReplicationController's, ``labels.SelectorFromSet``), not a LabelSelector.
    """

    api_version: str
    kind: str
    controller: str
    event_source: str
    queue_name: str
    selector_is_map: bool = False

    def selector(self, owner: Mapping[str, Any]) -> LabelSelector | None:
        """The owner's selector (None when it does not parse)."""
        raw = (owner.get("spec") or {}).get("selector") or {}
        if self.selector_is_map:
            raw = {"matchLabels": raw}
        try:
            return label_selector_from_match(raw)
        except SelectorError:
            return None

    def selects(self, owner: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
        """Whether the owner's valid, non-empty selector matches the pod's labels."""
        selector = self.selector(owner)
        return selector is not None and not selector.is_empty and selector.matches(
            meta(pod).get("labels") or {})


REPLICA_SET = ReplicaKind("apps/v1", "ReplicaSet", "replicaset-controller",
                          "replicaset-controller", "replicaset")
# replication_controller.go NewReplicationManager: EventSource "replication-controller"
REPLICATION_CONTROLLER = ReplicaKind("v1", "ReplicationController",
                                     "replicationcontroller-controller",
                                     "replication-controller", "replication_controller",
                                     selector_is_map=True)


def option(options: object, name: str, default: int) -> int:
    """One integer option of a component factory: from a mapping, or from the ``extra``
    mapping of an options object (the runner's ``ComponentOptions``)."""
    if isinstance(options, Mapping):
        found = options.get(name, default)
    else:
        extra = getattr(options, "extra", None)
        found = extra.get(name, default) if isinstance(extra, Mapping) else default
    try:
        return int(found)
    except (TypeError, ValueError):
        return default


def parse_time(value: object) -> float | None:
    """An RFC 3339 ``metav1.Time`` as epoch seconds (None when absent or unparseable)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def meta(obj: Mapping[str, Any]) -> Obj:
    found = obj.get("metadata")
    return found if isinstance(found, dict) else {}


def controller_ref(obj: Mapping[str, Any]) -> Obj | None:
    """``metav1.GetControllerOf``: the ownerReference with ``controller: true``."""
    for ref in meta(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def orphan_index_key(namespace: str) -> str:
    """``controller.OrphanPodIndexKeyForNamespace``: where the namespace's orphans are filed."""
    return _ORPHAN_PREFIX + namespace


def controller_uid_index(pod: Mapping[str, Any]) -> list[str]:
    """``PodControllerUIDIndex``: the controller's UID, or the namespace's orphan key."""
    ref = controller_ref(pod)
    if ref is not None:
        return [str(ref.get("uid") or "")]
    return [orphan_index_key(str(meta(pod).get("namespace") or ""))]


def make_controller_ref(owner: Mapping[str, Any], api_version: str, kind: str) -> Obj:
    """``metav1.NewControllerRef``."""
    return {"apiVersion": api_version, "kind": kind, "name": meta(owner).get("name", ""),
            "uid": meta(owner).get("uid", ""), "controller": True, "blockOwnerDeletion": True}


def is_active(pod: Mapping[str, Any]) -> bool:
    """``controller.IsPodActive``: not Succeeded/Failed and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not meta(pod).get("deletionTimestamp")


def ready_condition(pod: Mapping[str, Any]) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond
    return None


def is_ready(pod: Mapping[str, Any]) -> bool:
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def is_available(pod: Mapping[str, Any], min_ready_seconds: int, now: float) -> bool:
    """``podutil.IsPodAvailable``: Ready, and Ready for longer than minReadySeconds."""
    if not is_ready(pod):
        return False
    if min_ready_seconds == 0:
        return True
    since = parse_time((ready_condition(pod) or {}).get("lastTransitionTime"))
    return since is not None and since + min_ready_seconds < now


def pod_from_template(template: Mapping[str, Any], owner: Mapping[str, Any],
                      ref: Obj) -> Obj:
    """``GetPodFromTemplate``: labels, annotations, finalizers and spec of the template,
    ``generateName: <owner>-`` and the controller reference."""
    tmeta = template.get("metadata") or {}
    pod_meta: Obj = {"generateName": f"{meta(owner).get('name', '')}-",
                     "namespace": meta(owner).get("namespace", ""),
                     "ownerReferences": [ref]}
    for key in ("labels", "annotations"):
        if tmeta.get(key):
            pod_meta[key] = dict(tmeta[key])
    if tmeta.get("finalizers"):
        pod_meta["finalizers"] = list(tmeta["finalizers"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
            "spec": copy.deepcopy(template.get("spec") or {})}


def slow_start_batches(count: int, initial: int = SLOW_START_INITIAL_BATCH) -> list[int]:
    """``slowStartBatch``: sizes 1, 2, 4, ... summing to ``count``."""
    out: list[int] = []
    remaining, batch = count, min(count, initial)
    while batch > 0:
        out.append(batch)
        remaining -= batch
        batch = min(2 * batch, remaining)
    return out


def _deletion_cost(pod: Mapping[str, Any]) -> int:
    raw = (meta(pod).get("annotations") or {}).get(DELETION_COST)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


def _max_restarts(pod: Mapping[str, Any]) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return max((int(s.get("restartCount") or 0) for s in statuses), default=0)


def _log_rank(stamp: float, now: float) -> int:
    age_ns = (now - stamp) * 1e9
    return int(math.log2(age_ns)) if age_ns > 0 else -1


def _newer_first(t1: float | None, t2: float | None, uid1: str, uid2: str,
                 now: float) -> bool | None:
    """kube's time comparison with LogarithmicScaleDown: None when equal."""
    if t1 == t2:
        return None
    if t1 is None or t2 is None:
        return t1 is None  # afterOrZero
    diff = _log_rank(t1, now) - _log_rank(t2, now)
    if diff == 0:
        return uid1 < uid2
    return diff < 0


def deletion_key_less(a: Mapping[str, Any], b: Mapping[str, Any], rank_a: int, rank_b: int,
                      now: float) -> bool:
    """``ActivePodsWithRanks.Less``: should ``a`` be deleted before ``b``?"""
    node_a = (a.get("spec") or {}).get("nodeName") or ""
    node_b = (b.get("spec") or {}).get("nodeName") or ""
    if node_a != node_b and (not node_a or not node_b):
        return not node_a
    phase_a = _PHASE_ORDINAL.get((a.get("status") or {}).get("phase") or "", 0)
    phase_b = _PHASE_ORDINAL.get((b.get("status") or {}).get("phase") or "", 0)
    if phase_a != phase_b:
        return phase_a < phase_b
    ready_a, ready_b = is_ready(a), is_ready(b)
    if ready_a != ready_b:
        return not ready_a
    cost_a, cost_b = _deletion_cost(a), _deletion_cost(b)
    if cost_a != cost_b:
        return cost_a < cost_b
    if rank_a != rank_b:
        return rank_a > rank_b
    uid_a, uid_b = str(meta(a).get("uid", "")), str(meta(b).get("uid", ""))
    if ready_a and ready_b:
        verdict = _newer_first(
            parse_time((ready_condition(a) or {}).get("lastTransitionTime")),
            parse_time((ready_condition(b) or {}).get("lastTransitionTime")), uid_a, uid_b, now)
        if verdict is not None:
            return verdict
    restarts_a, restarts_b = _max_restarts(a), _max_restarts(b)
    if restarts_a != restarts_b:
        return restarts_a > restarts_b
    verdict = _newer_first(parse_time(meta(a).get("creationTimestamp")),
                           parse_time(meta(b).get("creationTimestamp")), uid_a, uid_b, now)
    return bool(verdict)


def pods_to_delete(pods: Sequence[Obj], related: Sequence[Obj], count: int,
                   now: float) -> list[Obj]:
    """``getPodsToDelete``: the ``count`` pods a scale-down removes, ranked by the number of
    active related pods (same Deployment family) on their node."""
    if count >= len(pods):
        return list(pods)[:count]
    on_node: dict[str, int] = {}
    for pod in related:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and is_active(pod):
            on_node[node] = on_node.get(node, 0) + 1
    ranks = [on_node.get((pod.get("spec") or {}).get("nodeName") or "", 0) for pod in pods]
    def compare(i: int, j: int) -> int:
        if deletion_key_less(pods[i], pods[j], ranks[i], ranks[j], now):
            return -1
        return 1 if deletion_key_less(pods[j], pods[i], ranks[j], ranks[i], now) else 0

    order = sorted(range(len(pods)), key=functools.cmp_to_key(compare))
    return [pods[i] for i in order[:count]]


def labels_match_all(template_labels: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """``fullyLabeledReplicas``: every template label present with its value."""
    return all(labels.get(k) == v for k, v in template_labels.items())


def replicaset_status(rs: Mapping[str, Any], pods: Sequence[Obj], now: float,
                      error: tuple[str, str] | None) -> Obj:
    """``calculateStatus``: counters over the active pods the RS owns, observedGeneration,
    and ``ReplicaFailure`` (``error`` is (reason, message) of a failed create/delete).
    Zero counters other than ``replicas`` are omitted, as the API's omitempty does."""
    spec = rs.get("spec") or {}
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    old = rs.get("status") or {}
    status: Obj = {"replicas": len(pods)}
    counts = {
        "fullyLabeledReplicas": sum(
            1 for p in pods if labels_match_all(template_labels, meta(p).get("labels") or {})),
        "readyReplicas": sum(1 for p in pods if is_ready(p)),
        "availableReplicas": sum(1 for p in pods if is_available(p, min_ready, now)),
    }
    status.update({k: v for k, v in counts.items() if v})
    generation = meta(rs).get("generation")
    if generation:
        status["observedGeneration"] = generation
    conditions = [c for c in old.get("conditions") or [] if c.get("type") != "ReplicaFailure"]
    failure = next((c for c in old.get("conditions") or []
                    if c.get("type") == "ReplicaFailure"), None)
    if error is not None:
        if failure is None:
            failure = {"type": "ReplicaFailure", "status": "True",
                       "lastTransitionTime": _rfc3339(now), "reason": error[0],
                       "message": error[1]}
        conditions.append(failure)
    if conditions:
        status["conditions"] = conditions
    return status


def _rfc3339(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
