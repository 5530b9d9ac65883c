"""The garbage collector (``garbage-collector-controller``; ``pkg/controller/garbagecollector``).

Monitors: discovery names every served kind that can be listed, watched and deleted (the
preferred version of each group; Events excluded, as kube ignores them), and one informer per
kind keeps the objects' metadata (kubewire serves no ``PartialObjectMetadata`` lists, so the
informers read full objects and keep only ``apiVersion``, ``kind`` and ``metadata``).
Discovery runs again every ``resync_s`` and whenever a CustomResourceDefinition changes, so kinds
added at run time are watched too.

The graph builder (one task, as kube's ``processGraphChanges``) turns the informers' events into
a graph of owners and dependents keyed by uid. A reference to an owner it has not seen makes a
*virtual* node that ``attempt_to_delete`` verifies with a live GET, and again (with the work
queue's backoff) until an informer observes it; an owner that turns out absent (404, or
another uid under that name) is removed from the graph, which queues its dependents.
Transitions queue work: an owner marked with ``orphan`` goes to the orphan queue (its
dependents lose their references to it, then the finalizer goes); one marked with
``foregroundDeletion`` queues its dependents and itself (once no dependent with
``blockOwnerDeletion`` is left, the finalizer goes and the API server removes it). A deleted
owner queues its dependents (background deletion).

``attempt_to_delete`` (kube's ``attemptToDeleteItem``) reads the dependent and each owner live,
classifies the owners (``gc_decisions.classify``) and keeps the dependent while an owner is
solid (dropping the references to absent or foreground-deleting owners), else deletes it with
a uid precondition and the policy ``gc_decisions.deletion_policy`` chooses. Namespaced owners
are looked up in the dependent's namespace; a cluster-scoped dependent of a namespaced kind is
left alone, and an owner observed in another namespace than its dependent records kube's
Warning ``OwnerRefInvalidNamespace`` on the dependent. Failures retry with the work queue's
backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from kubewire.client import Api, WorkQueue
from kubewire.client.errors import (
    ClientError,
    Conflict,
    NoKindMatch,
    NotFound,
    StatusError,
    UnsupportedMediaType,
)
from kubewire.client.informers.informer import Informer
from kubewire.client.informers.workqueue import QueueShutDown
from kubewire.client.resource import PatchType
from kubewire.client.transport import Request
from kubewire.cluster.controllers import gc_decisions as gc
from kubewire.cluster.controllers.gc_decisions import Identity
from kubewire.cluster.runtime import ClusterContext

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "garbage-collector-controller"
RESYNC_S = 30.0  # kube-controller-manager resyncs the GC's monitors every 30 s
WORKERS = 20  # --concurrent-gc-syncs
ABSENT_CACHE = 500  # kube's absentOwnerCache size
SYNC_TIMEOUT_S = 30.0
IGNORED = frozenset({("", "events"), ("events.k8s.io", "events")})


@dataclass(frozen=True, slots=True)
class Kind:
    """Where a kind is served (its group's preferred version)."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool


@dataclass(eq=False)
class Node:
    identity: Identity
    owners: list[Obj] = field(default_factory=list)
    dependents: set[str] = field(default_factory=set)  # uids
    observed: bool = False
    obj: Obj = field(default_factory=dict)


def _metadata_only(kind: Kind) -> Any:
    def keep(obj: Obj) -> Obj:
        meta = dict(obj.get("metadata") or {})
        meta.pop("managedFields", None)
        return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}
    return keep


