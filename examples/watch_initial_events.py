"""Initial events: one stream for the current state and then every change (streaming list).

    python examples/watch_initial_events.py [--max-events 10] [--timeout 30]

``send_initial_events=True`` (``sendInitialEvents=true``, Kubernetes 1.27+) makes the server
first send an ADDED event per existing Pod, then a BOOKMARK annotated
``k8s.io/initial-events-end``, then live changes: no separate list call.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from _common import PodChurn, changes_beside, options, ref

from kubewire.client import Api, Bookmark, create_client
from kubewire.models import Pod


async def main() -> None:
    args = options(__doc__, max_events=10, timeout=30).parse_args()
    async with await create_client() as client:
        api = Api(Pod, client=client)
        print(f"watching pods in namespace {api.namespace} with initial events")
        seen = 0
        watch = api.watch(send_initial_events=True, allow_bookmarks=True)
        try:
            async with (changes_beside(args, PodChurn("initial").run(api)),
                        asyncio.timeout(args.timeout), aclosing(watch) as events):
                async for event in events:
                    if isinstance(event.object, Bookmark):
                        if event.object.is_initial_events_end:
                            print("initial list complete, watching for changes now")
                        continue  # later bookmarks are checkpoints only
                    print(f"{event.type.value} {ref(event.object)}")
                    seen += 1
                    if seen >= args.max_events:
                        print(f"stopping after {seen} events")
                        break
        except TimeoutError:
            print(f"stopping after {args.timeout:g}s ({seen} events)")


if __name__ == "__main__":
    asyncio.run(main())
