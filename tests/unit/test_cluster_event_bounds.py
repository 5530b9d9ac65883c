"""The components' event recorders (``cluster/runtime.py``) hold a bounded amount whatever the
cluster's objects make them say: the send lanes at most ``MAX_QUEUED_EVENTS`` events and
``MAX_QUEUED_CHARS`` of text (the rest dropped and counted), the aggregation cache at most
4,096 keys and ``_AGGREGATE_CHARS`` of text (least recently used out first).

The recorders' client points at a closed port: nothing here is sent (events are offered with no
await between them, so no sender runs before ``abandon``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kubewire.client import Client
from kubewire.client.config import ClientConfig
from kubewire.cluster import runtime
from kubewire.cluster.runtime import (
    MAX_QUEUED_CHARS,
    MAX_QUEUED_EVENTS,
    ClusterContext,
    EventRecorder,
    _Aggregate,
)


@pytest.fixture
async def ctx() -> AsyncIterator[ClusterContext]:
    client = Client(ClientConfig(server="https://127.0.0.1:1"))
    context = ClusterContext(client)
    yield context
    for recorder in (context.events, context.new_events):
        await recorder.abandon()
    await client.close()


def _pod(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}}


def _queued(recorder: EventRecorder) -> int:
    return sum(lane.qsize() for lane in recorder.lanes)


@pytest.mark.parametrize("new_api", [False, True])
async def test_a_flood_of_events_is_dropped_past_the_queue_bound(ctx: ClusterContext,
                                                                 new_api: bool) -> None:
    recorder = ctx.new_events if new_api else ctx.events
    events = ctx.new_recorder("default-scheduler") if new_api else ctx.recorder("test")
    for i in range(5 * MAX_QUEUED_EVENTS):
        events.event(_pod(f"p{i}"), "Normal", "Poked", f"poked {i}")
    assert _queued(recorder) == MAX_QUEUED_EVENTS
    assert recorder.dropped == 4 * MAX_QUEUED_EVENTS
    await recorder.abandon()
    assert _queued(recorder) == 0 and recorder.queued_chars == 0


async def test_long_messages_are_dropped_past_the_text_bound(ctx: ClusterContext) -> None:
    events = ctx.recorder("test")
    long = "x" * (256 * 1024)  # an error text quoting what a client wrote
    for i in range(200):  # 50 MiB offered: far under the count bound, far over the text one
        events.event(_pod(f"p{i}"), "Warning", "FailedCreate", f"{i} {long}")
    kept = _queued(ctx.events)
    assert kept == MAX_QUEUED_CHARS // (256 * 1024 + 100)  # as many as fit, no more
    assert ctx.events.queued_chars <= MAX_QUEUED_CHARS
    assert ctx.events.dropped == 200 - kept
    events.event(_pod("short"), "Normal", "Fine", "short")  # a short one still fits
    assert _queued(ctx.events) == kept + 1


def _remember(recorder: EventRecorder, i: int, message: str = "m") -> tuple[str, ...]:
    key = ("default", "Pod", f"p{i}", "", "Normal", "Poked", message, "test", "")
    recorder._remember(key, _Aggregate(f"p{i}.1", "default", 1, "", 0.0))
    return key


async def test_the_aggregation_cache_keeps_the_newest_4096_keys(ctx: ClusterContext) -> None:
    recorder = ctx.events
    first = _remember(recorder, 0)
    for i in range(1, 10_000):
        _remember(recorder, i)
    assert len(recorder._recent) == 4096
    assert first not in recorder._recent
    assert next(reversed(recorder._recent))[2] == "p9999"
    assert next(iter(recorder._recent))[2] == "p5904"  # the oldest kept


async def test_the_aggregation_cache_is_bounded_by_its_text(ctx: ClusterContext) -> None:
    recorder = ctx.events
    long = "y" * (64 * 1024)
    keys = [_remember(recorder, i, f"{i} {long}") for i in range(1000)]  # 64 MiB of keys
    assert recorder._recent_chars <= runtime._AGGREGATE_CHARS
    assert recorder._recent_chars == sum(runtime._text_size(k) for k in recorder._recent)
    assert len(recorder._recent) == runtime._AGGREGATE_CHARS // runtime._text_size(keys[-1])
    assert keys[-1] in recorder._recent and keys[0] not in recorder._recent
    # a repeat of a kept key is counted once and becomes the newest
    kept = next(iter(recorder._recent))
    before = recorder._recent_chars
    recorder._remember(kept, _Aggregate("again", "default", 2, "", 1.0))
    assert recorder._recent_chars == before
    assert next(reversed(recorder._recent)) == kept
