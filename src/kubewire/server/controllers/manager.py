"""The in-server controllers, started and stopped together (kube-controller-manager's part and
kube-apiserver's own bootstrap controller).

``deletion`` (namespace contents, graceful pods), ``namespace_defaults`` (the ``default``
ServiceAccount and ``kube-root-ca.crt`` in every namespace), ``crds`` (naming, establishing,
serving and cleanup of CustomResourceDefinitions), ``preinstalled_crds`` (the Gateway API CRDs
created at start when absent), ``rbac_bootstrap`` (the default cluster roles and bindings
reconciled at start), ``priority_bootstrap`` (kube's two system PriorityClasses, created at
start when absent), ``apiservices`` (the local APIServices of the built-in and CRD
group/versions, kube-apiserver's autoregistration), ``clusterrole_aggregation`` (aggregated
ClusterRoles' rules), ``csr_signing`` (the CSR signer, when the server holds its CA's key,
and the CSR cleaner), ``service_account_tokens`` (legacy token Secrets filled with the
server's signing key) and ``bootstrap`` (the ``default/kubernetes`` Service and
EndpointSlice, once the server listens).
``ServerConfig.controllers`` (kube-controller-manager's ``--controllers``, read by
``selection``) switches the first two and the aggregation off or on, part by part; the API
server's own (``crds``, ``bootstrap``, the pre-installed CRDs, the RBAC defaults) always run. With
``ServerConfig.leader_elect`` those three (kube-controller-manager's part) run only while this
server holds the controller-manager Lease (``leadership``); the API server's own run on every
server, as in kube.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kubewire.server.context import ServerConfig, ServerContext, elects_leader
from kubewire.server.controllers.apiservices import LocalAPIServices
from kubewire.server.controllers.bootstrap import KubernetesService
from kubewire.server.controllers.clusterrole_aggregation import ClusterRoleAggregation
from kubewire.server.controllers.components import KUBE_SCHEDULER, ClusterComponents, Issue
from kubewire.server.controllers.crds import CustomResourceDefinitions
from kubewire.server.controllers.csr_signing import CsrCleaner, CsrSigning, signing_files
from kubewire.server.controllers.deletion import Controllers
from kubewire.server.controllers.namespace_defaults import NamespaceDefaults
from kubewire.server.controllers.preinstalled_crds import PreinstalledCRDs
from kubewire.server.controllers.priority_bootstrap import PriorityClassBootstrap
from kubewire.server.controllers.rbac_bootstrap import RbacBootstrap
from kubewire.server.controllers.resource_quota import ResourceQuotaController
from kubewire.server.controllers.selection import (
    CLUSTERROLE_AGGREGATION,
    CSR_CLEANER,
    CSR_SIGNING,
    GARBAGE_COLLECTOR,
    NAMESPACE,
    POD_TERMINATION,
    PV_PROTECTION,
    PVC_PROTECTION,
    RESOURCE_QUOTA,
    ROOT_CA_PUBLISHER,
    SERVICE_ACCOUNT,
    SERVICE_ACCOUNT_TOKEN,
    parse_controllers,
)
from kubewire.server.controllers.service_account_tokens import ServiceAccountTokens
from kubewire.server.controllers.storage_protection import StorageProtection

if TYPE_CHECKING:
    from kubewire.server.controllers.leadership import Leadership

log = logging.getLogger(__name__)

SETTLE_TIMEOUT_S = 10.0
# ``settled`` wakes when a queue runs dry or the pre-installing ends; it looks again at least
# this often in case the last change came by another way (a cache's, say)
SETTLE_POLL_S = 0.05


NODE_SETTINGS = ("name_prefix", "naming", "cpu", "memory", "pods", "ephemeral_storage",
                 "labels", "pod_cidr", "stages_file")  # ServerConfig.node_<name>


def node_settings(config: ServerConfig) -> dict[str, object]:
    """``ServerConfig``'s ``node_*`` fields by their ``FleetOptions`` names (None: default)."""
    return {name: getattr(config, f"node_{name}") for name in NODE_SETTINGS}


def _components_enabled(cluster: bool,
                        enabled: Callable[[str], bool]) -> Callable[[str], bool]:
    """Which of kubewire.cluster's components run: those ``--controllers`` selects, when the
    server runs a cluster at all (``ServerConfig.cluster``)."""
    return enabled if cluster else (lambda _name: False)