class GarbageCollector:
    """``await run()`` until cancelled."""

    name = NAME

    def __init__(self, ctx: ClusterContext, *, resync_s: float = RESYNC_S,
                 workers: int = WORKERS) -> None:
        self.ctx = ctx
        self.resync_s = resync_s
        self.workers = workers
        self.events = ctx.recorder(NAME)
        self.kinds: dict[tuple[str, str], Kind] = {}  # (group, kind) -> where served
        self.monitors: dict[tuple[str, str], Informer[Obj]] = {}  # (group, plural)
        self.nodes: dict[str, Node] = {}
        self.changes: asyncio.Queue[tuple[str, Obj]] = asyncio.Queue()
        self.attempt: WorkQueue[str] = WorkQueue()
        self.orphan: WorkQueue[str] = WorkQueue()
        self._absent: OrderedDict[Identity, None] = OrderedDict()
        self._apis: dict[tuple[str, str], Api[Obj]] = {}
        self._rediscover = asyncio.Event()

    # --- running ----------------------------------------------------------------------------

    async def run(self) -> None:
        tasks: list[asyncio.Task[None]] = []
        try:
            await self._first_discovery()
            await self._wait_synced()
            loop = asyncio.get_running_loop()
            tasks.append(loop.create_task(self._process_changes(), name="gc-graph"))
            tasks.append(loop.create_task(self._resync(), name="gc-resync"))
            tasks += [loop.create_task(self._worker(self.attempt, self._attempt_to_delete))
                      for _ in range(self.workers)]
            tasks.append(loop.create_task(self._worker(self.orphan, self._orphan_dependents)))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await self.attempt.shut_down()
            await self.orphan.shut_down()
            for informer in self.monitors.values():
                await informer.stop()
            self.monitors.clear()

    async def _first_discovery(self) -> None:
        """Discovery until it succeeds (a server still starting may refuse at first: its
        default RBAC roles are written a moment after it listens)."""
        delay = 0.1
        while True:
            try:
                await self._sync_monitors()
                return
            except (StatusError, ClientError) as err:
                log.info("garbage collector: discovery failed (%s); retrying", err)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _wait_synced(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(
                *(m.wait_for_sync() for m in self.monitors.values())), SYNC_TIMEOUT_S)

    async def _resync(self) -> None:
        """Discovery again every ``resync_s``, or soon after a CRD changed. The flag is taken
        when the pass starts, not after it: a CRD that changes during a pass (or while the
        first monitors sync, before this loop starts) brings another pass, rather than
        waiting for the resync."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rediscover.wait(), self.resync_s)
            self._rediscover.clear()
            await asyncio.sleep(0.2)  # a new CRD is served a moment after it is established
            try:
                await self._sync_monitors()
            except (StatusError, ClientError) as err:
                log.warning("garbage collector: discovery failed: %s", err)

    async def _worker(self, queue: WorkQueue[str], handle: Any) -> None:
        while True:
            try:
                uid = await queue.get()
            except QueueShutDown:
                return
            try:
                retry = await handle(uid)
            except (StatusError, ClientError) as err:
                log.info("garbage collector: %s: %s (retrying)", uid, err)
                retry = True
            except Exception:
                log.exception("garbage collector: %s failed", uid)
                retry = True
            if retry:
                queue.add_rate_limited(uid)
            else:
                queue.forget(uid)
            await queue.done(uid)

    # --- discovery and monitors --------------------------------------------------------------

    async def _get_json(self, path: str) -> Obj:
        import msgspec

        body: Obj = msgspec.json.decode(await self.ctx.client.request(Request("GET", path)))
        return body

    async def discover(self) -> list[Kind]:
        """The deletable, listable, watchable kinds, in their groups' preferred versions."""
        versions = [("v1", "/api/v1")]
        groups = await self._get_json("/apis")
        for group in groups.get("groups") or []:
            preferred = (group.get("preferredVersion") or {}).get("groupVersion")
            if preferred:
                versions.append((preferred, f"/apis/{preferred}"))
        found: list[Kind] = []
        for api_version, path in versions:
            try:
                doc = await self._get_json(path)
            except NotFound:
                continue
            for res in doc.get("resources") or []:
                verbs = set(res.get("verbs") or ())
                if "/" in res.get("name", "") or not {"list", "watch", "delete"} <= verbs:
                    continue
                if (gc.group_of(api_version), res["name"]) in IGNORED:
                    continue
                found.append(Kind(api_version, res["kind"], res["name"],
                                  bool(res.get("namespaced"))))
        return found

    async def _sync_monitors(self) -> None:
        kinds = await self.discover()
        self.ctx.client.discovery.invalidate()
        self.kinds = {(gc.group_of(k.api_version), k.kind): k for k in kinds}
        wanted = {(gc.group_of(k.api_version), k.plural): k for k in kinds}
        for key in set(self.monitors) - set(wanted):
            await self.monitors.pop(key).stop()
        for key, kind in wanted.items():
            if key in self.monitors:
                continue
            informer: Informer[Obj] = Informer(self._api(kind.api_version, kind.kind),
                                               transform=_metadata_only(kind))
            informer.add_handlers(on_add=self._on_add, on_update=self._on_update,
                                  on_delete=self._on_delete)
            if key == ("apiextensions.k8s.io", "customresourcedefinitions"):
                informer.add_handlers(on_add=self._crd_changed,
                                      on_update=lambda _old, _new: self._rediscover.set(),
                                      on_delete=self._crd_changed)
            self.monitors[key] = informer
            informer.start()

    def _crd_changed(self, _obj: Obj) -> None:
        self._rediscover.set()

    def _api(self, api_version: str, kind: str) -> Api[Obj]:
        key = (api_version, kind)
        api = self._apis.get(key)
        if api is None:
            api = self._apis[key] = self.ctx.api(api_version, kind)
        return api

    def _on_add(self, obj: Obj) -> None:
        self.changes.put_nowait(("add", obj))

    def _on_update(self, _old: Obj, obj: Obj) -> None:
        self.changes.put_nowait(("update", obj))

    def _on_delete(self, obj: Obj) -> None:
        self.changes.put_nowait(("delete", obj))

    # --- the graph ------------------------------------------------------------------------

    async def _process_changes(self) -> None:
        while True:
            kind, obj = await self.changes.get()
            try:
                if kind == "delete":
                    await self._deleted(gc.identity_of(obj), virtual=False)
                elif kind == "virtual-delete":
                    await self._deleted(gc.identity_of(obj), virtual=True)
                else:
                    await self._observed(obj)
            except Exception:
                log.exception("garbage collector: graph change failed")

    async def _observed(self, obj: Obj) -> None:
        identity = gc.identity_of(obj)
        refs = gc.owner_refs(obj)
        node = self.nodes.get(identity.uid)
        if node is None:
            node = self.nodes[identity.uid] = Node(identity, refs, observed=True, obj=obj)
            await self._add_to_owners(node, refs)
        else:
            if not node.observed:
                node.observed, node.identity = True, identity
                await self._check_virtual_dependents(node)
            old = {str(r["uid"]): r for r in node.owners}
            new = {str(r["uid"]): r for r in refs}
            removed = [old[u] for u in old.keys() - new.keys()]
            added = [new[u] for u in new.keys() - old.keys()]
            unblocked = [new[u] for u in old.keys() & new.keys()
                         if gc.blocks(old[u]) and not gc.blocks(new[u])]
            node.owners, node.obj = refs, obj
            for ref in removed:
                owner = self.nodes.get(str(ref["uid"]))
                if owner is not None:
                    owner.dependents.discard(identity.uid)
            for ref in (*removed, *unblocked):  # an owner waiting on it may finish now
                owner = self.nodes.get(str(ref["uid"]))
                if owner is not None and gc.deleting_dependents(owner.obj):
                    await self.attempt.add(owner.identity.uid)
            await self._add_to_owners(node, added)
        if gc.orphaning(obj):
            await self.orphan.add(identity.uid)
        if gc.deleting_dependents(obj):
            for dep in list(node.dependents):
                await self.attempt.add(dep)
            await self.attempt.add(identity.uid)

    async def _add_to_owners(self, node: Node, refs: list[Obj]) -> None:
        for ref in refs:
            uid = str(ref["uid"])
            owner = self.nodes.get(uid)
            if owner is None:
                kind = self.kinds.get((gc.group_of(str(ref.get("apiVersion", ""))),
                                       str(ref.get("kind", ""))))
                namespace = node.identity.namespace if kind is None or kind.namespaced else ""
                owner = self.nodes[uid] = Node(gc.owner_identity(ref, namespace))
                owner.dependents.add(node.identity.uid)
                await self.attempt.add(uid)  # verify that the owner exists
                continue
            owner.dependents.add(node.identity.uid)
            if owner.observed and owner.identity.namespace \
                    and owner.identity.namespace != node.identity.namespace:
                self._invalid_namespace(node, ref)
                await self.attempt.add(node.identity.uid)
            elif owner.observed and not gc.ref_matches(ref, owner.identity):
                await self.attempt.add(node.identity.uid)

    async def _check_virtual_dependents(self, node: Node) -> None:
        """A virtual node just observed: dependents whose references disagree with what was
        observed are verified (the bad child, then good parent order)."""
        for dep_uid in list(node.dependents):
            dep = self.nodes.get(dep_uid)
            if dep is None:
                continue
            for ref in dep.owners:
                if ref.get("uid") != node.identity.uid:
                    continue
                wrong_namespace = bool(node.identity.namespace) and (
                    dep.identity.namespace != node.identity.namespace)
                if wrong_namespace:
                    self._invalid_namespace(dep, ref)
                if wrong_namespace or not gc.ref_matches(ref, node.identity):
                    await self.attempt.add(dep_uid)

    def _invalid_namespace(self, node: Node, ref: Obj) -> None:
        involved = {"apiVersion": node.identity.api_version, "kind": node.identity.kind,
                    "metadata": {"name": node.identity.name, "uid": node.identity.uid,
                                 "namespace": node.identity.namespace}}
        self.events.event(involved, "Warning", "OwnerRefInvalidNamespace",
                          gc.invalid_namespace_message(ref, node.identity.namespace))

    async def _deleted(self, identity: Identity, *, virtual: bool) -> None:
        node = self.nodes.get(identity.uid)
        if node is None:
            return
        if virtual and node.observed:
            return  # the informer saw it; it decides
        del self.nodes[identity.uid]
        for ref in node.owners:
            owner = self.nodes.get(str(ref["uid"]))
            if owner is None:
                continue
            owner.dependents.discard(identity.uid)
            if gc.deleting_dependents(owner.obj):
                await self.attempt.add(owner.identity.uid)
        for dep in list(node.dependents):
            await self.attempt.add(dep)
        if virtual:
            self._remember_absent(identity)

    # --- attempt to delete ------------------------------------------------------------------

    def _remember_absent(self, identity: Identity) -> None:
        self._absent[identity] = None
        self._absent.move_to_end(identity)
        while len(self._absent) > ABSENT_CACHE:
            self._absent.popitem(last=False)

    async def _get(self, identity: Identity) -> Obj | None:
        """The live object with this identity's uid; None when absent or another uid."""
        api = self._api(identity.api_version, identity.kind)
        try:
            obj = await api.get(identity.name, namespace=identity.namespace or None)
        except NotFound:
            return None
        return obj if (obj.get("metadata") or {}).get("uid") == identity.uid else None

    async def _attempt_to_delete(self, uid: str) -> bool:
        """kube's ``attemptToDeleteItem``; True to retry later."""
        node = self.nodes.get(uid)
        if node is None:
            return False
        if node.observed and gc.being_deleted(node.obj) and not gc.deleting_dependents(
                node.obj):
            return False
        try:
            latest = await self._get(node.identity)
        except NoKindMatch:
            if node.observed:
                return True
            latest = None
        if latest is None:
            if not node.observed:  # a virtual owner that does not exist
                self.changes.put_nowait(("virtual-delete", _as_object(node.identity)))
            return False
        if gc.deleting_dependents(latest):
            return await self._finish_foreground(node, latest)
        await self._collect(node, latest)
        # A virtual node that exists is verified again until an informer observes it (kube's
        # attemptToDeleteWorker requeues it, issue 56121): an owner of a kind no monitor
        # watches yet would otherwise stay in the graph after it is deleted, and its
        # dependents with it.
        return not node.observed

    async def _collect(self, node: Node, latest: Obj) -> None:
        """Keep ``latest`` while an owner is solid (dropping references to absent or waiting
        owners), else delete it."""
        refs = gc.owner_refs(latest)
        if not refs:
            return
        owners: dict[str, Obj | None] = {}
        for ref in refs:
            found = await self._owner(node.identity, ref)
            if found is _UNRESOLVABLE:
                return  # a cluster-scoped object naming a namespaced owner: never
            owners[str(ref["uid"])] = found if isinstance(found, dict) else None
        classified = gc.classify(refs, owners)
        if classified.solid:
            drop = [str(r["uid"]) for r in (*classified.dangling, *classified.waiting)]
            if drop:
                await self._drop_refs(node.identity, latest, drop)
            return
        policy = gc.deletion_policy(latest, bool(node.dependents), classified)
        if classified.waiting and node.dependents and any(
                gc.deleting_dependents(self.nodes[d].obj) for d in node.dependents
                if d in self.nodes):
            # a dependent of its own deletes in the foreground too: unblock, lest they wait
            # on each other
            await self._patch(node.identity, gc.strategic_unblock(node.identity.uid,
                                                                  gc.owner_refs(latest)),
                              gc.json_patch_unblock(latest))
        await self._delete(node.identity, latest, policy)

    async def _delete(self, identity: Identity, latest: Obj, policy: str) -> None:
        """kube's ``deleteObject``: preconditions uid and the resourceVersion classified; on a
        conflict, again with the uid alone if the owner references have not changed (another
        change does not matter), else the item is tried again (``Conflict`` raised)."""
        api = self._api(identity.api_version, identity.kind)
        namespace = identity.namespace or None
        meta = latest.get("metadata") or {}
        try:
            await api.delete(identity.name, namespace=namespace, propagation_policy=policy,
                             preconditions={"uid": identity.uid,
                                            "resourceVersion": str(meta.get("resourceVersion"))})
            return
        except NotFound:
            return
        except Conflict:
            now = await self._get(identity)
            if now is None:
                return
            if gc.owner_refs(now) != gc.owner_refs(latest):
                raise
        with contextlib.suppress(NotFound):
            await api.delete(identity.name, namespace=namespace, propagation_policy=policy,
                             preconditions={"uid": identity.uid})

    async def _owner(self, dependent: Identity, ref: Obj) -> Obj | object | None:
        kind = self.kinds.get((gc.group_of(str(ref.get("apiVersion", ""))),
                               str(ref.get("kind", ""))))
        if kind is None:
            raise NoKindMatch(f"no kind {ref.get('kind')} in {ref.get('apiVersion')}")
        if kind.namespaced and not dependent.namespace:
            return _UNRESOLVABLE
        identity = gc.owner_identity(ref, dependent.namespace if kind.namespaced else "")
        if identity in self._absent:
            return None
        owner = await self._get(Identity(kind.api_version, kind.kind, identity.namespace,
                                         identity.name, identity.uid))
        if owner is None:
            self._remember_absent(identity)
        return owner

    async def _drop_refs(self, identity: Identity, obj: Obj, uids: list[str]) -> None:
        """Remove the references to ``uids`` from the object (strategic merge; JSON patch for
        kinds that do not take it)."""
        await self._patch(identity, gc.strategic_delete_refs(identity.uid, uids),
                          gc.json_patch_delete_refs(obj, uids))

    async def _patch(self, identity: Identity, strategic: Obj,
                     json_patch: list[Obj]) -> None:
        """A strategic merge patch; kinds that refuse it (custom resources) get the JSON patch
        (kube falls back to a JSON merge patch with the same preconditions)."""
        api = self._api(identity.api_version, identity.kind)
        namespace = identity.namespace or None
        try:
            await api.patch(identity.name, strategic, namespace=namespace,
                            type=PatchType.STRATEGIC)
        except (UnsupportedMediaType, ValueError):
            await api.patch(identity.name, json_patch, namespace=namespace, type=PatchType.JSON)
        except NotFound:
            pass

    async def _finish_foreground(self, node: Node, latest: Obj) -> bool:
        """``processDeletingDependentsItem``: remove ``foregroundDeletion`` once no blocking
        dependent is left, else make sure they are being deleted."""
        blocking = []
        for dep_uid in node.dependents:
            dep = self.nodes.get(dep_uid)
            if dep is not None and any(gc.blocks(r) for r in dep.owners
                                       if r.get("uid") == node.identity.uid):
                blocking.append(dep)
        if not blocking:
            return await self._remove_finalizer(node.identity, gc.FOREGROUND, latest)
        for dep in blocking:
            if not gc.deleting_dependents(dep.obj):
                await self.attempt.add(dep.identity.uid)
        return False

    async def _remove_finalizer(self, identity: Identity, finalizer: str, obj: Obj) -> bool:
        api = self._api(identity.api_version, identity.kind)
        for _ in range(5):
            if not gc.has_finalizer(obj, finalizer):
                return False
            try:
                await api.patch(identity.name, gc.without_finalizer(obj, finalizer),
                                namespace=identity.namespace or None, type=PatchType.JSON)
                return False
            except NotFound:
                return False
            except (Conflict, StatusError) as err:
                if isinstance(err, StatusError) and err.code not in (409, 422):
                    raise
            latest = await self._get(identity)
            if latest is None:
                return False
            obj = latest
        return True

    # --- orphan ---------------------------------------------------------------------------

    async def _orphan_dependents(self, uid: str) -> bool:
        """``attemptToOrphanWorker``: drop the owner's references from every dependent, then
        remove its ``orphan`` finalizer."""
        node = self.nodes.get(uid)
        if node is None:
            return False
        for dep_uid in list(node.dependents):
            dep = self.nodes.get(dep_uid)
            if dep is None:
                continue
            latest = await self._get(dep.identity)
            if latest is not None and gc.refs_to(latest, uid):
                await self._drop_refs(dep.identity, latest, [uid])
        latest = await self._get(node.identity)
        if latest is None:
            return False
        return await self._remove_finalizer(node.identity, gc.ORPHAN, latest)


_UNRESOLVABLE = object()


def _as_object(identity: Identity) -> Obj:
    return {"apiVersion": identity.api_version, "kind": identity.kind,
            "metadata": {"name": identity.name, "namespace": identity.namespace,
                         "uid": identity.uid}}

