"""The StatefulSet controller's pure decisions (kube's ``pkg/controller/statefulset``
``stateful_set_utils.go`` and ``stateful_set_control.go``): pod identity, claims, health, the
revision a new pod gets, and status."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from kubewire.cluster.controllers import pod_state
from kubewire.cluster.controllers.history import REVISION_HASH_LABEL, controller_ref

Obj = dict[str, Any]
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def spec(sts: Mapping[str, Any]) -> Mapping[str, Any]:
    return sts.get("spec") or {}


def replicas(sts: Mapping[str, Any]) -> int:
    value = spec(sts).get("replicas")
    return 1 if value is None else int(value)


def start_ordinal(sts: Mapping[str, Any]) -> int:
    return int((spec(sts).get("ordinals") or {}).get("start") or 0)


def parallel(sts: Mapping[str, Any]) -> bool:
    return spec(sts).get("podManagementPolicy") == "Parallel"


def strategy(sts: Mapping[str, Any]) -> str:
    return str((spec(sts).get("updateStrategy") or {}).get("type") or "RollingUpdate")


def partition(sts: Mapping[str, Any]) -> int:
    rolling = (spec(sts).get("updateStrategy") or {}).get("rollingUpdate") or {}
    return int(rolling.get("partition") or 0)


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def ordinal_of(sts_name: str, pod: Mapping[str, Any]) -> int | None:
    """``getOrdinal``: the number after ``<set>-``, or None for a name not of that shape."""
    name = name_of(pod)
    prefix = f"{sts_name}-"
    if not name.startswith(prefix):
        return None
    tail = name[len(prefix):]
    return int(tail) if tail.isdigit() and str(int(tail)) == tail else None


def claim_name(template: Mapping[str, Any], sts_name: str, ordinal: int) -> str:
    """``getPersistentVolumeClaimName``: ``<claim>-<set>-<ordinal>``."""
    return f"{name_of(template)}-{sts_name}-{ordinal}"


def retention(sts: Mapping[str, Any]) -> tuple[str, str]:
    """(whenDeleted, whenScaled), each Retain or Delete."""
    policy = spec(sts).get("persistentVolumeClaimRetentionPolicy") or {}
    return (str(policy.get("whenDeleted") or "Retain"), str(policy.get("whenScaled") or "Retain"))


def set_owner_ref(sts: Mapping[str, Any]) -> Obj:
    """``setOwnerRef``: the plain (non-controller) reference a retained claim gets."""
    ref = controller_ref(sts)
    return {key: ref[key] for key in ("apiVersion", "kind", "name", "uid")}


def claim_owner_refs(sts: Mapping[str, Any], claim: Mapping[str, Any], pod: Mapping[str, Any],
                     condemned: bool) -> list[Obj] | None:
    """``updateClaimOwnerRefForSetAndPod``: the claim's references under the retention
    policy, or None when they need no change. A live ordinal's claim is owned by the set iff
    ``whenDeleted: Delete``; a condemned one by its pod iff ``whenScaled: Delete``, and by
    the set iff ``whenDeleted: Delete`` with ``whenScaled: Retain``. Other owners stay."""
    when_deleted, when_scaled = retention(sts)
    set_uid = (sts.get("metadata") or {}).get("uid")
    pod_uid = (pod.get("metadata") or {}).get("uid")
    if condemned:
        want_set = when_deleted == "Delete" and when_scaled == "Retain"
        want_pod = when_scaled == "Delete"
    else:
        want_set, want_pod = when_deleted == "Delete", False
    refs = [dict(r) for r in (claim.get("metadata") or {}).get("ownerReferences") or []]
    has_set = any(r.get("uid") == set_uid for r in refs)
    has_pod = bool(pod_uid) and any(r.get("uid") == pod_uid for r in refs)
    if has_set == want_set and has_pod == want_pod:
        return None
    kept = [r for r in refs if r.get("uid") not in (set_uid, pod_uid)]
    if want_set:
        kept.append(next((r for r in refs if r.get("uid") == set_uid), set_owner_ref(sts)))
    if want_pod and pod_uid:
        kept.append({"apiVersion": "v1", "kind": "Pod", "name": name_of(pod), "uid": pod_uid})
    return kept


def new_claims(sts: Mapping[str, Any], ordinal: int) -> list[Obj]:
    """``getPersistentVolumeClaims``: one claim per template, labels = template labels + the
    selector's matchLabels; the set's reference when ``whenDeleted: Delete``."""
    meta = sts.get("metadata") or {}
    match = (spec(sts).get("selector") or {}).get("matchLabels") or {}
    claims = []
    for template in spec(sts).get("volumeClaimTemplates") or []:
        claim = copy.deepcopy(dict(template))
        claim["apiVersion"], claim["kind"] = "v1", "PersistentVolumeClaim"
        cmeta = claim.setdefault("metadata", {})
        cmeta["name"] = claim_name(template, str(meta.get("name", "")), ordinal)
        cmeta["namespace"] = meta.get("namespace")
        cmeta["labels"] = {**(cmeta.get("labels") or {}), **match}
        for key in ("creationTimestamp", "resourceVersion", "uid"):
            cmeta.pop(key, None)
        if retention(sts)[0] == "Delete":
            cmeta["ownerReferences"] = [set_owner_ref(sts)]
        claim.pop("status", None)
        claims.append(claim)
    return claims


def new_pod(sts: Mapping[str, Any], ordinal: int, revision_name: str,
            template: Mapping[str, Any]) -> Obj:
    """``newVersionedStatefulSetPod``: the template of the revision, with identity (name,
    hostname, subdomain, labels), storage volumes and the controller reference."""
    meta = sts.get("metadata") or {}
    set_name = str(meta.get("name", ""))
    tmpl = copy.deepcopy(dict(template))
    pmeta = dict(tmpl.get("metadata") or {})
    pmeta.pop("creationTimestamp", None)
    pod_name = f"{set_name}-{ordinal}"
    labels = dict(pmeta.get("labels") or {})
    labels[POD_NAME_LABEL] = pod_name
    labels[POD_INDEX_LABEL] = str(ordinal)
    labels[REVISION_HASH_LABEL] = revision_name
    pmeta.update({"name": pod_name, "namespace": meta.get("namespace"), "labels": labels,
                  "ownerReferences": [controller_ref(sts)]})
    pmeta.pop("generateName", None)
    pod_spec = dict(tmpl.get("spec") or {})
    pod_spec["hostname"] = pod_name
    if spec(sts).get("serviceName"):
        pod_spec["subdomain"] = spec(sts)["serviceName"]
    templates = spec(sts).get("volumeClaimTemplates") or []
    if templates:
        claimed = {name_of(t): claim_name(t, set_name, ordinal) for t in templates}
        volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") not in claimed]
        volumes = [{"name": name, "persistentVolumeClaim": {"claimName": claim}}
                   for name, claim in claimed.items()] + volumes
        pod_spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pmeta, "spec": pod_spec}


def identity_labels(sts_name: str, ordinal: int, pod: Mapping[str, Any]) -> Obj:
    """The identity labels the pod lacks or has wrong (``identityMatches``)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    wanted = {POD_NAME_LABEL: f"{sts_name}-{ordinal}", POD_INDEX_LABEL: str(ordinal)}
    return {k: v for k, v in wanted.items() if labels.get(k) != v}


