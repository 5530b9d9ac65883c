"""The CronJob controller (``cronjob-controller``, kube's
``pkg/controller/cronjob/cronjob_controllerv2.go`` and ``utils.go``), a client of the API.

Per CronJob key (``syncCronJob``): reconcile ``status.active`` with the Jobs it owns (finished
ones leave it with ``SawCompletedJob``, ``lastSuccessfulTime`` follows the newest Complete one;
vanished ones go with ``MissingJob``), delete finished Jobs beyond the history limits; then,
unless suspended, find the most recent missed start time (``cron_schedule``), skip it when past
``startingDeadlineSeconds`` (``MissSchedule``) or when a run is active under ``Forbid``, delete the
active runs under ``Replace``, and create the Job ``<cronjob>-<minutes since epoch>`` from
``jobTemplate``; the key comes back at the next start time (+100 ms). Times come from the
context's clock.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubewire.client import WorkQueue
from kubewire.client.errors import AlreadyExists, ClientError, Conflict, NotFound, StatusError
from kubewire.client.informers.informer import OWNER_INDEX
from kubewire.cluster.controllers.cron_schedule import (
    Schedule,
    ScheduleError,
    load_zone,
    most_recent_schedule_time,
    parse_schedule,
)
from kubewire.cluster.controllers.job_rules import condition, is_finished, rfc3339
from kubewire.cluster.controllers.replica_rules import controller_ref, meta, option, parse_time
from kubewire.cluster.runtime import ClusterContext, object_reference, run_workers

log = logging.getLogger(__name__)
Obj = dict[str, Any]
WORKERS = 5  # --concurrent-cron-job-syncs
NEXT_SCHEDULE_DELTA_S = 0.1  # nextScheduleDelta
SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def _key(obj: Mapping[str, Any]) -> str:
    return f"{meta(obj).get('namespace', '')}/{meta(obj).get('name', '')}"


def _spec(obj: Mapping[str, Any]) -> Obj:
    found = obj.get("spec")
    return found if isinstance(found, dict) else {}


def job_name(cronjob: Mapping[str, Any], scheduled: float) -> str:
    """``getJobName``: ``<name>-<scheduled minutes since the epoch>``."""
    return f"{meta(cronjob).get('name', '')}-{int(scheduled) // 60}"


def job_from_template(cronjob: Mapping[str, Any], scheduled: float, zone_name: str | None) -> Obj:
    """``getJobFromTemplate2``: jobTemplate's labels, annotations and spec, the scheduled
    time annotation (RFC 3339 in the CronJob's zone), the controller reference."""
    template = _spec(cronjob).get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    annotations = dict(tmeta.get("annotations") or {})
    zone = load_zone(zone_name) if zone_name else UTC
    annotations[SCHEDULED_ANNOTATION] = datetime.fromtimestamp(scheduled, zone).isoformat() \
        .replace("+00:00", "Z")
    job_meta: Obj = {
        "name": job_name(cronjob, scheduled), "namespace": meta(cronjob).get("namespace", ""),
        "annotations": annotations,
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                             "name": meta(cronjob).get("name", ""),
                             "uid": meta(cronjob).get("uid", ""), "controller": True,
                             "blockOwnerDeletion": True}]}
    if tmeta.get("labels"):
        job_meta["labels"] = dict(tmeta["labels"])
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta,
            "spec": copy.deepcopy(template.get("spec") or {})}


def finished_status(job: Mapping[str, Any]) -> str:
    """``getFinishedStatus``: the True Complete or Failed condition's type."""
    for type_ in ("Complete", "Failed"):
        if condition(job, type_) is not None:
            return type_
    return ""


