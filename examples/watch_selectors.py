"""Label and field selectors: the server sends only the Pods that match.

    python examples/watch_selectors.py [--label-selector app=nginx,env=production]
        [--field-selector status.phase=Running] [--max-events 10] [--timeout 30]

The selectors of the guides' "Filtering" snippets. A Pod that starts matching arrives as
ADDED, one that stops matching as DELETED, whatever happened to it on the server.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from _common import PodChurn, changes_beside, equality_labels, options, ref

from kubewire.client import Api, Bookmark, create_client
from kubewire.models import Pod


def own_changes(label_selector: str, field_selector: str) -> PodChurn:
    """Pods that start matching (their phase set, as a kubelet would) and stop matching (a
    label changed) again, for a selector of ``key=value`` terms."""
    labels = equality_labels(label_selector)
    phase = field_selector.partition("status.phase=")[2].split(",")[0] or None
    relabel = {key: f"not-{value}" for key, value in list(labels.items())[-1:]}
    return PodChurn("selected", labels=labels, relabel=relabel or None, phase=phase)


async def main() -> None:
    parser = options(__doc__, max_events=10, timeout=30)
    parser.add_argument("--label-selector", default="app=nginx,env=production")
    parser.add_argument("--field-selector", default="status.phase=Running")
    args = parser.parse_args()
    async with await create_client() as client:
        api = Api(Pod, client=client)
        # A label selector may also be a dict: {"app": "nginx", "env": "production"}.
        selectors = {"label_selector": args.label_selector,
                     "field_selector": args.field_selector}
        # List first and watch from the list's revision: nothing after it is missed.
        listed = await api.list(**selectors)
        for item in listed:
            print(f"LISTED {ref(item)}")
        print(f"watching pods in namespace {api.namespace} "
              f"where {args.label_selector} and {args.field_selector}")
        seen = 0
        watch = api.watch(resource_version=listed.resource_version, **selectors)
        try:
            changes = own_changes(args.label_selector, args.field_selector).run(api)
            async with (changes_beside(args, changes), asyncio.timeout(args.timeout),
                        aclosing(watch) as events):
                async for event in events:
                    pod = event.object
                    if isinstance(pod, Bookmark) or pod.metadata is None:
                        continue
                    labels = ",".join(f"{key}={value}" for key, value in
                                      sorted((pod.metadata.labels or {}).items()))
                    phase = pod.status.phase if pod.status else None
                    print(f"{event.type.value} {ref(pod)} labels {labels} phase {phase}")
                    seen += 1
                    if seen >= args.max_events:
                        print(f"stopping after {seen} events")
                        break
        except TimeoutError:
            print(f"stopping after {args.timeout:g}s ({seen} events)")


if __name__ == "__main__":
    asyncio.run(main())
