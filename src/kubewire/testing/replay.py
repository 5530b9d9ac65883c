"""``kubewire replay TRACE``: a trace's objects and events written into a kubewire server,
through its ``POST /kubewire/import`` (objects as recorded: uid, timestamps, generation,
managedFields and status kept; only resourceVersion is the target's).

The events go in the trace's order, which the endpoint keeps (one store write each), so every
object's and the whole trace's order hold. ``speed`` None (``fast``) sends as fast as the server
takes them, in batches (at most ``BATCH_EVENTS`` events or ``BATCH_BYTES`` a request); a factor
(``recorded`` is 1.0) sends each watch event when its recorded offset, divided by the factor,
has passed since the replay started (the initial state goes at once). The trace is read line
by line, never whole.

The target's own controllers run on what is written unless it was started without them
(``kubewire serve --controllers ''``, ``kubewire.Server(controllers=())``): a replayed namespace
then gets the target's ``default`` ServiceAccount and ``kube-root-ca.crt`` (the trace's own
then replace them: MODIFIED where the source saw ADDED), and a pod or namespace written with a
deletionTimestamp is finished by it. The API server's own work always runs: a CRD written
without status is established by the target. The state after the replay is the trace's; such
objects may show extra events on the target's watches.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from kubewire.client import Client
from kubewire.client.transport import Request
from kubewire.testing.trace import TraceEvent, due_at, import_line, read_trace

IMPORT_PATH = "/kubewire/import"
BATCH_EVENTS = 500  # the endpoint takes 1000
BATCH_BYTES = 2 * 1024 * 1024  # the wire takes 3 MiB


@dataclass(slots=True)
class ReplayResult:
    events: int = 0  # lines of the trace sent (initial state included)
    imported: int = 0  # store writes made
    skipped: int = 0  # DELETED of objects that were not there
    requests: int = 0
    seconds: float = 0.0


async def send(client: Client, lines: list[bytes], result: ReplayResult) -> None:
    """One import request; its counts added to ``result``."""
    if not lines:
        return
    answer: dict[str, Any] = msgspec.json.decode(
        await client.request(Request("POST", IMPORT_PATH, body=b"".join(lines))))
    result.requests += 1
    result.imported += int(answer.get("imported", 0))
    result.skipped += int(answer.get("skipped", 0))


async def import_events(client: Client, events: Iterable[TraceEvent], speed: float | None,
                        clock: Callable[[], float] = time.monotonic) -> ReplayResult:
    """Send ``events`` in order, paced by ``speed`` (see the module docstring)."""
    result = ReplayResult()
    start = clock()
    batch: list[bytes] = []
    size = 0
    for event in events:
        due = due_at(event, speed)
        if due is not None and due > clock() - start:
            await send(client, batch, result)
            batch, size = [], 0
            await asyncio.sleep(max(0.0, due - (clock() - start)))
        line = import_line(event)
        if batch and (len(batch) >= BATCH_EVENTS or size + len(line) > BATCH_BYTES):
            await send(client, batch, result)
            batch, size = [], 0
        batch.append(line)
        size += len(line)
        result.events += 1
    await send(client, batch, result)
    result.seconds = clock() - start
    return result


async def replay(client: Client, lines: Iterable[bytes], speed: float | None = None
                 ) -> ReplayResult:
    """Replay a trace (its lines, header first) into the server ``client`` talks to."""
    _, events = read_trace(lines)
    return await import_events(client, events, speed)
