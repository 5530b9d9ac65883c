"""The TTL-after-finished controller (``ttl-after-finished-controller``, kube's
``pkg/controller/ttlafterfinished/ttlafterfinished_controller.go``), a client of the API.

A Job with ``spec.ttlSecondsAfterFinished`` whose Complete or Failed condition is True is
deleted that many seconds after the condition's ``lastTransitionTime``: the key waits in the
queue until then, the Job is read fresh (a changed TTL counts), and deleted with kube's options,
``propagationPolicy: Foreground`` and the fresh object's uid as precondition (kube's source
chooses Foreground: the garbage collector removes the pods first, the Job last).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kubewire.client import WorkQueue
from kubewire.client.errors import Conflict, NotFound
from kubewire.cluster.controllers.job_rules import is_finished, spec, status
from kubewire.cluster.controllers.replica_rules import meta, option, parse_time
from kubewire.cluster.runtime import ClusterContext, run_workers

log = logging.getLogger(__name__)
Obj = dict[str, Any]
WORKERS = 5  # --concurrent-ttl-after-finished-syncs


def needs_cleanup(job: Mapping[str, Any]) -> bool:
    """``needsCleanup``: a TTL set and the Job finished."""
    return spec(job).get("ttlSecondsAfterFinished") is not None and is_finished(job)


def time_left(job: Mapping[str, Any], now: float) -> float | None:
    """``timeLeft``: seconds until the TTL expires (<= 0: expired); None when the Job needs no
    cleanup or its finish time is unknown (``jobFinishTime``)."""
    if not needs_cleanup(job):
        return None
    for cond in status(job).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            finished = parse_time(cond.get("lastTransitionTime"))
            if finished is None:
                return None
            return finished + int(spec(job)["ttlSecondsAfterFinished"]) - now
    return None


def _key(obj: Mapping[str, Any]) -> str:
    return f"{meta(obj).get('namespace', '')}/{meta(obj).get('name', '')}"


class TTLAfterFinishedController:
    """Deletes finished Jobs whose TTL expired."""

    name = "ttl-after-finished-controller"

    def __init__(self, ctx: ClusterContext, *, workers: int = WORKERS) -> None:
        self.ctx = ctx
        self.workers = workers
        self.clock = ctx.clock
        self.job_api = ctx.api("batch/v1", "Job")
        self.queue: WorkQueue[str] = WorkQueue()
        self.informer = ctx.informer("batch/v1", "Job")
        self.informer.add_handlers(on_add=self._changed, on_update=self._updated)

    async def _changed(self, job: Obj) -> None:
        if not meta(job).get("deletionTimestamp") and needs_cleanup(job):
            await self.queue.add(_key(job))

    async def _updated(self, old: Obj, new: Obj) -> None:
        await self._changed(new)

    async def run(self) -> None:
        await self.informer.wait_for_sync()
        await run_workers(self.queue, self.process, workers=self.workers, what="ttl")

    def _expired(self, job: Mapping[str, Any], key: str) -> bool:
        """``processTTL``: True when expired; otherwise the key comes back when it will be."""
        if meta(job).get("deletionTimestamp"):
            return False
        left = time_left(job, self.clock())
        if left is None:
            return False
        if left <= 0:
            return True
        self.queue.add_after(key, left)
        return False

    async def process(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        cached = self.informer.get(name, namespace)
        if cached is None or not self._expired(cached, key):
            return
        try:
            fresh = await self.job_api.get(name, namespace=namespace)
        except NotFound:
            return
        if not self._expired(fresh, key):  # the latest TTL decides
            return
        try:
            await self.job_api.delete(name, namespace=namespace,
                                      propagation_policy="Foreground",
                                      preconditions={"uid": meta(fresh).get("uid", "")})
        except (NotFound, Conflict):
            return


def make_ttl_after_finished_controller(ctx: ClusterContext,
                                       options: object = None) -> TTLAfterFinishedController:
    """The component factory. Options: ``workers`` (kube's
    ``--concurrent-ttl-after-finished-syncs``, 5)."""
    return TTLAfterFinishedController(ctx, workers=option(options, "workers", WORKERS))
