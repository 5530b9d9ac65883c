"""The Job controller's pure decisions (kube's ``pkg/controller/job``): which pods are finished,
how many to run, when a Job is done or failed, the pod failure policy, the back-off after failed
pods, completed-index intervals and the status conditions, all from plain dicts.

Written by hand from kube 1.32's ``job_controller.go``, ``indexed_job_utils.go``,
``pod_failure_policy.go`` and ``backoff_utils.go`` (the controller-manager is Go; there is no
library to reuse).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubewire.cluster.controllers.replica_rules import meta, parse_time

Obj = dict[str, Any]

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
JOB_CONTROLLER_NAME = "kubernetes.io/job-controller"  # spec.managedBy's built-in value
DEFAULT_BACKOFF_S = 10.0  # DefaultJobPodFailureBackOff
MAX_BACKOFF_S = 600.0  # MaxJobPodFailureBackOff (10 * time.Minute in 1.32's source)
MAX_POD_CREATE_DELETE_PER_SYNC = 500  # MaxPodCreateDeletePerSync
MAX_UNCOUNTED_PODS = 500  # MaxUncountedPods

# (reason, message) of the terminal conditions (job_controller.go, batch types)
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Job was active longer than specified deadline")
COMPLETIONS_REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")
MAX_FAILED_INDEXES_EXCEEDED = ("MaxFailedIndexesExceeded",
                               "Job has exceeded the specified maximal number of failed indexes")
FAILED_INDEXES = ("FailedIndexes", "Job has failed indexes")


def spec(job: Mapping[str, Any]) -> Obj:
    found = job.get("spec")
    return found if isinstance(found, dict) else {}


def status(job: Mapping[str, Any]) -> Obj:
    found = job.get("status")
    return found if isinstance(found, dict) else {}


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def is_indexed(job: Mapping[str, Any]) -> bool:
    return spec(job).get("completionMode") == "Indexed"


def has_finalizer(pod: Mapping[str, Any]) -> bool:
    return TRACKING_FINALIZER in (meta(pod).get("finalizers") or [])


def condition(job: Mapping[str, Any], type_: str) -> Obj | None:
    for cond in status(job).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_ and cond.get("status") == "True":
            return cond
    return None


def is_finished(job: Mapping[str, Any]) -> bool:
    """``IsJobFinished``: a Complete or Failed condition is True."""
    return condition(job, "Complete") is not None or condition(job, "Failed") is not None


def only_replace_failed(job: Mapping[str, Any]) -> bool:
    """``onlyReplaceFailedPods``: podReplacementPolicy Failed, or a pod failure policy."""
    return spec(job).get("podReplacementPolicy") == "Failed" \
        or spec(job).get("podFailurePolicy") is not None


def is_pod_failed(pod: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """``isPodFailed``: phase Failed, or (unless only failed pods are replaced) deleted before
    it succeeded, so an orphan that never reaches Failed still counts."""
    if phase(pod) == "Failed":
        return True
    if only_replace_failed(job):
        return False
    return bool(meta(pod).get("deletionTimestamp")) and phase(pod) != "Succeeded"


def is_terminating(pod: Mapping[str, Any]) -> bool:
    """Being deleted and not yet terminal (``controller.IsPodTerminating``)."""
    return bool(meta(pod).get("deletionTimestamp")) and phase(pod) not in ("Succeeded", "Failed")


def is_active(pod: Mapping[str, Any]) -> bool:
    return phase(pod) not in ("Succeeded", "Failed") and not meta(pod).get("deletionTimestamp")


def is_ready(pod: Mapping[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def pod_index(pod: Mapping[str, Any]) -> int | None:
    """``getCompletionIndex``: the annotation (or label), a non-negative integer."""
    value = (meta(pod).get("annotations") or {}).get(COMPLETION_INDEX)
    if value is None:
        value = (meta(pod).get("labels") or {}).get(COMPLETION_INDEX)
    try:
        index = int(str(value))
    except (TypeError, ValueError):
        return None
    return index if index >= 0 and str(index) == str(value) else None


def per_index_limit(job: Mapping[str, Any]) -> int | None:
    """``backoffLimitPerIndex`` of an Indexed Job (None: the Job-wide backoffLimit rules)."""
    found = spec(job).get("backoffLimitPerIndex")
    return int(found) if found is not None and is_indexed(job) else None


def index_failure_count(pod: Mapping[str, Any]) -> int:
    """The failures of the pod's index before it (``job-index-failure-count``)."""
    try:
        return max(0, int((meta(pod).get("annotations") or {}).get(INDEX_FAILURE_COUNT, 0)))
    except (TypeError, ValueError):
        return 0


