"""``kubewire record``: list and watch chosen kinds of any cluster into a trace file
(``trace.py`` says the format), with kubewire's own client (kubeconfig, TLS, tokens, watch
resume are its business).

How: discovery names the kinds (``--kinds``, else every kind that can be listed and watched, in
each group's preferred version); each kind (in each chosen namespace, or all) is listed, and the
lists are written as the initial state — CRDs first, then namespaces, then the rest, so a replay
defines a kind before its objects. Then one watch per list, from the list's resourceVersion,
feeds a queue; the events leave through ``trace.Reorder`` (one global order by resourceVersion
when they are numbers) straight to the file. A watch whose revision is compacted (410) lists
again and writes what changed meanwhile as events (a vanished object's DELETED carries only its
name). Recording every kind, discovery is asked again every ``DISCOVER_EVERY_S`` and a kind
served since (a CRD created meanwhile) is followed from then on, its first list written as
ADDED events after the CRD's own. Memory is bounded: the queue has a cap (the watches wait on
a full one), the reorder window holds a fraction of a second, and per object only its
resourceVersion is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import IO, Any

import msgspec

from kubewire.client import Api, Client, Gone
from kubewire.client.transport import Request
from kubewire.testing.trace import (
    NO_REDACTION,
    Header,
    Redaction,
    Reorder,
    TraceEvent,
    redact,
)
from kubewire.times import format_time

QUEUE_CAP = 10_000
FLUSH_EVERY_S = 0.05
DISCOVER_EVERY_S = 2.0
FIRST = ("customresourcedefinitions.apiextensions.k8s.io", "namespaces")
_decode = msgspec.json.Decoder(Any).decode


class RecordError(Exception):
    """What stops a recording before it starts (a kind the cluster does not serve)."""


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One kind to record, as discovery serves it."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def name(self) -> str:
        """``pods``, ``deployments.apps``: how ``--kinds`` names it."""
        group = self.api_version.rpartition("/")[0]
        return f"{self.plural}.{group}" if group else self.plural


def parse_kinds(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


async def _get(client: Client, path: str) -> Any:
    return _decode(await client.request(Request("GET", path)))


async def served_kinds(client: Client) -> list[KindSpec]:
    """Every kind that can be listed and watched, in each group's preferred version."""
    versions: list[str] = list((await _get(client, "/api")).get("versions") or ["v1"])[:1]
    for group in (await _get(client, "/apis")).get("groups") or []:
        preferred = (group.get("preferredVersion") or {}).get("groupVersion")
        if preferred:
            versions.append(preferred)
    out: list[KindSpec] = []
    for api_version in versions:
        path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        for res in (await _get(client, path)).get("resources") or []:
            verbs = set(res.get("verbs") or ())
            if "/" in res["name"] or not {"list", "watch"} <= verbs:
                continue
            out.append(KindSpec(api_version, res["kind"], res["name"], bool(res["namespaced"])))
    names = {spec.name for spec in out}
    if "events.events.k8s.io" in names:  # one storage served twice: record it once
        out = [spec for spec in out if spec.name != "events"]
    return out


def choose(served: Sequence[KindSpec], wanted: Sequence[str] | None) -> list[KindSpec]:
    """The kinds ``--kinds`` names (``pods``, ``deployments.apps``, ``Widget.example.com``
    also by kind), all served ones without it; CRDs and namespaces first."""
    if wanted is None:
        chosen = list(served)
    else:
        chosen = []
        for name in wanted:
            plural, _, group = name.partition(".")
            found = [spec for spec in served
                     if spec.api_version.rpartition("/")[0] == group
                     and plural.lower() in (spec.plural, spec.kind.lower())]
            if not found:
                raise RecordError(f"the cluster does not serve {name!r} (as plural.group: "
                                  "pods, deployments.apps, widgets.example.com)")
            if found[0] not in chosen:
                chosen.append(found[0])
    return sorted(chosen, key=lambda spec: (FIRST.index(spec.name) if spec.name in FIRST
                                             else len(FIRST)))


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class RecordOptions:
    """Where and how to record: ``namespaces`` None for all; ``window_s`` the reorder
    window (``trace.Reorder``); ``wall`` the clock of the events' ``time``."""

    namespaces: Sequence[str] | None = None
    redaction: Redaction = NO_REDACTION
    window_s: float = 0.25
    wall: Callable[[], datetime] = _utc_now
    # recording every kind: look for newly served kinds this often (None: never)
    discover_every_s: float | None = None


