"""The Deployment controller's pure arithmetic, as kube v1.32 does it
(``pkg/controller/deployment/util/deployment_util.go``, ``sync.go``, ``progress.go``).

- ``template_hash``: the ``pod-template-hash`` (FNV-1a 32 + ``rand.SafeEncodeString``);
- ``fenceposts``: maxSurge (rounded up) and maxUnavailable (rounded down, 1 if both are 0);
- revision and replica annotations on ReplicaSets (``SetNewReplicaSetAnnotations``,
  ``SetReplicasAnnotations``);
- ``new_rs_new_replicas`` and the proportional-scaling fraction;
- ``deployment_status``, ``set_condition`` and the completeness / progress / timeout tests.

ReplicaSets and Deployments are plain dicts as the API serves them.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kubewire.cluster.controllers.replica_rules import meta, parse_time

Obj = dict[str, Any]
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
ROLLBACK_TO = "deprecated.deployment.rollback.to"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SKIPPED_ANNOTATIONS = frozenset({LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS,
                                 MAX_REPLICAS, ROLLBACK_TO})
MAX_REV_HISTORY_CHARS = 2000
MAX_INT32 = 2**31 - 1
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand


def safe_encode(text: str) -> str:
    """``rand.SafeEncodeString``: each byte mapped to a consonant or a digit."""
    return "".join(_ALPHANUMS[b % len(_ALPHANUMS)] for b in text.encode())


def fnv1a32(data: bytes, start: int = 0x811C9DC5) -> int:
    value = start
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def template_hash(template: Mapping[str, Any], collision_count: int | None) -> str:
    """``controller.ComputeHash``: FNV-1a 32 of the template (kube dumps the Go struct;
    kubewire hashes its canonical JSON), then collisionCount (little-endian, 8 bytes), the
    decimal sum safe-encoded. Clients treat the value as opaque."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    value = fnv1a32(data)
    if collision_count is not None:
        # kube writes an 8-byte buffer with the uint32 in its first four bytes
        value = fnv1a32((collision_count & 0xFFFFFFFF).to_bytes(8, "little"), value)
    return safe_encode(str(value))


