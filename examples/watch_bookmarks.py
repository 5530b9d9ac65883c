"""Bookmarks: checkpoints that keep the watch's resourceVersion fresh while nothing changes.

    python examples/watch_bookmarks.py [--max-events 3] [--timeout 200] [--watch-only]

With ``allow_bookmarks=True`` the server sends a BOOKMARK about once a minute (kubewire:
``kubewire serve --bookmark-interval``) whenever the store moved on; it carries only
``metadata.resource_version``. Save it: a watch resumed from a fresh checkpoint is far less
likely to get 410 Gone. (kubewire's watch resumes from it by itself across reconnects.)

Bookmarks come only while the store moves on, so unless ``--watch-only`` the example updates a
ConfigMap of its own every two seconds: the Pods it watches do not change, the revision does.
"""

from __future__ import annotations

import asyncio
import itertools
from contextlib import aclosing, suppress

from _common import changes_beside, options, ref

from kubewire.client import Api, Bookmark, EventType, NotFound, create_client
from kubewire.models import ConfigMap, ObjectMeta, Pod

TICK = "example-bookmarks-tick"


async def tick(maps: Api[ConfigMap], every: float = 2.0) -> None:
    """Move the store on: update one ConfigMap every ``every`` seconds; delete it at the end."""
    try:
        await maps.create(ConfigMap(metadata=ObjectMeta(name=TICK), data={"n": "0"}))
        for n in itertools.count(1):
            await asyncio.sleep(every)
            await maps.patch(TICK, {"data": {"n": str(n)}})
    finally:
        with suppress(NotFound):
            await maps.delete(TICK)


async def main() -> None:
    args = options(__doc__, max_events=3, timeout=200).parse_args()
    async with await create_client() as client:
        api = Api(Pod, client=client)
        checkpoint: str | None = (await api.list()).resource_version
        print(f"watching pods in namespace {api.namespace} from resourceVersion={checkpoint}")
        bookmarks = 0
        watch = api.watch(resource_version=checkpoint, allow_bookmarks=True)
        try:
            async with (changes_beside(args, tick(Api(ConfigMap, client=client))),
                        asyncio.timeout(args.timeout), aclosing(watch) as events):
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
