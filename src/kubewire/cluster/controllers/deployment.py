"""The Deployment controller (``deployment-controller``, kube's ``pkg/controller/deployment``),
a client of the API.

Per Deployment key (``syncDeployment``): claim ReplicaSets, keep the paused condition, then
either scale proportionally (paused, or ``spec.replicas`` changed) or roll out — RollingUpdate
(``rolling.go``: grow the new ReplicaSet within maxSurge, shrink old ones within
maxUnavailable) or Recreate (``recreate.go``: old to zero, wait for their pods, then the new
one) — then clean up history beyond ``revisionHistoryLimit`` and write the status and
conditions ``kubectl rollout status`` reads (``progress.go``). ReplicaSet and Deployment
writes are PUTs carrying the cached resourceVersion, so a stale cache costs a Conflict and a
retry, never a double step. The arithmetic is in ``rollout``.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kubewire.client import WorkQueue
from kubewire.client.errors import AlreadyExists, ClientError, Conflict, NotFound, StatusError
from kubewire.client.informers.informer import NAMESPACE_INDEX, OWNER_INDEX
from kubewire.cluster.controllers import rollout as ro
from kubewire.cluster.controllers.owner_keys import OwnerKeys, add_all
from kubewire.cluster.controllers.replica_rules import (
    controller_ref,
    make_controller_ref,
    meta,
    option,
    parse_time,
)
from kubewire.cluster.runtime import ClusterContext, run_workers
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import LabelSelector, label_selector_from_match

log = logging.getLogger(__name__)
Obj = dict[str, Any]
WORKERS = 5  # --concurrent-deployment-syncs
SELECTING_ALL = "This deployment is selecting all pods. A non-empty selector is required."


def _key(obj: Mapping[str, Any]) -> str:
    return f"{meta(obj).get('namespace', '')}/{meta(obj).get('name', '')}"


def _selector(obj: Mapping[str, Any]) -> LabelSelector | None:
    try:
        return label_selector_from_match((obj.get("spec") or {}).get("selector") or {})
    except SelectorError:
        return None


def _clean_status(status: Obj) -> Obj:
    """As the API serves it: zero integers and empty conditions omitted."""
    return {k: v for k, v in status.items() if v not in (0, None, [])}


class DeploymentController:
    """kube's Deployment controller on shared informers and a work queue."""

    name = "deployment-controller"

    def __init__(self, ctx: ClusterContext, *, workers: int = WORKERS) -> None:
        self.ctx = ctx
        self.workers = workers
        self.clock = ctx.clock
        self.d_api = ctx.api("apps/v1", "Deployment")
        self.rs_api = ctx.api("apps/v1", "ReplicaSet")
        self.recorder = ctx.recorder(self.name)
        self.queue: WorkQueue[str] = WorkQueue()
        self.d_informer = ctx.informer("apps/v1", "Deployment")
        self.rs_informer = ctx.informer("apps/v1", "ReplicaSet")
        self.pod_informer = ctx.informer("v1", "Pod")
        self.owners = OwnerKeys(self.d_informer, "Deployment")
        for informer in (self.rs_informer, self.pod_informer):
            with contextlib.suppress(ValueError):
                informer.add_owner_indexer()
        self.d_informer.add_handlers(on_add=self._d_changed, on_update=self._d_updated,
                                     on_delete=self._d_changed)
        self.rs_informer.add_handlers(on_add=self._rs_added, on_update=self._rs_updated,
                                      on_delete=self._rs_deleted)
        self.pod_informer.add_handlers(on_delete=self._pod_deleted)

    # --- event handlers -----------------------------------------------------------------

    async def _d_changed(self, d: Obj) -> None:
        await self.queue.add(_key(d))

    async def _d_updated(self, old: Obj, new: Obj) -> None:
        await self.queue.add(_key(new))

    async def _rs_added(self, rs: Obj) -> None:
        if meta(rs).get("deletionTimestamp"):
            await self._rs_deleted(rs)
            return
        await add_all(self.queue, self.owners.wake(rs))

    async def _rs_updated(self, old: Obj, new: Obj) -> None:
        if meta(old).get("resourceVersion") == meta(new).get("resourceVersion"):
            return
        old_ref, new_ref = controller_ref(old), controller_ref(new)
        if old_ref is not None and (new_ref is None or old_ref.get("uid") != new_ref.get("uid")):
            old_key = self.owners.controller(old)
            if old_key is not None:
                await self.queue.add(old_key)
        if new_ref is not None:
            key = self.owners.controller(new)
            if key is not None:
                await self.queue.add(key)
            return
        if meta(old).get("labels") != meta(new).get("labels") or old_ref is not None:
            await add_all(self.queue, self.owners.selecting(new))

    async def _rs_deleted(self, rs: Obj) -> None:
        key = self.owners.controller(rs)
        if key is not None:
            await self.queue.add(key)

    async def _pod_deleted(self, pod: Obj) -> None:
        """A Recreate rollout waits for old pods to go."""
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        rs = self.rs_informer.get(ref.get("name", ""), meta(pod).get("namespace", ""))
        if rs is None:
            return
        key = self.owners.controller(rs)
        if key is None:
            return
        namespace, name = key.split("/", 1)
        d = self.d_informer.get(name, namespace)
        if d is not None and not ro.is_rolling(d):
            await self.queue.add(key)

    # --- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        for informer in (self.d_informer, self.rs_informer, self.pod_informer):
            await informer.wait_for_sync()
        for d in self.d_informer.cache.list():
            await self.queue.add(_key(d))
        await run_workers(self.queue, self.sync, workers=self.workers, what="deployment")

    async def sync(self, key: str) -> None:
        """``syncDeployment``."""
        namespace, name = key.split("/", 1)
        cached = self.d_informer.get(name, namespace)
        if cached is None:
            return
        d = copy.deepcopy(cached)
        selector = _selector(d)
        if selector is None:
            return
        if selector.is_empty:
            self.recorder.event(d, "Warning", "SelectingAll", SELECTING_ALL)
            status = d.setdefault("status", {})
            if int(status.get("observedGeneration") or 0) < int(meta(d).get("generation") or 0):
                status["observedGeneration"] = meta(d).get("generation")
                await self._update_status(d)
            return
        rss = await self._claim(d, selector)
        if meta(d).get("deletionTimestamp"):
            new_rs, old_rss = await self._get_all(d, rss, create=False)
            await self._sync_status(d, [*old_rss, new_rs], new_rs)
            return
        await self._check_paused(d)
        spec = d.get("spec") or {}
        if spec.get("paused") or await self._is_scaling_event(d, rss):
            await self._sync_scale(d, rss)
        elif ro.is_rolling(d):
            await self._rollout_rolling(d, rss)
        else:
            await self._rollout_recreate(d, rss)

    # --- claiming ---------------------------------------------------------------------

    async def _claim(self, d: Obj, selector: LabelSelector) -> list[Obj]:
        """``ClaimReplicaSets``: owned and matching, plus adopted orphans; owned ones that no
        longer match are released."""
        uid = meta(d).get("uid")
        deleting = bool(meta(d).get("deletionTimestamp"))
        owned: list[Obj] = []
        for rs in self.rs_informer.by_index(NAMESPACE_INDEX, meta(d).get("namespace", "")):
            ref = controller_ref(rs)
            matches = selector.matches(meta(rs).get("labels") or {})
            if ref is not None:
                if ref.get("uid") != uid:
                    continue
                if matches:
                    owned.append(copy.deepcopy(rs))
                elif not deleting:
                    await self._patch_owner(rs, [{"$patch": "delete", "uid": uid}])
                continue
            if matches and not deleting and not meta(rs).get("deletionTimestamp"):
                adopted = await self._patch_owner(
                    rs, [make_controller_ref(d, "apps/v1", "Deployment")])
                if adopted is not None:
                    owned.append(adopted)
        return owned

    async def _patch_owner(self, rs: Obj, refs: list[Obj]) -> Obj | None:
        body = {"metadata": {"ownerReferences": refs, "uid": meta(rs).get("uid")}}
        try:
            return await self.rs_api.patch(meta(rs)["name"], body,
                                           namespace=meta(rs).get("namespace"))
        except (NotFound, Conflict):
            return None
        except StatusError as err:
            if err.code == 422:
                return None
            raise

    # --- writes -----------------------------------------------------------------------

    async def _update_status(self, d: Obj) -> None:
        """``UpdateStatus`` (also how the revision annotation is written); ``d`` takes the new
        resourceVersion so a second write in the same sync does not conflict with itself."""
        if "status" in d:
            d["status"] = _clean_status(d["status"])
        written = await self.d_api.replace_status(d, namespace=meta(d)["namespace"])
        meta(d)["resourceVersion"] = meta(written).get("resourceVersion")

    async def _update_rs(self, rs: Obj) -> Obj:
        written: Obj = await self.rs_api.replace(rs, namespace=meta(rs)["namespace"])
        return written

    async def _scale_rs(self, d: Obj, rs: Obj, new_scale: int,
                        operation: str) -> tuple[bool, Obj]:
        """``scaleReplicaSet``: size and replica annotations in one PUT; the event."""
        replicas = ro.replicas_of(d)
        max_replicas = replicas + ro.max_surge(d)
        size_changes = ro.rs_replicas(rs) != new_scale
        if not size_changes and not ro.replicas_annotations_need_update(rs, replicas,
                                                                        max_replicas):
            return False, rs
        old_scale = ro.rs_replicas(rs)
        changed = copy.deepcopy(rs)
        changed.setdefault("spec", {})["replicas"] = new_scale
        ro.set_replicas_annotations(changed, replicas, max_replicas)
        written = await self._update_rs(changed)
        if size_changes:
            self.recorder.event(d, "Normal", "ScalingReplicaSet",
                                f"Scaled {operation} replica set {meta(rs)['name']} "
                                f"from {old_scale} to {new_scale}")
        return size_changes, written

    async def _scale_and_record(self, d: Obj, rs: Obj, new_scale: int) -> tuple[bool, Obj]:
        if ro.rs_replicas(rs) == new_scale:
            return False, rs
        operation = "up" if ro.rs_replicas(rs) < new_scale else "down"
        return await self._scale_rs(d, rs, new_scale, operation)

    # --- the new ReplicaSet -------------------------------------------------------------

    async def _get_all(self, d: Obj, rss: list[Obj],
                       create: bool) -> tuple[Obj | None, list[Obj]]:
        """``getAllReplicaSetsAndSyncRevision``: (new RS or None, every old RS)."""
        found_new = ro.find_new_rs(d, rss)
        old_rss = [rs for rs in rss if rs is not found_new]
        new_rs = await self._get_new_rs(d, rss, old_rss, create)
        return new_rs, old_rss

    async def _get_new_rs(self, d: Obj, rss: list[Obj], old_rss: list[Obj],
                          create: bool) -> Obj | None:
        """``getNewReplicaSet``."""
        existing = ro.find_new_rs(d, rss)
        new_revision = ro.max_revision(old_rss) + 1
        now = self.clock()
        spec = d.get("spec") or {}
        if existing is not None:
            rs = copy.deepcopy(existing)
            annotations_updated = ro.set_new_rs_annotations(d, rs, new_revision, True)
            min_ready = int(spec.get("minReadySeconds") or 0)
            if annotations_updated or int(rs["spec"].get("minReadySeconds") or 0) != min_ready:
                rs["spec"]["minReadySeconds"] = min_ready
                written = await self._update_rs(rs)
                # later steps of this sync work from the written object, not the stale one
                rss[:] = [written if meta(x).get("uid") == meta(rs).get("uid") else x
                          for x in rss]
                old_rss[:] = [x for x in rss if meta(x).get("uid") != meta(rs).get("uid")]
                return written
            needs_update = self._set_revision(d, (meta(rs).get("annotations") or {}).get(
                ro.REVISION, ""))
            status = d.setdefault("status", {})
            if ro.has_progress_deadline(d) and ro.get_condition(status, "Progressing") is None:
                ro.set_condition(status, ro.condition(
                    "Progressing", "True", "FoundNewReplicaSet",
                    f'Found new replica set "{meta(rs)["name"]}"', now))
                needs_update = True
            if needs_update:
                await self._update_status(d)
            return rs
        if not create:
            return None
        return await self._create_new_rs(d, old_rss, new_revision)

    async def _create_new_rs(self, d: Obj, old_rss: list[Obj], new_revision: int) -> Obj | None:
        spec = d.get("spec") or {}
        status = d.setdefault("status", {})
        template = copy.deepcopy(spec.get("template") or {})
        pod_hash = ro.template_hash(template, status.get("collisionCount"))
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), ro.HASH_LABEL: pod_hash}
        selector = copy.deepcopy(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}),
                                   ro.HASH_LABEL: pod_hash}
        name = f"{meta(d)['name']}-{pod_hash}"
        new_rs: Obj = {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": meta(d)["namespace"],
                         "ownerReferences": [make_controller_ref(d, "apps/v1", "Deployment")],
                         "labels": dict(tmeta["labels"])},
            "spec": {"replicas": 0, "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                     "selector": selector, "template": template}}
        count = ro.new_rs_new_replicas(d, [*old_rss, new_rs], new_rs)
        new_rs["spec"]["replicas"] = count
        ro.set_new_rs_annotations(d, new_rs, new_revision, False)
        now = self.clock()
        already = False
        try:
            created: Obj = await self.rs_api.create(new_rs, namespace=meta(d)["namespace"])
        except AlreadyExists:
            found = self.rs_informer.get(name, meta(d)["namespace"])
            if found is None:
                found = await self.rs_api.get(name, namespace=meta(d)["namespace"])
            ref = controller_ref(found)
            if ref is not None and ref.get("uid") == meta(d).get("uid") and \
                    ro.equal_ignore_hash(spec.get("template") or {},
                                         (found.get("spec") or {}).get("template") or {}):
                created, already = copy.deepcopy(found), True
            else:
                status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
                await self._update_status(d)
                raise
        except (StatusError, ClientError) as err:
            message = (f'Failed to create new replica set "{name}": '
                       f'{getattr(err, "message", "") or err}')
            if ro.has_progress_deadline(d):
                ro.set_condition(status, ro.condition("Progressing", "False",
                                                      "ReplicaSetCreateError", message, now))
                await self._update_status(d)
            self.recorder.event(d, "Warning", "ReplicaSetCreateError", message)
            raise
        if not already and count > 0:
            self.recorder.event(d, "Normal", "ScalingReplicaSet",
                                f"Scaled up replica set {name} from 0 to {count}")
        needs_update = self._set_revision(d, str(new_revision))
        if not already and ro.has_progress_deadline(d):
            ro.set_condition(status, ro.condition(
                "Progressing", "True", "NewReplicaSetCreated",
                f'Created new replica set "{name}"', now))
            needs_update = True
        if needs_update:
            await self._update_status(d)
        return created

    @staticmethod
    def _set_revision(d: Obj, revision: str) -> bool:
        """``SetDeploymentRevision``."""
        annotations = meta(d).setdefault("annotations", {})
        if annotations.get(ro.REVISION) == revision:
            return False
        annotations[ro.REVISION] = revision
        return True

    # --- paused and scaling -----------------------------------------------------------

    async def _check_paused(self, d: Obj) -> None:
        """``checkPausedConditions``."""
        if not ro.has_progress_deadline(d):
            return
        status = d.setdefault("status", {})
        cond = ro.get_condition(status, "Progressing")
        if cond is not None and cond.get("reason") == "ProgressDeadlineExceeded":
            return
        paused_cond = cond is not None and cond.get("reason") == "DeploymentPaused"
        paused = bool((d.get("spec") or {}).get("paused"))
        now = self.clock()
        if paused and not paused_cond:
            ro.set_condition(status, ro.condition("Progressing", "Unknown", "DeploymentPaused",
                                                  "Deployment is paused", now))
        elif not paused and paused_cond:
            ro.set_condition(status, ro.condition("Progressing", "Unknown",
                                                  "DeploymentResumed",
                                                  "Deployment is resumed", now))
        else:
            return
        await self._update_status(d)

    async def _is_scaling_event(self, d: Obj, rss: list[Obj]) -> bool:
        """``isScalingEvent``: an active RS was sized for another ``spec.replicas``."""
        new_rs, old_rss = await self._get_all(d, rss, create=False)
        for rs in [*old_rss, new_rs]:
            if rs is None or ro.rs_replicas(rs) == 0:
                continue
            desired = (meta(rs).get("annotations") or {}).get(ro.DESIRED_REPLICAS)
            if desired is None:
                continue
            with contextlib.suppress(ValueError):
                if int(desired) != ro.replicas_of(d):
                    return True
        return False

    async def _sync_scale(self, d: Obj, rss: list[Obj]) -> None:
        """``sync``: scale only (paused deployments, replica changes), cleanup when paused."""
        new_rs, old_rss = await self._get_all(d, rss, create=False)
        await self._scale(d, new_rs, old_rss)
        refreshed = self._refreshed(rss)
        new_rs, old_rss = self._split(new_rs, refreshed)
        if (d.get("spec") or {}).get("paused"):
            await self._cleanup(d, old_rss)
        await self._sync_status(d, [*old_rss, new_rs], new_rs)

    def _refreshed(self, rss: list[Obj]) -> list[Obj]:
        """The claimed RSes as the cache now holds them (after this sync's writes)."""
        out = []
        for rs in rss:
            found = self.rs_informer.get(meta(rs)["name"], meta(rs)["namespace"])
            out.append(copy.deepcopy(found) if found is not None else rs)
        return out

    @staticmethod
    def _split(new_rs: Obj | None, rss: list[Obj]) -> tuple[Obj | None, list[Obj]]:
        if new_rs is None:
            return None, rss
        uid = meta(new_rs).get("uid")
        found = next((rs for rs in rss if meta(rs).get("uid") == uid), new_rs)
        return found, [rs for rs in rss if meta(rs).get("uid") != uid]

    async def _scale(self, d: Obj, new_rs: Obj | None, old_rss: list[Obj]) -> None:
        """``scale``: one active RS takes the new size; else proportional shares."""
        replicas = ro.replicas_of(d)
        latest = self._active_or_latest(new_rs, old_rss)
        if latest is not None:
            if ro.rs_replicas(latest) != replicas:
                await self._scale_and_record(d, latest, replicas)
            return
        if self._saturated(d, new_rs):
            for rs in old_rss:
                if ro.rs_replicas(rs) > 0:
                    await self._scale_and_record(d, rs, 0)
            return
        if not ro.is_rolling(d):
            return
        active = [rs for rs in [*old_rss, new_rs] if rs is not None and ro.rs_replicas(rs) > 0]
        status_replicas = int((d.get("status") or {}).get("replicas") or 0)
        operation, sizes = ro.proportional_sizes(d, active, status_replicas)
        for rs in active:
            await self._scale_rs(d, rs, sizes[meta(rs)["name"]], operation)

    @staticmethod
    def _active_or_latest(new_rs: Obj | None, old_rss: list[Obj]) -> Obj | None:
        """``FindActiveOrLatest``."""
        if new_rs is None and not old_rss:
            return None
        newest_first = sorted(old_rss, key=ro.creation_key, reverse=True)
        active = [rs for rs in [*newest_first, new_rs]
                  if rs is not None and ro.rs_replicas(rs) > 0]
        if len(active) == 1:
            return active[0]
        if not active:
            return new_rs if new_rs is not None else newest_first[0]
        return None

    @staticmethod
    def _saturated(d: Obj, rs: Obj | None) -> bool:
        """``IsSaturated``."""
        if rs is None:
            return False
        desired = (meta(rs).get("annotations") or {}).get(ro.DESIRED_REPLICAS)
        replicas = ro.replicas_of(d)
        return (desired == str(replicas) and ro.rs_replicas(rs) == replicas
                and ro.rs_status(rs, "availableReplicas") == replicas)

    # --- rolling update ---------------------------------------------------------------

    async def _rollout_rolling(self, d: Obj, rss: list[Obj]) -> None:
        """``rolloutRolling``."""
        new_rs, old_rss = await self._get_all(d, rss, create=True)
        if new_rs is None:
            return
        all_rss: list[Obj | None] = [*old_rss, new_rs]
        scaled, new_rs = await self._reconcile_new(d, all_rss, new_rs)
        if scaled:
            await self._sync_rollout_status(d, [*old_rss, new_rs], new_rs)
            return
        scaled_down, old_rss = await self._reconcile_old(d, old_rss, new_rs)
        if scaled_down:
            await self._sync_rollout_status(d, [*old_rss, new_rs], new_rs)
            return
        if ro.complete(d, d.get("status") or {}):
            await self._cleanup(d, old_rss)
        await self._sync_rollout_status(d, [*old_rss, new_rs], new_rs)

    async def _reconcile_new(self, d: Obj, all_rss: Sequence[Obj | None],
                             new_rs: Obj) -> tuple[bool, Obj]:
        replicas = ro.replicas_of(d)
        if ro.rs_replicas(new_rs) == replicas:
            return False, new_rs
        if ro.rs_replicas(new_rs) > replicas:
            return await self._scale_and_record(d, new_rs, replicas)
        count = ro.new_rs_new_replicas(d, all_rss, new_rs)
        return await self._scale_and_record(d, new_rs, count)

    async def _reconcile_old(self, d: Obj, old_rss: list[Obj],
                             new_rs: Obj) -> tuple[bool, list[Obj]]:
        """``reconcileOldReplicaSets``."""
        active_old = [rs for rs in old_rss if ro.rs_replicas(rs) > 0]
        if ro.total_spec(active_old) == 0:
            return False, old_rss
        all_count = ro.total_spec([*active_old, new_rs])
        min_available = ro.replicas_of(d) - ro.max_unavailable(d)
        new_unavailable = ro.rs_replicas(new_rs) - ro.rs_status(new_rs, "availableReplicas")
        max_scaled_down = all_count - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False, old_rss
        by_name = {meta(rs)["name"]: rs for rs in old_rss}
        cleaned = 0
        for rs in sorted(active_old, key=ro.creation_key):
            if cleaned >= max_scaled_down:
                break
            target = by_name[meta(rs)["name"]]
            unhealthy = ro.rs_replicas(target) - ro.rs_status(target, "availableReplicas")
            if ro.rs_replicas(target) == 0 or unhealthy <= 0:
                continue
            step = min(max_scaled_down - cleaned, unhealthy)
            _, by_name[meta(rs)["name"]] = await self._scale_and_record(
                d, target, ro.rs_replicas(target) - step)
            cleaned += step
        old_now = list(by_name.values())
        scaled = await self._scale_down_old_rolling(d, old_now, new_rs, by_name)
        return cleaned + scaled > 0, list(by_name.values())

    async def _scale_down_old_rolling(self, d: Obj, old_rss: list[Obj], new_rs: Obj,
                                      by_name: dict[str, Obj]) -> int:
        """``scaleDownOldReplicaSetsForRollingUpdate``."""
        min_available = ro.replicas_of(d) - ro.max_unavailable(d)
        available = ro.total_status([*old_rss, new_rs], "availableReplicas")
        if available <= min_available:
            return 0
        total = available - min_available
        done = 0
        for rs in sorted(old_rss, key=ro.creation_key):
            if done >= total:
                break
            if ro.rs_replicas(rs) == 0:
                continue
            step = min(ro.rs_replicas(rs), total - done)
            _, by_name[meta(rs)["name"]] = await self._scale_and_record(
                d, rs, ro.rs_replicas(rs) - step)
            done += step
        return done

    # --- recreate ---------------------------------------------------------------------

    async def _rollout_recreate(self, d: Obj, rss: list[Obj]) -> None:
        """``rolloutRecreate``."""
        new_rs, old_rss = await self._get_all(d, rss, create=False)
        scaled_down = False
        updated_old: list[Obj] = []
        for rs in old_rss:
            if ro.rs_replicas(rs) > 0:
                scaled, rs = await self._scale_and_record(d, rs, 0)
                scaled_down = scaled_down or scaled
            updated_old.append(rs)
        old_rss = updated_old
        if scaled_down or self._old_pods_running(new_rs, old_rss):
            await self._sync_rollout_status(d, [*old_rss, new_rs], new_rs)
            return
        if new_rs is None:
            new_rs, old_rss = await self._get_all(d, rss, create=True)
        if new_rs is not None:
            _, new_rs = await self._scale_and_record(d, new_rs, ro.replicas_of(d))
        if ro.complete(d, d.get("status") or {}):
            await self._cleanup(d, old_rss)
        await self._sync_rollout_status(d, [*old_rss, new_rs], new_rs)

    def _old_pods_running(self, new_rs: Obj | None, old_rss: list[Obj]) -> bool:
        """``oldPodsRunning``: old RSes still report pods, or their pods are not finished."""
        if ro.total_status(old_rss, "replicas") > 0:
            return True
        new_uid = meta(new_rs).get("uid") if new_rs is not None else None
        for rs in old_rss:
            if meta(rs).get("uid") == new_uid:
                continue
            for pod in self.pod_informer.by_index(OWNER_INDEX, meta(rs).get("uid", "")):
                if (controller_ref(pod) or {}).get("uid") != meta(rs).get("uid"):
                    continue
                if (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded"):
                    return True
        return False

    # --- cleanup and status -----------------------------------------------------------

    async def _cleanup(self, d: Obj, old_rss: list[Obj]) -> None:
        """``cleanupDeployment``: delete the oldest revisions beyond revisionHistoryLimit."""
        limit = (d.get("spec") or {}).get("revisionHistoryLimit")
        if limit is None:
            return
        alive = [rs for rs in old_rss if not meta(rs).get("deletionTimestamp")]
        surplus = len(alive) - int(limit)
        if surplus <= 0:
            return
        alive.sort(key=lambda rs: (ro.revision_of(rs), ro.creation_key(rs)))
        for rs in alive[:surplus]:
            if ro.rs_status(rs, "replicas") != 0 or ro.rs_replicas(rs) != 0 \
                    or int(meta(rs).get("generation") or 0) > ro.rs_status(
                        rs, "observedGeneration"):
                continue
            with contextlib.suppress(NotFound):
                await self.rs_api.delete(meta(rs)["name"], namespace=meta(rs)["namespace"])

    async def _sync_status(self, d: Obj, all_rss: Sequence[Obj | None],
                           new_rs: Obj | None) -> None:
        """``syncDeploymentStatus``."""
        status = _clean_status(ro.deployment_status(d, all_rss, new_rs, self.clock()))
        if status == (d.get("status") or {}):
            return
        d["status"] = status
        await self._update_status(d)

    async def _sync_rollout_status(self, d: Obj, all_rss: Sequence[Obj | None],
                                   new_rs: Obj | None) -> None:
        """``syncRolloutStatus``: the Progressing condition and ReplicaFailure."""
        now = self.clock()
        status = ro.deployment_status(d, all_rss, new_rs, now)
        old_status = d.get("status") or {}
        if not ro.has_progress_deadline(d):
            ro.remove_condition(status, "Progressing")
        current = ro.get_condition(old_status, "Progressing")
        settled = (int(status.get("replicas") or 0) == int(status.get("updatedReplicas") or 0)
                   and current is not None and current.get("reason") == "NewReplicaSetAvailable")
        subject = (f'ReplicaSet "{meta(new_rs)["name"]}"' if new_rs is not None
                   else f'Deployment "{meta(d)["name"]}"')
        if ro.has_progress_deadline(d) and not settled:
            if ro.complete(d, status):
                ro.set_condition(status, ro.condition(
                    "Progressing", "True", "NewReplicaSetAvailable",
                    f"{subject} has successfully progressed.", now))
            elif ro.progressing(d, status):
                cond = ro.condition("Progressing", "True", "ReplicaSetUpdated",
                                    f"{subject} is progressing.", now)
                if current is not None:
                    if current.get("status") == "True":
                        cond["lastTransitionTime"] = current.get("lastTransitionTime")
                    ro.remove_condition(status, "Progressing")
                ro.set_condition(status, cond)
            elif ro.timed_out(d, status, now):
                ro.set_condition(status, ro.condition(
                    "Progressing", "False", "ProgressDeadlineExceeded",
                    f"{subject} has timed out progressing.", now))
        failure = self._replica_failure(all_rss, new_rs)
        if failure is not None:
            ro.set_condition(status, failure)
        else:
            ro.remove_condition(status, "ReplicaFailure")
        status = _clean_status(status)
        if status == _clean_status(dict(old_status)):
            self._requeue_stuck(d, status, now)
            return
        d["status"] = status
        await self._update_status(d)

    @staticmethod
    def _replica_failure(all_rss: Sequence[Obj | None], new_rs: Obj | None) -> Obj | None:
        """``getReplicaFailures``: the new RS's ReplicaFailure first, then old ones'."""
        ordered = [new_rs, *[rs for rs in all_rss if rs is not new_rs]]
        for rs in ordered:
            if rs is None:
                continue
            for cond in (rs.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "ReplicaFailure":
                    stamp = cond.get("lastTransitionTime")
                    return {"type": "ReplicaFailure", "status": cond.get("status"),
                            "lastUpdateTime": stamp, "lastTransitionTime": stamp,
                            "reason": cond.get("reason"), "message": cond.get("message")}
        return None

    def _requeue_stuck(self, d: Obj, status: Obj, now: float) -> None:
        """``requeueStuckDeployment``: look again when the progress deadline passes."""
        current = ro.get_condition(d.get("status") or {}, "Progressing")
        if not ro.has_progress_deadline(d) or current is None:
            return
        if ro.complete(d, status) or current.get("reason") == "ProgressDeadlineExceeded":
            return
        since = parse_time(current.get("lastUpdateTime"))
        if since is None:
            return
        deadline = int((d.get("spec") or {}).get("progressDeadlineSeconds") or 0)
        after = since + deadline - now
        if after < 1.0:
            self.queue.add_rate_limited(_key(d))
        else:
            self.queue.add_after(_key(d), after + 1.0)


def make_deployment_controller(ctx: ClusterContext,
                               options: object = None) -> DeploymentController:
    """The component factory. Options (a mapping, or an options object's ``extra``):
    ``workers`` (kube's ``--concurrent-deployment-syncs``, 5)."""
    return DeploymentController(ctx, workers=option(options, "workers", WORKERS))
