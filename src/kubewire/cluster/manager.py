"""``kubewire controller-manager``: the cluster's components in a process of their own, against
any Kubernetes-compatible server (kube-controller-manager's ``--kubeconfig`` form).

One client from the kubeconfig (its credential is every component's, as kube-controller-manager
without ``--use-service-account-credentials``) and one ``ClusterContext``; the components
``enabled`` (``--controllers``) selects run until the process is stopped. With
``leader_elect`` the kube-controller-manager part (and the kubelets) run only while this
process holds the Lease ``kube-system/kube-controller-manager``, and the scheduler part while
it holds ``kube-system/kube-scheduler`` (client-go's elector, ``kubewire.client
.leaderelection``); losing a Lease stops that part and campaigns again, as ``kubewire serve``
does (kube's binaries exit instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kubewire.client import Client
from kubewire.client.leaderelection import (
    ClientEventRecorder,
    ClientLeases,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
    new_identity,
)
from kubewire.cluster.components import (
    KUBE_CONTROLLER_MANAGER,
    KUBE_SCHEDULER,
    ComponentOptions,
    Registration,
    selected,
)
from kubewire.cluster.runtime import ClusterContext

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Election:
    """kube-controller-manager's ``--leader-elect-*`` durations (seconds) and namespace."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    namespace: str = "kube-system"


async def run_parts(ctx: ClusterContext, registrations: list[Registration],
                    options: ComponentOptions) -> None:
    """Run the components until cancelled (a failing one is logged and made again)."""
    async def one(registration: Registration) -> None:
        while True:
            try:
                await registration.factory(ctx, options).run()
                return
            except Exception:
                log.exception("component %s failed; restarting", registration.name)
            await asyncio.sleep(1.0)

    await asyncio.gather(*(one(r) for r in registrations))


async def _elected(client: Client, name: str, election: Election, identity: str,
                   work: Callable[[], asyncio.Future[None] | asyncio.Task[None]]) -> None:
    """Campaign for ``name``; run ``work()`` while leading; campaign again after losing."""
    config = LeaderElectionConfig(name=name, namespace=election.namespace, identity=identity,
                                  lease_duration=election.lease_duration,
                                  renew_deadline=election.renew_deadline,
                                  retry_period=election.retry_period, release_on_cancel=True)
    while True:
        async def lead() -> None:
            task = work()
            try:
                await task
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

        elector = LeaderElector(config, LeaderCallbacks(
            on_started_leading=lead, on_stopped_leading=lambda: None),
            ClientLeases(client), events=ClientEventRecorder(client, name))
        await elector.run()
        log.warning("lost the lease %s/%s; campaigning again", election.namespace, name)


async def run_controller_manager(client: Client, enabled: Callable[[str], bool],
                                 options: ComponentOptions,
                                 election: Election | None = None) -> None:
    """Run what ``enabled`` selects against ``client``'s server until cancelled."""
    chosen = selected(enabled)
    if not chosen:
        log.warning("no component selected: nothing to run")
    ctx = ClusterContext(client)
    parts: dict[str, list[Registration]] = {}
    for registration in chosen:
        part = KUBE_SCHEDULER if registration.part == KUBE_SCHEDULER else KUBE_CONTROLLER_MANAGER
        parts.setdefault(part, []).append(registration)
    log.info("running %s", ", ".join(r.name for r in chosen) or "nothing")
    loop = asyncio.get_running_loop()
    try:
        if not parts:
            await loop.create_future()  # as kube-controller-manager with nothing enabled
        if election is None:
            await asyncio.gather(*(run_parts(ctx, regs, options) for regs in parts.values()))
            return
        identity = new_identity()

        def starter(regs: list[Registration]) -> Callable[[], asyncio.Task[None]]:
            return lambda: loop.create_task(run_parts(ctx, regs, options))

        await asyncio.gather(*(_elected(client, part, election, identity, starter(regs))
                               for part, regs in parts.items()))
    finally:
        await ctx.close()
