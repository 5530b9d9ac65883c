"""``cluster.runtime.run_workers``: the one work-queue loop of the cluster's components, with
its two hooks (``then`` after a sync, ``on_error`` after an API error)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from kubewire.client import WorkQueue
from kubewire.client.errors import Conflict, TransportError
from kubewire.cluster.runtime import Retry, run_workers


async def _until(check: object, timeout_s: float = 2.0) -> None:
    assert callable(check)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_sync_forgets_its_key_unless_then_asks_again() -> None:
    queue: WorkQueue[str] = WorkQueue()
    seen: list[tuple[str, float]] = []
    loop = asyncio.get_running_loop()

    async def sync(key: str) -> str:
        seen.append((key, loop.time()))
        return "stale" if sum(1 for k, _ in seen if k == key) == 1 and key == "b" else ""

    def then(_key: str, result: str) -> Retry | None:
        return Retry(0.05) if result == "stale" else None

    queue.add_rate_limited("a")  # a failure before: its backoff is forgotten after the sync
    queue.add_rate_limited("b")
    task = asyncio.create_task(run_workers(queue, sync, workers=2, what="t", then=then))
    try:
        await _until(lambda: [k for k, _ in seen].count("b") == 2)
        first, second = (t for k, t in seen if k == "b")
        assert second - first >= 0.045  # Retry(0.05): after the delay, not at once
        assert queue.failures("a") == 0
        assert queue.failures("b") == 0  # the stale retry is no failure ...
        await asyncio.sleep(0.1)
        assert [k for k, _ in seen].count("b") == 2  # ... and the second sync was the last
    finally:
        await _stop(task)


async def test_retry_without_a_delay_backs_off_as_a_failure() -> None:
    queue: WorkQueue[str] = WorkQueue()
    calls: list[str] = []

    async def sync(key: str) -> bool:
        calls.append(key)
        return len(calls) < 3

    task = asyncio.create_task(run_workers(
        queue, sync, workers=1, what="t",
        then=lambda _k, again: Retry() if again else None))
    try:
        await queue.add("k")
        await _until(lambda: len(calls) == 3)
        assert queue.failures("k") == 0  # the third sync succeeded: forgotten
    finally:
        await _stop(task)


async def test_on_error_hears_api_errors_and_the_key_is_requeued_rate_limited(
        caplog: pytest.LogCaptureFixture) -> None:
    queue: WorkQueue[str] = WorkQueue()
    errors: list[tuple[str, str]] = []
    calls: list[str] = []

    async def sync(key: str) -> None:
        calls.append(key)
        if len(calls) == 1:
            raise Conflict("the object has been modified")
        if len(calls) == 2:
            raise TransportError("connection reset")
        if len(calls) == 3:
            raise RuntimeError("a bug")  # logged with its traceback, requeued

    def on_error(key: str, err: Exception) -> None:
        errors.append((key, type(err).__name__))
        if len(errors) == 2:
            raise ValueError("the hook's own bug")  # must not stop the loop either

    caplog.set_level(logging.DEBUG, logger="kubewire.cluster.runtime")
    task = asyncio.create_task(run_workers(queue, sync, workers=1, what="thing",
                                           on_error=on_error))
    try:
        await queue.add("k")
        await _until(lambda: len(calls) == 4)
        assert errors == [("k", "Conflict"), ("k", "TransportError")]
        assert queue.failures("k") == 0
        assert any(r.exc_info and isinstance(r.exc_info[1], RuntimeError)
                   for r in caplog.records)
        assert any("on_error" in r.getMessage() for r in caplog.records)
    finally:
        await _stop(task)


async def test_without_on_error_an_api_error_is_logged_at_debug(
        caplog: pytest.LogCaptureFixture) -> None:
    queue: WorkQueue[str] = WorkQueue()
    calls: list[str] = []

    async def sync(key: str) -> None:
        calls.append(key)
        if len(calls) == 1:
            raise Conflict("modified")

    caplog.set_level(logging.DEBUG, logger="kubewire.cluster.runtime")
    task = asyncio.create_task(run_workers(queue, sync, workers=1, what="thing"))
    try:
        await queue.add("k")
        await _until(lambda: len(calls) == 2)
        found = [r for r in caplog.records if "thing k" in r.getMessage()]
        assert found and found[0].levelno == logging.DEBUG
    finally:
        await _stop(task)


async def test_cancelling_shuts_the_queue_down() -> None:
    queue: WorkQueue[str] = WorkQueue()

    async def sync(_key: str) -> None:
        return None

    task = asyncio.create_task(run_workers(queue, sync, workers=3, what="t"))
    await asyncio.sleep(0.01)
    await _stop(task)
    await queue.add("late")
    assert len(queue) == 0  # shut down: adds are ignored