def index_failures(job: Mapping[str, Any], pods: Sequence[Obj]) -> dict[int, int]:
    """``getNewIndexFailureCounts`` per index: failed pods so far (the latest failed pod's
    count plus one)."""
    out: dict[int, int] = {}
    for pod in pods:
        index = pod_index(pod)
        if index is not None and is_pod_failed(pod, job):
            out[index] = max(out.get(index, 0), index_failure_count(pod) + 1)
    return out


def done_indexes(job: Mapping[str, Any], pods: Sequence[Obj]) -> set[int]:
    """Indexes that need no more pods: completed, and (per-index back-off) failed, judged
    from the pods too as ``calculateFailedIndexes`` does (a failed pod not yet counted still
    fails its index)."""
    completions = int(spec(job).get("completions") or 0)
    done = parse_indexes(status(job).get("completedIndexes"), completions)
    limit = per_index_limit(job)
    if limit is not None:
        failed = [p for p in pods if is_pod_failed(p, job)]
        done |= failed_indexes(job, failed, done, limit)
    return done


# --- completed indexes ("0-2,5") ------------------------------------------------------------

def parse_indexes(text: str | None, completions: int) -> set[int]:
    """``parseIndexesFromString``: intervals ``a-b`` and single indexes, those < completions."""
    out: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            continue
        out.update(i for i in range(first, last + 1) if 0 <= i < completions)
    return out


def format_indexes(indexes: Iterable[int]) -> str:
    """``orderedIntervals.String``: sorted, runs of three or more as ``a-b``."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    start = prev = None
    for index in ordered:
        if start is None:
            start = prev = index
        elif prev is not None and index == prev + 1:
            prev = index
        else:
            parts.append(_interval(start, prev))
            start = prev = index
    if start is not None:
        parts.append(_interval(start, prev))
    return ",".join(parts)


def _interval(first: int, last: int | None) -> str:
    """kube writes a two-index interval as ``a,b`` and longer ones as ``a-b``."""
    if last is None or last == first:
        return str(first)
    if last == first + 1:
        return f"{first},{last}"
    return f"{first}-{last}"


# --- pod failure policy ---------------------------------------------------------------------

def _exit_codes_match(requirement: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """``matchOnExitCodes``: a container (or the named one) terminated with a non-zero code
    the operator accepts (In / NotIn the values)."""
    operator = requirement.get("operator")
    values = {int(v) for v in requirement.get("values") or []}
    name = requirement.get("containerName")
    pod_status = pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in pod_status.get(key) or []:
            if name is not None and container.get("name") != name:
                continue
            terminated = (container.get("state") or {}).get("terminated") or {}
            if not terminated:
                continue
            code = int(terminated.get("exitCode") or 0)
            if code == 0:
                continue
            if (operator == "In" and code in values) or (operator == "NotIn"
                                                         and code not in values):
                return True
    return False


def _conditions_match(patterns: Sequence[Mapping[str, Any]], pod: Mapping[str, Any]) -> bool:
    for pattern in patterns:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == pattern.get("type") \
                    and cond.get("status") == pattern.get("status", "True"):
                return True
    return False


@dataclass(frozen=True, slots=True)
class PolicyMatch:
    """What a pod failure policy rule decided for a failed pod: ``action`` is FailJob, Ignore,
    Count or FailIndex; ``message`` is the FailJob condition's message."""

    action: str
    message: str = ""