class CronJobController:
    """kube's CronJob controller (v2) on shared informers and a work queue."""

    name = "cronjob-controller"

    def __init__(self, ctx: ClusterContext, *, workers: int = WORKERS) -> None:
        self.ctx = ctx
        self.workers = workers
        self.clock = ctx.clock
        self.cj_api = ctx.api("batch/v1", "CronJob")
        self.job_api = ctx.api("batch/v1", "Job")
        self.recorder = ctx.recorder(self.name)
        self.queue: WorkQueue[str] = WorkQueue()
        self.cj_informer = ctx.informer("batch/v1", "CronJob")
        self.job_informer = ctx.informer("batch/v1", "Job")
        with contextlib.suppress(ValueError):  # another controller added it
            self.job_informer.add_owner_indexer()
        self.cj_informer.add_handlers(on_add=self._cj_changed, on_update=self._cj_updated,
                                      on_delete=self._cj_changed)
        self.job_informer.add_handlers(on_add=self._job_changed, on_update=self._job_updated,
                                       on_delete=self._job_changed)

    async def _cj_changed(self, cj: Obj) -> None:
        await self.queue.add(_key(cj))

    async def _cj_updated(self, old: Obj, new: Obj) -> None:
        await self.queue.add(_key(new))

    async def _job_changed(self, job: Obj) -> None:
        ref = controller_ref(job)
        if ref is not None and ref.get("kind") == "CronJob":
            await self.queue.add(f"{meta(job).get('namespace', '')}/{ref.get('name', '')}")

    async def _job_updated(self, old: Obj, new: Obj) -> None:
        await self._job_changed(new)

    async def run(self) -> None:
        await self.cj_informer.wait_for_sync()
        await self.job_informer.wait_for_sync()
        for cj in self.cj_informer.cache.list():
            await self.queue.add(_key(cj))
        await run_workers(self.queue, self.sync, workers=self.workers, what="cronjob")

    def _owned_jobs(self, cj: Mapping[str, Any]) -> list[Obj]:
        uid = meta(cj).get("uid", "")
        return [j for j in self.job_informer.by_index(OWNER_INDEX, uid)
                if (controller_ref(j) or {}).get("uid") == uid]

    async def sync(self, key: str) -> None:
        """``sync``/``syncCronJob``: reconcile, clean up, maybe start a Job, write status."""
        namespace, name = key.split("/", 1)
        cj = self.cj_informer.get(name, namespace)
        if cj is None:
            return
        jobs = self._owned_jobs(cj)
        cj = await self._fresh_if_behind(cj, jobs)
        st = copy.deepcopy(cj.get("status") or {})
        await self._reconcile_active(cj, st, jobs)
        if not meta(cj).get("deletionTimestamp"):
            await self._cleanup(cj, jobs)
            await self._maybe_start(cj, st, key)
        st = {k: v for k, v in st.items() if v not in (None, [])}
        if st != (cj.get("status") or {}):
            await self._write_status(cj, st)

    async def _reconcile_active(self, cj: Obj, st: Obj, jobs: list[Obj]) -> None:
        active: list[Obj] = list(st.get("active") or [])
        active_uids = {ref.get("uid") for ref in active}
        for job in jobs:
            uid = meta(job).get("uid")
            finished = is_finished(job)
            if uid not in active_uids and not finished:
                self.recorder.event(cj, "Warning", "UnexpectedJob",
                                    "Saw a job that the controller did not create or forgot: "
                                    f"{meta(job).get('name', '')}")
            elif uid in active_uids and finished:
                state = finished_status(job)
                active = [ref for ref in active if ref.get("uid") != uid]
                active_uids.discard(uid)
                self.recorder.event(cj, "Normal", "SawCompletedJob",
                                    f"Saw completed job: {meta(job).get('name', '')}, "
                                    f"status: {state}")
            if finished_status(job) == "Complete":
                done = parse_time((job.get("status") or {}).get("completionTime"))
                last = parse_time(st.get("lastSuccessfulTime"))
                if done is not None and (last is None or done > last):
                    st["lastSuccessfulTime"] = rfc3339(done)
        st["active"] = await self._drop_missing(cj, active, {meta(j).get("uid") for j in jobs})

    async def _drop_missing(self, cj: Obj, active: list[Obj], listed: set[Any]) -> list[Obj]:
        """Active references to Jobs neither cached nor found by a GET leave the list
        (``MissingJob``)."""
        for ref in list(active):
            if ref.get("uid") in listed:
                continue
            try:
                found = await self.job_api.get(ref.get("name", ""),
                                               namespace=meta(cj).get("namespace"))
            except NotFound:
                found = None
            if found is None or meta(found).get("uid") != ref.get("uid"):
                active = [r for r in active if r.get("uid") != ref.get("uid")]
                self.recorder.event(cj, "Normal", "MissingJob",
                                    f"Active job went missing: {ref.get('name', '')}")
        return active

    async def _fresh_if_behind(self, cj: Obj, jobs: list[Obj]) -> Obj:
        """The CronJob read fresh when an unfinished Job of ours is missing from the cached
        ``active`` (the cache may lag behind this controller's own status write; kube reads
        it again too before calling the Job unexpected)."""
        known = {ref.get("uid") for ref in (cj.get("status") or {}).get("active") or []}
        if all(is_finished(j) or meta(j).get("uid") in known for j in jobs):
            return cj
        try:
            fresh: Obj = await self.cj_api.get(meta(cj)["name"], namespace=meta(cj)["namespace"])
        except NotFound:
            return cj
        return fresh if meta(fresh).get("uid") == meta(cj).get("uid") else cj

    async def _write_status(self, cj: Obj, st: Obj) -> None:
        """PUT status; once more on a fresh read after a conflict (the CronJob's spec or
        metadata changed under this sync)."""
        namespace = meta(cj)["namespace"]
        try:
            await self.cj_api.replace_status({**cj, "status": st}, namespace=namespace)
        except Conflict:
            fresh = await self.cj_api.get(meta(cj)["name"], namespace=namespace)
            if meta(fresh).get("uid") == meta(cj).get("uid"):
                await self.cj_api.replace_status({**fresh, "status": st}, namespace=namespace)

    async def _cleanup(self, cj: Obj, jobs: list[Obj]) -> None:
        """``cleanupFinishedJobs``: finished Jobs beyond the history limits, oldest first."""
        spec = _spec(cj)
        for state, field, default in (("Complete", "successfulJobsHistoryLimit", 3),
                                      ("Failed", "failedJobsHistoryLimit", 1)):
            limit = spec.get(field, default)
            if limit is None:
                continue
            done = [j for j in jobs if finished_status(j) == state]
            done.sort(key=lambda j: ((j.get("status") or {}).get("startTime") or "~",
                                     meta(j).get("name", "")))
            for job in done[:max(0, len(done) - int(limit))]:
                await self._delete_job(cj, job)

    async def _delete_job(self, cj: Obj, job: Mapping[str, Any]) -> bool:
        try:
            await self.job_api.delete(meta(job)["name"], namespace=meta(job)["namespace"],
                                      propagation_policy="Background")
        except NotFound:
            return True
        except (StatusError, ClientError) as err:
            self.recorder.event(cj, "Warning", "FailedDelete",
                                f"Deleted job: {getattr(err, 'message', err)}")
            return False
        self.recorder.event(cj, "Normal", "SuccessfulDelete",
                            f"Deleted job {meta(job)['name']}")
        return True

    def _schedule(self, cj: Obj) -> Schedule | None:
        spec = _spec(cj)
        zone = spec.get("timeZone")
        if zone is not None:
            try:
                load_zone(zone)
            except ScheduleError as err:
                self.recorder.event(cj, "Warning", "UnknownTimeZone", str(err))
                return None
        try:
            return parse_schedule(str(spec.get("schedule") or ""), zone)
        except ScheduleError as err:
            self.recorder.event(cj, "Warning", "UnparseableSchedule",
                                f"unparseable schedule: \"{spec.get('schedule')}\" : {err}")
            return None

    def _requeue_next(self, key: str, schedule: Schedule, now: float) -> None:
        upcoming = schedule.next(now)
        if upcoming is not None:
            self.queue.add_after(key, max(0.0, upcoming - now) + NEXT_SCHEDULE_DELTA_S)

    async def _maybe_start(self, cj: Obj, st: Obj, key: str) -> None:
        spec = _spec(cj)
        schedule = self._schedule(cj)
        if schedule is None or spec.get("suspend"):
            return
        now = self.clock()
        earliest = parse_time(st.get("lastScheduleTime")) \
            or parse_time(meta(cj).get("creationTimestamp")) or now
        deadline = spec.get("startingDeadlineSeconds")
        try:
            recent = most_recent_schedule_time(schedule, earliest, now,
                                               None if deadline is None else int(deadline))
        except ScheduleError as err:
            self.recorder.event(cj, "Warning", "InvalidSchedule",
                                f"invalid schedule: {spec.get('schedule')} : {err}")
            return
        if recent.too_many:
            self.recorder.event(cj, "Warning", "TooManyMissedTimes",
                                "too many missed start times. Set or decrease "
                                ".spec.startingDeadlineSeconds or check clock skew")
        self._requeue_next(key, schedule, now)
        scheduled = recent.time
        if scheduled is None:
            return
        if deadline is not None and scheduled + int(deadline) < now:
            stamp = datetime.fromtimestamp(scheduled, UTC).strftime("%a, %d %b %Y %H:%M:%S +0000")
            self.recorder.event(cj, "Warning", "MissSchedule",
                                f"Missed scheduled time to start a job: {stamp}")
            return
        if await self._concurrency_allows(cj, st, job_name(cj, scheduled)):
            await self._create(cj, st, scheduled)

    async def _concurrency_allows(self, cj: Obj, st: Obj, name: str) -> bool:
        """Not the start time already run; Forbid waits for the active runs; Replace
        deletes them (Background)."""
        active: list[Obj] = st.get("active") or []
        if any(ref.get("name") == name for ref in active):
            return False
        policy = _spec(cj).get("concurrencyPolicy") or "Allow"
        if policy == "Forbid" and active:
            self.recorder.event(cj, "Normal", "JobAlreadyActive",
                                "Not starting job because prior execution is running and "
                                "concurrency policy is Forbid")
            return False
        if policy == "Replace":
            for ref in list(active):
                if await self._delete_job(cj, {"metadata": {
                        "name": ref.get("name"), "namespace": meta(cj).get("namespace")}}):
                    active = [r for r in active if r.get("uid") != ref.get("uid")]
            st["active"] = active
        return True

    async def _create(self, cj: Obj, st: Obj, scheduled: float) -> None:
        body = job_from_template(cj, scheduled, _spec(cj).get("timeZone"))
        try:
            job = await self.job_api.create(body, namespace=meta(cj).get("namespace"))
        except AlreadyExists:
            # a Job of that name exists: ours from an earlier round, or someone else's
            try:
                job = await self.job_api.get(body["metadata"]["name"],
                                             namespace=meta(cj).get("namespace"))
            except NotFound:
                return
            if (controller_ref(job) or {}).get("uid") != meta(cj).get("uid"):
                return
            st["lastScheduleTime"] = rfc3339(scheduled)
            return
        except (StatusError, ClientError) as err:
            self.recorder.event(cj, "Warning", "FailedCreate",
                                f"Error creating job: {getattr(err, 'message', err)}")
            raise
        self.recorder.event(cj, "Normal", "SuccessfulCreate",
                            f"Created job {meta(job).get('name', '')}")
        st["active"] = [*(st.get("active") or []), object_reference(job)]
        st["lastScheduleTime"] = rfc3339(scheduled)


def make_cronjob_controller(ctx: ClusterContext, options: object = None) -> CronJobController:
    """The component factory. Options: ``workers`` (kube's ``--concurrent-cron-job-syncs``,
    5)."""
    return CronJobController(ctx, workers=option(options, "workers", WORKERS))
