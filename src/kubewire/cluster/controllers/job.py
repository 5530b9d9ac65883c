"""The Job controller (``job-controller``, kube's ``pkg/controller/job/job_controller.go``), a
client of the API.

Per Job key (``syncJob``): the Job's pods (by owner), pods that finished and still carry the
``batch.kubernetes.io/job-tracking`` finalizer are first recorded in
``status.uncountedTerminatedPods``, then their finalizer is removed (strategic merge
``$deleteFromPrimitiveList/finalizers``), then they move into ``succeeded``/``failed`` (and, when
Indexed, ``completedIndexes``), as ``trackJobStatusAndRemoveFinalizers`` does, so no pod is
counted twice or lost. Then the finish rules (pod failure policy, backoffLimit,
activeDeadlineSeconds, completions) in 1.32's two steps: ``FailureTarget``/``SuccessCriteriaMet``,
active pods deleted, and ``Failed``/``Complete`` once none is left; or, while running,
``manageJob``: suspend, create the missing pods (slow start, exponential back-off after failed
pods, Indexed pods at the lowest free indexes), delete the excess. Decisions are in
``job_rules``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubewire.client import QueueShutDown, WorkQueue
from kubewire.client.errors import ClientError, Conflict, NotFound, StatusError
from kubewire.client.informers.informer import OWNER_INDEX
from kubewire.cluster.controllers import job_rules as rules
from kubewire.cluster.controllers.job_rules import (
    TRACKING_FINALIZER,
    has_finalizer,
    is_finished,
    spec,
    status,
)
from kubewire.cluster.controllers.replica_rules import (
    controller_ref,
    meta,
    option,
    slow_start_batches,
)
from kubewire.cluster.controllers.replicaset import Expectations
from kubewire.cluster.runtime import ClusterContext, now_rfc3339, run_workers

log = logging.getLogger(__name__)
Obj = dict[str, Any]
WORKERS = 5  # --concurrent-job-syncs
SYNC_PERIOD_S = 600.0  # a Job with nothing to wait on is looked at again (kube: on events)


@dataclass(slots=True)
class _Round:
    """What one ``manageJob`` round works on."""

    active: list[Obj]
    terminating: list[Obj]
    pods: list[Obj]
    key: str
    events: list[tuple[str, str, str]]


@dataclass(slots=True)
class BackoffRecord:
    """``backoffRecord``: failed pods since the last success and when the last one failed."""

    failures: int = 0
    last_failure: float = 0.0


def _key(obj: Mapping[str, Any]) -> str:
    return f"{meta(obj).get('namespace', '')}/{meta(obj).get('name', '')}"


def _error_text(err: BaseException) -> str:
    return str(getattr(err, "message", "") or err)


class JobController:
    """kube's Job controller on shared informers and a work queue."""

    name = "job-controller"

    def __init__(self, ctx: ClusterContext, *, workers: int = WORKERS,
                 backoff_base: float = rules.DEFAULT_BACKOFF_S,
                 backoff_max: float = rules.MAX_BACKOFF_S) -> None:
        self.ctx = ctx
        self.workers = workers
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.clock = ctx.clock
        self.job_api = ctx.api("batch/v1", "Job")
        self.pod_api = ctx.api("v1", "Pod")
        self.recorder = ctx.recorder(self.name)
        self.queue: WorkQueue[str] = WorkQueue()
        self.expectations: dict[str, Expectations] = {}
        self.backoff: dict[str, BackoffRecord] = {}
        self.synced = False  # orphans are judged only once the Job cache is complete
        self.orphans: WorkQueue[str] = WorkQueue()  # pod keys (kube's orphanQueue)
        self.job_informer = ctx.informer("batch/v1", "Job")
        self.pod_informer = ctx.informer("v1", "Pod")
        with contextlib.suppress(ValueError):
            self.pod_informer.add_owner_indexer()
        self.job_informer.add_handlers(on_add=self._job_added, on_update=self._job_updated,
                                       on_delete=self._job_deleted)
        self.pod_informer.add_handlers(on_add=self._pod_added, on_update=self._pod_updated,
                                       on_delete=self._pod_deleted)

    # --- event handlers -----------------------------------------------------------------

    async def _job_added(self, job: Obj) -> None:
        await self.queue.add(_key(job))

    async def _job_updated(self, old: Obj, new: Obj) -> None:
        await self.queue.add(_key(new))

    async def _job_deleted(self, job: Obj) -> None:
        key = _key(job)
        self.expectations.pop(key, None)
        self.backoff.pop(key, None)
        await self.queue.add(key)
        for pod in self.pod_informer.by_index(OWNER_INDEX, meta(job).get("uid", "")):
            if has_finalizer(pod):
                await self.orphans.add(_key(pod))

    async def _release_orphan(self, pod: Obj) -> None:
        """``syncOrphanPod``: a pod holding the tracking finalizer whose Job is gone (or was
        replaced by another of the same name) loses the finalizer, else it could never be
        deleted."""
        if not has_finalizer(pod):
            return
        ref = controller_ref(pod)
        if ref is not None and (ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1"):
            return
        if ref is not None:
            job = self.job_informer.get(ref.get("name", ""), meta(pod).get("namespace", ""))
            if job is not None and meta(job).get("uid") == ref.get("uid") \
                    and not is_finished(job):
                return
        try:
            fresh = await self.pod_api.get(meta(pod)["name"], namespace=meta(pod)["namespace"])
        except NotFound:
            return
        if meta(fresh).get("uid") == meta(pod).get("uid") and has_finalizer(fresh):
            await self._remove_finalizer(fresh)

    def _owner_key(self, pod: Mapping[str, Any]) -> str | None:
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
            return None
        namespace = meta(pod).get("namespace", "")
        job = self.job_informer.get(ref.get("name", ""), namespace)
        if job is None or meta(job).get("uid") != ref.get("uid"):
            return None
        return f"{namespace}/{ref.get('name', '')}"

    async def _pod_added(self, pod: Obj) -> None:
        key = self._owner_key(pod)
        if key is None:
            await self._orphan_seen(pod)
        else:
            found = self.expectations.get(key)
            if found is not None and found.adds > 0:
                found.adds -= 1
            await self.queue.add(key)

    async def _pod_updated(self, old: Obj, new: Obj) -> None:
        if meta(old).get("resourceVersion") == meta(new).get("resourceVersion"):
            return
        key = self._owner_key(new)
        if key is None:
            await self._orphan_seen(new)
            return
        if meta(new).get("deletionTimestamp") and not meta(old).get("deletionTimestamp"):
            found = self.expectations.get(key)
            if found is not None:
                found.deletes.discard(_key(new))
        await self.queue.add(key)

    async def _orphan_seen(self, pod: Obj) -> None:
        ref = controller_ref(pod)
        if has_finalizer(pod) and ref is not None and ref.get("kind") == "Job" \
                and ref.get("apiVersion") == "batch/v1" and self.synced:
            await self.orphans.add(_key(pod))

    async def _pod_deleted(self, pod: Obj) -> None:
        key = self._owner_key(pod)
        if key is not None:
            found = self.expectations.get(key)
            if found is not None:
                found.deletes.discard(_key(pod))
            await self.queue.add(key)

    # --- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        await self.job_informer.wait_for_sync()
        await self.pod_informer.wait_for_sync()
        self.synced = True
        for job in self.job_informer.cache.list():
            await self.queue.add(_key(job))
        for pod in self.pod_informer.cache.list():
            await self._orphan_seen(pod)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(run_workers(self.queue, self.sync, workers=self.workers,
                                              what="job"))
                group.create_task(self._orphan_worker())
        finally:
            await self.orphans.shut_down()

    async def _orphan_worker(self) -> None:
        while True:
            try:
                key = await self.orphans.get()
            except QueueShutDown:
                return
            try:
                namespace, name = key.split("/", 1)
                pod = self.pod_informer.get(name, namespace)
                if pod is not None:
                    await self._release_orphan(pod)
                self.orphans.forget(key)
            except (StatusError, ClientError) as err:
                log.debug("job orphan pod %s: %s", key, err)
                self.orphans.add_rate_limited(key)
            finally:
                await self.orphans.done(key)

    def _pods(self, job: Mapping[str, Any]) -> list[Obj]:
        uid = meta(job).get("uid", "")
        return [p for p in self.pod_informer.by_index(OWNER_INDEX, uid)
                if (controller_ref(p) or {}).get("uid") == uid]

    async def sync(self, key: str) -> None:
        """``syncJob``."""
        namespace, name = key.split("/", 1)
        job = self.job_informer.get(name, namespace)
        if job is None:
            self.expectations.pop(key, None)
            self.backoff.pop(key, None)
            return
        if spec(job).get("managedBy", rules.JOB_CONTROLLER_NAME) != rules.JOB_CONTROLLER_NAME:
            return  # another controller manages it (JobManagedBy, beta in 1.32)
        pods = self._pods(job)
        if is_finished(job) or meta(job).get("deletionTimestamp"):
            # a finished (or deleted) Job's pods must not keep its finalizer
            await asyncio.gather(*(self._remove_finalizer(p) for p in pods if has_finalizer(p)))
            return
        expect = self.expectations.get(key)
        if expect is not None and not expect.satisfied(self.clock()):
            return
        job = await self._track(job, pods, key)
        pods = self._pods(job)
        await self._decide(job, pods, key)

    # --- counting finished pods ----------------------------------------------------------

    async def _track(self, job: Obj, pods: list[Obj], key: str) -> Obj:
        """``trackJobStatusAndRemoveFinalizers``: record newly finished pods as uncounted,
        remove their finalizers, then count them."""
        st = status(job)
        tracking = rules.track_finished(job, pods)
        new_status = dict(st)
        if tracking.fail_job is not None and rules.condition(job, "FailureTarget") is None:
            new_status["conditions"] = rules.set_condition(
                list(st.get("conditions") or []),
                rules.new_condition("FailureTarget", "PodFailurePolicy",
                                    tracking.fail_job.message, self.clock()))
        uncounted = st.get("uncountedTerminatedPods") or {}
        if tracking.uids != set(uncounted.get("succeeded") or []) | set(
                uncounted.get("failed") or []) or new_status != st:
            new_status["uncountedTerminatedPods"] = rules.uncounted_field(tracking.succeeded,
                                                                          tracking.failed)
            job = await self._write_status(job, new_status)
        if not tracking.release and not tracking.uids:
            return job
        released = await asyncio.gather(*(self._remove_finalizer(p) for p in tracking.release))
        still_held = {str(meta(p).get("uid")) for p, done in
                      zip(tracking.release, released, strict=True) if not done}
        counted = rules.count_released(job, tracking, still_held,
                                       {str(meta(p).get("uid")): p for p in pods}, self.clock())
        record = self.backoff.setdefault(key, BackoffRecord())
        if counted.successes and not rules.is_indexed(job):
            record.failures = 0
        if counted.failure_times:
            record.failures += len(counted.failure_times)
            record.last_failure = max(record.last_failure, *counted.failure_times)
        if counted.status != status(job):
            job = await self._write_status(job, counted.status)
        return job

    async def _remove_finalizer(self, pod: Obj) -> bool:
        """``removeTrackingFinalizerPatch``; True when the pod no longer holds it."""
        body = {"metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}}
        try:
            await self.pod_api.patch(meta(pod)["name"], body,
                                     namespace=meta(pod).get("namespace"))
        except NotFound:
            return True
        except (StatusError, ClientError) as err:
            log.debug("job pod %s: finalizer not removed: %s", _key(pod), err)
            return False
        return True

    # --- deciding ------------------------------------------------------------------------

    async def _decide(self, job: Obj, pods: list[Obj], key: str) -> None:
        now = self.clock()
        st = dict(status(job))
        conditions = list(st.get("conditions") or [])
        active = [p for p in pods if rules.is_active(p)]
        terminating = [p for p in pods if rules.is_terminating(p)]
        events: list[tuple[str, str, str]] = []
        interim = rules.interim_condition(job, pods, now)
        if interim is not None:
            conditions = rules.set_condition(conditions, interim)
        target = rules.condition({"status": {"conditions": conditions}}, "FailureTarget")
        success = rules.condition({"status": {"conditions": conditions}}, "SuccessCriteriaMet")
        end = target or success
        if end is not None:
            await self._delete_pods(job, active, key)
            remaining = [p for p in pods if has_finalizer(p) or rules.is_terminating(p)
                         or rules.is_active(p)]
            if not remaining and not st.get("uncountedTerminatedPods"):
                conditions = self._terminal(st, conditions, end, events, now)
            active_count, terminating = 0, terminating + active
        else:
            conditions, active_count = await self._manage(
                job, st, conditions, _Round(active, terminating, pods, key, events))
        st["conditions"] = conditions
        ready = sum(1 for p in active if rules.is_ready(p)) if active_count else 0
        st = rules.counts_into(st, active_count, ready, len(terminating))
        if st != status(job):
            job = await self._write_status(job, st)
        for type_, reason, message in events:
            self.recorder.event(job, type_, reason, message)
        remaining_s = rules.deadline_remaining(job, now)
        if remaining_s is not None and not is_finished(job):
            self.queue.add_after(key, remaining_s + 0.1)

    @staticmethod
    def _terminal(st: Obj, conditions: list[Obj], end: Obj,
                  events: list[tuple[str, str, str]], now: float) -> list[Obj]:
        """The second step: ``Failed`` with the target's reason (a Warning event) or
        ``Complete`` with ``completionTime`` (event ``Completed``)."""
        reason, message = str(end.get("reason", "")), str(end.get("message", ""))
        if end.get("type") == "FailureTarget":
            events.append(("Warning", reason, message))
            return rules.set_condition(conditions,
                                       rules.new_condition("Failed", reason, message, now))
        st["completionTime"] = now_rfc3339(lambda: now)
        events.append(("Normal", "Completed", "Job completed"))
        return rules.set_condition(conditions,
                                   rules.new_condition("Complete", reason, message, now))

    async def _manage(self, job: Obj, st: Obj, conditions: list[Obj],
                      now_round: _Round) -> tuple[list[Obj], int]:
        """``manageJob`` with the suspend handling of ``syncJob``; returns the conditions and
        the active count to write."""
        now = self.clock()
        active, terminating, key = now_round.active, now_round.terminating, now_round.key
        if spec(job).get("suspend"):
            if rules.condition(job, "Suspended") is None:
                conditions = rules.set_condition(conditions, rules.new_condition(
                    "Suspended", "JobSuspended", "Job suspended", now))
                now_round.events.append(("Normal", "Suspended", "Job suspended"))
            await self._delete_pods(job, active, key)
            return conditions, 0
        if rules.condition(job, "Suspended") is not None:
            conditions = rules.set_condition(conditions, rules.new_condition(
                "Suspended", "JobResumed", "Job resumed", now, "False"))
            now_round.events.append(("Normal", "Resumed", "Job resumed"))
            st["startTime"] = now_rfc3339(lambda: now)
        if not st.get("startTime"):
            st["startTime"] = now_rfc3339(lambda: now)
        completed = rules.done_indexes({**job, "status": st}, now_round.pods)
        if rules.is_indexed(job):
            excess = self._indexed_excess(active, completed,
                                          int(spec(job).get("completions") or 0))
            await self._delete_pods(job, excess, key)
            active = [p for p in active if p not in excess]
        want = rules.wanted_active(job, int(st.get("succeeded") or 0), len(completed))
        count = len(active) + (len(terminating) if rules.only_replace_failed(job) else 0)
        if count > want:
            extra = sorted(active, key=lambda p: (rules.is_ready(p),
                                                  meta(p).get("creationTimestamp") or ""))
            victims = extra[:count - want]
            await self._delete_pods(job, victims, key)
            return conditions, len(active) - len(victims)
        if count == want:
            return conditions, len(active)
        record = self.backoff.get(key)
        if record is not None and record.failures:
            delay = rules.backoff_delay(record.failures, self.backoff_base, self.backoff_max)
            wait = record.last_failure + delay - now
            if wait > 0:
                self.queue.add_after(key, wait)
                return conditions, len(active)
        made = await self._create_pods(job, now_round.pods, completed,
                                       min(want - count, rules.MAX_POD_CREATE_DELETE_PER_SYNC),
                                       key)
        return conditions, len(active) + made

    @staticmethod
    def _indexed_excess(active: list[Obj], completed: set[int], completions: int) -> list[Obj]:
        """Active pods of a completed or invalid index, and duplicates of one index
        (``firstPendingIndexes``' counterpart ``getPodsToDelete``)."""
        seen: set[int] = set()
        excess: list[Obj] = []
        for pod in sorted(active, key=lambda p: (not rules.is_ready(p),
                                                 meta(p).get("creationTimestamp") or "")):
            index = rules.pod_index(pod)
            if index is None or index >= completions or index in completed or index in seen:
                excess.append(pod)
            else:
                seen.add(index)
        return excess

    async def _create_pods(self, job: Obj, pods: list[Obj], completed: set[int], count: int,
                           key: str) -> int:
        indexes: list[int | None]
        held = [p for p in pods if rules.is_active(p) or rules.is_terminating(p)]
        failures = rules.index_failures(job, pods)
        if rules.is_indexed(job):
            indexes = list(rules.missing_indexes(job, completed, held, count))
        else:
            indexes = [None] * count
        if not indexes:
            return 0
        self.expectations[key] = Expectations(adds=len(indexes), stamp=self.clock())
        namespace = meta(job).get("namespace", "")
        created = 0
        position = 0
        failure = False
        for batch in slow_start_batches(len(indexes)):
            chunk = indexes[position:position + batch]
            position += batch
            results = await asyncio.gather(
                *(self.pod_api.create(rules.pod_for_job(
                    job, i, failures.get(i, 0) if i is not None else 0), namespace=namespace)
                  for i in chunk), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    if not isinstance(result, (StatusError, ClientError)):
                        raise result
                    failure = True
                    self.recorder.event(job, "Warning", "FailedCreate",
                                        f"Error creating: {_error_text(result)}")
                else:
                    created += 1
                    self.recorder.event(job, "Normal", "SuccessfulCreate",
                                        f"Created pod: {meta(result).get('name', '')}")
            if failure:
                break
        found = self.expectations.get(key)
        if found is not None and created < len(indexes):
            found.adds = max(0, found.adds - (len(indexes) - created))
        return created

    async def _delete_pods(self, job: Obj, pods: list[Obj], key: str) -> None:
        if not pods:
            return
        self.expectations[key] = Expectations(deletes={_key(p) for p in pods},
                                              stamp=self.clock())

        async def delete(pod: Obj) -> None:
            try:
                await self.pod_api.delete(meta(pod)["name"], namespace=meta(pod)["namespace"],
                                          preconditions={"uid": meta(pod).get("uid", "")})
            except NotFound:
                pass
            except (StatusError, ClientError) as err:
                self.recorder.event(job, "Warning", "FailedDelete",
                                    f"Error deleting: {_error_text(err)}")
            else:
                self.recorder.event(job, "Normal", "SuccessfulDelete",
                                    f"Deleted pod: {meta(pod)['name']}")
            found = self.expectations.get(key)
            if found is not None:
                found.deletes.discard(_key(pod))

        await asyncio.gather(*(delete(p) for p in pods))

    async def _write_status(self, job: Obj, new_status: Obj) -> Obj:
        """PUT status; on a conflict once more on a fresh read (the counts are this sync's)."""
        namespace = meta(job)["namespace"]
        try:
            written: Obj = await self.job_api.replace_status({**job, "status": new_status},
                                                             namespace=namespace)
            return written
        except Conflict:
            fresh = await self.job_api.get(meta(job)["name"], namespace=namespace)
            if meta(fresh).get("uid") != meta(job).get("uid"):
                return job
            result: Obj = await self.job_api.replace_status({**fresh, "status": new_status},
                                                            namespace=namespace)
            return result


def make_job_controller(ctx: ClusterContext, options: object = None) -> JobController:
    """The component factory. Options (a mapping, or an options object's ``extra``):
    ``workers`` (kube's ``--concurrent-job-syncs``, 5), ``backoff_base_ms`` (the first delay
    after a failed pod, kube's 10 s) and ``backoff_max_ms`` (its cap, 10 min)."""
    return JobController(
        ctx, workers=option(options, "workers", WORKERS),
        backoff_base=option(options, "backoff_base_ms", int(rules.DEFAULT_BACKOFF_S * 1000))
        / 1000.0,
        backoff_max=option(options, "backoff_max_ms", int(rules.MAX_BACKOFF_S * 1000)) / 1000.0)
