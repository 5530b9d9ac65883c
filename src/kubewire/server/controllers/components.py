"""The cluster's components (``kubewire.cluster``) run by ``kubewire serve`` against itself.

Once the server listens (``serving``), each component selected by ``--controllers`` from
``kubewire.cluster.components.COMPONENTS`` gets a client of this server over loopback
(HTTPS verified against kubewire's CA when kubewire made the serving certificate; the loopback
address otherwise) with a bearer token the server issued for the component's identity
(``access.authn.IssuedTokens``: in memory only, as kube-apiserver's loopback token), so
``--authorization-mode RBAC`` decides their requests by kube's default roles
(``system:kube-scheduler``, ``system:controller:generic-garbage-collector``, ...). Components
sharing an identity share one client and one ``ClusterContext`` (their informers).

When they run: kube-controller-manager's components while the manager runs that part (from
the start, or while this server holds the controller-manager Lease with ``--leader-elect``:
``lead``/``step_down``); kube-scheduler's while this server holds the Lease
``kube-system/kube-scheduler`` (with leader election; always otherwise); kubelets always.

Where they run (``ServerConfig.components_loop``, ``serve --components-loop``): ``"thread"``
(the default) on an event loop of their own in a thread, ``"loop"`` on the server's. Measured
with ``python -m bench.components_loop`` (a background deletion of 2,000 owned ConfigMaps while
a client GETs one other object in a loop; 2 cores, two runs): a thread kept the GET at p50
0.25-0.35 ms, p99 23-41 ms and collected in 2.7-3.6 s; the server's loop gave p50 5.6-8.4 ms,
p99 62-68 ms and 4.9-5.2 s (no collector: p50 0.19 ms, p99 6-7 ms). On one loop the
collector's decoding and graph work sit between the server's requests; in a thread they share
only the GIL, which each side yields every few milliseconds. ``"loop"`` keeps everything on
one loop (debugging, a test that wants one loop's order).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubewire.server.controllers.selection import CLUSTER_COMPONENTS

if TYPE_CHECKING:  # the client loads aiohttp (~200 ms): imported only when a component runs
    from kubewire.client.config import ClientConfig
    from kubewire.cluster.components import ComponentOptions, Identity, Registration
    from kubewire.cluster.runtime import ClusterContext

log = logging.getLogger(__name__)

Issue = Callable[[str, tuple[str, ...]], str]
KUBE_CONTROLLER_MANAGER = "kube-controller-manager"  # kubewire.cluster.components' part names
KUBE_SCHEDULER = "kube-scheduler"
LOOPS = ("thread", "loop")
RESTART_S = 1.0
CLOSE_GRACE_S = 0.25


class ComponentLoop:
    """Where the components' coroutines run: a thread's own loop, or the server's."""

    def __init__(self, mode: str) -> None:
        if mode not in LOOPS:
            raise ValueError(f"components loop must be one of {', '.join(LOOPS)}: {mode!r}")
        self.mode = mode
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.mode == "loop":
            self.loop = asyncio.get_running_loop()
            return
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="kubewire-components", daemon=True)
        self._thread.start()
        ready.wait()

    async def call(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` on the components' loop and wait for it (from the server's loop)."""
        assert self.loop is not None
        if self.mode == "loop":
            await coro
            return
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def submit(self, coro: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None] | None:
        """Start ``coro`` there without waiting."""
        assert self.loop is not None
        if self.mode == "loop":
            self.loop.create_task(coro)
            return None
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def stop(self) -> None:
        if self._thread is not None and self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            await asyncio.to_thread(self._thread.join, 10.0)
            self._thread = None


@dataclass(eq=False)
class Part:
    """The components of one part (kube-controller-manager, kube-scheduler, kubelet)."""

    name: str
    registrations: list[Registration]
    wanted: bool = False  # this server should run it now (it leads, or no election)
    contexts: dict[Identity, ClusterContext] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    lock: asyncio.Lock | None = None  # on the components' loop


class ClusterComponents:
    """``lead(part)``/``step_down(part)`` as leadership changes, ``serving(...)`` once
    listening, ``await stop()`` at the end."""

    def __init__(self, enabled: Callable[[str], bool], nodes: int, mode: str,
                 hpa: tuple[float, float, float] | None = None,
                 node_settings: Mapping[str, object] | None = None) -> None:
        """``hpa``: kube-controller-manager's HPA flags (sync period, tolerance, downscale
        stabilization), for the HPA controller; None: kube's defaults. ``node_settings``: the
        simulated nodes' ``FleetOptions`` fields (``--node-*``; None values: defaults),
        checked here (``ValueError``: the server does not start)."""
        chosen: list[Registration] = []
        self.options: ComponentOptions | None = None
        if any(enabled(name) for name in CLUSTER_COMPONENTS):
            from kubewire.cluster.components import ComponentOptions, selected
            from kubewire.cluster.controllers.hpa import flag_options
            from kubewire.cluster.nodes.flags import fleet_options

            self.options = ComponentOptions(
                nodes=nodes, extra=flag_options(*hpa) if hpa is not None else {},
                fleet=fleet_options(nodes, node_settings or {}))
            chosen = selected(enabled, self.options)
        self.loop = ComponentLoop(mode)
        self.parts: dict[str, Part] = {}
        for registration in chosen:
            part = self.parts.setdefault(registration.part, Part(registration.part, []))
            part.registrations.append(registration)
        self._make_config: Callable[[Identity], ClientConfig] | None = None
        self._pending: set[concurrent.futures.Future[None] | asyncio.Task[None]] = set()

    @property
    def names(self) -> list[str]:
        return [r.name for part in self.parts.values() for r in part.registrations]

    def serving(self, url: str, ca_pem: bytes | None, issue: Issue) -> None:
        """The server listens at ``url``: start the wanted parts."""
        if not self.parts:
            return
        from kubewire.client.config import ClientConfig, TLSSettings
        from kubewire.client.credentials import StaticCredentials

        tokens: dict[Identity, str] = {}

        def config_for(identity: Identity) -> ClientConfig:
            token = tokens.get(identity)
            if token is None:
                token = tokens[identity] = issue(identity.user, identity.groups)
            tls = TLSSettings(ca_pem=ca_pem, insecure_skip_verify=ca_pem is None)
            return ClientConfig(server=url, tls=tls,
                                credentials=StaticCredentials.bearer(token))

        self._make_config = config_for
        self.loop.start()
        for part in self.parts.values():
            if part.wanted:
                self._switch(part)

    def lead(self, part_name: str = KUBE_CONTROLLER_MANAGER) -> None:
        part = self.parts.get(part_name)
        if part is not None and not part.wanted:
            part.wanted = True
            if self._make_config is not None:
                self._switch(part)

    async def step_down(self, part_name: str = KUBE_CONTROLLER_MANAGER) -> None:
        part = self.parts.get(part_name)
        if part is None or not part.wanted:
            return
        part.wanted = False
        if self._make_config is not None:
            await self.loop.call(self._apply(part))

    def _switch(self, part: Part) -> None:
        future = self.loop.submit(self._apply(part))
        if future is not None:
            self._pending.add(future)
            future.add_done_callback(self._pending.discard)

    async def _apply(self, part: Part) -> None:
        """On the components' loop: make the part's running state match ``wanted``."""
        if part.lock is None:
            part.lock = asyncio.Lock()
        async with part.lock:
            if part.wanted and not part.tasks:
                self._start(part)
            elif not part.wanted and part.tasks:
                await self._stop(part)

    def _start(self, part: Part) -> None:
        from kubewire.client import Client
        from kubewire.cluster.components import CONTROLLER_MANAGER_USER
        from kubewire.cluster.runtime import ClusterContext

        assert self._make_config is not None
        loop = asyncio.get_running_loop()
        shared: ClusterContext | None = None
        if part.name == KUBE_CONTROLLER_MANAGER:  # its informers: list/watch as the manager
            shared = part.contexts.get(CONTROLLER_MANAGER_USER)
            if shared is None:
                shared = part.contexts[CONTROLLER_MANAGER_USER] = ClusterContext(
                    Client(self._make_config(CONTROLLER_MANAGER_USER)))
        for registration in part.registrations:
            ctx = part.contexts.get(registration.identity)
            if ctx is None:
                client = Client(self._make_config(registration.identity))
                ctx = part.contexts[registration.identity] = ClusterContext(
                    client, informers_from=shared)
            task = loop.create_task(self._run(registration, ctx), name=registration.name)
            part.tasks.append(task)
        log.info("%s: started %s", part.name, ", ".join(r.name for r in part.registrations))

    async def _run(self, registration: Registration, ctx: ClusterContext) -> None:
        """Run one component; one that fails is made again after ``RESTART_S`` (where
        kube-controller-manager would exit and be restarted)."""
        while True:
            try:
                assert self.options is not None
                await registration.factory(ctx, self.options).run()
                return
            except Exception:
                log.exception("component %s failed; restarting in %.0fs", registration.name,
                              RESTART_S)
            await asyncio.sleep(RESTART_S)

    async def _stop(self, part: Part) -> None:
        for task in part.tasks:
            task.cancel()
        for task in part.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        part.tasks.clear()
        for ctx in part.contexts.values():
            await ctx.close()
            await ctx.client.close()
        if part.contexts:  # the closed connections' sockets close on the loop's next turns
            # (TLS ones after their shutdown: aiohttp's advice)
            tls = any(c.client.config.server.startswith("https:") for c in part.contexts.values())
            await asyncio.sleep(CLOSE_GRACE_S if tls else 0.05)
        part.contexts.clear()

    async def _stop_all(self) -> None:
        for part in self.parts.values():
            part.wanted = False
            await self._apply(part)

    async def stop(self) -> None:
        if self._make_config is None:
            return
        for future in list(self._pending):
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(future) if isinstance(
                    future, concurrent.futures.Future) else await future
        await self.loop.call(self._stop_all())
        await self.loop.stop()
        self._make_config = None


