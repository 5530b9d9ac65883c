"""``Informer`` against the real server: streaming list and list+watch sync, handlers,
``subscribe()``, indexers, transform, a transparent relist after 410 with synthesized
deletions, and a controller loop on the work queue."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

import msgspec
import pytest

from kubewire.client.api import Api
from kubewire.client.backoff import Backoff
from kubewire.client.client import Client, create_client
from kubewire.client.config import ClientConfig
from kubewire.client.errors import AlreadyExists, Gone
from kubewire.client.events import EventType
from kubewire.client.informers.informer import NAMESPACE_INDEX, OWNER_INDEX, Informer, InformerEvent
from kubewire.client.informers.workqueue import ItemBackoff, QueueShutDown, WorkQueue
from kubewire.client.resource import PatchType
from kubewire.client.watch import WatchSettings
from kubewire.models import ConfigMap, Namespace, ObjectMeta
from kubewire.models.meta_v1 import OwnerReference
from kubewire.storage.base import Retention
from tests.integration.harness import ServerThread
from tests.integration.test_client_watch_faults import FaultProxy

WAIT_S = 30.0  # bound on every wait: a stuck informer fails the test instead of hanging it


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


def cm(name: str, namespace: str | None = None, **labels: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace=namespace, labels=labels or None))


async def eventually(predicate: Callable[[], bool], what: str) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)
    try:
        await asyncio.wait_for(poll(), WAIT_S)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


def names(objs: list[ConfigMap]) -> list[str]:
    return sorted(o.metadata.name or "" for o in objs if o.metadata)


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming-list", "list-watch"])
async def test_sync_handlers_indexes_and_live_changes(client: Client, streaming: bool) -> None:
    await Api(Namespace, client=client).create(Namespace(metadata=ObjectMeta(name="team")))
    maps = Api(ConfigMap, client=client, namespace=None)
    await maps.create(cm("a", "default", tier="web"))
    await maps.create(cm("b", "team", tier="db"))
    log: list[tuple[str, str]] = []

    async def on_update(old: ConfigMap, new: ConfigMap) -> None:
        assert old.metadata is not None and new.metadata is not None
        log.append(("update", f"{old.metadata.labels}->{new.metadata.labels}"))

    def strip_managed_fields(obj: ConfigMap) -> ConfigMap:
        assert obj.metadata is not None
        return msgspec.structs.replace(
            obj, metadata=msgspec.structs.replace(obj.metadata, managed_fields=None))

    informer = Informer(maps, transform=strip_managed_fields)
    informer.use_streaming_list = streaming
    informer.add_handlers(on_add=lambda o: log.append(("add", o.metadata.name)),
                          on_update=on_update,
                          on_delete=lambda o: log.append(("delete", o.metadata.name)))
    informer.add_label_indexer("tier")
    informer.add_indexer("first-letter", lambda o: [(o.metadata.name or "?")[0]])
    async with informer:
        await asyncio.wait_for(informer.wait_for_sync(), WAIT_S)
        assert informer.has_synced and informer.use_streaming_list is streaming
        assert sorted(log) == [("add", "a"), ("add", "b")]
        assert names(informer.by_index(NAMESPACE_INDEX, "team")) == ["b"]
        assert names(informer.by_index("label:tier", "web")) == ["a"]
        cached = informer.get("a", "default")
        assert cached is not None and cached.metadata is not None
        assert cached.metadata.managed_fields is None
        async with informer.subscribe() as events:
            await maps.create(cm("c", "team", tier="web"))
            await maps.patch("a", {"metadata": {"labels": {"tier": "db"}}}, namespace="default")
            await maps.delete("b", namespace="team")
            seen = [await asyncio.wait_for(anext(events), WAIT_S) for _ in range(3)]
        assert [(e.type, e.object.metadata.name) for e in seen if e.object.metadata] == [
            (EventType.ADDED, "c"), (EventType.MODIFIED, "a"), (EventType.DELETED, "b")]
        assert isinstance(seen[1], InformerEvent) and seen[1].old is not None
        assert names(informer.by_index("label:tier", "web")) == ["c"]
        assert names(informer.by_index("label:tier", "db")) == ["a"]
        assert names(informer.by_index("first-letter", "b")) == []
        assert ("update", "{'tier': 'web'}->{'tier': 'db'}") in log
        assert ("delete", "b") in log


async def test_relist_after_gone_synthesizes_deletions(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(ring_capacity=8, retention=Retention(max_changes=10, max_age_s=None))
    fast = WatchSettings(backoff=Backoff(initial_s=0.05, max_s=0.2, rng=random.Random(5)))
    async with await create_client(server.kubeconfig) as direct, \
            FaultProxy(server.port) as proxy, \
            Client(ClientConfig(server=proxy.url)) as proxied:
        maps = Api(ConfigMap, client=direct)
        for name in ("stays", "goes", "changes"):
            await maps.create(cm(name))
        informer = Informer(Api(ConfigMap, client=proxied), settings=fast)
        deleted: list[str] = []
        informer.add_handlers(on_delete=lambda o: deleted.append(o.metadata.name))
        async with informer:
            await asyncio.wait_for(informer.wait_for_sync(), WAIT_S)
            seen_rv = (await maps.list()).resource_version
            proxy.go_down()  # the informer cannot see what happens next
            await maps.delete("goes")
            await maps.patch("changes", {"data": {"k": "v"}}, type=PatchType.MERGE)
            await maps.create(cm("new"))
            await _compact_past(maps, seen_rv)
            proxy.come_up()
            await eventually(lambda: informer.relists >= 1, "the informer to list again")
            await eventually(lambda: sorted(informer.cache.keys()) == [
                "default/changes", "default/new", "default/stays"], "the relisted cache")
        assert deleted == ["goes"]  # synthesized: the DELETED event itself was never seen
        changed = informer.get("changes", "default")
        assert changed is not None and changed.data == {"k": "v"}


async def _compact_past(maps: Api[ConfigMap], resource_version: str) -> None:
    """Write until a watch from ``resource_version`` gets 410 (compaction follows writes)."""
    for round_ in range(30):
        for i in range(50):
            name = f"churn-{round_}-{i}"
            await maps.create(cm(name))
            await maps.delete(name)
        try:
            async with aclosing(maps.watch(resource_version=resource_version)) as stream:
                await asyncio.wait_for(anext(stream), WAIT_S)
        except Gone:
            return
    pytest.fail("the change log was never compacted")


async def test_controller_loop_with_work_queue_owner_index_and_resync(client: Client) -> None:
    maps = Api(ConfigMap, client=client)
    sources = Informer(maps, label_selector="role=source", resync_s=0.05)
    copies = Informer(maps, label_selector="role=copy")
    copies.add_owner_indexer()
    queue: WorkQueue[str] = WorkQueue(ItemBackoff(base_s=0.01))
    failed_once: set[str] = set()
    resynced: list[str] = []

    def enqueue(obj: ConfigMap) -> None:
        queue.add_after(sources.key_of(obj), 0)

    def on_update(old: ConfigMap, new: ConfigMap) -> None:
        if old is new and new.metadata is not None:
            resynced.append(new.metadata.name or "")
        enqueue(new)

    sources.add_handlers(on_add=enqueue, on_update=on_update)

    async def reconcile(key: str) -> None:
        namespace, _, name = key.partition("/")
        source = sources.get(name, namespace)
        if source is None or source.metadata is None:
            return
        if name == "flaky" and name not in failed_once:
            failed_once.add(name)
            raise RuntimeError("transient")
        owner = OwnerReference(api_version="v1", kind="ConfigMap", name=name,
                               uid=source.metadata.uid)
        copy = ConfigMap(metadata=ObjectMeta(name=f"{name}-copy", labels={"role": "copy"},
                                             owner_references=[owner]), data=source.data)
        try:
            await maps.create(copy)
        except AlreadyExists:
            current = await maps.get(f"{name}-copy")
            await maps.replace(msgspec.structs.replace(current, data=source.data))

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            try:
                await reconcile(key)
                queue.forget(key)
            except RuntimeError:
                queue.add_rate_limited(key)
            finally:
                await queue.done(key)

    async with sources, copies:
        for name in ("steady", "flaky"):
            await maps.create(ConfigMap(metadata=ObjectMeta(name=name, labels={"role": "source"}),
                                        data={"v": name}))
        workers = [asyncio.ensure_future(worker()) for _ in range(2)]
        try:
            await eventually(lambda: sorted(copies.cache.keys()) == [
                "default/flaky-copy", "default/steady-copy"], "both copies")
            steady = sources.get("steady", "default")
            assert steady is not None and steady.metadata is not None
            owned = copies.by_index(OWNER_INDEX, steady.metadata.uid or "")
            assert names(owned) == ["steady-copy"]
            assert failed_once == {"flaky"}  # failed, backed off, then reconciled
            await maps.patch("steady", {"data": {"v": "changed"}}, type=PatchType.MERGE)
            await eventually(lambda: _data(copies.get("steady-copy", "default")) == {
                "v": "changed"}, "the copy to follow its source")
            await eventually(lambda: {"steady", "flaky"} <= set(resynced), "a resync")
        finally:
            await queue.shut_down()
            await asyncio.gather(*workers)


def _data(obj: ConfigMap | None) -> dict[str, str] | None:
    return obj.data if obj is not None else None


async def test_refused_streaming_list_falls_back_to_list_and_watch(
        server: ServerThread, client: Client) -> None:
    await Api(ConfigMap, client=client).create(cm("existing"))
    refusal = (b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},'
               b'"status":"Failure","message":"a watch stream was requested by the client but '
               b'the required storage feature RequestWatchProgress is disabled",'
               b'"reason":"InternalError","code":500}}\n')
    async with FaultProxy(server.port) as proxy, \
            Client(ClientConfig(server=proxy.url)) as proxied:
        # As an older kube-apiserver answers a streaming list it cannot serve.
        proxy.answer_next_with(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               b"Connection: close\r\n\r\n" + refusal)
        informer = Informer(Api(ConfigMap, client=proxied))
        async with informer:
            await asyncio.wait_for(informer.wait_for_sync(), WAIT_S)
            assert proxy.canned_answers == 1
            assert informer.use_streaming_list is False
            assert sorted(informer.cache.keys()) == ["default/existing"]
            await Api(ConfigMap, client=client).create(cm("later"))
            await eventually(lambda: "default/later" in informer.cache, "the watch after list")
