"""Several kinds at once: Pods, Services and Deployments watched side by side.

    python examples/watch_many_kinds.py [--max-events 10] [--timeout 30]

One task per kind (an ``asyncio.TaskGroup``; ``asyncio.gather`` works the same way), each
feeding one queue, so a single loop sees every change in the order it arrives.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import TypeVar

from _common import HasMetadata, options, ref

from kubewire.client import Api, Bookmark, create_client
from kubewire.models import Deployment, Pod, Service

K = TypeVar("K", bound=HasMetadata)


async def watch_kind(api: Api[K], resource_version: str, out: asyncio.Queue[str]) -> None:
    async with aclosing(api.watch(resource_version=resource_version)) as events:
        async for event in events:
            if not isinstance(event.object, Bookmark):
                await out.put(f"{api.info.kind} {event.type.value}: {ref(event.object)}")


async def main() -> None:
    args = options(__doc__, max_events=10, timeout=30).parse_args()
    async with await create_client() as client:
        pods, services = Api(Pod, client=client), Api(Service, client=client)
        deployments = Api(Deployment, client=client)
        changes: asyncio.Queue[str] = asyncio.Queue()
        seen = 0
        async with asyncio.TaskGroup() as group:
            # Each watch starts where its list ended: nothing written after this is missed.
            tasks = [
                group.create_task(watch_kind(pods, (await pods.list()).resource_version,
                                             changes)),
                group.create_task(watch_kind(services, (await services.list()).resource_version,
                                             changes)),
                group.create_task(watch_kind(deployments,
                                             (await deployments.list()).resource_version,
                                             changes)),
            ]
            print(f"watching pods, services and deployments in namespace {pods.namespace}")
            try:
                async with asyncio.timeout(args.timeout):
                    while seen < args.max_events:
                        print(await changes.get())
                        seen += 1
                print(f"stopping after {seen} events")
            except TimeoutError:
                print(f"stopping after {args.timeout:g}s ({seen} events)")
            for task in tasks:
                task.cancel()  # the group waits for them to close their watches


if __name__ == "__main__":
    asyncio.run(main())
