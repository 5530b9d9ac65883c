"""Basic watch: print every change to the Pods of the kubeconfig context's namespace.

    python examples/watch_basic.py [--max-events 10] [--timeout 30]

The kubex "Basic usage" and ``match event.type`` snippets on kubewire.client. Without a
resource version the watch first reports every existing Pod as ADDED, then live changes.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from _common import PodChurn, changes_beside, options, ref

from kubewire.client import Api, Bookmark, EventType, create_client
from kubewire.models import Pod


async def main() -> None:
    args = options(__doc__, max_events=10, timeout=30).parse_args()
    client = await create_client()  # KUBECONFIG, else ~/.kube/config
    async with client:
        api: Api[Pod] = Api(Pod, client=client)  # namespace: the context's (kubex passes one)
        print(f"watching pods in namespace {api.namespace}")
        seen = 0
        try:
            # aclosing: leaving the loop early closes the watch's connection at once.
            async with (changes_beside(args, PodChurn("basic").run(api)),
                        asyncio.timeout(args.timeout), aclosing(api.watch()) as events):
                async for event in events:
                    pod = event.object
                    if isinstance(pod, Bookmark):  # only sent when allow_bookmarks=True
                        continue
                    match event.type:
                        case EventType.ADDED:
                            print(f"ADDED {ref(pod)}: new pod")
                        case EventType.MODIFIED:
                            phase = pod.status.phase if pod.status else None
                            print(f"MODIFIED {ref(pod)}: phase {phase}")
                        case EventType.DELETED:
                            print(f"DELETED {ref(pod)}: pod gone")
                    seen += 1
                    if seen >= args.max_events:
                        print(f"stopping after {seen} events")
                        break
        except TimeoutError:
            print(f"stopping after {args.timeout:g}s ({seen} events)")


if __name__ == "__main__":
    asyncio.run(main())
