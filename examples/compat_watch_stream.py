"""kubernetes_asyncio's ``watch.Watch().stream(...)``, on kubewire.client.

    python examples/compat_watch_stream.py [--target target-pod] [--max-events 10]
        [--timeout 60]

The "Basic Resource Watching" and "Watching with Resource Version" examples of
kubernetes_asyncio's Watch, unchanged but for where ``v1`` comes from: ``Watch().stream``
takes a bound ``list`` method of an ``Api`` where kubernetes_asyncio takes
``v1.list_namespaced_pod``, and yields the same event dicts (``type``, ``object``,
``raw_object``). It stops when ``--target`` is deleted.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress

from _common import changes_beside, example_pod, options

from kubewire.client import Api, NotFound, Watch, create_client
from kubewire.models import Pod


async def make_target(v1: Api[Pod], name: str) -> None:
    """The example's own changes (not in kubernetes_asyncio's): the target Pod, created and
    deleted a second later."""
    try:
        await v1.create(example_pod(name))
        await asyncio.sleep(1)
    finally:
        with suppress(NotFound):
            await v1.delete(name)


async def watch_pods() -> None:
    parser = options(__doc__, max_events=10, timeout=60)
    parser.add_argument("--target", default="target-pod")
    args = parser.parse_args()
    client = await create_client()  # kubernetes_asyncio: await config.load_config()
    v1 = Api(Pod, client=client)  # kubernetes_asyncio: client.CoreV1Api()
    namespace = v1.namespace  # the kubeconfig context's
    w = Watch()
    seen = 0
    try:
        # Get the current resource version, and watch from it so that no event is missed.
        pod_list = await v1.list(namespace=namespace)  # list_namespaced_pod(namespace=...)
        resource_version = pod_list.resource_version  # kubernetes_asyncio: .metadata.
        print(f"Starting to watch pods in {namespace} namespace...")
        async with changes_beside(args, make_target(v1, args.target)):
            async for event in w.stream(v1.list, namespace=namespace,
                                        resource_version=resource_version,
                                        timeout_seconds=int(args.timeout)):
                event_type = event["type"]
                pod = event["object"]
                print(f"{event_type}: Pod {pod.metadata.name}")
                print(f"  Namespace: {pod.metadata.namespace}")
                print(f"  Phase: {pod.status.phase}")
                print(f"  Node: {pod.spec.node_name or 'Not scheduled'}")
                print("---")
                seen += 1
                # Example: stop watching after a specific condition (or a number of events).
                if event_type == "DELETED" and pod.metadata.name == args.target:
                    print("Target pod deleted, stopping watch")
                    w.stop()
                elif seen >= args.max_events:
                    print(f"stopping after {seen} events")
                    w.stop()
        print("Watch stream closed")
    finally:
        w.stop()
        await client.close()  # kubernetes_asyncio: await v1.api_client.close()


if __name__ == "__main__":
    asyncio.run(watch_pods())
