"""``APIServer.start()`` returns as soon as its start-up work is written: ``settled()`` wakes when
a controller's queue runs dry or the pre-installing ends, not on a timer, so a fresh in-memory
server in process is ready in tens of milliseconds (issue 17) and ready means settled."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kubewire.server.app import APIServer
from kubewire.server.context import ServerConfig
from kubewire.server.controllers import manager


async def started(data_dir: Path) -> tuple[APIServer, float]:
    server = APIServer(ServerConfig(data_dir=data_dir, port=0, insecure_http=True,
                                    storage="memory"))
    began = time.monotonic()
    await server.start()
    return server, time.monotonic() - began


def test_start_does_not_wait_for_a_poll_to_see_the_work_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a re-check timer far longer than start-up: only the wake-ups can end settled() in time
    monkeypatch.setattr(manager, "SETTLE_POLL_S", 30.0)

    async def main() -> None:
        first, _ = await started(tmp_path / "a")  # the process's one-time schema work
        await first.stop()
        server, seconds = await started(tmp_path / "b")
        try:
            assert seconds < 5.0
            assert server.controllers.idle  # what start() promises: the work is written
            served = {res.crd_name for res in server.ctx.registry.custom()}
            assert "httproutes.gateway.networking.k8s.io" in served
        finally:
            await server.stop()

    asyncio.run(main())
