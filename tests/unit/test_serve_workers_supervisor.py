"""``server/daemon/workers``: the port reservation, the backoff, and the supervisor running real
(tiny Python) worker processes: readiness once all are ready, a start that fails when one exits
first, a restart after an exit, and a stop that ends them all."""

from __future__ import annotations

import asyncio
import errno
import signal
import socket
import sys

import pytest

from kubewire.cli import _without_ready_fd
from kubewire.server.daemon.background import alive
from kubewire.server.daemon.workers import (
    BACKOFF_MAX_S,
    StartFailed,
    Supervisor,
    backoff_s,
    exit_text,
    reserve_port,
)

# A worker: writes its ready line on --ready-fd (unless told to exit first), then waits.
WORKER = """
import os, sys, time
fd = int(sys.argv[sys.argv.index("--ready-fd") + 1])
if sys.argv[1] == "fail":
    from kubewire.server.daemon.workers import report_failure
    report_failure(fd, "no good:\\nat all")
    sys.exit(1)
if sys.argv[1] != "ok":
    sys.exit(int(sys.argv[1]))
os.write(fd, b"ready\\n"); os.close(fd)
while True:
    time.sleep(60)
"""


def test_backoff_doubles_up_to_its_cap() -> None:
    assert [backoff_s(n) for n in range(4)] == [0.5, 1.0, 2.0, 4.0]
    assert backoff_s(100) == BACKOFF_MAX_S


def test_exit_text() -> None:
    assert exit_text(1) == "status 1"
    assert exit_text(-signal.SIGKILL) == "signal SIGKILL"


def test_without_ready_fd() -> None:
    assert _without_ready_fd(["serve", "--ready-fd", "7", "--port", "0", "--ready-fd=8"]) == [
        "serve", "--port", "0"]


def test_reserve_port_picks_one_that_only_reuse_port_listeners_can_share() -> None:
    held = reserve_port("127.0.0.1", 0)
    try:
        port = held[0].getsockname()[1]
        with socket.socket() as plain, pytest.raises(OSError) as err:
            plain.bind(("127.0.0.1", port))
        assert err.value.errno == errno.EADDRINUSE
        with socket.socket() as worker:
            worker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            worker.bind(("127.0.0.1", port))
            worker.listen()
    finally:
        for sock in held:
            sock.close()


def test_reserve_port_refuses_a_port_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError) as err:
            reserve_port("127.0.0.1", taken.getsockname()[1])
        assert err.value.errno == errno.EADDRINUSE


def _supervisor(*modes: str) -> Supervisor:
    return Supervisor(lambda index: [sys.executable, "-c", WORKER, modes[index]], len(modes))


async def test_ready_once_every_worker_is_then_a_dead_one_is_restarted() -> None:
    supervisor = _supervisor("ok", "ok")
    await supervisor.start()
    try:
        first, second = supervisor.pids
        assert all(w.ready.is_set() for w in supervisor.workers)
        assert supervisor.workers[1].process is not None
        supervisor.workers[1].process.kill()
        for _ in range(200):
            await asyncio.sleep(0.05)
            if supervisor.workers[1].ready.is_set() and supervisor.pids[1] != second:
                break
        assert supervisor.pids[0] == first and supervisor.pids[1] != second
        assert supervisor.workers[1].restarts == 1
    finally:
        await supervisor.stop()
    assert not any(alive(pid) for pid in [*supervisor.pids, second])


async def test_a_worker_that_exits_before_it_is_ready_fails_the_start() -> None:
    supervisor = _supervisor("ok", "3")
    with pytest.raises(StartFailed, match=r"worker 1 \(pid \d+\) exited with status 3 before "
                                          "it was ready"):
        await supervisor.start()
    assert not any(alive(pid) for pid in supervisor.pids)


async def test_the_reason_a_worker_gives_is_the_start_failure() -> None:
    supervisor = _supervisor("ok", "fail")
    with pytest.raises(StartFailed) as failed:
        await supervisor.start()
    assert str(failed.value) == "no good: at all"
    assert not any(alive(pid) for pid in supervisor.pids)


async def test_workers_that_all_fail_at_once_are_reaped_once(
        caplog: pytest.LogCaptureFixture) -> None:
    """Stopping after a failed start signals workers that may have exited a moment ago: the
    signal must not reap them (``Process.send_signal`` polls), or asyncio's child watcher finds
    them gone and logs "Unknown child process" (a second line on the command's stderr)."""
    caplog.set_level("WARNING", logger="asyncio")
    for _ in range(10):  # a race: before the fix, most runs of ten lost it at least once
        supervisor = _supervisor(*["fail"] * 8)
        with pytest.raises(StartFailed, match="no good: at all"):
            await supervisor.start()
        assert not any(alive(pid) for pid in supervisor.pids)
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
