"""A watch with the caller's ``timeout_seconds`` lasts that long even when the server restarts
meanwhile: the early end of its stream is a reconnect, not the end of the watch."""

from __future__ import annotations

import asyncio
import time
from contextlib import aclosing

from kubewire.client.api import Api
from kubewire.client.client import create_client
from kubewire.client.watch import WatchSettings
from kubewire.models import ConfigMap, ObjectMeta
from tests.integration.harness import ServerThread
from tests.integration.test_client_watch_faults import FAST

TIMEOUT_S = 4


async def test_a_server_restart_does_not_end_a_watch_before_its_timeout(
        server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        maps = Api(ConfigMap, client=client)
        since = (await maps.list()).resource_version
        seen: list[str] = []
        started = time.monotonic()

        async def consume() -> float:
            watch = maps.watch(resource_version=since, timeout_seconds=TIMEOUT_S,
                               settings=WatchSettings(**FAST))
            async with aclosing(watch) as events:
                async for event in events:
                    assert isinstance(event.object, ConfigMap) and event.object.metadata
                    seen.append(event.object.metadata.name or "")
            return time.monotonic() - started

        task = asyncio.create_task(consume())
        await maps.create(ConfigMap(metadata=ObjectMeta(name="before")))
        await asyncio.sleep(0.3)
        await asyncio.to_thread(server.restart)  # the server closes the watch cleanly
        await maps.create(ConfigMap(metadata=ObjectMeta(name="after")))
        lasted = await asyncio.wait_for(task, TIMEOUT_S + 10)
        assert seen == ["before", "after"]
        assert TIMEOUT_S - 1 <= lasted < TIMEOUT_S + 3
