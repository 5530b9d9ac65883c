"""Several kinds at once: Pods, Services and Deployments watched side by side.

    python examples/watch_many_kinds.py [--max-events 10] [--timeout 30]

One task per kind (an ``asyncio.TaskGroup``; ``asyncio.gather`` works the same way), each
feeding one queue, so a single loop sees every change in the order it arrives.
"""

from __future__ import annotations

import asyncio
import itertools
from contextlib import aclosing, suppress
from typing import TypeVar

from _common import HasMetadata, changes_beside, example_pod, options, ref

from kubewire.client import Api, Bookmark, NotFound, create_client
from kubewire.models import Deployment, ObjectMeta, Pod, Service
from kubewire.models.apps_v1 import DeploymentSpec
from kubewire.models.core_v1 import PodTemplateSpec, ServicePort, ServiceSpec
from kubewire.models.meta_v1 import LabelSelector

K = TypeVar("K", bound=HasMetadata)


async def watch_kind(api: Api[K], resource_version: str, out: asyncio.Queue[str]) -> None:
    async with aclosing(api.watch(resource_version=resource_version)) as events:
        async for event in events:
            if not isinstance(event.object, Bookmark):
                await out.put(f"{api.info.kind} {event.type.value}: {ref(event.object)}")


async def own_changes(pods: Api[Pod], services: Api[Service],
                      deployments: Api[Deployment]) -> None:
    """A Pod, a Service and a Deployment, made and deleted again every two seconds."""
    for n in itertools.count(1):
        name, labels = f"example-kinds-{n}", {"app": f"example-kinds-{n}"}
        template = example_pod(name, labels)
        try:
            await pods.create(template)
            await services.create(Service(metadata=ObjectMeta(name=name), spec=ServiceSpec(
                selector=labels, ports=[ServicePort(port=80)])))
            await deployments.create(Deployment(metadata=ObjectMeta(name=name), spec=DeploymentSpec(
                selector=LabelSelector(match_labels=labels),
                template=PodTemplateSpec(metadata=template.metadata, spec=template.spec))))
            await asyncio.sleep(1)
        finally:
            for api in (pods, services, deployments):
                with suppress(NotFound):
                    await api.delete(name)
        await asyncio.sleep(1)


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
                async with (changes_beside(args, own_changes(pods, services, deployments)),
                            asyncio.timeout(args.timeout)):
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
