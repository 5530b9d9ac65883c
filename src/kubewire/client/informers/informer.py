"""``Informer``: a local cache of one kind kept in step with the server, with handlers.

Contract (after client-go ``shared_informer.go``):
- **Eventually consistent cache.** After ``wait_for_sync()`` the cache holds every object
  matching the informer's namespace and selectors as of some revision, and follows the server.
- **Per-object order.** Handlers see each object's changes in revision order: ``on_add(obj)``,
  then ``on_update(old, new)`` any number of times, then ``on_delete(last)``. ``last`` is the
  object as the DELETED event carried it, or — when the deletion happened while the informer
  could not see it — the last state the cache held.
- **Gone is handled.** When the server answers 410 the informer lists again and reconciles: new
  objects are added, changed ones updated, and objects that vanished meanwhile get a
  synthesized ``on_delete``. Handlers never see the 410.
- **How it syncs.** First a streaming list (``sendInitialEvents=true`` with
  ``resourceVersionMatch=NotOlderThan``; the initial events are collected and applied at the
  ``initial-events-end`` bookmark); a server that refuses it gets a paginated list followed by
  a watch from the list's revision, from then on.
- **Handlers** may be plain functions or coroutines; they run in order, one event at a time,
  so a slow handler slows the informer (use ``subscribe()`` and your own tasks to decouple). A
  handler that raises is logged, never kills the informer.
- **Resync** (``resync_s``): every cached object is handed to ``on_update(obj, obj)`` again
  periodically, from the cache, without asking the server.
- **Lifetime.** ``async with informer:`` starts its tasks and cancels them on exit.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager, suppress
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Generic, TypedDict, TypeVar, Unpack

from kubewire.client.api import Api
from kubewire.client.backoff import Backoff
from kubewire.client.errors import Gone, StatusError, TransportError
from kubewire.client.events import Bookmark, EventType, WatchEvent
from kubewire.client.informers.indexer import Indexer, IndexFunc
from kubewire.client.watch import WatchSettings
from kubewire.client.watch_state import RETRIABLE_CODES

T = TypeVar("T")
log = logging.getLogger(__name__)

EVENT_QUEUE_SIZE = 1024  # a subscriber this far behind holds the informer back
NAMESPACE_INDEX = "namespace"
OWNER_INDEX = "owner"
FATAL_CODES = frozenset({400, 401, 403, 404, 405, 406, 415, 422})  # retrying cannot fix these
Handler = Callable[..., Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class InformerEvent(Generic[T]):
    """What ``subscribe()`` yields: ``old`` is set for MODIFIED (and is the last state for a
    DELETED the informer synthesized)."""

    type: EventType
    object: T
    old: T | None = None


class InformerParams(TypedDict, Generic[T], total=False):
    """Options of an ``Informer``."""

    label_selector: str | None
    field_selector: str | None
    transform: Callable[[T], T] | None  # applied before caching (e.g. drop managedFields)
    settings: WatchSettings | None  # watchdog and backoff of its watches
    resync_s: float | None  # period of resync from the cache; None: never


class Informer(Generic[T]):
    """A cache of one ``Api``'s objects, with indexers and handlers."""

    def __init__(self, api: Api[T], **opts: Unpack[InformerParams[T]]) -> None:
        self.api = api
        self.resync_s = opts.get("resync_s")
        self.label_selector = opts.get("label_selector")
        self.field_selector = opts.get("field_selector")
        self._transform = opts.get("transform")
        self._settings = opts.get("settings")
        self.cache: Indexer[T] = Indexer({NAMESPACE_INDEX: self._namespace_of})
        self._handlers: list[tuple[Handler | None, Handler | None, Handler | None]] = []
        self._queues: list[asyncio.Queue[InformerEvent[T]]] = []
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._resync_task: asyncio.Task[None] | None = None
        self.use_streaming_list = True
        self.relists = 0  # how many times a 410 made it list again
        self._backoff = Backoff()

    # --- configuration --------------------------------------------------------------------

    def add_handlers(self, *, on_add: Handler | None = None, on_update: Handler | None = None,
                     on_delete: Handler | None = None) -> None:
        """Register callbacks (functions or coroutines): ``on_add(obj)``,
        ``on_update(old, new)``, ``on_delete(obj)``."""
        self._handlers.append((on_add, on_update, on_delete))

    def add_indexer(self, name: str, func: IndexFunc[T]) -> None:
        """Index objects by ``func(obj)`` values; look up with ``cache.by_index``."""
        self.cache.add_indexer(name, func)

    def add_label_indexer(self, label: str) -> None:
        """Index by the value of ``label`` (index name ``label:<label>``)."""
        labels_of = self.api.codec.labels

        def values(obj: T) -> list[str]:
            labels = labels_of(obj)
            return [labels[label]] if label in labels else []

        self.cache.add_indexer(f"label:{label}", values)

    def add_owner_indexer(self) -> None:
        """Index by owner UID (index name ``owner``): ``by_index("owner", uid)`` finds the
        objects a controller's object owns."""
        self.cache.add_indexer(OWNER_INDEX, owner_uids)

    def _namespace_of(self, obj: T) -> list[str]:
        namespace = self.api.codec.key(obj)[0]
        return [namespace] if namespace else []

    def key_of(self, obj: T) -> str:
        """``namespace/name``, or ``name`` for cluster-scoped objects (client-go's key)."""
        namespace, name, _ = self.api.codec.key(obj)
        return _cache_key(name, namespace)

    # --- running --------------------------------------------------------------------------

    async def __aenter__(self) -> Informer[T]:
        self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="kubewire-informer")
        if self.resync_s and self._resync_task is None:
            self._resync_task = asyncio.create_task(self._resync(self.resync_s),
                                                    name="kubewire-informer-resync")

    async def stop(self) -> None:
        for task in (self._task, self._resync_task):
            if task is not None:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
        self._task = self._resync_task = None

    async def _resync(self, period_s: float) -> None:
        """Every ``period_s``, hand every cached object to ``on_update(obj, obj)`` again
        (client-go resync: a controller re-checks state it may have failed to act on)."""
        await self._synced.wait()
        while True:
            await asyncio.sleep(period_s)
            for obj in self.cache.list():
                await self._notify(InformerEvent(EventType.MODIFIED, obj, obj))

    async def wait_for_sync(self) -> None:
        """Return once the cache holds a full list; raise what stopped the informer."""
        if self._task is None:
            raise RuntimeError("the informer is not running")
        sync = asyncio.ensure_future(self._synced.wait())
        done, _ = await asyncio.wait({sync, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if sync not in done:
            sync.cancel()
            self._task.result()  # raises the informer's error
            raise RuntimeError("the informer stopped before it synced")

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[InformerEvent[T]]]:
        """``async with informer.subscribe() as events: async for event in events``: every
        change from the moment of subscribing, through a bounded queue (a subscriber that
        does not keep up holds the informer back rather than growing memory)."""
        queue: asyncio.Queue[InformerEvent[T]] = asyncio.Queue(EVENT_QUEUE_SIZE)
        self._queues.append(queue)

        async def drain() -> AsyncIterator[InformerEvent[T]]:
            while True:
                yield await queue.get()

        try:
            yield drain()
        finally:
            self._queues.remove(queue)

    async def _run(self) -> None:
        """List and watch until cancelled (client-go ``Reflector.Run``)."""
        while True:
            try:
                if self.use_streaming_list:
                    await self._stream_list_and_watch()
                else:
                    await self._watch(await self._list())
            except Gone:
                self.relists += 1
                log.info("informer %s: 410 Gone, listing again", self.api.resource_name)
            except (StatusError, TransportError) as err:
                await self._recover(err)

    async def _recover(self, err: StatusError | TransportError) -> None:
        """After a failed list or watch: fall back from a refused streaming list, give up on
        errors that retrying cannot fix, else wait and start over."""
        if isinstance(err, StatusError) and self.use_streaming_list \
                and not self._synced.is_set():
            log.info("informer %s: streaming list refused (%s): list+watch",
                     self.api.resource_name, err)
            self.use_streaming_list = False
            return
        if isinstance(err, StatusError) and err.code in FATAL_CODES:
            raise err
        delay = self._backoff.next_delay()
        log.warning("informer %s: %s; retrying in %.1fs", self.api.resource_name, err, delay)
        await asyncio.sleep(delay)

    async def _list(self) -> str:
        listed = await self.api.list(label_selector=self.label_selector,
                                     field_selector=self.field_selector)
        await self._reconcile(listed.items)
        return listed.resource_version

    async def _watch(self, resource_version: str) -> None:
        stream = self.api.watch(resource_version=resource_version, allow_bookmarks=True,
                                label_selector=self.label_selector,
                                field_selector=self.field_selector, settings=self._settings)
        async with aclosing(stream) as events:
            async for event in events:
                await self._apply(event)

    async def _stream_list_and_watch(self) -> None:
        # A server that cannot stream says so with an in-stream 500 (watch-protocol §6.2):
        # raise it instead of retrying, so that _recover falls back to list+watch.
        settings = replace(self._settings or WatchSettings(),
                           retriable_codes=RETRIABLE_CODES - {500})
        stream = self.api.watch(send_initial_events=True, allow_bookmarks=True,
                                label_selector=self.label_selector,
                                field_selector=self.field_selector, settings=settings)
        # The snapshot by key: a watch that started over sends an object changed meanwhile
        # again, and one deleted meanwhile as DELETED before the bookmark.
        initial: dict[str, T] | None = {}
        async with aclosing(stream) as events:
            async for event in events:
                if initial is None:
                    await self._apply(event)
                elif isinstance(event.object, Bookmark):
                    # The initial-events-end bookmark (or, from servers that do not send it,
                    # the first bookmark: none comes before the initial events are all out).
                    await self._reconcile(list(initial.values()))
                    initial = None
                elif event.type is EventType.DELETED:
                    initial.pop(self.key_of(event.object), None)
                else:
                    initial[self.key_of(event.object)] = event.object

    # --- cache updates --------------------------------------------------------------------

    async def _reconcile(self, objects: list[T]) -> None:
        """Make the cache equal to ``objects`` (a full list), notifying the differences."""
        fresh = {self.key_of(obj): self._prepared(obj) for obj in objects}
        for key in sorted(set(self.cache.keys()) - fresh.keys()):
            gone = self.cache.delete(key)
            if gone is not None:
                await self._notify(InformerEvent(EventType.DELETED, gone, gone))
        for key, obj in fresh.items():
            old = self.cache.upsert(key, obj)
            if old is None:
                await self._notify(InformerEvent(EventType.ADDED, obj))
            elif self.api.codec.key(old)[2] != self.api.codec.key(obj)[2]:
                await self._notify(InformerEvent(EventType.MODIFIED, obj, old))
        self._synced.set()
        self._backoff.reset()

    async def _apply(self, event: WatchEvent[T]) -> None:
        obj = event.object
        if isinstance(obj, Bookmark):
            return
        obj = self._prepared(obj)
        key = self.key_of(obj)
        if event.type is EventType.DELETED:
            self.cache.delete(key)
            await self._notify(InformerEvent(EventType.DELETED, obj))
            return
        old = self.cache.upsert(key, obj)
        await self._notify(InformerEvent(EventType.ADDED, obj) if old is None
                           else InformerEvent(EventType.MODIFIED, obj, old))

    def _prepared(self, obj: T) -> T:
        return self._transform(obj) if self._transform is not None else obj

    async def _notify(self, event: InformerEvent[T]) -> None:
        for on_add, on_update, on_delete in self._handlers:
            if event.type is EventType.ADDED:
                await _call(on_add, event.object)
            elif event.type is EventType.MODIFIED:
                await _call(on_update, event.old, event.object)
            else:
                await _call(on_delete, event.object)
        for queue in self._queues:
            await queue.put(event)

    def by_index(self, name: str, value: str) -> list[T]:
        """Lister: cached objects filed under ``value`` in index ``name``."""
        return self.cache.by_index(name, value)

    def get(self, name: str, namespace: str | None = None) -> T | None:
        """Lister: one cached object."""
        return self.cache.get(_cache_key(name, namespace))


def _cache_key(name: str, namespace: str | None) -> str:
    """The cache's key of an object (``key_of`` files it, ``get`` finds it)."""
    return f"{namespace}/{name}" if namespace else name


def owner_uids(obj: object) -> list[str]:
    """The UIDs in ``metadata.ownerReferences`` of a model or a dict."""
    if isinstance(obj, dict):
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        return [str(ref["uid"]) for ref in refs if ref.get("uid")]
    meta = getattr(obj, "metadata", None)
    refs = getattr(meta, "owner_references", None) or []
    return [ref.uid for ref in refs if ref.uid]


async def _call(handler: Handler | None, *args: object) -> None:
    if handler is None:
        return
    try:
        result = handler(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("informer handler %r failed", handler)

