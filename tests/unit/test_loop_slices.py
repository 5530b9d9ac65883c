"""Requests begin in slices of the loop's time (server/observe/loop_slices.py): a burst of
requests that arrive together no longer keeps the loop from its sockets and timers until all
of them have begun. Run on asyncio's loop and on uvloop (the server's)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable, Iterator

import pytest
import uvloop

from kubewire.server.observe import loop_slices
from kubewire.server.observe.loop_slices import LoopSlices

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def spin(seconds: float) -> None:
    """Hold the loop ``seconds`` of CPU, as a create's handler does."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


@contextlib.contextmanager
def watched_socket(order: list[str]) -> Iterator[socket.socket]:
    """A socket pair whose reading end, once readable, adds "io" to ``order`` (as a commit's
    delivery waits for the loop's poll); yields the writing end."""
    loop = asyncio.get_running_loop()
    r, w = socket.socketpair()
    r.setblocking(False)

    def readable() -> None:
        r.recv(16)
        order.append("io")
        loop.remove_reader(r)

    loop.add_reader(r, readable)
    try:
        yield w
    finally:
        r.close()
        w.close()


async def burst(slices: LoopSlices, requests: int, work_s: float) -> list[str]:
    """``requests`` begun together, each taking ``work_s`` of the loop once it begins; the
    first makes a socket readable. Returns the order in which they ran and the socket's
    reader did ("io")."""
    order: list[str] = []
    with watched_socket(order) as w:
        async def request(i: int) -> None:
            await slices.begin()
            if i == 0:
                w.send(b"x")  # a commit delivered, say: its callback waits for the loop's poll
            spin(work_s)
            order.append(str(i))

        await asyncio.gather(*(request(i) for i in range(requests)))
        for _ in range(3):
            await asyncio.sleep(0)
    return order


@pytest.mark.parametrize("loop_name", LOOPS)
def test_io_is_served_between_the_requests_of_a_burst(loop_name: str) -> None:
    # Ten requests of 2 ms each, a slice of 4 ms: the socket's callback runs after two or three
    # of them on uvloop (its I/O callbacks run as it polls), after four or five on asyncio's
    # loop (they join the ready queue behind the requests that yielded: two slices), not
    # after all ten.
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        order = runner.run(burst(LoopSlices(), 10, 0.002))
    assert sorted(order) == sorted(["io", *map(str, range(10))])
    assert order[0] == "0"  # the first request of a batch always begins
    slices = 1 if loop_name == "uvloop" else 2
    assert 1 <= order.index("io") <= slices * (1 + round(loop_slices.SLICE_S / 0.002))
    assert [x for x in order if x != "io"] == [str(i) for i in range(10)]  # in arrival order


@pytest.mark.parametrize("loop_name", LOOPS)
def test_without_slices_a_burst_holds_the_loop(loop_name: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # The same burst with an unbounded slice: the loop polls only once all ten have run (what
    # the slices are for; also shows that the test above can fail).
    monkeypatch.setattr(loop_slices, "SLICE_S", 60.0)
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        order = runner.run(burst(LoopSlices(), 10, 0.002))
    assert order.index("io") == 10


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_flood_of_requests_waits_a_bounded_number_of_turns(loop_name: str) -> None:
    # 200 requests of 1 ms arriving together are 50 slices: a request waits at most
    # MAX_TURNS_WAITED turns (each a loop callback), then begins; all of them do, in order.
    async def flood() -> list[int]:
        slices = LoopSlices()
        order: list[int] = []

        async def request(i: int) -> int:
            waited = await slices.begin()
            spin(0.001)
            order.append(i)
            return waited

        waits = await asyncio.gather(*(request(i) for i in range(200)))
        assert order == list(range(200))
        return waits

    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        waits = runner.run(flood())
    assert max(waits) == loop_slices.MAX_TURNS_WAITED  # the slices did hold some back
    assert sum(waits) <= 200 * loop_slices.MAX_TURNS_WAITED


@pytest.mark.parametrize("loop_name", LOOPS)
def test_requests_released_by_the_gate_take_their_slices_again(loop_name: str) -> None:
    # Ten requests begin in one batch (none has worked yet) and find the gate closed (the
    # server's: a flush to watchers is due); its future releases all ten in one batch of
    # callbacks. They take slices again: the socket made readable as the first one runs is
    # served after two or three of them (uvloop; four or five on asyncio's loop), not after
    # all ten as one convoy.
    async def gated() -> tuple[list[str], list[int]]:
        loop = asyncio.get_running_loop()
        slices = LoopSlices()
        gate: asyncio.Future[None] = loop.create_future()
        order: list[str] = []
        with watched_socket(order) as w:
            async def request(i: int) -> int:
                waited = await slices.begin(lambda: None if gate.done() else gate)
                if i == 0:
                    w.send(b"x")
                spin(0.002)
                order.append(str(i))
                return waited

            tasks = [loop.create_task(request(i)) for i in range(10)]
            for _ in range(3):
                await asyncio.sleep(0)
            assert order == []  # all ten wait at the gate
            gate.set_result(None)
            waits = await asyncio.gather(*tasks)
            for _ in range(3):
                await asyncio.sleep(0)
        return order, waits

    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        order, waits = runner.run(gated())
    slices = 1 if loop_name == "uvloop" else 2
    assert 1 <= order.index("io") <= slices * (1 + round(loop_slices.SLICE_S / 0.002))
    assert [x for x in order if x != "io"] == [str(i) for i in range(10)]
    assert max(waits) >= 1  # some waited for a slice after the gate


@pytest.mark.parametrize("loop_name", LOOPS)
def test_an_open_gate_is_not_waited_for(loop_name: str) -> None:
    async def one() -> tuple[int, int]:
        slices = LoopSlices()
        calls = []
        waited = await slices.begin(lambda: calls.append(1))  # returns None: open
        return waited, len(calls)

    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        assert runner.run(one()) == (0, 1)