def match_pod_failure_policy(job: Mapping[str, Any], pod: Mapping[str, Any]) -> PolicyMatch | None:
    """``matchPodFailurePolicy``: the first rule matching the failed pod (None: count it)."""
    policy = spec(job).get("podFailurePolicy")
    if not isinstance(policy, dict):
        return None
    for number, rule in enumerate(policy.get("rules") or []):
        exit_codes = rule.get("onExitCodes")
        patterns = rule.get("onPodConditions") or []
        matched = _exit_codes_match(exit_codes, pod) if exit_codes else \
            _conditions_match(patterns, pod)
        if not matched:
            continue
        action = str(rule.get("action") or "")
        message = ""
        if action == "FailJob":
            message = _fail_job_message(pod, number, exit_codes, patterns)
        return PolicyMatch(action, message)
    return None


def _fail_job_message(pod: Mapping[str, Any], number: int, exit_codes: Mapping[str, Any] | None,
                      patterns: Sequence[Mapping[str, Any]]) -> str:
    """The messages of ``matchPodFailurePolicy`` for FailJob."""
    name = meta(pod).get("name", "")
    if exit_codes:
        for key in ("initContainerStatuses", "containerStatuses"):
            for container in (pod.get("status") or {}).get(key) or []:
                code = int(((container.get("state") or {}).get("terminated") or {})
                           .get("exitCode") or 0)
                if code and _exit_codes_match({**exit_codes,
                                               "containerName": container.get("name")}, pod):
                    return (f"Container {container.get('name')} for pod "
                            f"{meta(pod).get('namespace', '')}/{name} failed with exit code "
                            f"{code} matching FailJob rule at index {number}")
    for pattern in patterns:
        return (f"Pod {meta(pod).get('namespace', '')}/{name} has condition "
                f"{pattern.get('type')} matching FailJob rule at index {number}")
    return ""


# --- arithmetic -----------------------------------------------------------------------------

def wanted_active(job: Mapping[str, Any], succeeded: int, completed_indexes: int) -> int:
    """How many pods should run (``manageJob``): with completions,
    ``min(parallelism, completions - succeeded)``; without, parallelism until one succeeded."""
    found = spec(job).get("parallelism")
    parallelism = 1 if found is None else int(found)
    completions = spec(job).get("completions")
    if completions is None:
        return 0 if succeeded > 0 else parallelism
    done = completed_indexes if is_indexed(job) else succeeded
    return max(0, min(parallelism, int(completions) - done))


def backoff_delay(failures: int, base: float = DEFAULT_BACKOFF_S,
                  cap: float = MAX_BACKOFF_S) -> float:
    """``getRemainingTime``'s back-off: 0 before a failure, then base * 2^(failures-1),
    capped."""
    if failures <= 0:
        return 0.0
    return float(min(base * float(2 ** min(failures - 1, 30)), cap))


def past_deadline(job: Mapping[str, Any], now: float) -> bool:
    """``pastActiveDeadline``: running longer than activeDeadlineSeconds since startTime."""
    deadline = spec(job).get("activeDeadlineSeconds")
    start = parse_time(status(job).get("startTime"))
    if deadline is None or start is None:
        return False
    return now - start >= int(deadline)


def deadline_remaining(job: Mapping[str, Any], now: float) -> float | None:
    deadline = spec(job).get("activeDeadlineSeconds")
    start = parse_time(status(job).get("startTime"))
    if deadline is None or start is None:
        return None
    return max(0.0, start + int(deadline) - now)


def backoff_limit_exceeded(job: Mapping[str, Any], failed: int, pods: Sequence[Obj]) -> bool:
    """``exceedsBackoffLimit`` / the OnFailure restart sum (``pastBackoffLimitOnFailure``)."""
    found = spec(job).get("backoffLimit")
    limit = 6 if found is None else int(found)
    template_spec = (spec(job).get("template") or {}).get("spec") or {}
    if template_spec.get("restartPolicy") == "OnFailure":
        restarts = 0
        for pod in pods:
            if phase(pod) in ("Running", "Pending"):
                for key in ("initContainerStatuses", "containerStatuses"):
                    for container in (pod.get("status") or {}).get(key) or []:
                        restarts += int(container.get("restartCount") or 0)
        if limit == 0:
            return restarts > 0
        if restarts >= limit:
            return True
    return failed > limit


