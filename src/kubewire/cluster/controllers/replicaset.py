"""The ReplicaSet controller (``replicaset-controller``, kube's
``pkg/controller/replicaset/replica_set.go``), a client of the API, and the same loop run on
ReplicationControllers (``replicationcontroller-controller``): kube's
``pkg/controller/replication`` is this controller behind an adapter that shows RCs as
ReplicaSets, so one class serves both, told which kind by a ``ReplicaKind``.

Per ReplicaSet key: claim pods (adopt matching orphans, release owned pods that stopped
matching: ``ClaimPods``), and when the expectations of the last round are met, create or delete
the difference (at most 500 a round, creates in slow-start batches 1, 2, 4, ..., deletes ranked
by ``getPodsToDelete``); then write the status. Expectations guard against acting twice on a
lagging watch: a round that creates N pods waits until the informer has seen them (or five
minutes pass), as kube's ``ControllerExpectations`` do. Decisions are in ``replica_rules``.

The claim's candidates are the pods the ReplicaSet controls and the namespace's orphans, from
the ``controllerUID`` index (the set kube's ``controller.FilterPodsByOwner`` reads from its
``PodControllerUIDIndex``; 1.32's sync lists the whole namespace): pods another controller owns
are never claimed, so reading them changes nothing but the cost, and with 10,000 pods in one
namespace that cost made every sync visit all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubewire.client import WorkQueue
from kubewire.client.errors import ClientError, Conflict, NotFound, StatusError
from kubewire.client.informers.informer import NAMESPACE_INDEX, OWNER_INDEX
from kubewire.cluster.controllers.owner_keys import OwnerKeys, add_all
from kubewire.cluster.controllers.replica_rules import (
    BURST_REPLICAS,
    CONTROLLER_UID_INDEX,
    REPLICA_SET,
    REPLICATION_CONTROLLER,
    ReplicaKind,
    controller_ref,
    controller_uid_index,
    is_active,
    is_ready,
    make_controller_ref,
    meta,
    option,
    orphan_index_key,
    pod_from_template,
    pods_to_delete,
    replicaset_status,
    slow_start_batches,
)
from kubewire.cluster.runtime import ClusterContext, run_workers
from kubewire.selectors.labels import LabelSelector

log = logging.getLogger(__name__)
Obj = dict[str, Any]
EXPECTATIONS_TIMEOUT_S = 300.0  # controller.ExpectationsTimeout
WORKERS = 5  # --concurrent-replicaset-syncs, --concurrent-rc-syncs


@dataclass(slots=True)
class Expectations:
    """``UIDTrackingControllerExpectations`` for one owner: creates still to be seen, pods
    whose deletion is still to be seen."""

    adds: int = 0
    deletes: set[str] = field(default_factory=set)
    stamp: float = 0.0

    def satisfied(self, now: float) -> bool:
        return (self.adds <= 0 and not self.deletes) or now - self.stamp > EXPECTATIONS_TIMEOUT_S


def _key(obj: Mapping[str, Any]) -> str:
    return f"{meta(obj).get('namespace', '')}/{meta(obj).get('name', '')}"


def _error_text(err: BaseException) -> str:
    return str(getattr(err, "message", "") or err)


class ReplicaSetController:
    """kube's ReplicaSet controller on shared informers and a work queue, for the owner kind
    ``kind`` (ReplicaSets, or ReplicationControllers)."""

    def __init__(self, ctx: ClusterContext, *, kind: ReplicaKind = REPLICA_SET,
                 workers: int = WORKERS, burst: int = BURST_REPLICAS) -> None:
        self.ctx = ctx
        self.kind = kind
        self.name = kind.controller
        self.workers = workers
        self.burst = burst
        self.clock = ctx.clock
        self.rs_api = ctx.api(kind.api_version, kind.kind)
        self.pod_api = ctx.api("v1", "Pod")
        self.recorder = ctx.recorder(kind.event_source)
        self.queue: WorkQueue[str] = WorkQueue()
        self.expectations: dict[str, Expectations] = {}
        self.rs_informer = ctx.informer(kind.api_version, kind.kind)
        self.pod_informer = ctx.informer("v1", "Pod")
        self.owners = OwnerKeys(self.rs_informer, kind.kind, kind.selects)
        with contextlib.suppress(ValueError):
            self.pod_informer.add_owner_indexer()
        with contextlib.suppress(ValueError):
            self.pod_informer.add_indexer(CONTROLLER_UID_INDEX, controller_uid_index)
        self.rs_informer.add_handlers(on_add=self._rs_changed, on_update=self._rs_updated,
                                      on_delete=self._rs_deleted)
        self.pod_informer.add_handlers(on_add=self._pod_added, on_update=self._pod_updated,
                                       on_delete=self._pod_deleted)

    # --- event handlers -----------------------------------------------------------------

    async def _rs_changed(self, rs: Obj) -> None:
        await self.queue.add(_key(rs))

    async def _rs_updated(self, old: Obj, new: Obj) -> None:
        await self.queue.add(_key(new))

    async def _rs_deleted(self, rs: Obj) -> None:
        self.expectations.pop(_key(rs), None)
        await self.queue.add(_key(rs))

    async def _pod_added(self, pod: Obj) -> None:
        if meta(pod).get("deletionTimestamp"):
            await self._pod_deleted(pod)
            return
        ref = controller_ref(pod)
        if ref is not None:
            key = self.owners.controller(pod)
            if key is not None:
                self._creation_observed(key)
                await self.queue.add(key)
            return
        await add_all(self.queue, self.owners.selecting(pod))

    async def _pod_updated(self, old: Obj, new: Obj) -> None:
        if meta(old).get("resourceVersion") == meta(new).get("resourceVersion"):
            return
        old_ref, new_ref = controller_ref(old), controller_ref(new)
        if meta(new).get("deletionTimestamp") and not meta(old).get("deletionTimestamp"):
            key = self.owners.controller(new)
            if key is not None:
                self._deletion_observed(key, new)
        if old_ref is not None and (new_ref is None or old_ref.get("uid") != new_ref.get("uid")):
            old_key = self.owners.controller(old)
            if old_key is not None:
                await self.queue.add(old_key)
        if new_ref is not None:
            key = self.owners.controller(new)
            if key is not None:
                await self.queue.add(key)
                rs = self.rs_informer.get(key.split("/", 1)[1], key.split("/", 1)[0])
                min_ready = int(((rs or {}).get("spec") or {}).get("minReadySeconds") or 0)
                if min_ready > 0 and is_ready(new) and not is_ready(old):
                    self.queue.add_after(key, float(min_ready) + 1.0)
            return
        if meta(old).get("labels") != meta(new).get("labels") or old_ref is not None:
            await add_all(self.queue, self.owners.selecting(new))

    async def _pod_deleted(self, pod: Obj) -> None:
        key = self.owners.controller(pod)
        if key is not None:
            self._deletion_observed(key, pod)
            await self.queue.add(key)

    def _creation_observed(self, key: str) -> None:
        found = self.expectations.get(key)
        if found is not None and found.adds > 0:
            found.adds -= 1

    def _deletion_observed(self, key: str, pod: Mapping[str, Any]) -> None:
        found = self.expectations.get(key)
        if found is not None:
            found.deletes.discard(_key(pod))

    # --- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        await self.rs_informer.wait_for_sync()
        await self.pod_informer.wait_for_sync()
        for rs in self.rs_informer.cache.list():
            await self.queue.add(_key(rs))
        await run_workers(self.queue, self.sync, workers=self.workers,
                          what=self.kind.queue_name)

    async def sync(self, key: str) -> None:
        """``syncReplicaSet``."""
        namespace, name = key.split("/", 1)
        rs = self.rs_informer.get(name, namespace)
        if rs is None:
            self.expectations.pop(key, None)
            return
        now = self.clock()
        expect = self.expectations.get(key)
        needs_sync = expect is None or expect.satisfied(now)
        selector = self.kind.selector(rs)
        if selector is None:
            return
        pods = await self._claim(rs, selector)
        error: tuple[str, str] | None = None
        if needs_sync and not meta(rs).get("deletionTimestamp"):
            error = await self._manage(rs, pods, key)
        status = replicaset_status(rs, pods, self.clock(), error)
        if status != (rs.get("status") or {}):
            rs = await self._write_status(rs, status)
        spec = rs.get("spec") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        replicas = int(spec.get("replicas") or 0)
        if error is None and min_ready > 0 and status.get("readyReplicas", 0) == replicas \
                and status.get("availableReplicas", 0) != replicas:
            self.queue.add_after(key, float(min_ready))
        if error is not None:
            raise ClientError(error[1])

    async def _claim(self, rs: Obj, selector: LabelSelector) -> list[Obj]:
        """``ClaimPods`` over the active pods it controls and the namespace's active orphans."""
        uid = meta(rs).get("uid")
        namespace = meta(rs).get("namespace", "")
        deleting = bool(meta(rs).get("deletionTimestamp"))
        owned: list[Obj] = []
        candidates = [*self.pod_informer.by_index(CONTROLLER_UID_INDEX, str(uid or "")),
                      *self.pod_informer.by_index(CONTROLLER_UID_INDEX,
                                                  orphan_index_key(namespace))]
        for pod in candidates:
            if meta(pod).get("namespace", "") != namespace or not is_active(pod):
                continue
            ref = controller_ref(pod)
            matches = selector.matches(meta(pod).get("labels") or {})
            if ref is not None:
                if ref.get("uid") != uid:
                    continue
                if matches:
                    owned.append(pod)
                elif not deleting:
                    await self._patch_owner(pod, [{"$patch": "delete", "uid": uid}])
                continue
            if matches and not deleting and not selector.is_empty:
                adopted = await self._patch_owner(pod, [self._controller_ref(rs)])
                if adopted is not None:
                    owned.append(adopted)
        return owned

    def _controller_ref(self, rs: Obj) -> Obj:
        """``metav1.NewControllerRef`` to the owner, as its own kind (the RC adapter's
        ``GroupVersionKind`` is core/v1 ReplicationController)."""
        return make_controller_ref(rs, self.kind.api_version, self.kind.kind)

    async def _patch_owner(self, pod: Obj, refs: list[Obj]) -> Obj | None:
        body = {"metadata": {"ownerReferences": refs, "uid": meta(pod).get("uid")}}
        try:
            return await self.pod_api.patch(meta(pod)["name"], body,
                                            namespace=meta(pod).get("namespace"))
        except (NotFound, Conflict):
            return None
        except StatusError as err:
            if err.code == 422:  # the pod changed (uid precondition) or is being deleted
                return None
            raise

    async def _manage(self, rs: Obj, pods: list[Obj], key: str) -> tuple[str, str] | None:
        """``manageReplicas``: create or delete the difference; (reason, message) of a
        failure."""
        diff = len(pods) - int((rs.get("spec") or {}).get("replicas") or 0)
        if diff < 0:
            return await self._create(rs, min(-diff, self.burst), key)
        if diff > 0:
            return await self._delete(rs, pods, min(diff, self.burst), key)
        return None

    async def _create(self, rs: Obj, count: int, key: str) -> tuple[str, str] | None:
        self.expectations[key] = Expectations(adds=count, stamp=self.clock())
        template = (rs.get("spec") or {}).get("template") or {}
        ref = self._controller_ref(rs)
        namespace = meta(rs).get("namespace", "")
        created = 0
        failure: BaseException | None = None
        for batch in slow_start_batches(count):
            results = await asyncio.gather(
                *(self.pod_api.create(pod_from_template(template, rs, ref), namespace=namespace)
                  for _ in range(batch)), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    if not isinstance(result, (StatusError, ClientError)):
                        raise result
                    if self._namespace_terminating(result):
                        continue  # kube neither reports nor retries these
                    failure = failure or result
                    self.recorder.event(rs, "Warning", "FailedCreate",
                                        f"Error creating: {_error_text(result)}")
                else:
                    created += 1
                    self.recorder.event(rs, "Normal", "SuccessfulCreate",
                                        f"Created pod: {meta(result).get('name', '')}")
            if failure is not None:
                break
        if created < count:  # pods never created will never be observed
            found = self.expectations.get(key)
            if found is not None:
                found.adds = max(0, found.adds - (count - created))
        if failure is not None:
            return "FailedCreate", _error_text(failure)
        return None

    @staticmethod
    def _namespace_terminating(err: BaseException) -> bool:
        details = getattr(err, "details", None)
        causes = getattr(details, "causes", None) or []
        return any(getattr(c, "type", "") == "NamespaceTerminating" for c in causes)

    def _related_pods(self, rs: Obj) -> list[Obj]:
        """``getIndirectlyRelatedPods``: pods of every ReplicaSet with the same controller."""
        owner = controller_ref(rs)
        namespace = meta(rs).get("namespace", "")
        siblings = [rs]
        if owner is not None:
            siblings = [other for other in self.rs_informer.by_index(NAMESPACE_INDEX, namespace)
                        if (controller_ref(other) or {}).get("uid") == owner.get("uid")]
        related: list[Obj] = []
        for sibling in siblings:
            related.extend(self.pod_informer.by_index(OWNER_INDEX, meta(sibling).get("uid", "")))
        return related

    async def _delete(self, rs: Obj, pods: list[Obj], count: int,
                      key: str) -> tuple[str, str] | None:
        victims = pods_to_delete(pods, self._related_pods(rs), count, self.clock())
        self.expectations[key] = Expectations(deletes={_key(p) for p in victims},
                                              stamp=self.clock())

        async def delete(pod: Obj) -> BaseException | None:
            try:
                await self.pod_api.delete(meta(pod)["name"], namespace=meta(pod)["namespace"],
                                          preconditions={"uid": meta(pod).get("uid", "")})
            except NotFound:
                self._deletion_observed(key, pod)
                return None
            except (StatusError, ClientError) as err:
                self._deletion_observed(key, pod)
                self.recorder.event(rs, "Warning", "FailedDelete",
                                    f"Error deleting: {_error_text(err)}")
                return err
            self.recorder.event(rs, "Normal", "SuccessfulDelete",
                                f"Deleted pod: {meta(pod)['name']}")
            return None

        errors = [e for e in await asyncio.gather(*(delete(p) for p in victims)) if e]
        if errors:
            return "FailedDelete", _error_text(errors[0])
        return None

    async def _write_status(self, rs: Obj, status: Obj) -> Obj:
        """``updateReplicaSetStatus``: PUT status, once more on a conflict with a fresh GET
        (the status, observedGeneration included, is what this sync saw)."""
        body = {**rs, "status": status}
        try:
            written: Obj = await self.rs_api.replace_status(body,
                                                            namespace=meta(rs)["namespace"])
            return written
        except Conflict:
            fresh = await self.rs_api.get(meta(rs)["name"], namespace=meta(rs)["namespace"])
            if meta(fresh).get("uid") != meta(rs).get("uid"):
                return rs
            result: Obj = await self.rs_api.replace_status({**fresh, "status": status},
                                                           namespace=meta(rs)["namespace"])
            return result


def make_replicaset_controller(ctx: ClusterContext,
                               options: object = None) -> ReplicaSetController:
    """The component factory. Options (a mapping, or an options object's ``extra``):
    ``workers`` (kube's ``--concurrent-replicaset-syncs``, 5) and ``burst`` (500)."""
    return ReplicaSetController(ctx, workers=option(options, "workers", WORKERS),
                                burst=option(options, "burst", BURST_REPLICAS))


def make_replication_controller_controller(ctx: ClusterContext,
                                           options: object = None) -> ReplicaSetController:
    """The replication manager's factory (kube's ``startReplicationController``): the same
    loop on ReplicationControllers; ``workers`` (kube's ``--concurrent-rc-syncs``, 5) and
    ``burst`` (500) as for ReplicaSets."""
    return ReplicaSetController(ctx, kind=REPLICATION_CONTROLLER,
                                workers=option(options, "workers", WORKERS),
                                burst=option(options, "burst", BURST_REPLICAS))
