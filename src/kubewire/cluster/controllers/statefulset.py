"""The StatefulSet controller (``statefulset-controller``, kube's ``pkg/controller/statefulset``).

Per set: keep its ControllerRevisions (``history``), create ordinal pods ``<set>-<i>`` with
their claims, one at a time in order (``OrderedReady``) or all at once (``Parallel``), delete
condemned ordinals from the highest, roll pods to the update revision from the highest ordinal
down to the partition one at a time (``RollingUpdate``; ``OnDelete`` leaves that to the user),
and write the status ``kubectl rollout status`` reads. Like kube it keeps no expectations: pod
names are fixed, so a create the cache has not seen yet answers AlreadyExists.
The decisions are in ``statefulset_rules``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from kubewire.client import PatchType, WorkQueue
from kubewire.client.errors import AlreadyExists, ClientError, Conflict, NotFound, StatusError
from kubewire.client.informers.informer import NAMESPACE_INDEX
from kubewire.cluster.controllers import adoption, history, pod_state
from kubewire.cluster.controllers import statefulset_rules as rules
from kubewire.cluster.controllers.options import settings_of
from kubewire.cluster.controllers.owner_keys import OwnerKeys, add_all
from kubewire.cluster.runtime import ClusterContext, run_workers

Obj = dict[str, Any]
NAME = "statefulset-controller"
WORKERS = 5  # kube-controller-manager --concurrent-statefulset-syncs
MAX_COLLISIONS = 100


def option(options: object, key: str, default: int) -> int:
    """A whole-number setting from the factory's options (``options.settings_of``)."""
    return int(settings_of(options).get(key, default))


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def controller_of(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == kind:
            return dict(ref)
    return None


class StatefulSetController:
    """kube's StatefulSet controller over shared informers."""

    name = NAME

    def __init__(self, ctx: ClusterContext, workers: int = WORKERS) -> None:
        self.ctx = ctx
        self.workers = workers
        self.queue: WorkQueue[str] = WorkQueue()
        self.events = ctx.recorder(NAME)
        self.sets = ctx.informer("apps/v1", "StatefulSet")
        self.owners = OwnerKeys(self.sets, "StatefulSet")
        self.pods = ctx.informer("v1", "Pod")
        self.revisions = ctx.informer("apps/v1", "ControllerRevision")
        self.claims = ctx.informer("v1", "PersistentVolumeClaim")
        for informer in (self.pods, self.revisions):  # shared: another may have indexed it
            with contextlib.suppress(ValueError):
                informer.add_owner_indexer()
        self.set_api = ctx.api("apps/v1", "StatefulSet")
        self.pod_api = ctx.api("v1", "Pod")
        self.rev_api = ctx.api("apps/v1", "ControllerRevision")
        self.claim_api = ctx.api("v1", "PersistentVolumeClaim")

    async def run(self) -> None:
        self.sets.add_handlers(on_add=self._enqueue, on_update=lambda _o, n: self._enqueue(n),
                               on_delete=self._enqueue)
        self.pods.add_handlers(on_add=self._pod_changed,
                               on_update=lambda _o, n: self._pod_changed(n),
                               on_delete=self._pod_changed)
        for informer in (self.sets, self.pods, self.revisions, self.claims):
            await informer.wait_for_sync()
        for sts in self.sets.cache.list():
            await self._enqueue(sts)
        await run_workers(self.queue, self.sync, workers=self.workers, what="statefulset")

    async def _enqueue(self, sts: Obj) -> None:
        await self.queue.add(key_of(sts))

    async def _pod_changed(self, pod: Obj) -> None:
        await add_all(self.queue, self.owners.wake(pod))

    # --- one set --------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        sts = self.sets.get(name, namespace)
        if sts is None or (sts.get("metadata") or {}).get("deletionTimestamp"):
            return
        uid = sts["metadata"].get("uid", "")
        revisions = [r for r in self.revisions.by_index("owner", uid)
                     if (controller_of(r, "StatefulSet") or {}).get("uid") == uid]
        collisions = int((sts.get("status") or {}).get("collisionCount") or 0)
        current, update, collisions = await self._revisions(sts, revisions, collisions)
        pods = await self._claim_pods(sts)
        await self._update_set(sts, pods, current, update)
        pods = [p for p in self.pods.by_index("owner", uid)
                if (controller_of(p, "StatefulSet") or {}).get("uid") == uid]
        await self._write_status(sts, pods, current, update, collisions)
        await self._truncate(sts, pods, current, update)
        self._recheck_when_available(key, sts, pods)

    def _recheck_when_available(self, key: str, sts: Obj, pods: list[Obj]) -> None:
        """With ``minReadySeconds``, sync again when the next Ready pod becomes available."""
        min_ready = pod_state.min_ready_seconds(sts)
        if min_ready <= 0:
            return
        now = self.ctx.clock()
        waits = [w for w in (pod_state.wait_until_available(p, min_ready, now) for p in pods)
                 if w]
        if waits:
            self.queue.add_after(key, min(waits) + 0.05)

    async def _claim_pods(self, sts: Obj) -> list[Obj]:
        """``getPodsForStatefulSet``: adopt orphans named ``<set>-<n>`` that match the
        selector (after a live check that the set is not being deleted), release owned pods
        that no longer match."""
        namespace, set_name = sts["metadata"]["namespace"], rules.name_of(sts)
        members = [p for p in self.pods.by_index(NAMESPACE_INDEX, namespace)
                   if rules.ordinal_of(set_name, p) is not None]
        decided = adoption.claims(sts, members)
        if not decided.adopt and not decided.release:
            return decided.owned
        deleting = False
        if decided.adopt:
            try:
                live = await self.set_api.get(set_name, namespace=namespace)
            except NotFound:
                return decided.owned
            deleting = bool(live["metadata"].get("deletionTimestamp")) or \
                live["metadata"].get("uid") != sts["metadata"].get("uid")
        return await adoption.apply_claims(self.pod_api, sts, decided, deleting)

    async def _revisions(self, sts: Obj, revisions: list[Obj],
                         collisions: int) -> tuple[Obj, Obj, int]:
        """``getStatefulSetRevisions``: the current and update revisions (creating or
        renumbering the update one) and the collision count."""
        ordered = history.sorted_revisions(revisions)
        data = history.template_patch(sts)
        number = history.next_revision(ordered)
        labels = ((sts.get("spec") or {}).get("template") or {}).get("metadata", {}).get(
            "labels") or {}
        equal = history.find_equal(ordered, data)
        if equal and ordered and equal[-1] is ordered[-1]:
            update = ordered[-1]
        elif equal:
            update = await self.rev_api.patch(rules.name_of(equal[-1]), {"revision": number},
                                              namespace=sts["metadata"]["namespace"])
        else:
            update, collisions = await self._create_revision(sts, data, number, collisions,
                                                             labels)
        wanted = (sts.get("status") or {}).get("currentRevision")
        current = next((r for r in ordered if rules.name_of(r) == wanted), update)
        return current, update, collisions

    async def _create_revision(self, sts: Obj, data: Obj, number: int, collisions: int,
                               labels: Mapping[str, str]) -> tuple[Obj, int]:
        """``CreateControllerRevision``: a name taken by other data bumps the count."""
        namespace = sts["metadata"]["namespace"]
        for _ in range(MAX_COLLISIONS):
            rev = history.new_revision(sts, data, number, collisions, labels)
            try:
                return await self.rev_api.create(rev, namespace=namespace), collisions
            except AlreadyExists:
                existing = await self.rev_api.get(rules.name_of(rev), namespace=namespace)
                if history.equal_revision(existing, data):
                    return existing, collisions
                collisions += 1
        raise ClientError(f"too many revision hash collisions for {key_of(sts)}")

    async def _update_set(self, sts: Obj, pods: list[Obj], current_rev: Obj,
                          update_rev: Obj) -> None:
        """``updateStatefulSet``: create, recreate, condemn and roll, in kube's order."""
        set_name = rules.name_of(sts)
        current, update = rules.name_of(current_rev), rules.name_of(update_rev)
        start, count = rules.start_ordinal(sts), rules.replicas(sts)
        by_ordinal: dict[int, Obj] = {}
        condemned: list[tuple[int, Obj]] = []
        for pod in pods:
            ordinal = rules.ordinal_of(set_name, pod)
            if ordinal is None:
                continue
            if start <= ordinal < start + count:
                by_ordinal[ordinal] = pod
            else:
                condemned.append((ordinal, pod))
        condemned.sort(key=lambda item: -item[0])
        templates = {current: _template_of(current_rev, sts), update: _template_of(update_rev, sts)}
        revisions = (current, update)
        if await self._replicas(sts, by_ordinal, revisions, templates):
            return
        if await self._condemned(sts, by_ordinal, condemned):
            return
        if rules.strategy(sts) == "RollingUpdate" and len(by_ordinal) == count:
            await self._roll(sts, by_ordinal, update)

    async def _replicas(self, sts: Obj, by_ordinal: dict[int, Obj], revisions: tuple[str, str],
                        templates: dict[str, Obj]) -> bool:
        """Ordinals in range, ascending: recreate failed pods, create missing ones (with their
        claims); True when an ``OrderedReady`` set must wait."""
        ordered = not rules.parallel(sts)
        start, now = rules.start_ordinal(sts), self.ctx.clock()
        for ordinal in range(start, start + rules.replicas(sts)):
            pod = by_ordinal.get(ordinal)
            if pod is not None and rules.phase(pod) in ("Failed", "Succeeded") \
                    and not rules.terminating(pod):
                failed = rules.phase(pod) == "Failed"
                self.events.event(
                    sts, "Warning" if failed else "Normal",
                    "RecreatingFailedPod" if failed else "RecreatingTerminatedPod",
                    f"StatefulSet {sts['metadata']['namespace']}/{rules.name_of(sts)} is "
                    f"recreating {'failed' if failed else 'terminated'} Pod {rules.name_of(pod)}")
                await self._delete_pod(sts, pod)
            elif pod is None:
                revision = rules.revision_for(sts, ordinal, *revisions)
                await self._create_pod(sts, ordinal, revision, templates[revision])
            else:
                await self._ensure_claims(sts, ordinal, pod)
                if rules.healthy(pod, sts, now) or not ordered:
                    if not rules.terminating(pod):
                        await self._ensure_identity(sts, ordinal, pod)
                    continue
            if ordered:
                return True  # wait for it to be Running, Ready and not terminating
        return False

    async def _ensure_identity(self, sts: Obj, ordinal: int, pod: Obj) -> None:
        """``identityMatches``/``updateIdentity``: an adopted pod gets the set's identity
        labels (``update Pod … successful``)."""
        missing = rules.identity_labels(rules.name_of(sts), ordinal, pod)
        if not missing:
            return
        name, set_name = rules.name_of(pod), rules.name_of(sts)
        try:
            await self.pod_api.patch(name, {"metadata": {
                "labels": missing, "resourceVersion": pod["metadata"].get("resourceVersion")}},
                namespace=sts["metadata"]["namespace"])
        except NotFound:
            return
        except StatusError as err:
            self.events.event(sts, "Warning", "FailedUpdate",
                              f"update Pod {name} in StatefulSet {set_name} failed error: "
                              f"{err.message}")
            raise
        self.events.event(sts, "Normal", "SuccessfulUpdate",
                          f"update Pod {name} in StatefulSet {set_name} successful")

    async def _condemned(self, sts: Obj, by_ordinal: dict[int, Obj],
                         condemned: list[tuple[int, Obj]]) -> bool:
        """Ordinals out of range, highest first; ``OrderedReady`` one at a time and only
        while every other pod is healthy. True when it must wait."""
        ordered = not rules.parallel(sts)
        now = self.ctx.clock()
        for ordinal, pod in condemned:
            if not rules.terminating(pod):
                if ordered and not all(rules.healthy(p, sts, now) for p in by_ordinal.values()):
                    return True
                await self._release_claims(sts, ordinal, pod)
                await self._delete_pod(sts, pod)
            if ordered:
                return True
        return False

    async def _roll(self, sts: Obj, by_ordinal: dict[int, Obj], update: str) -> None:
        """RollingUpdate: from the highest ordinal down to the partition, delete the first pod
        not at the update revision, or wait for one that is not healthy yet."""
        start, now = rules.start_ordinal(sts), self.ctx.clock()
        for ordinal in range(start + rules.replicas(sts) - 1, start + rules.partition(sts) - 1,
                             -1):
            pod = by_ordinal[ordinal]
            if rules.revision_label(pod) != update and not rules.terminating(pod):
                await self._delete_pod(sts, pod)
                return
            if not rules.healthy(pod, sts, now):
                return

    async def _create_pod(self, sts: Obj, ordinal: int, revision: str, template: Obj) -> None:
        pod = rules.new_pod(sts, ordinal, revision, template)
        await self._ensure_claims(sts, ordinal, pod)
        name, set_name = rules.name_of(pod), rules.name_of(sts)
        try:
            await self.pod_api.create(pod, namespace=sts["metadata"]["namespace"])
        except AlreadyExists:
            return  # the cache has not seen it yet
        except StatusError as err:
            self.events.event(sts, "Warning", "FailedCreate",
                              f"create Pod {name} in StatefulSet {set_name} failed error: "
                              f"{err.message}")
            raise
        self.events.event(sts, "Normal", "SuccessfulCreate",
                          f"create Pod {name} in StatefulSet {set_name} successful")

    async def _delete_pod(self, sts: Obj, pod: Obj) -> None:
        name, set_name = rules.name_of(pod), rules.name_of(sts)
        try:
            await self.pod_api.delete(name, namespace=sts["metadata"]["namespace"],
                                      preconditions={"uid": pod["metadata"].get("uid", "")})
        except NotFound:
            return
        except StatusError as err:
            self.events.event(sts, "Warning", "FailedDelete",
                              f"delete Pod {name} in StatefulSet {set_name} failed error: "
                              f"{err.message}")
            raise
        self.events.event(sts, "Normal", "SuccessfulDelete",
                          f"delete Pod {name} in StatefulSet {set_name} successful")

    async def _ensure_claims(self, sts: Obj, ordinal: int, pod: Obj) -> None:
        """``createPersistentVolumeClaims``: each missing claim of this ordinal; existing
        ones get the owner references the retention policy asks for."""
        namespace, set_name = sts["metadata"]["namespace"], rules.name_of(sts)
        for claim in rules.new_claims(sts, ordinal):
            name = rules.name_of(claim)
            existing = self.claims.get(name, namespace)
            if existing is not None:
                await self._sync_claim_refs(sts, existing, pod, condemned=False)
                continue
            try:
                await self.claim_api.create(claim, namespace=namespace)
            except AlreadyExists:
                continue
            except StatusError as err:
                self.events.event(sts, "Warning", "FailedCreate",
                                  f"create Claim {name} for Pod {rules.name_of(pod)} in "
                                  f"StatefulSet {set_name} failed error: {err.message}")
                raise
            self.events.event(sts, "Normal", "SuccessfulCreate",
                              f"create Claim {name} Pod {rules.name_of(pod)} in StatefulSet "
                              f"{set_name} success")

    async def _release_claims(self, sts: Obj, ordinal: int, pod: Obj) -> None:
        """Before a scaled-down pod goes, its claims get the references the retention policy
        gives condemned pods (``whenScaled: Delete``: owned by the pod, so they go with it)."""
        namespace = sts["metadata"]["namespace"]
        for template in (sts.get("spec") or {}).get("volumeClaimTemplates") or []:
            claim = self.claims.get(rules.claim_name(template, rules.name_of(sts), ordinal),
                                    namespace)
            if claim is not None:
                await self._sync_claim_refs(sts, claim, pod, condemned=True)

    async def _sync_claim_refs(self, sts: Obj, claim: Obj, pod: Obj, *,
                               condemned: bool) -> None:
        """``updateClaimOwnerRefForSetAndPod``: patch the claim's references if they differ."""
        refs = rules.claim_owner_refs(sts, claim, pod, condemned)
        if refs is None:
            return
        with contextlib.suppress(NotFound, Conflict):
            await self.claim_api.patch(rules.name_of(claim), {"metadata": {
                "ownerReferences": refs or None,
                "resourceVersion": claim["metadata"].get("resourceVersion")}},
                namespace=sts["metadata"]["namespace"],
                type=PatchType.MERGE)  # a strategic patch would merge the refs by uid

    async def _write_status(self, sts: Obj, pods: list[Obj], current: Obj, update: Obj,
                            collisions: int) -> None:
        status = rules.status(sts, pods, (rules.name_of(current), rules.name_of(update)),
                              collisions, self.ctx.clock())
        old = sts.get("status") or {}
        if all(old.get(k) == v for k, v in status.items()):
            return
        # kube's UpdateStatus (a PUT): the statefulset-controller role may update
        # statefulsets/status, not patch it; a conflict comes back through the queue
        with contextlib.suppress(NotFound):
            await self.set_api.replace_status({**sts, "status": {**old, **status}},
                                              namespace=sts["metadata"]["namespace"])

    async def _truncate(self, sts: Obj, pods: list[Obj], current: Obj, update: Obj) -> None:
        """``truncateHistory``: drop unused revisions beyond ``revisionHistoryLimit``."""
        uid = sts["metadata"].get("uid", "")
        revisions = [r for r in self.revisions.by_index("owner", uid)
                     if (controller_of(r, "StatefulSet") or {}).get("uid") == uid]
        live = {rules.revision_label(p) for p in pods} | {rules.name_of(current),
                                                          rules.name_of(update)}
        limit = (sts.get("spec") or {}).get("revisionHistoryLimit")
        for rev in history.revisions_to_prune(revisions, live, 10 if limit is None else
                                              int(limit)):
            with contextlib.suppress(NotFound):
                await self.rev_api.delete(rules.name_of(rev),
                                          namespace=sts["metadata"]["namespace"])


def _template_of(revision: Mapping[str, Any], sts: Mapping[str, Any]) -> Obj:
    """``ApplyRevision``: the pod template a revision's patch holds."""
    template = dict((((revision.get("data") or {}).get("spec") or {}).get("template")) or {})
    if not template:
        template = dict((sts.get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    return template


def make_statefulset_controller(ctx: ClusterContext,
                                options: object = None) -> StatefulSetController:
    """The component factory. Options (a mapping, or an options object's ``extra``):
    ``workers``."""
    return StatefulSetController(ctx, workers=option(options, "workers", WORKERS))