def rfc3339(stamp: float) -> str:
    """A ``metav1.Time`` (seconds) for epoch seconds."""
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_condition(type_: str, reason: str, message: str, now: float,
                  status_: str = "True") -> Obj:
    stamp = rfc3339(now)
    return {"type": type_, "status": status_, "lastProbeTime": stamp,
            "lastTransitionTime": stamp, "reason": reason, "message": message}


def set_condition(conditions: list[Obj], cond: Obj) -> list[Obj]:
    """``ensureJobConditionStatus``: replace a condition of the same type when its status,
    reason or message changed (keeping its transition time when the status did not), else
    append."""
    out = copy.deepcopy(conditions)
    for i, old in enumerate(out):
        if old.get("type") != cond.get("type"):
            continue
        if (old.get("status"), old.get("reason"), old.get("message")) == \
                (cond.get("status"), cond.get("reason"), cond.get("message")):
            return out
        new = dict(cond)
        if old.get("status") == cond.get("status"):
            new["lastTransitionTime"] = old.get("lastTransitionTime")
        out[i] = new
        return out
    out.append(cond)
    return out


def pod_for_job(job: Mapping[str, Any], index: int | None, failures: int = 0) -> Obj:
    """``GetPodFromTemplate`` plus the Job's additions: ``generateName`` (``<job>-<index>-``
    when Indexed), the tracking finalizer, the completion index as annotation and label, the
    hostname ``<job>-<index>`` and ``JOB_COMPLETION_INDEX`` in every container's env."""
    name = meta(job).get("name", "")
    template = spec(job).get("template") or {}
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    annotations = dict(tmeta.get("annotations") or {})
    pod_spec = copy.deepcopy(template.get("spec") or {})
    pod_meta: Obj = {"generateName": f"{name}-", "namespace": meta(job).get("namespace", ""),
                     "ownerReferences": [{
                         "apiVersion": "batch/v1", "kind": "Job", "name": name,
                         "uid": meta(job).get("uid", ""), "controller": True,
                         "blockOwnerDeletion": True}],
                     "finalizers": [*(tmeta.get("finalizers") or []), TRACKING_FINALIZER]}
    if index is not None:
        pod_meta["generateName"] = f"{name}-{index}-"
        annotations[COMPLETION_INDEX] = str(index)
        if per_index_limit(job) is not None:
            annotations[INDEX_FAILURE_COUNT] = str(failures)
        labels[COMPLETION_INDEX] = str(index)
        if not pod_spec.get("hostname"):
            pod_spec["hostname"] = f"{name}-{index}"
        env_var = {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}}
        for key in ("initContainers", "containers"):
            for container in pod_spec.get(key) or []:
                env = container.setdefault("env", [])
                if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in env):
                    env.append(env_var)
    if labels:
        pod_meta["labels"] = labels
    if annotations:
        pod_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def missing_indexes(job: Mapping[str, Any], completed: set[int], pods: Sequence[Obj],
                    count: int) -> list[int]:
    """``firstPendingIndexes``: the lowest indexes neither completed nor held by an active (or,
    counted against the target, terminating) pod."""
    completions = int(spec(job).get("completions") or 0)
    held = {i for pod in pods if (i := pod_index(pod)) is not None}
    out: list[int] = []
    for index in range(completions):
        if len(out) >= count:
            break
        if index not in completed and index not in held:
            out.append(index)
    return out


# --- tracking finished pods (trackJobStatusAndRemoveFinalizers) -----------------------------

