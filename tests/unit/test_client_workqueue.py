"""The controller work queue: dedup, one worker per key, per-key backoff, shutdown."""

from __future__ import annotations

import asyncio

import pytest

from kubewire.client.informers.workqueue import ItemBackoff, QueueShutDown, WorkQueue


async def test_adds_are_deduplicated_while_queued() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "a", "a"):
        await queue.add(key)
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["a", "b"]


async def test_a_key_being_processed_is_requeued_only_when_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    await queue.add("a")
    key = await queue.get()
    await queue.add("a")  # changed again while a worker holds it
    assert len(queue) == 0  # no second worker may take it now
    await queue.done(key)
    assert len(queue) == 1
    assert await queue.get() == "a"


def test_item_backoff_doubles_per_key_and_forgets() -> None:
    backoff: ItemBackoff[str] = ItemBackoff(base_s=1.0, max_s=5.0)
    assert [backoff.when("a") for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff.when("b") == 1.0
    backoff.forget("a")
    assert backoff.failures("a") == 0 and backoff.when("a") == 1.0


async def test_rate_limited_add_arrives_after_its_delay() -> None:
    queue: WorkQueue[str] = WorkQueue(ItemBackoff(base_s=0.001))
    assert queue.add_rate_limited("a") == 0.001
    assert await asyncio.wait_for(queue.get(), 10) == "a"
    assert queue.failures("a") == 1
    queue.forget("a")
    assert queue.failures("a") == 0


async def test_shut_down_wakes_waiting_workers() -> None:
    queue: WorkQueue[str] = WorkQueue()
    worker = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.add_after("late", 3600)  # a pending timer is cancelled, not leaked
    await queue.shut_down()
    with pytest.raises(QueueShutDown):
        await asyncio.wait_for(worker, 10)
    await queue.add("x")
    assert len(queue) == 0
