"""Restart on Gone: when the revision to resume from was compacted, list again and go on.

    python examples/watch_restart_on_gone.py [--resource-version RV] [--max-events 10]
        [--timeout 30]

A watcher that saved a checkpoint (``--resource-version``, for example the last one
``watch_bookmarks.py`` printed) resumes from it. If the server no longer keeps that revision
the watch raises ``Gone`` (HTTP 410 "too old resource version"): the events in between are
lost, so list again (the current state) and watch from the list's revision.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from _common import PodChurn, changes_beside, options, ref

from kubewire.client import Api, Bookmark, Gone, create_client  # kubex: kubex.core.exceptions
from kubewire.models import Pod


async def main() -> None:
    parser = options(__doc__, max_events=10, timeout=30)
    parser.add_argument("--resource-version", help="the checkpoint to resume from")
    args = parser.parse_args()
    async with await create_client() as client:
        api = Api(Pod, client=client)
        resource_version: str | None = args.resource_version
        if resource_version is None:
            resource_version = (await api.list()).resource_version
        print(f"watching pods in namespace {api.namespace} from the checkpoint")
        seen = 0
        try:
            async with (changes_beside(args, PodChurn("resumed").run(api)),
                        asyncio.timeout(args.timeout)):
                while seen < args.max_events:
                    try:
                        watch = api.watch(resource_version=resource_version, allow_bookmarks=True)
                        async with aclosing(watch) as events:
                            async for event in events:
                                pod = event.object
                                if isinstance(pod, Bookmark):  # a fresher checkpoint
                                    resource_version = pod.metadata.resource_version
                                    continue
                                if pod.metadata and pod.metadata.resource_version:
                                    resource_version = pod.metadata.resource_version
                                print(f"{event.type.value} {ref(pod)}")
                                seen += 1
                                if seen >= args.max_events:
                                    break
                    except Gone:
                        # kubex's variant: watch again with send_initial_events=True and take
                        # its ADDED snapshot as the list.
                        print("410 Gone: the checkpoint was compacted; listing again")
                        listed = await api.list()
                        for item in listed:
                            print(f"LISTED {ref(item)}")
                        resource_version = listed.resource_version
                        print("watching again from the list's resourceVersion")
            print(f"stopping after {seen} events")
        except TimeoutError:
            print(f"stopping after {args.timeout:g}s ({seen} events)")


if __name__ == "__main__":
    asyncio.run(main())