@dataclass(slots=True)
class Tracking:
    """Finished pods of one sync: uids to count (``uncountedTerminatedPods``), pods whose
    finalizer is to go, and the FailJob rule a failed pod matched."""

    succeeded: list[str]
    failed: list[str]
    release: list[Obj]
    fail_job: PolicyMatch | None = None

    @property
    def uids(self) -> set[str]:
        return set(self.succeeded) | set(self.failed)


def track_finished(job: Mapping[str, Any], pods: Sequence[Obj]) -> Tracking:
    """Pods that finished and still hold the tracking finalizer join the uncounted lists
    (at most ``MAX_UNCOUNTED_PODS`` each); those the pod failure policy ignores only lose
    their finalizer."""
    uncounted = status(job).get("uncountedTerminatedPods") or {}
    out = Tracking(list(uncounted.get("succeeded") or []),
                   list(uncounted.get("failed") or []), [])
    known = out.uids
    for pod in pods:
        if not has_finalizer(pod):
            continue
        uid = str(meta(pod).get("uid", ""))
        if uid in known:
            out.release.append(pod)
        elif phase(pod) == "Succeeded":
            if len(out.succeeded) < MAX_UNCOUNTED_PODS:
                out.succeeded.append(uid)
                out.release.append(pod)
        elif is_pod_failed(pod, job):
            match = match_pod_failure_policy(job, pod) if phase(pod) == "Failed" else None
            if match is not None and match.action == "Ignore":
                out.release.append(pod)
                continue
            if match is not None and match.action == "FailJob" and out.fail_job is None:
                out.fail_job = match
            if len(out.failed) < MAX_UNCOUNTED_PODS:
                out.failed.append(uid)
                out.release.append(pod)
    return out


def uncounted_field(succeeded: Sequence[str], failed: Sequence[str]) -> Obj:
    return {k: list(v) for k, v in (("succeeded", succeeded), ("failed", failed)) if v}


@dataclass(frozen=True, slots=True)
class Counted:
    """The status after counting released pods, and what the back-off needs to know."""

    status: Obj
    successes: int
    failure_times: list[float]


def count_released(job: Mapping[str, Any], tracking: Tracking, still_held: set[str],
                   pods_by_uid: Mapping[str, Obj], now: float) -> Counted:
    """Uncounted pods whose finalizer is gone move into ``succeeded``/``failed`` (Indexed:
    a success counts once per index, into ``completedIndexes``)."""
    st = status(job)
    indexed = is_indexed(job)
    completions = int(spec(job).get("completions") or 0)
    completed = parse_indexes(st.get("completedIndexes"), completions)
    succeeded = int(st.get("succeeded") or 0)
    keep_ok = [uid for uid in tracking.succeeded if uid in still_held]
    keep_failed = [uid for uid in tracking.failed if uid in still_held]
    successes = 0
    for uid in tracking.succeeded:
        if uid in still_held:
            continue
        successes += 1
        if not indexed:
            succeeded += 1
            continue
        pod = pods_by_uid.get(uid)
        index = pod_index(pod) if pod is not None else None
        if index is not None and index < completions and index not in completed:
            completed.add(index)
            succeeded += 1
    times = [finish_time(pods_by_uid[uid], now) if uid in pods_by_uid else now
             for uid in tracking.failed if uid not in still_held]
    final = dict(st)
    final["succeeded"] = succeeded
    final["failed"] = int(st.get("failed") or 0) + len(times)
    final["uncountedTerminatedPods"] = uncounted_field(keep_ok, keep_failed)
    if indexed:
        text = format_indexes(completed)
        if text:
            final["completedIndexes"] = text
        else:
            final.pop("completedIndexes", None)
    limit = per_index_limit(job)
    if limit is not None:
        counted = [pods_by_uid[uid] for uid in tracking.failed
                   if uid not in still_held and uid in pods_by_uid]
        final["failedIndexes"] = format_indexes(
            failed_indexes(job, counted, completed, limit))
    return Counted(final, successes, times)


