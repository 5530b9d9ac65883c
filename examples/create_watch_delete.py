"""Create, watch, delete: create a Pod while watching, delete it, see both in the stream.

    python examples/create_watch_delete.py [--timeout 30]

kubex's ``examples/watch_pods.py`` on kubewire.client: a watcher task over all namespaces,
a Pod made from ``generate_name``, deleted again, the watcher cancelled at the end. Unlike
the original the watcher starts from a list's resourceVersion, and each step waits for its
event, so the output is the same on every run.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing, suppress

from _common import options, ref

from kubewire.client import Api, Bookmark, create_client
from kubewire.models import ObjectMeta, Pod  # kubex: ObjectMetadata
from kubewire.models.core_v1 import Container, PodSpec

Seen = asyncio.Queue[tuple[str, str]]


async def watcher(pod_api: Api[Pod], resource_version: str, seen: Seen) -> None:
    watch = pod_api.watch(allow_bookmarks=True, namespace=None,
                          resource_version=resource_version)
    async with aclosing(watch) as events:
        async for event in events:
            if isinstance(event.object, Bookmark):
                continue
            await seen.put((event.type.value, ref(event.object)))


async def wait_for(seen: Seen, event_type: str, pod: str) -> None:
    """Print what the watcher saw, up to ``event_type`` of ``pod``."""
    while True:
        event = await seen.get()
        print(f"watch: {event[0]} {event[1]}")
        if event == (event_type, pod):
            return


async def main() -> None:
    args = options(__doc__, max_events=None, timeout=30, watch_only=False).parse_args()
    client = await create_client()
    async with client:
        api: Api[Pod] = Api(Pod, client=client)  # kubex passes namespace="default"
        seen: Seen = asyncio.Queue()
        since = (await api.list(namespace=None)).resource_version
        _watcher = asyncio.create_task(watcher(api, since, seen))
        pod_name: str | None = None
        try:
            async with asyncio.timeout(args.timeout):
                _pod = await api.create(
                    Pod(
                        metadata=ObjectMeta(generate_name="example-pod-"),
                        spec=PodSpec(containers=[Container(name="example", image="nginx")]),
                    ),
                )
                assert _pod.metadata is not None and _pod.metadata.name is not None
                pod_name = _pod.metadata.name
                print(f"created {ref(_pod)}")
                await wait_for(seen, "ADDED", ref(_pod))
                answer = await api.delete(pod_name)
                pod_name = None
                # The deleted Pod (marked with a deletionTimestamp), or a Status.
                print(f"delete answered with a {type(answer).__name__}")
                await wait_for(seen, "DELETED", ref(_pod))
        except TimeoutError:
            print(f"stopping after {args.timeout:g}s")
        finally:
            if pod_name is not None:
                print(await api.delete(pod_name))
            _watcher.cancel()
            with suppress(asyncio.CancelledError):
                await _watcher
        print("done")


if __name__ == "__main__":
    asyncio.run(main())
