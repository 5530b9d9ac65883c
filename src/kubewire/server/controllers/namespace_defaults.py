"""What kube-controller-manager puts in every namespace (controllers.md §10).

- The serviceaccounts controller (``pkg/controller/serviceaccount/serviceaccounts_controller.go``):
  a ServiceAccount ``default`` in every Active namespace, made again when it is deleted (no token
  Secret, as since 1.24).
- The root-CA publisher (``pkg/controller/certificates/rootcacertpublisher/publisher.go``): a
  ConfigMap ``kube-root-ca.crt`` in every namespace, ``data: {ca.crt: <the cluster CA>}`` and the
  ``kubernetes.io/description`` annotation; made again when deleted, its data and annotation put
  back when edited. kubewire's cluster CA is the one its PKI made for the serving certificate;
  a server without one (``--insecure-http``, or a serving pair the user brought) publishes none.

Both follow the commit feed (a new namespace, a deleted account, a changed or deleted ConfigMap)
and, on start, every namespace the store holds, so they resume after a restart. Their writes go
through the ordinary create and update paths as ``kube-controller-manager``.

Replicas (several servers on one etcd) each run them. A ``kube-root-ca.crt`` whose data another
replica wrote (no manager but ``kube-controller-manager`` owns ``data``) stands until this
replica starts again: replicas that do not share their CA (each made its own ``DIR/pki``) would
otherwise put their own back at each other without end. A user's edit is still undone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.controllers.work_queue import FeedController, WorkQueue
from kubewire.server.request.options import WriteOptions
from kubewire.server.request.routes import Route
from kubewire.server.writes.admission import DEFAULT_SERVICE_ACCOUNT, ROOT_CA_CONFIG_MAP
from kubewire.server.writes.create_update import create_object, guaranteed_update
from kubewire.status import StatusError
from kubewire.storage.base import Change, ChangeType

DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using "
               "internal endpoints such as the internal service IP or kubernetes.default.svc. "
               "No other usage is guaranteed across distributions of Kubernetes clusters.")
MANAGER = "kube-controller-manager"
CONTROLLER_MANAGER = WriteOptions(field_manager=MANAGER)
START = "start:"  # a namespace's key when marked at start (names have no ':'): take over

_decode = msgspec.json.Decoder(dict[str, Any]).decode


def root_ca_data(ca_pem: str) -> dict[str, str]:
    return {"ca.crt": ca_pem}


class NamespaceDefaults(FeedController):
    """The ``default`` ServiceAccount and the ``kube-root-ca.crt`` ConfigMap of each namespace."""

    def __init__(self, ctx: ServerContext, root_ca: bytes | None, *,
                 make_accounts: bool = True) -> None:
        """``root_ca`` None: no ``kube-root-ca.crt`` (no CA, or root-ca-certificate-publisher
        off); ``make_accounts`` False: no ``default`` ServiceAccount (serviceaccount-controller
        off)."""
        self.ctx = ctx
        self.root_ca = root_ca.decode() if root_ca is not None else None
        self.make_accounts = make_accounts
        registry = ctx.registry
        namespaces = registry.lookup("", "v1", "namespaces")
        accounts = registry.lookup("", "v1", "serviceaccounts")
        config_maps = registry.lookup("", "v1", "configmaps")
        assert namespaces is not None and accounts is not None and config_maps is not None
        self.namespaces, self.accounts, self.config_maps = namespaces, accounts, config_maps
        self.queue = WorkQueue("namespace-defaults", self._sync)

    def mark_initial(self) -> None:
        for obj in self.ctx.caches.for_resource(self.namespaces).scan(
                self.namespaces.storage_prefix()):
            self.queue.mark(START + obj.name)

    def changed(self, changes: Sequence[Change]) -> None:
        namespace_prefix = self.namespaces.storage_prefix()
        account_prefix = self.accounts.storage_prefix()
        config_map_prefix = self.config_maps.storage_prefix()
        for change in changes:
            key = change.key
            if key.startswith(namespace_prefix):
                if change.type != ChangeType.DELETED:
                    self.queue.mark(key[len(namespace_prefix):])
                continue
            if key.startswith(account_prefix) and self.make_accounts:
                namespace, _, name = key[len(account_prefix):].partition("/")
                if change.type == ChangeType.DELETED and name == DEFAULT_SERVICE_ACCOUNT:
                    self.queue.mark(namespace)
            elif key.startswith(config_map_prefix) and self.root_ca is not None:
                namespace, _, name = key[len(config_map_prefix):].partition("/")
                if change.type != ChangeType.ADDED and name == ROOT_CA_CONFIG_MAP:
                    self.queue.mark(namespace)

    async def _sync(self, key: str) -> None:
        take_over = key.startswith(START)
        namespace = key.removeprefix(START)
        found = self.ctx.caches.for_resource(self.namespaces).get(
            self.namespaces.storage_key("", namespace))
        if found is None:
            return
        ns = _decode(found.value)
        if (ns.get("status") or {}).get("phase") != "Active":
            return  # a terminating namespace gets nothing new (the creates would be refused)
        if self.make_accounts:
            await self._ensure_account(namespace)
        if self.root_ca is not None:
            await self._ensure_root_ca(namespace, take_over=take_over)

    async def _ensure_account(self, namespace: str) -> None:
        cache = self.ctx.caches.for_resource(self.accounts)
        if cache.get(self.accounts.storage_key(namespace, DEFAULT_SERVICE_ACCOUNT)) is not None:
            return
        obj = _typed(self.accounts, {"metadata": {"name": DEFAULT_SERVICE_ACCOUNT}})
        await _create_quietly(self.ctx, Route(self.accounts, namespace, "", "", False), obj)

    async def _ensure_root_ca(self, namespace: str, *, take_over: bool) -> None:
        assert self.root_ca is not None
        data = root_ca_data(self.root_ca)
        resource = self.config_maps
        current = self.ctx.caches.for_resource(resource).get(
            resource.storage_key(namespace, ROOT_CA_CONFIG_MAP))
        if current is None:
            obj = _typed(resource, {
                "metadata": {"name": ROOT_CA_CONFIG_MAP,
                             "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                "data": data})
            await _create_quietly(self.ctx, Route(resource, namespace, "", "", False), obj)
            return
        existing = _decode(current.value)
        annotations = (existing.get("metadata") or {}).get("annotations") or {}
        if existing.get("data") == data and annotations.get(DESCRIPTION_ANNOTATION):
            return
        if not take_over and _another_replicas(existing):
            return

        def restored(cm: dict[str, Any]) -> dict[str, Any]:
            cm["data"] = dict(data)
            meta = cm.setdefault("metadata", {})
            meta["annotations"] = {**(meta.get("annotations") or {}),
                                   DESCRIPTION_ANNOTATION: DESCRIPTION}
            return cm

        route = Route(resource, namespace, ROOT_CA_CONFIG_MAP, "", False)
        try:
            await guaranteed_update(self.ctx, route, restored, CONTROLLER_MANAGER)
        except StatusError as err:
            if err.code != 404:  # deleted meanwhile: its DELETED brings us back
                raise


def _another_replicas(cm: dict[str, Any]) -> bool:
    """A ``kube-root-ca.crt`` as a replica writes it (with its own CA), changed by no one else."""
    meta = cm.get("metadata") or {}
    data = cm.get("data") or {}
    if set(data) != {"ca.crt"} or not (meta.get("annotations") or {}).get(DESCRIPTION_ANNOTATION):
        return False
    for entry in meta.get("managedFields") or []:
        if isinstance(entry, dict) and entry.get("manager") != MANAGER and \
                "f:data" in (entry.get("fieldsV1") or {}):
            return False
    return True


async def _create_quietly(ctx: ServerContext, route: Route, obj: dict[str, Any]) -> None:
    """Create; a namespace that is gone or terminating, or an object made meanwhile, is fine
    (the controllers ignore NotFound, NamespaceTerminating and AlreadyExists)."""
    try:
        await create_object(ctx, route, obj, CONTROLLER_MANAGER)
    except StatusError as err:
        if err.code not in (403, 404, 409):
            raise


def _typed(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
