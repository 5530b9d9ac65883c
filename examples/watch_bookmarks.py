"""Bookmarks: checkpoints that keep the watch's resourceVersion fresh while nothing changes.

    python examples/watch_bookmarks.py [--max-events 3] [--timeout 180]

With ``allow_bookmarks=True`` the server sends a BOOKMARK about once a minute (kubewire:
``kubewire serve --bookmark-interval``) whenever the store moved on; it carries only
``metadata.resource_version``. Save it: a watch resumed from a fresh checkpoint is far less
likely to get 410 Gone. (kubewire's watch resumes from it by itself across reconnects.)
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from _common import options, ref

from kubewire.client import Api, Bookmark, EventType, create_client
from kubewire.models import Pod


async def main() -> None:
    args = options(__doc__, max_events=3, timeout=180).parse_args()
    async with await create_client() as client:
        api = Api(Pod, client=client)
        checkpoint: str | None = (await api.list()).resource_version
        print(f"watching pods in namespace {api.namespace} from resourceVersion={checkpoint}")
        bookmarks = 0
        watch = api.watch(resource_version=checkpoint, allow_bookmarks=True)
        try:
            async with asyncio.timeout(args.timeout), aclosing(watch) as events:
                async for event in events:
                    if event.type is EventType.BOOKMARK:
                        assert isinstance(event.object, Bookmark)
                        checkpoint = event.object.metadata.resource_version
                        print(f"BOOKMARK checkpoint: resourceVersion={checkpoint}")
                        bookmarks += 1
                        if bookmarks >= args.max_events:
                            print(f"stopping after {bookmarks} bookmarks")
                            break
                    elif not isinstance(event.object, Bookmark):
                        pod = event.object
                        checkpoint = pod.metadata.resource_version if pod.metadata else None
                        print(f"{event.type.value} {ref(pod)}")
        except TimeoutError:
            print(f"stopping after {args.timeout:g}s ({bookmarks} bookmarks)")
        print(f"resume later from resourceVersion={checkpoint}")


if __name__ == "__main__":
    asyncio.run(main())