def revision_for(sts: Mapping[str, Any], ordinal: int, current: str, update: str) -> str:
    """Which revision a (re)created pod gets: below the partition of a RollingUpdate the
    current one, else the update one (``newVersionedStatefulSetPod``)."""
    if strategy(sts) == "RollingUpdate" and ordinal < start_ordinal(sts) + partition(sts):
        return current
    return update


def terminating(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def ready(pod: Mapping[str, Any]) -> bool:
    """``podutil.IsPodReady``: the Ready condition is True."""
    return pod_state.ready(pod)


def running_and_ready(pod: Mapping[str, Any]) -> bool:
    return phase(pod) == "Running" and ready(pod)


def healthy(pod: Mapping[str, Any], sts: Mapping[str, Any], now: float) -> bool:
    """``isRunningAndAvailable`` and not terminating: Running, Ready for
    ``minReadySeconds``."""
    return (phase(pod) == "Running" and not terminating(pod)
            and pod_state.available(pod, pod_state.min_ready_seconds(sts), now))


def revision_label(pod: Mapping[str, Any]) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(REVISION_HASH_LABEL, ""))


def status(sts: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
           revisions: tuple[str, str], collision_count: int, now: float) -> Obj:
    """``computeReplicaStatus`` + ``completeRollingUpdate``: counts over the set's pods at
    the (current, update) revisions."""
    current, update = revisions
    replicas_n = ready_n = available_n = current_n = updated_n = 0
    for pod in pods:
        replicas_n += 1
        if running_and_ready(pod) and not terminating(pod):
            ready_n += 1
            if healthy(pod, sts, now):
                available_n += 1
        if terminating(pod):
            continue
        if revision_label(pod) == current:
            current_n += 1
        if revision_label(pod) == update:
            updated_n += 1
    out: Obj = {
        "observedGeneration": (sts.get("metadata") or {}).get("generation"),
        "replicas": replicas_n, "readyReplicas": ready_n, "currentReplicas": current_n,
        "updatedReplicas": updated_n, "availableReplicas": available_n,
        "currentRevision": current, "updateRevision": update, "collisionCount": collision_count,
    }
    if strategy(sts) == "RollingUpdate" and updated_n == replicas_n and ready_n == replicas_n:
        out["currentRevision"] = update
        out["currentReplicas"] = updated_n
    return out
