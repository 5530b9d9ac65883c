"""storage/deadlines.py: many deadlines on one loop timer, fired in order, cancellable."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from kubewire.storage import deadlines
from kubewire.storage.deadlines import Deadline, call_later

WAIT_S = 5.0  # bound on waiting for a deadline; a hang fails the test


class Target:
    def __init__(self, name: str, log: list[str], on_close: Callable[[], None] | None = None,
                 ) -> None:
        self.name = name
        self.log = log
        self.on_close = on_close

    def close(self) -> None:
        self.log.append(self.name)
        if self.on_close is not None:
            self.on_close()


async def until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(WAIT_S):
        while not check():
            await asyncio.sleep(0.005)


def table_count() -> int:
    return len(deadlines._by_loop)


async def test_deadlines_fire_in_order_and_leave_nothing_behind() -> None:
    log: list[str] = []
    for name, delay in (("c", 0.03), ("a", 0.0), ("b", 0.01), ("a2", 0.005)):
        call_later(delay, Target(name, log))
    assert table_count() == 1
    await until(lambda: len(log) == 4)
    assert log == ["a", "a2", "b", "c"]
    assert table_count() == 0  # no reference to the loop is kept


async def test_a_cancelled_deadline_does_not_fire_and_drops_its_target() -> None:
    log: list[str] = []
    target = Target("x", log)
    entry = call_later(0.0, target)
    entry.cancel()
    entry.cancel()  # idempotent
    assert entry.target is None
    assert table_count() == 0  # nothing left: the loop's table and timer are gone
    call_later(0.01, Target("y", log))
    await until(lambda: log == ["y"])


async def test_cancelling_the_earliest_still_fires_the_next() -> None:
    log: list[str] = []
    first = call_later(0.0, Target("first", log))
    call_later(0.01, Target("second", log))
    first.cancel()
    await until(lambda: log == ["second"])
    assert table_count() == 0


async def test_many_cancellations_compact_the_heap() -> None:
    log: list[str] = []
    keep = call_later(3600, Target("keep", log))
    entries = [call_later(3600 + i, Target(str(i), log)) for i in range(1000)]
    for entry in entries:
        entry.cancel()
    table = deadlines._by_loop[asyncio.get_running_loop()]
    assert len(table._heap) < 2 * deadlines._COMPACT_MIN + 1  # not a thousand dead entries
    keep.cancel()
    assert table_count() == 0
    assert log == []


async def test_a_close_that_cancels_itself_or_adds_deadlines() -> None:
    log: list[str] = []
    holder: dict[str, Deadline] = {}
    other = call_later(0.02, Target("other", log))

    def on_close() -> None:
        holder["self"].cancel()  # as Watcher.close cancels its own timer
        other.cancel()
        call_later(0.0, Target("added", log))

    holder["self"] = call_later(0.0, Target("self", log, on_close))
    await until(lambda: log == ["self", "added"])
    assert table_count() == 0


async def test_a_failing_close_is_logged_and_the_rest_fire(
        caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []

    def fail() -> None:
        raise RuntimeError("boom")

    call_later(0.0, Target("bad", log, fail))
    call_later(0.0, Target("good", log))
    with caplog.at_level(logging.ERROR, logger="kubewire.storage.deadlines"):
        await until(lambda: log == ["bad", "good"])
    assert "deadline callback failed" in caplog.text
