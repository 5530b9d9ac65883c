"""Control runs: known effects that prove the harness measures what it reports.

Every attack of the suite fails on a server without the fixes, so none can show that a passing
measurement is right. These runs go through the same ``run_attack`` with effects known in
advance, and hold whatever the server's code becomes:

- ``calm``: a few ordinary GETs. Nothing grows, the probe is fast: every bound holds.
- ``known-memory``: 40 ConfigMaps of 1 MiB each. The watch cache keeps every object, so the
  server's RSS grows by at least their 40 MiB, and the RSS watch must see it.
- ``frozen-server``: the server is SIGSTOPped for half a second. Every request the probe had
  in flight then waits that long, so its worst latency must show it.
- ``watch-then-flood``: the pipelining flood on connections that each opened a watch first.
  While a watch streams, kubewire keeps 64 KiB of what the client sends and then stops reading
  that connection (Go reads the next request only after a response), while it serves everyone
  else: every connection must count as paused (what the kernel took is what a paused server
  leaves in it).
"""

from __future__ import annotations

import asyncio
import signal
import time

from tests.reliability.hostile.floods import VERSION, VERSION_FLOODS, pipelined
from tests.reliability.hostile.harness import AttackSpec, Outcome
from tests.reliability.hostile.server import ADMIN, HostileServer
from tests.reliability.hostile.wire import (
    CONFIGMAPS,
    Answer,
    exchanges,
    get_request,
    request_head,
    summary,
)

KNOWN_OBJECTS = 40
KNOWN_OBJECT_BYTES = 1 << 20
FROZEN_S = 0.5


async def calm(server: HostileServer, long: bool) -> Outcome:
    results, seconds = await exchanges(server, 2, [get_request(server, f"{CONFIGMAPS}/cm-0",
                                                        server.auth(ADMIN))] * 5)
    return Outcome(all(isinstance(r, Answer) and r.status == 200 for r in results),
                   summary(results), seconds, 2)


async def known_memory(server: HostileServer, long: bool) -> Outcome:
    def create(i: int) -> bytes:
        body = (b'{"metadata":{"name":"big-%d"},"data":{"payload":"%s"}}'
                % (i, b"x" * KNOWN_OBJECT_BYTES))
        return request_head("POST", CONFIGMAPS, {**server.auth(ADMIN), "Content-Length":
                                                 str(len(body)), "Content-Type":
                                                 "application/json"}) + body

    results, seconds = await exchanges(server, 1, [create(i) for i in range(KNOWN_OBJECTS)])
    return Outcome(all(isinstance(r, Answer) and r.status == 201 for r in results),
                   summary(results), seconds, 1)


async def frozen_server(server: HostileServer, long: bool) -> Outcome:
    began = time.monotonic()
    await asyncio.sleep(0.2)
    server.signal_server(signal.SIGSTOP)
    try:
        await asyncio.sleep(FROZEN_S)
    finally:
        server.signal_server(signal.SIGCONT)
    await asyncio.sleep(0.2)
    return Outcome(True, f"server stopped for {FROZEN_S:g} s", time.monotonic() - began, 0)


async def watch_then_flood(server: HostileServer, long: bool) -> Outcome:
    watch = get_request(server, f"{CONFIGMAPS}?watch=1", server.auth(ADMIN))
    return await pipelined(server, VERSION, VERSION_FLOODS[False], first=watch)


CONTROLS: dict[str, AttackSpec] = {spec.name: spec for spec in [
    AttackSpec("calm", calm, "200s, nothing grows"),
    AttackSpec("known-memory", known_memory, f"{KNOWN_OBJECTS} creates of 1 MiB"),
    AttackSpec("frozen-server", frozen_server, f"the server stopped {FROZEN_S:g} s"),
    AttackSpec("watch-then-flood", watch_then_flood, "every flooding connection paused"),
]}
