"""Server-side timeouts: ask the server to end each watch after N seconds, then resume.

    python examples/watch_server_timeout.py [--watch-timeout 5] [--rounds 3]
        [--max-events 10] [--timeout 60]

``timeout_seconds`` is sent as ``timeoutSeconds``: the server closes the stream after that
long and the ``async for`` loop simply ends. Watching again from the last resourceVersion
seen (an event's, or a bookmark's) misses nothing and repeats nothing.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from _common import PodChurn, changes_beside, options, ref

from kubewire.client import Api, Bookmark, create_client
from kubewire.models import Pod


async def main() -> None:
    parser = options(__doc__, max_events=10, timeout=60)
    parser.add_argument("--watch-timeout", type=int, default=5,
                        help="timeoutSeconds of each watch (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="how many watches to run one after the other (default %(default)s)")
    args = parser.parse_args()
    async with await create_client() as client:
        api = Api(Pod, client=client)
        resource_version = (await api.list()).resource_version
        seen = 0
        try:
            async with (changes_beside(args, PodChurn("rounds", every=6.0).run(api)),
                        asyncio.timeout(args.timeout)):
                for round_ in range(1, args.rounds + 1):
                    print(f"round {round_}: watching pods in namespace {api.namespace} "
                          f"for {args.watch_timeout}s")
                    watch = api.watch(resource_version=resource_version, allow_bookmarks=True,
                                      timeout_seconds=args.watch_timeout)
                    async with aclosing(watch) as events:
                        async for event in events:
                            pod = event.object
                            if isinstance(pod, Bookmark):  # a checkpoint: resume from it
                                resource_version = pod.metadata.resource_version
                                continue
                            if pod.metadata and pod.metadata.resource_version:
                                resource_version = pod.metadata.resource_version
                            print(f"{event.type.value} {ref(pod)}")
                            seen += 1
                            if seen >= args.max_events:
                                print(f"stopping after {seen} events")
                                return
                    print(f"round {round_}: the server ended the watch; resuming from the "
                          "last resourceVersion")
            print(f"stopping after {args.rounds} rounds ({seen} events)")
        except TimeoutError:
            print(f"stopping after {args.timeout:g}s ({seen} events)")


if __name__ == "__main__":
    asyncio.run(main())