def failed_indexes(job: Mapping[str, Any], newly_failed: Sequence[Obj], completed: set[int],
                   limit: int) -> set[int]:
    """``status.failedIndexes`` after counting failed pods: an index fails when a FailIndex
    rule matched its pod or its failures exceed ``backoffLimitPerIndex``."""
    completions = int(spec(job).get("completions") or 0)
    out = parse_indexes(status(job).get("failedIndexes"), completions)
    for pod in newly_failed:
        index = pod_index(pod)
        if index is None or index >= completions or index in completed:
            continue
        match = match_pod_failure_policy(job, pod) if phase(pod) == "Failed" else None
        if (match is not None and match.action == "FailIndex") \
                or index_failure_count(pod) + 1 > limit:
            out.add(index)
    return out


def finish_time(pod: Mapping[str, Any], now: float) -> float:
    """When a failed pod finished: its containers' latest ``finishedAt``, else its deletion,
    else now (``getFinishedTime``)."""
    latest: float | None = None
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in (pod.get("status") or {}).get(key) or []:
            done = parse_time(((container.get("state") or {}).get("terminated") or {})
                              .get("finishedAt"))
            if done is not None and (latest is None or done > latest):
                latest = done
    if latest is None:
        latest = parse_time(meta(pod).get("deletionTimestamp"))
    return now if latest is None else latest


# --- finishing --------------------------------------------------------------------------------

def succeeded_enough(job: Mapping[str, Any], succeeded: int, completed: set[int],
                     active: int) -> bool:
    """Completions reached (Indexed: every index), or, without completions, a success and
    nothing left running."""
    completions = spec(job).get("completions")
    if completions is None:
        return succeeded > 0 and active == 0
    if is_indexed(job):
        return len(completed) >= int(completions)
    return succeeded >= int(completions)


def interim_condition(job: Mapping[str, Any], pods: Sequence[Obj], now: float) -> Obj | None:
    """The first of 1.32's two terminal steps, when one is due and none was set:
    ``FailureTarget`` (backoff limit, deadline) or ``SuccessCriteriaMet``."""
    if condition(job, "FailureTarget") is not None \
            or condition(job, "SuccessCriteriaMet") is not None:
        return None
    st = status(job)
    failed = int(st.get("failed") or 0)
    if backoff_limit_exceeded(job, failed, pods):
        return new_condition("FailureTarget", *BACKOFF_LIMIT_EXCEEDED, now)
    if not spec(job).get("suspend") and past_deadline(job, now):
        return new_condition("FailureTarget", *DEADLINE_EXCEEDED, now)
    completions = int(spec(job).get("completions") or 0)
    completed = parse_indexes(st.get("completedIndexes"), completions)
    if per_index_limit(job) is not None:
        failed_indexes = parse_indexes(st.get("failedIndexes"), completions)
        most = spec(job).get("maxFailedIndexes")
        if most is not None and len(failed_indexes) > int(most):
            return new_condition("FailureTarget", *MAX_FAILED_INDEXES_EXCEEDED, now)
        if failed_indexes and len(failed_indexes | completed) >= completions:
            return new_condition("FailureTarget", *FAILED_INDEXES, now)
    active = sum(1 for p in pods if is_active(p))
    if succeeded_enough(job, int(st.get("succeeded") or 0), completed, active):
        return new_condition("SuccessCriteriaMet", *COMPLETIONS_REACHED, now)
    return None


def counts_into(st: Obj, active: int, ready: int, terminating: int) -> Obj:
    """The status fields every sync writes (``active``/``succeeded``/``failed`` omitted at
    0, ``ready``, ``terminating`` and ``uncountedTerminatedPods`` always)."""
    out = dict(st)
    for key, value in (("active", active), ("succeeded", int(st.get("succeeded") or 0)),
                       ("failed", int(st.get("failed") or 0))):
        if value:
            out[key] = value
        else:
            out.pop(key, None)
    out["ready"] = ready
    out["terminating"] = terminating
    out.setdefault("uncountedTerminatedPods", {})
    if not out.get("conditions"):
        out.pop("conditions", None)
    return out
