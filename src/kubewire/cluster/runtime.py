"""What the cluster's components share: one client, shared informers, event recorders, a clock.

``ClusterContext.informer(api_version, kind, ...)`` is client-go's shared informer factory: one
informer per (kind, namespace, selectors), started on first use and shared by every component
that asks for it, so the kube-controller-manager part holds one watch of Pods however many
controllers read them. Objects are plain dicts (``Api(dict, ...)``).

``ClusterContext.recorder(component, host)`` records core/v1 Events as client-go's
``tools/record`` does (the API most controllers and the kubelet use): named
``<involvedObject.name>.<hex nanoseconds>``, with ``source.component`` (and ``host``),
``firstTimestamp``/``lastTimestamp`` and ``count``, through client-go's ``EventCorrelator``
(``event_correlation``): similar events (differing in message only) are combined from the
tenth on, a source may send 25 events about one object and then one per five minutes, and an
event identical to one recorded in the last ten minutes (same object, type, reason, message,
source) PATCHes the earlier one's ``count``, ``lastTimestamp`` and ``message`` instead.
``ClusterContext.new_recorder(component)`` records events.k8s.io/v1 Events as ``tools/events``
does (the scheduler's API: ``regarding``, ``note``, ``action``, ``eventTime``,
``reportingController``). Both send from a bounded queue in the background: a component never
waits for an event, and when the queue is full the event is dropped and counted, as client-go's
broadcaster drops (``maxQueuedEvents`` 1000; and past ``MAX_QUEUED_CHARS`` of text). The
aggregation cache is an LRU of 4,096 keys (client-go's) and ``_AGGREGATE_CHARS`` of their
text. Where client-go sends from one goroutine, events here go out on ``SEND_LANES``
concurrent lanes (a request per event costs a Python client a round trip: one lane managed
~130 events/s while 1,000 simulated nodes started); an event's lane follows its aggregation
key, so repeats of one event stay in order.

A ``Component`` is anything with a ``name`` and ``async run()`` that works until cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from kubewire.client import Api, Client, QueueShutDown, WorkQueue
from kubewire.client.errors import ClientError, NotFound, StatusError
from kubewire.client.informers.informer import Informer
from kubewire.cluster.event_correlation import COMBINED_PREFIX, EventCorrelator

log = logging.getLogger(__name__)

Obj = dict[str, Any]
MAX_QUEUED_EVENTS = 1000  # client-go tools/record maxQueuedEvents
SEND_LANES = 8
AGGREGATE_WINDOW_S = 600.0  # the correlator's cache: identical events within ten minutes
_AGGREGATE_CACHE = 4096  # client-go's LRU maxLruCacheEntries
# kubewire's bounds by size beside client-go's by count: an event's text (a message quoting a
# server's error, names) is the cluster's objects' to make long
MAX_QUEUED_CHARS = 8 * 1024 * 1024  # the text of the events waiting to be sent
_AGGREGATE_CHARS = 4 * 1024 * 1024  # the text of the aggregation cache's keys


K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


class Component(Protocol):
    """One control loop (or scheduler, or kubelet): works until cancelled."""

    name: str

    async def run(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Retry:
    """What a ``run_workers`` ``then`` hook asks after a sync that did not raise: sync the key
    again after ``after_s`` (the cache is behind this component's own writes), or with
    ``after_s`` None rate-limited, as after a failure. Either way its backoff is not reset."""

    after_s: float | None = None


async def run_workers(queue: WorkQueue[K], sync: Callable[[K], Awaitable[R]], *,  # noqa: PLR0913 (keywords only)
                      workers: int, what: str,
                      then: Callable[[K, R], Retry | None] | None = None,
                      on_error: Callable[[K, StatusError | ClientError], None] | None = None,
                      ) -> None:
    """client-go's ``processNextWorkItem`` loop on ``workers`` tasks until cancelled: each key
    is synced, forgotten on success and requeued rate-limited on failure (anything but an API
    or client error is logged with its traceback: a bug must not stop the loop, as kube's
    ``HandleError``). The queue is shut down on the way out.

    ``then(key, result)`` sees what ``sync`` returned and may ask for the key again
    (``Retry``) instead of forgetting it. ``on_error(key, err)`` is told of an API or client
    error after the key is requeued (an event, a log line, state to reset); without it the
    error is logged at debug."""

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            try:
                result = await sync(key)
                _settle(queue, key, then(key, result) if then is not None else None)
            except (StatusError, ClientError) as err:
                queue.add_rate_limited(key)
                _report(what, key, err, on_error)
            except Exception:
                log.exception("%s %s", what, key)
                queue.add_rate_limited(key)
            finally:
                await queue.done(key)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(workers):
                group.create_task(worker())
    finally:
        await queue.shut_down()


def _settle(queue: WorkQueue[K], key: K, retry: Retry | None) -> None:
    if retry is None:
        queue.forget(key)
    elif retry.after_s is None:
        queue.add_rate_limited(key)
    else:
        queue.add_after(key, retry.after_s)


def _report(what: str, key: K, err: StatusError | ClientError,
            on_error: Callable[[K, StatusError | ClientError], None] | None) -> None:
    if on_error is None:
        log.debug("%s %s: %s", what, key, err)
        return
    try:
        on_error(key, err)
    except Exception:  # the hook's bug must not stop the loop either
        log.exception("%s %s: on_error", what, key)


def _text_size(key: tuple[str, ...]) -> int:
    """The characters an event's aggregation key holds (its text: names, reason, message)."""
    return sum(len(part) for part in key)


def now_rfc3339(clock: Callable[[], float]) -> str:
    """A ``metav1.Time`` (seconds) for ``clock()``."""
    return datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro(clock: Callable[[], float]) -> str:
    """A ``metav1.MicroTime`` for ``clock()``."""
    return datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def object_reference(obj: Mapping[str, Any]) -> Obj:
    """``ref.GetReference``: kind, namespace, name, uid, apiVersion, resourceVersion."""
    meta = obj.get("metadata") or {}
    ref: Obj = {"kind": obj.get("kind", ""), "apiVersion": obj.get("apiVersion", "")}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    ref["name"] = meta.get("name", "")
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


@dataclass(frozen=True, slots=True)
class Note:
    """What an event says: type (Normal/Warning), reason, message, and (events.k8s.io) action."""

    type: str
    reason: str
    message: str
    action: str = ""


@dataclass(slots=True)
class _Aggregate:
    name: str
    namespace: str
    count: int
    first: str
    seen: float


class EventRecorder:
    """core/v1 Events (``tools/record``), aggregated, sent in the background."""

    def __init__(self, client: Client, clock: Callable[[], float]) -> None:
        self.client = client
        self.clock = clock
        self.api: Api[Obj] = Api(dict, client=client, namespace=None, api_version="v1",
                                 kind="Event")
        self.lanes: list[asyncio.Queue[tuple[Obj, tuple[str, ...]]]] = [
            asyncio.Queue(MAX_QUEUED_EVENTS // SEND_LANES) for _ in range(SEND_LANES)]
        self.dropped = 0
        self.sent = 0
        self.queued_chars = 0
        self.correlator = EventCorrelator()
        self._recent: OrderedDict[tuple[str, ...], _Aggregate] = OrderedDict()
        self._recent_chars = 0
        self._tasks: list[asyncio.Task[None] | None] = [None] * SEND_LANES

    def recorder(self, component: str, host: str = "") -> Recorder:
        """A recorder for one source (client-go's ``NewRecorder(scheme, EventSource{...})``)."""
        return Recorder(self, component, host)

    def event(self, involved: Mapping[str, Any], note: Note, component: str,
              host: str = "", related: Mapping[str, Any] | None = None) -> None:
        """Record one event about ``involved`` (an object with kind/apiVersion/metadata;
        ``related`` is for events.k8s.io, tools/record's core/v1 events leave it out)."""
        type_, reason, message = note.type, note.reason, note.message
        ref = object_reference(involved)
        namespace = ref.get("namespace") or "default"
        stamp = now_rfc3339(self.clock)
        source_of: Obj = {"component": component}
        if host:
            source_of["host"] = host
        event: Obj = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{ref['name']}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": ref, "reason": reason, "message": message, "source": source_of,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1, "type": type_,
            "eventTime": None, "reportingComponent": component, "reportingInstance": host,
        }
        source_object = (component, host, ref.get("kind", ""), namespace, ref["name"],
                         ref.get("uid", ""), ref.get("apiVersion", ""))
        key: tuple[str, ...] = (*source_object, type_, reason, message)
        now = self.clock()
        if self.correlator.aggregate((*source_object, type_, reason), message, now):
            event["message"] = COMBINED_PREFIX + message
            key = (*source_object, type_, reason)  # the group's one event, counted up
        event = self._observe(event, key, now)
        if self.correlator.allow(source_object, now):
            self._offer(event, key)

    @property
    def filtered(self) -> int:
        """Events the spam filter kept back."""
        return self.correlator.filtered

    def _observe(self, event: Obj, key: tuple[str, ...], now: float) -> Obj:
        """``eventObserve``: a repeat of ``key`` within ten minutes becomes the earlier event
        (its name and first time) with the count one higher; the send PATCHes it."""
        earlier = self._recent.get(key)
        if earlier is not None and now - earlier.seen < AGGREGATE_WINDOW_S:
            earlier.count += 1
            earlier.seen = now
            self._recent.move_to_end(key)
            return {**event, "metadata": {**event["metadata"], "name": earlier.name},
                    "firstTimestamp": earlier.first, "count": earlier.count}
        meta = event["metadata"]
        self._remember(key, _Aggregate(meta["name"], meta["namespace"], 1,
                                       event["firstTimestamp"], now))
        return event

    def _offer(self, event: Obj, key: tuple[str, ...]) -> None:
        lane = hash(key) % SEND_LANES
        size = _text_size(key)
        if self.queued_chars + size > MAX_QUEUED_CHARS:
            self.dropped += 1
            return
        try:
            self.lanes[lane].put_nowait((event, key))
        except asyncio.QueueFull:
            self.dropped += 1
            return
        self.queued_chars += size
        task = self._tasks[lane]
        if task is None or task.done():
            self._tasks[lane] = asyncio.get_running_loop().create_task(self._send_all(lane))

    async def _send_all(self, lane: int) -> None:
        queue = self.lanes[lane]
        while not queue.empty():
            event, key = queue.get_nowait()
            self.queued_chars -= _text_size(key)
            try:
                await self._send(event, key)
                self.sent += 1
            except (StatusError, ClientError) as err:
                log.debug("event %s/%s not recorded: %s", event["metadata"]["namespace"],
                          event["metadata"]["name"], err)

    async def _send(self, event: Obj, key: tuple[str, ...]) -> None:
        """``recordEvent``: a repeat (count above 1) PATCHes the earlier event, and creates it
        when the server no longer has it; anything else is created."""
        meta = event["metadata"]
        if event["count"] > 1:
            with contextlib.suppress(NotFound):
                await self.api.patch(meta["name"], {
                    "count": event["count"], "lastTimestamp": event["lastTimestamp"],
                    "message": event["message"]}, namespace=meta["namespace"])
                return
        await self.api.create(event, namespace=meta["namespace"])

    def _remember(self, key: tuple[str, ...], aggregate: _Aggregate) -> None:
        """Keep ``aggregate`` as the newest entry of the LRU, within its two bounds."""
        if self._recent.pop(key, None) is not None:
            self._recent_chars -= _text_size(key)
        self._recent[key] = aggregate
        self._recent_chars += _text_size(key)
        while self._recent and (len(self._recent) > _AGGREGATE_CACHE
                                or self._recent_chars > _AGGREGATE_CHARS):
            gone, _ = self._recent.popitem(last=False)
            self._recent_chars -= _text_size(gone)

    async def drain(self) -> None:
        """Wait until every queued event was sent (tests, shutdown)."""
        while running := [t for t in self._tasks if t is not None and not t.done()]:
            await asyncio.wait([asyncio.shield(t) for t in running])

    async def abandon(self) -> None:
        """Stop sending: what is still queued is dropped (after ``drain`` timed out, before the
        client closes, so no sender reopens its connection)."""
        for lane, task in enumerate(self._tasks):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            queue = self.lanes[lane]
            self.dropped += queue.qsize()
            while not queue.empty():
                self.queued_chars -= _text_size(queue.get_nowait()[1])


class NewEventRecorder(EventRecorder):
    """events.k8s.io/v1 Events (``tools/events``): the scheduler's."""

    def __init__(self, client: Client, clock: Callable[[], float]) -> None:
        super().__init__(client, clock)
        self.api = Api(dict, client=client, namespace=None, api_version="events.k8s.io/v1",
                       kind="Event")

    def recorder(self, component: str, host: str = "") -> Recorder:
        return Recorder(self, component, host)

    def event(self, involved: Mapping[str, Any], note: Note, component: str,
              host: str = "", related: Mapping[str, Any] | None = None) -> None:
        type_, reason, message, action = note.type, note.reason, note.message, note.action
        ref = object_reference(involved)
        namespace = ref.get("namespace") or "default"
        event: Obj = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{ref['name']}.{time.time_ns():x}", "namespace": namespace},
            "eventTime": now_micro(self.clock), "reportingController": component,
            "reportingInstance": host or f"{component}-kubewire", "action": action or reason,
            "reason": reason, "regarding": ref, "note": message, "type": type_,
        }
        if related is not None:  # Eventf(regarding, related, ...): the scheduler's preemptor
            event["related"] = object_reference(related)
        key = (namespace, ref.get("kind", ""), ref["name"], ref.get("uid", ""), type_, reason,
               message, component, "new")
        self._offer(event, key)

    async def _send(self, event: Obj, key: tuple[str, ...]) -> None:
        # tools/events keeps series for repeats; kubewire records each once per ten minutes
        seen = self.clock()
        earlier = self._recent.get(key)
        if earlier is not None and seen - earlier.seen < AGGREGATE_WINDOW_S:
            earlier.seen = seen
            return
        meta = event["metadata"]
        await self.api.create(event, namespace=meta["namespace"])
        self._remember(key, _Aggregate(meta["name"], meta["namespace"], 1, "", seen))


@dataclass(frozen=True, slots=True)
class Recorder:
    """Events from one source: ``event(obj, "Normal", "SuccessfulCreate", "Created pod: x")``
    (an events.k8s.io recorder also takes ``action``)."""

    sink: EventRecorder
    component: str
    host: str = ""

    def event(self, involved: Mapping[str, Any], type_: str,  # noqa: PLR0913 (related: kw)
              reason: str, message: str, action: str = "", *,
              related: Mapping[str, Any] | None = None) -> None:
        self.sink.event(involved, Note(type_, reason, message, action), self.component,
                        self.host, related)


@dataclass
class ClusterContext:
    """What every component gets: the client, shared informers, event recorders, the clock."""

    client: Client
    clock: Callable[[], float] = time.time
    # Where ``informer()`` comes from: another context's shared informers (kube-controller-
    # manager's shared informer factory runs as the manager itself, each loop writes as its
    # own service account); None: this context's own, on ``client``.
    informers_from: ClusterContext | None = None
    events: EventRecorder = field(init=False)
    new_events: NewEventRecorder = field(init=False)
    _informers: dict[tuple[str, str, str | None, str | None, str | None], Informer[Obj]] = (
        field(default_factory=dict, init=False))

    def __post_init__(self) -> None:
        self.events = EventRecorder(self.client, self.clock)
        self.new_events = NewEventRecorder(self.client, self.clock)

    def recorder(self, component: str, host: str = "") -> Recorder:
        """core/v1 events from ``component`` (most controllers, the kubelet with ``host``)."""
        return self.events.recorder(component, host)

    def new_recorder(self, component: str, host: str = "") -> Recorder:
        """events.k8s.io/v1 events from ``component`` (the scheduler)."""
        return self.new_events.recorder(component, host)

    def api(self, api_version: str, kind: str, namespace: str | None = None) -> Api[Obj]:
        """An ``Api`` of plain dicts for one kind."""
        return Api(dict, client=self.client, namespace=namespace, api_version=api_version,
                   kind=kind)

    def informer(self, api_version: str, kind: str, *, namespace: str | None = None,
                 label_selector: str | None = None,
                 field_selector: str | None = None) -> Informer[Obj]:
        """The shared informer for these arguments, started on first use (add handlers and
        indexers before awaiting ``wait_for_sync``; handlers added later see later events)."""
        if self.informers_from is not None:
            return self.informers_from.informer(api_version, kind, namespace=namespace,
                                                label_selector=label_selector,
                                                field_selector=field_selector)
        key = (api_version, kind, namespace, label_selector, field_selector)
        found = self._informers.get(key)
        if found is None:
            found = Informer(self.api(api_version, kind, namespace),
                             label_selector=label_selector, field_selector=field_selector)
            self._informers[key] = found
            found.start()
        return found

    async def close(self) -> None:
        """Stop every informer and send the queued events."""
        for informer in self._informers.values():
            await informer.stop()
        self._informers.clear()
        for recorder in (self.events, self.new_events):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(recorder.drain(), 5.0)
            await recorder.abandon()
