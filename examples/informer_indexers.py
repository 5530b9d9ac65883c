"""An informer: a local cache of Pods with indexes, and handlers for every change.

    python examples/informer_indexers.py [--max-events 10] [--timeout 60]

The Python counterpart of client-go's shared informer from the guides: list+watch (here a
streaming list), a cache that follows the server, handlers ``on_add(pod)``,
``on_update(old, new)``, ``on_delete(pod)``, and indexes answering "which Pods have label
app=web" or "which Pods are Running" from memory. A transform drops ``managedFields`` before
caching, to save memory.
"""

from __future__ import annotations

import asyncio

import msgspec
from _common import PodChurn, changes_beside, options, ref

from kubewire.client import Api, Informer, create_client
from kubewire.models import Pod


def without_managed_fields(pod: Pod) -> Pod:
    if pod.metadata is None:
        return pod
    return msgspec.structs.replace(
        pod, metadata=msgspec.structs.replace(pod.metadata, managed_fields=None))


def phase_of(pod: Pod) -> list[str]:
    """A custom index function: the values an object is filed under (none, one or more)."""
    return [pod.status.phase] if pod.status and pod.status.phase else []


def app_of(pod: Pod) -> str | None:
    return (pod.metadata.labels or {}).get("app") if pod.metadata else None


async def main() -> None:
    args = options(__doc__, max_events=10, timeout=60).parse_args()
    async with await create_client() as client:
        informer = Informer(Api(Pod, client=client), transform=without_managed_fields)
        informer.add_label_indexer("app")  # index "label:app"
        informer.add_indexer("phase", phase_of)
        changes = 0
        enough = asyncio.Event()

        def show_indexes() -> None:
            for index in ("label:app", "phase"):
                filed = [f"{value}=[{','.join(ref(p) for p in informer.by_index(index, value))}]"
                         for value in informer.cache.index_values(index)]
                print(f"  index {index}: {' '.join(filed)}")

        def counted() -> None:
            nonlocal changes
            show_indexes()
            changes += 1
            if changes >= args.max_events:
                enough.set()

        def on_add(pod: Pod) -> None:
            print(f"add {ref(pod)} app={app_of(pod)}")
            counted()

        def on_update(old: Pod, new: Pod) -> None:
            print(f"update {ref(new)} app={app_of(old)}->{app_of(new)}")
            counted()

        async def on_delete(pod: Pod) -> None:  # handlers may be coroutines too
            print(f"delete {ref(pod)}")
            counted()

        informer.add_handlers(on_add=on_add, on_update=on_update, on_delete=on_delete)
        churn = PodChurn("indexed", labels={"app": "web"}, relabel={"app": "db"}, every=2.0)
        async with changes_beside(args, churn.run(informer.api)), informer:
            await informer.wait_for_sync()
            print(f"synced: {len(informer.cache)} pods in namespace {informer.api.namespace}")
            try:
                await asyncio.wait_for(enough.wait(), args.timeout)
                print(f"stopping after {changes} changes")
            except TimeoutError:
                print(f"stopping after {args.timeout:g}s ({changes} changes)")


if __name__ == "__main__":
    asyncio.run(main())