DEFAULT_OPTIONS = RecordOptions()


@dataclass(slots=True)
class _Follow:
    """One list+watch: a kind in one namespace (or all)."""

    spec: KindSpec
    namespace: str | None
    api: Api[dict[str, Any]]
    revision: str = ""
    known: dict[tuple[str, str], str] | None = None  # (namespace, name) -> resourceVersion


def _typed(obj: dict[str, Any], spec: KindSpec) -> dict[str, Any]:
    if obj.get("apiVersion") and obj.get("kind"):
        return obj
    return {"apiVersion": spec.api_version, "kind": spec.kind, **obj}


def _ident(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Recorder:
    """One recording into ``out`` (a binary file); ``run`` until ``duration_s`` or ``stop``."""

    def __init__(self, client: Client, kinds: Sequence[KindSpec], out: IO[bytes],
                 options: RecordOptions = DEFAULT_OPTIONS) -> None:
        self.client = client
        self.kinds = list(kinds)
        self.namespaces = None if options.namespaces is None else list(options.namespaces)
        self.out = out
        self.redaction = options.redaction
        self.reorder = Reorder(options.window_s)
        self.wall = options.wall
        self.discover_every_s = options.discover_every_s
        self.queue: asyncio.Queue[TraceEvent] = asyncio.Queue(QUEUE_CAP)
        self.stopped = asyncio.Event()
        self.ready = asyncio.Event()
        self.events = 0
        self._start = 0.0

    def stop(self) -> None:
        self.stopped.set()

    async def run(self, duration_s: float | None = None) -> int:
        """Record; returns the number of events written after the initial state. ``ready``
        is set once the initial state is written and the watches are started."""
        version = await _get(self.client, "/version")
        self.out.write(Header("record", version, [spec.name for spec in self.kinds],
                              self.namespaces, format_time(self.wall()), self.redaction).line())
        self._start = time.monotonic()
        follows = [await self._initial(spec, ns) for spec in self.kinds
                   for ns in self._namespaces_of(spec)]
        self.out.flush()
        tasks = [asyncio.create_task(self._watch(follow)) for follow in follows]
        if self.discover_every_s is not None:
            tasks.append(asyncio.create_task(self._discover(self.discover_every_s, tasks)))
        self.ready.set()
        try:
            await self._write_until(duration_s, tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            while not self.queue.empty():
                self.reorder.push(self.queue.get_nowait(), time.monotonic())
            self._write(self.reorder.drain())
            self.out.flush()
        return self.events

    def _namespaces_of(self, spec: KindSpec) -> list[str | None]:
        if not spec.namespaced or self.namespaces is None:
            return [None]
        return list(self.namespaces)

    async def _initial(self, spec: KindSpec, namespace: str | None, *,
                       as_events: bool = False) -> _Follow:
        """List the kind; its objects go to the file as the initial state, or (a kind served
        since the start) to the queue as ADDED events."""
        api = Api(dict, client=self.client, namespace=namespace, api_version=spec.api_version,
                  plural=spec.plural, namespaced=spec.namespaced, kind=spec.kind)
        follow = _Follow(spec, namespace, api, known={})
        assert follow.known is not None
        async for page in api.pages(namespace=namespace):
            follow.revision = page.resource_version
            for item in page.items:
                obj = _typed(item, spec)
                rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
                follow.known[_ident(obj)] = rv
                if as_events:
                    await self._put("ADDED", obj, rv)
                else:
                    self.out.write(TraceEvent("ADDED", redact(obj, self.redaction), rv,
                                              initial=True).line())
        return follow

    async def _discover(self, every_s: float, tasks: list[asyncio.Task[None]]) -> None:
        """Recording every kind: follow the kinds served since the start too (a CRD's,
        created while recording), from their first list on, as events."""
        names = {spec.name for spec in self.kinds}
        while True:
            await asyncio.sleep(every_s)
            for spec in await served_kinds(self.client):
                if spec.name in names:
                    continue
                names.add(spec.name)
                self.kinds.append(spec)
                for ns in self._namespaces_of(spec):
                    follow = await self._initial(spec, ns, as_events=True)
                    tasks.append(asyncio.create_task(self._watch(follow)))

    async def _watch(self, follow: _Follow) -> None:
        while True:
            try:
                async for event in follow.api.watch(namespace=follow.namespace,
                                                    resource_version=follow.revision):
                    obj = event.object
                    if not isinstance(obj, dict):
                        continue
                    obj = _typed(obj, follow.spec)
                    rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
                    follow.revision = rv or follow.revision
                    assert follow.known is not None
                    if event.type.value == "DELETED":
                        follow.known.pop(_ident(obj), None)
                    else:
                        follow.known[_ident(obj)] = rv
                    await self._put(event.type.value, obj, rv)
            except Gone:
                await self._relist(follow)

    async def _relist(self, follow: _Follow) -> None:
        """After a 410: list again; what changed since the last event becomes events."""
        listing = await follow.api.list(namespace=follow.namespace)
        assert follow.known is not None
        seen: dict[tuple[str, str], str] = {}
        for item in listing.items:
            obj = _typed(item, follow.spec)
            rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            seen[_ident(obj)] = rv
            before = follow.known.get(_ident(obj))
            if before != rv:
                await self._put("ADDED" if before is None else "MODIFIED", obj, rv)
        for (namespace, name) in set(follow.known) - set(seen):
            meta = {"name": name, **({"namespace": namespace} if namespace else {}),
                    "resourceVersion": listing.resource_version}
            gone = {"apiVersion": follow.spec.api_version, "kind": follow.spec.kind,
                    "metadata": meta}
            await self._put("DELETED", gone, listing.resource_version)
        follow.known = seen
        follow.revision = listing.resource_version

    async def _put(self, kind: str, obj: dict[str, Any], rv: str) -> None:
        await self.queue.put(TraceEvent(kind, redact(obj, self.redaction), rv,
                                        time=format_time(self.wall()),
                                        offset=time.monotonic() - self._start))

    async def _write_until(self, duration_s: float | None,
                           tasks: list[asyncio.Task[None]]) -> None:
        end = None if duration_s is None else time.monotonic() + duration_s
        while not self.stopped.is_set():
            now = time.monotonic()
            if end is not None and now >= end:
                return
            for task in tasks:  # a watch that failed ends the recording with its error
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            wait = FLUSH_EVERY_S if end is None else min(FLUSH_EVERY_S, end - now)
            with contextlib.suppress(TimeoutError):
                event = await asyncio.wait_for(self.queue.get(), wait)
                self.reorder.push(event, time.monotonic())
            while not self.queue.empty():
                self.reorder.push(self.queue.get_nowait(), time.monotonic())
            ready = self.reorder.ready(time.monotonic())
            if ready:
                self._write(ready)
                self.out.flush()

    def _write(self, events: list[TraceEvent]) -> None:
        for event in events:
            self.out.write(event.line())
        self.events += len(events)


async def record(client: Client, out: IO[bytes], kinds: Sequence[str] | None = None,
                 options: RecordOptions = DEFAULT_OPTIONS, duration_s: float | None = None,
                 ) -> int:
    """Record ``kinds`` (names as ``--kinds`` takes them; None: every served kind) into
    ``out`` for ``duration_s`` (None: until cancelled). Returns the events written.
    Recording every kind, kinds served later are followed too."""
    specs = choose(await served_kinds(client), kinds)
    if kinds is None and options.discover_every_s is None:
        options = replace(options, discover_every_s=DISCOVER_EVERY_S)
    return await Recorder(client, specs, out, options).run(duration_s)
