"""All namespaces: one watch over the Pods of every namespace.

    python examples/watch_all_namespaces.py [--max-events 10] [--timeout 30]

``namespace=None`` watches across every namespace, even on an ``Api`` made for one (kubex's
"Watching across all namespaces"; kubernetes_asyncio's ``list_pod_for_all_namespaces``).
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
        api = Api(Pod, client=client)  # defaults to the context's namespace ...
        print("watching pods in all namespaces")
        seen = 0
        try:
            # ... which namespace=None overrides for this call.
            watch = api.watch(namespace=None, allow_bookmarks=True)
            async with (changes_beside(args, PodChurn("everywhere").run(api)),
                        asyncio.timeout(args.timeout), aclosing(watch) as events):
                async for event in events:
                    if isinstance(event.object, Bookmark):
                        continue
                    print(f"{event.type.value}: {ref(event.object)}")
                    seen += 1
                    if seen >= args.max_events:
                        print(f"stopping after {seen} events")
                        break
        except TimeoutError:
            print(f"stopping after {args.timeout:g}s ({seen} events)")


if __name__ == "__main__":
    asyncio.run(main())