class ControllerManager:
    """``start()`` after the caches are filled, ``serving(host, port)`` once listening, then
    ``await settled()``; ``await stop()`` before the caches stop."""

    def __init__(self, ctx: ServerContext, root_ca: bytes | None) -> None:
        chosen = parse_controllers(ctx.config.controllers)  # ValueError: an unknown name
        component_enabled = _components_enabled(ctx.config.cluster, chosen.enabled)
        gc_flag = ctx.config.enable_garbage_collector
        ctx.garbage_collection = (component_enabled(GARBAGE_COLLECTOR) if gc_flag is None
                                  else gc_flag)
        # kubewire.cluster's components, as clients of this server (``components``)
        config = ctx.config
        self.components = ClusterComponents(
            component_enabled, config.nodes, config.components_loop,
            hpa=(config.hpa_sync_period_s, config.hpa_tolerance,
                 config.hpa_downscale_stabilization_s),
            node_settings=node_settings(config))
        self.deletion = Controllers(ctx, namespaces=chosen.enabled(NAMESPACE),
                                    pods=chosen.enabled(POD_TERMINATION))
        self.namespace_defaults = NamespaceDefaults(
            ctx, root_ca if chosen.enabled(ROOT_CA_PUBLISHER) else None,
            make_accounts=chosen.enabled(SERVICE_ACCOUNT))
        self.kubernetes_service = KubernetesService(ctx)
        self.crds = CustomResourceDefinitions(ctx)
        self.preinstalled = PreinstalledCRDs(ctx)
        self.rbac_bootstrap = RbacBootstrap(ctx)
        self.priority_bootstrap = PriorityClassBootstrap(ctx)
        self.apiservices = LocalAPIServices(ctx)
        self._priority_classes: asyncio.Task[None] | None = None
        self.aggregation = (ClusterRoleAggregation(ctx)
                            if chosen.enabled(CLUSTERROLE_AGGREGATION) else None)
        self.csr_signing: CsrSigning | None = None
        if chosen.enabled(CSR_SIGNING):
            files = signing_files(ctx.config)
            if files is None:  # kube: no signing key, no signer
                log.debug("Skipping CSR signer controller because no csr cert/key was specified")
            else:
                self.csr_signing = CsrSigning(ctx, files)
        self.csr_cleaner = CsrCleaner(ctx) if chosen.enabled(CSR_CLEANER) else None
        self.resource_quota = (ResourceQuotaController(ctx)
                               if chosen.enabled(RESOURCE_QUOTA) else None)
        self.storage_protection = (
            StorageProtection(ctx, claims=chosen.enabled(PVC_PROTECTION),
                              volumes=chosen.enabled(PV_PROTECTION))
            if chosen.enabled(PVC_PROTECTION) or chosen.enabled(PV_PROTECTION) else None)
        self.tokens = (ServiceAccountTokens(ctx, root_ca)
                       if chosen.enabled(SERVICE_ACCOUNT_TOKEN) else None)
        self._installing: asyncio.Task[None] | None = None
        self._bootstrapping: asyncio.Task[None] | None = None
        self._serving = False
        self._changed = asyncio.Event()
        queues = [self.namespace_defaults.queue, self.kubernetes_service.queue, self.crds.queue,
                  self.apiservices.queue]
        queues += [c.queue for c in (self.aggregation, self.csr_signing, self.resource_quota,
                                     self.storage_protection, self.tokens) if c is not None]
        for queue in queues:
            queue.on_idle = self._changed.set
        # kube-controller-manager's part: on from start, or while elected
        self.leadership: Leadership | None = None
        if elects_leader(ctx.config):
            # imported only then: the elector is the client's, which loads aiohttp (~200 ms)
            from kubewire.server.controllers.leadership import Leadership

            self.leadership = Leadership(ctx, self._lead, self._step_down)  # ValueError
        # kube-scheduler campaigns for its own Lease
        self.scheduler_leadership: Leadership | None = None
        if self.leadership is not None and KUBE_SCHEDULER in self.components.parts:
            self.scheduler_leadership = Leadership(
                ctx, lambda: self.components.lead(KUBE_SCHEDULER),
                lambda: self.components.step_down(KUBE_SCHEDULER), lease=KUBE_SCHEDULER)
        self._kcm_running = False

    def start(self) -> None:
        if self.leadership is None:
            self._lead()
            self.components.lead(KUBE_SCHEDULER)
        else:
            self.leadership.start()
        if self.scheduler_leadership is not None:
            self.scheduler_leadership.start()
        self.crds.start()  # listens to the feed before the pre-installed CRDs are written
        self.apiservices.start()
        self._installing = asyncio.get_running_loop().create_task(
            self.preinstalled.install(), name="preinstalled-crds")
        self._installing.add_done_callback(lambda _: self._changed.set())
        self._bootstrapping = asyncio.get_running_loop().create_task(
            self.rbac_bootstrap.reconcile(), name="rbac-bootstrap")
        self._bootstrapping.add_done_callback(lambda _: self._changed.set())
        self._priority_classes = asyncio.get_running_loop().create_task(
            self.priority_bootstrap.ensure(), name="priority-class-bootstrap")
        self._priority_classes.add_done_callback(lambda _: self._changed.set())

    def _lead(self) -> None:
        """Start kube-controller-manager's part (at start, or on acquiring the Lease)."""
        self._kcm_running = True
        for part in self.components.parts:  # kube-controller-manager's, and the kubelets
            if part != KUBE_SCHEDULER:
                self.components.lead(part)
        self.deletion.start()
        self.namespace_defaults.start()
        if self.aggregation is not None:
            self.aggregation.start()
        if self.csr_signing is not None:
            self.csr_signing.start()
        if self.csr_cleaner is not None:
            self.csr_cleaner.start()
        if self.resource_quota is not None:
            self.resource_quota.start()
        if self.storage_protection is not None:
            self.storage_protection.start()
        if self.tokens is not None:
            self.tokens.start()
        self._changed.set()

    async def _step_down(self) -> None:
        """Stop it (on losing the Lease, or at stop)."""
        if self._kcm_running:
            self._kcm_running = False
            if self.csr_cleaner is not None:
                await self.csr_cleaner.stop()
            if self.csr_signing is not None:
                await self.csr_signing.stop()
            for part in self.components.parts:
                if part != KUBE_SCHEDULER:
                    await self.components.step_down(part)
            if self.aggregation is not None:
                await self.aggregation.stop()
            if self.resource_quota is not None:
                await self.resource_quota.stop()
            if self.storage_protection is not None:
                await self.storage_protection.stop()
            if self.tokens is not None:
                await self.tokens.stop()
            await self.namespace_defaults.stop()
            await self.deletion.stop()
        self._changed.set()

    def serving(self, host: str, port: int) -> None:
        self.kubernetes_service.start(host, port)
        self._serving = True

    def serve_components(self, url: str, ca_pem: bytes | None, issue: Issue) -> None:
        """Start kubewire.cluster's components as clients of ``url`` (tokens from ``issue``)."""
        self.components.serving(url, ca_pem, issue)

    async def stop_components(self) -> None:
        """Stop them (before the server stops listening: their last requests are answered)."""
        if self.scheduler_leadership is not None:
            await self.scheduler_leadership.stop()
        await self.components.stop()

    @property
    def idle(self) -> bool:
        """No namespace, kubernetes-Service or CRD work pending, and the pre-installed CRDs
        established and served (tests wait for it). Electing, the first try for the Lease is
        over and the controller-manager part runs if and only if this server leads: a server
        that does not lead waits for nothing of that part."""
        election = self.leadership
        if election is not None and not (election.tried
                                         and election.leading == self._kcm_running):
            return False
        kcm_idle = self.namespace_defaults.queue.idle and all(
            part is None or part.queue.idle
            for part in (self.aggregation, self.csr_signing, self.resource_quota,
                         self.storage_protection))
        return ((not self._kcm_running or kcm_idle)
                and self.kubernetes_service.queue.idle
                and self.crds.queue.idle and self.preinstalled.served
                and self.apiservices.queue.idle
                and self.rbac_bootstrap.done and self.priority_bootstrap.done)

    async def settled(self, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Wait (at most ``timeout_s``) until the start-up work is written: a server whose
        ``start()`` returned has its ``kubernetes`` Service, every namespace's defaults and the
        pre-installed CRDs served, so its first clients see a store that holds still, as a
        cluster's does once up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.idle and loop.time() < deadline:
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(),
                                       min(SETTLE_POLL_S, max(0.0, deadline - loop.time())))

    async def drop_pending(self) -> None:
        """Before a reset: forget the namespace and pod deletions in progress (their timers
        must not fire on a later object of the same name)."""
        await self.deletion.drop_pending()

    def resume_pending(self) -> None:
        """After a reset: take on the marked namespaces and pods the store holds again (when
        this server runs the controller-manager part)."""
        if self._kcm_running:
            self.deletion.find_marked()

    async def stop(self) -> None:
        await self.stop_components()
        if self.leadership is not None:
            await self.leadership.stop()  # its controllers stop, then the Lease is released
        if self._serving:
            await self.kubernetes_service.stop()
        for task in (self._installing, self._bootstrapping, self._priority_classes):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.crds.stop()
        await self.apiservices.stop()
        await self._step_down()
