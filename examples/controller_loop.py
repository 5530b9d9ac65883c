"""A controller loop: an informer feeds a work queue, a worker reconciles each Pod.

    python examples/controller_loop.py [--selector managed-by=simple-controller]
        [--max-events 10] [--timeout 60]

The guides' "simple controller" done the client-go way. The informer keeps a cache of the
Pods labelled ``managed-by=simple-controller`` and puts the key of every changed Pod on a
``WorkQueue`` (one entry per key however often it changes, never two workers on one key).
The worker reconciles from the cache: a live Pod gets the finalizer
``simple-controller/cleanup``; a Pod being deleted is cleaned up and the finalizer removed,
which lets the deletion finish. Failed reconciles are retried with per-key backoff.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress

from _common import PodChurn, changes_beside, equality_labels, options

from kubewire.client import (
    Api,
    Informer,
    NotFound,
    PatchType,
    QueueShutDown,
    StatusError,
    TransportError,
    WorkQueue,
    create_client,
)
from kubewire.models import Pod

FINALIZER = "simple-controller/cleanup"


class Controller:
    def __init__(self, pods: Api[Pod], selector: str) -> None:
        self.pods = pods
        self.informer = Informer(pods, label_selector=selector)
        self.queue: WorkQueue[str] = WorkQueue()
        self.managed: set[str] = set()
        self.actions = 0
        # Handlers only enqueue keys: all the work happens in the worker.
        self.informer.add_handlers(on_add=self.enqueue,
                                   on_update=lambda old, new: self.enqueue(new),
                                   on_delete=self.enqueue)

    async def enqueue(self, pod: Pod) -> None:
        await self.queue.add(self.informer.key_of(pod))

    async def worker(self, done: asyncio.Event, max_actions: int) -> None:
        with suppress(QueueShutDown):
            while True:
                key = await self.queue.get()
                try:
                    if await self.reconcile(key):
                        self.actions += 1
                    self.queue.forget(key)
                except (StatusError, TransportError) as err:
                    delay = self.queue.add_rate_limited(key)
                    print(f"{key}: {type(err).__name__}, retrying in {delay:.2f}s")
                finally:
                    await self.queue.done(key)
                if self.actions >= max_actions:
                    done.set()

    async def reconcile(self, key: str) -> bool:
        """Move ``key`` towards what it should be; returns whether anything was done."""
        namespace, name = key.split("/")
        pod = self.informer.get(name, namespace)
        if pod is None or pod.metadata is None:
            if key in self.managed:
                self.managed.discard(key)
                print(f"{key}: gone, forgotten")
                return True
            return False
        finalizers = pod.metadata.finalizers or []
        # resourceVersion in a merge patch is a precondition: a stale cache gets Conflict.
        version = pod.metadata.resource_version
        if pod.metadata.deletion_timestamp is None and FINALIZER not in finalizers:
            self.managed.add(key)
            await self.patch(name, namespace, [*finalizers, FINALIZER], version)
            print(f"{key}: managing it, added finalizer {FINALIZER}")
            return True
        if pod.metadata.deletion_timestamp is not None and FINALIZER in finalizers:
            self.managed.add(key)
            print(f"{key}: being deleted, cleaning up")
            rest = [f for f in finalizers if f != FINALIZER]
            await self.patch(name, namespace, rest, version)
            print(f"{key}: cleaned up, removed finalizer {FINALIZER}")
            return True
        self.managed.add(key)
        return False

    async def patch(self, name: str, namespace: str, finalizers: list[str],
                    version: str | None) -> None:
        # A merge patch replaces the list (a strategic merge patch, kubernetes_asyncio's
        # default for a dict, would merge it and never remove the finalizer).
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": version}}
        with suppress(NotFound):  # deleted meanwhile: nothing left to do
            await self.pods.patch(name, body, namespace=namespace, type=PatchType.MERGE)


async def main() -> None:
    parser = options(__doc__, max_events=10, timeout=60)
    parser.add_argument("--selector", default="managed-by=simple-controller")
    args = parser.parse_args()
    async with await create_client() as client:
        controller = Controller(Api(Pod, client=client), args.selector)
        done = asyncio.Event()
        changes = PodChurn("managed", labels=equality_labels(args.selector), every=2.0)
        async with (changes_beside(args, changes.run(controller.pods)), controller.informer,
                    asyncio.TaskGroup() as group):
            await controller.informer.wait_for_sync()
            print(f"controller running for pods in namespace {controller.pods.namespace} "
                  f"labelled {args.selector}")
            worker = group.create_task(controller.worker(done, args.max_events))
            try:
                await asyncio.wait_for(done.wait(), args.timeout)
                print(f"stopping after {controller.actions} actions")
            except TimeoutError:
                print(f"stopping after {args.timeout:g}s ({controller.actions} actions)")
            await controller.queue.shut_down()
            await worker


if __name__ == "__main__":
    asyncio.run(main())