def _normalized(value: Any) -> Any:
    """Semantic equality treats absent, null and empty maps/lists alike."""
    if isinstance(value, dict):
        out = {k: _normalized(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def without_hash(template: Mapping[str, Any]) -> Obj:
    out = copy.deepcopy(dict(template))
    labels = (out.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
    return out


def equal_ignore_hash(t1: Mapping[str, Any], t2: Mapping[str, Any]) -> bool:
    """``EqualIgnoreHash``: templates equal once ``pod-template-hash`` is dropped."""
    return bool(_normalized(without_hash(t1)) == _normalized(without_hash(t2)))


def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.endswith("%"):
        try:
            percent = int(value[:-1])
        except ValueError:
            return 0
        scaled = percent * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    try:
        return int(str(value))
    except ValueError:
        return 0


def replicas_of(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def is_rolling(d: Mapping[str, Any]) -> bool:
    strategy: dict[str, Any] = (d.get("spec") or {}).get("strategy") or {}
    return bool(strategy.get("type", "RollingUpdate") == "RollingUpdate")


def fenceposts(d: Mapping[str, Any]) -> tuple[int, int]:
    """``ResolveFenceposts``: (maxSurge, maxUnavailable) in pods."""
    rolling: dict[str, Any] = ((d.get("spec") or {}).get("strategy") or {}).get(
        "rollingUpdate") or {}
    desired = replicas_of(d)
    surge = scaled_value(rolling.get("maxSurge", "25%"), desired, True)
    unavailable = scaled_value(rolling.get("maxUnavailable", "25%"), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: Mapping[str, Any]) -> int:
    return fenceposts(d)[0] if is_rolling(d) else 0


def max_unavailable(d: Mapping[str, Any]) -> int:
    """``MaxUnavailable``: capped at replicas; 0 for Recreate or 0 replicas."""
    replicas = replicas_of(d)
    if not is_rolling(d) or replicas == 0:
        return 0
    return min(fenceposts(d)[1], replicas)


def rs_replicas(rs: Mapping[str, Any]) -> int:
    return int((rs.get("spec") or {}).get("replicas") or 0)


def rs_status(rs: Mapping[str, Any], key: str) -> int:
    return int((rs.get("status") or {}).get(key) or 0)


def total_spec(rss: Sequence[Mapping[str, Any] | None]) -> int:
    return sum(rs_replicas(rs) for rs in rss if rs is not None)


def total_status(rss: Sequence[Mapping[str, Any] | None], key: str) -> int:
    return sum(rs_status(rs, key) for rs in rss if rs is not None)


def revision_of(obj: Mapping[str, Any]) -> int:
    try:
        return int((meta(obj).get("annotations") or {}).get(REVISION, "0") or 0)
    except ValueError:
        return 0


def max_revision(rss: Sequence[Mapping[str, Any]]) -> int:
    return max((revision_of(rs) for rs in rss), default=0)


def creation_key(rs: Mapping[str, Any]) -> tuple[float, str]:
    """``ReplicaSetsByCreationTimestamp``: older first, then by name."""
    return (parse_time(meta(rs).get("creationTimestamp")) or 0.0, meta(rs).get("name", ""))


def find_new_rs(d: Mapping[str, Any], rss: Sequence[Obj]) -> Obj | None:
    """``FindNewReplicaSet``: the oldest RS whose template equals the Deployment's."""
    template = (d.get("spec") or {}).get("template") or {}
    for rs in sorted(rss, key=creation_key):
        if equal_ignore_hash((rs.get("spec") or {}).get("template") or {}, template):
            return rs
    return None


def set_replicas_annotations(rs: Obj, desired: int, max_replicas: int) -> bool:
    annotations = meta(rs).setdefault("annotations", {})
    changed = False
    for key, value in ((DESIRED_REPLICAS, str(desired)), (MAX_REPLICAS, str(max_replicas))):
        if annotations.get(key) != value:
            annotations[key] = value
            changed = True
    return changed


def replicas_annotations_need_update(rs: Mapping[str, Any], desired: int,
                                     max_replicas: int) -> bool:
    annotations = meta(rs).get("annotations") or {}
    return (annotations.get(DESIRED_REPLICAS) != str(desired)
            or annotations.get(MAX_REPLICAS) != str(max_replicas))


def set_new_rs_annotations(d: Mapping[str, Any], rs: Obj, new_revision: int,
                           exists: bool) -> bool:
    """``SetNewReplicaSetAnnotations``: copy the Deployment's annotations (minus the skip
    list), raise the revision (recording the old one in revision-history) and, for a new RS,
    the replica annotations. True when something changed."""
    annotations = meta(rs).setdefault("annotations", {})
    changed = False
    for key, value in (meta(d).get("annotations") or {}).items():
        if key in SKIPPED_ANNOTATIONS or annotations.get(key) == value:
            continue
        annotations[key] = value
        changed = True
    had = REVISION in annotations
    old_text = annotations.get(REVISION, "")
    try:
        old = int(old_text) if old_text else 0
    except ValueError:
        return changed
    if old < new_revision:
        annotations[REVISION] = str(new_revision)
        changed = True
        if had:
            _append_history(annotations, old_text)
    if not exists:
        replicas = replicas_of(d)
        if set_replicas_annotations(rs, replicas, replicas + max_surge(d)):
            changed = True
    return changed


def _append_history(annotations: dict[str, str], old_text: str) -> None:
    """The revision-history annotation, trimmed from the front to 2000 characters."""
    history = annotations.get(REVISION_HISTORY, "")
    parts = history.split(",")
    if not parts[0]:
        annotations[REVISION_HISTORY] = old_text
        return
    total = len(history) + len(old_text) + 1
    start = 0
    while total > MAX_REV_HISTORY_CHARS and start < len(parts):
        total -= len(parts[start]) + 1
        start += 1
    if total <= MAX_REV_HISTORY_CHARS:
        annotations[REVISION_HISTORY] = ",".join([*parts[start:], old_text])


def new_rs_new_replicas(d: Mapping[str, Any], all_rss: Sequence[Mapping[str, Any] | None],
                        new_rs: Mapping[str, Any]) -> int:
    """``NewRSNewReplicas``: how far the new RS may grow now."""
    replicas = replicas_of(d)
    if not is_rolling(d):
        return replicas
    surge = fenceposts(d)[0]
    current = total_spec(all_rss)
    max_total = replicas + surge
    if current >= max_total:
        return rs_replicas(new_rs)
    grow = min(max_total - current, replicas - rs_replicas(new_rs))
    return rs_replicas(new_rs) + grow


def round_half_away(value: float) -> int:
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


def proportion(rs: Mapping[str, Any] | None, d: Mapping[str, Any], to_add: int, added: int,
               status_replicas: int) -> int:
    """``GetProportion``: this RS's share of a Deployment's scaling."""
    if rs is None or rs_replicas(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    replicas = replicas_of(d)
    if replicas == 0:
        fraction = -rs_replicas(rs)
    else:
        deployment_replicas = replicas + max_surge(d)
        try:
            annotated = int((meta(rs).get("annotations") or {})[MAX_REPLICAS])
        except (KeyError, ValueError):
            annotated = status_replicas
        if annotated == 0:
            fraction = 0
        else:
            fraction = round_half_away(rs_replicas(rs) * deployment_replicas / annotated) \
                - rs_replicas(rs)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def _newer_first(rs: Mapping[str, Any]) -> tuple[float, str]:
    stamp, name = creation_key(rs)
    return (-stamp, "".join(chr(0x10FFFF - ord(c)) for c in name))


def proportional_sizes(d: Mapping[str, Any], active: list[Obj],
                       status_replicas: int) -> tuple[str, dict[str, int]]:
    """The sizing half of ``sync.go`` ``scale`` for several active RSes: each gets its
    proportion of the change (largest first, newer first when growing, older first when
    shrinking), the leftover goes to the first. Sorts ``active`` in that order and returns
    ("up"/"down"/"", name → new size)."""
    replicas = replicas_of(d)
    allowed = replicas + max_surge(d) if replicas > 0 else 0
    to_add = allowed - total_spec(active)
    operation = ""
    if to_add > 0:
        active.sort(key=lambda rs: (-rs_replicas(rs), _newer_first(rs)))
        operation = "up"
    elif to_add < 0:
        active.sort(key=lambda rs: (-rs_replicas(rs), creation_key(rs)))
        operation = "down"
    sizes: dict[str, int] = {}
    added = 0
    for rs in active:
        share = proportion(rs, d, to_add, added, status_replicas) if to_add else 0
        sizes[meta(rs)["name"]] = rs_replicas(rs) + share
        added += share
    if to_add and active:
        first = meta(active[0])["name"]
        sizes[first] = max(0, sizes[first] + to_add - added)
    return operation, sizes


# --- status and conditions ------------------------------------------------------------------

def rfc3339(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(type_: str, status: str, reason: str, message: str, now: float) -> Obj:
    """``NewDeploymentCondition``."""
    stamp = rfc3339(now)
    return {"type": type_, "status": status, "lastUpdateTime": stamp,
            "lastTransitionTime": stamp, "reason": reason, "message": message}


def get_condition(status: Mapping[str, Any], type_: str) -> Obj | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def set_condition(status: Obj, cond: Obj) -> None:
    """``SetDeploymentCondition``: same status and reason leave it; else replace (keeping
    lastTransitionTime when the status is unchanged), appended last."""
    current = get_condition(status, cond["type"])
    if current is not None and current.get("status") == cond["status"] \
            and current.get("reason") == cond["reason"]:
        return
    if current is not None and current.get("status") == cond["status"]:
        cond = {**cond, "lastTransitionTime": current.get("lastTransitionTime")}
    status["conditions"] = [*remove_condition_list(status, cond["type"]), cond]


def remove_condition_list(status: Mapping[str, Any], type_: str) -> list[Obj]:
    return [c for c in status.get("conditions") or [] if c.get("type") != type_]


def remove_condition(status: Obj, type_: str) -> None:
    status["conditions"] = remove_condition_list(status, type_)


def has_progress_deadline(d: Mapping[str, Any]) -> bool:
    value = (d.get("spec") or {}).get("progressDeadlineSeconds")
    return value is not None and value != MAX_INT32


def deployment_status(d: Mapping[str, Any], all_rss: Sequence[Mapping[str, Any] | None],
                      new_rs: Mapping[str, Any] | None, now: float) -> Obj:
    """``calculateStatus`` (with the Available condition)."""
    available = total_status(all_rss, "availableReplicas")
    unavailable = max(0, total_spec(all_rss) - available)
    old = d.get("status") or {}
    status: Obj = {"observedGeneration": meta(d).get("generation", 0),
                   "replicas": total_status(all_rss, "replicas"),
                   "updatedReplicas": total_status([new_rs], "replicas"),
                   "readyReplicas": total_status(all_rss, "readyReplicas"),
                   "availableReplicas": available, "unavailableReplicas": unavailable}
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    status["conditions"] = [dict(c) for c in old.get("conditions") or []]
    if available >= replicas_of(d) - max_unavailable(d):
        set_condition(status, condition("Available", "True", "MinimumReplicasAvailable",
                                        "Deployment has minimum availability.", now))
    else:
        set_condition(status, condition("Available", "False", "MinimumReplicasUnavailable",
                                        "Deployment does not have minimum availability.", now))
    return status


def complete(d: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """``DeploymentComplete``."""
    replicas = replicas_of(d)
    return (int(status.get("updatedReplicas") or 0) == replicas
            and int(status.get("replicas") or 0) == replicas
            and int(status.get("availableReplicas") or 0) == replicas
            and int(status.get("observedGeneration") or 0) >= int(meta(d).get("generation") or 0))


def progressing(d: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """``DeploymentProgressing``: more updated/ready/available pods, or fewer old ones."""
    old = d.get("status") or {}

    def num(s: Mapping[str, Any], key: str) -> int:
        return int(s.get(key) or 0)

    old_old = num(old, "replicas") - num(old, "updatedReplicas")
    new_old = num(new, "replicas") - num(new, "updatedReplicas")
    return (num(new, "updatedReplicas") > num(old, "updatedReplicas") or new_old < old_old
            or num(new, "readyReplicas") > num(old, "readyReplicas")
            or num(new, "availableReplicas") > num(old, "availableReplicas"))


def timed_out(d: Mapping[str, Any], status: Mapping[str, Any], now: float) -> bool:
    """``DeploymentTimedOut``."""
    if not has_progress_deadline(d):
        return False
    cond = get_condition(status, "Progressing")
    if cond is None or cond.get("reason") == "NewReplicaSetAvailable":
        return False
    if cond.get("reason") == "ProgressDeadlineExceeded":
        return True
    since = parse_time(cond.get("lastUpdateTime"))
    deadline = int((d.get("spec") or {}).get("progressDeadlineSeconds") or 0)
    return since is not None and since + deadline < now


def omit_zeros(status: Obj) -> Obj:
    """The API's omitempty on the integer fields."""
    return {k: v for k, v in status.items() if v not in (0, None) or k == "conditions"}
