"""``kubewire serve --workers N``: N server processes on one port, kept running by their parent.

Each worker is a whole server (the same ``kubewire serve`` command line, with ``--worker I``):
its own store connection, watch caches and event loop, over one shared store (etcd, or the
SQLite file, whose one writer the parent runs as a hub: ``storage/sqlite/writer_hub``; either
makes resourceVersions interchangeable between them), listening on the same host and port with
``SO_REUSEPORT``, so the kernel spreads new connections over them and watch and read capacity
grow with cores.

The parent does what must happen once: it holds the data directory's lock, makes the PKI and
writes the admin kubeconfig (``cli``), and reserves the port (``reserve_port``): a first bind
*without* ``SO_REUSEPORT`` fails if anything else holds the port (and picks one for ``--port
0``); only then does its socket allow the workers' reuse. It keeps that socket, bound and never
listening (the kernel gives connections only to listening sockets), so the port stays theirs
while a worker restarts.

``Supervisor`` starts the workers, each with a pipe (``--ready-fd``) on which it writes one line
once it listens (or, after ``FAILURE_MARK``, why it cannot start), reports readiness once every
worker has, and restarts a worker that exits, after ``backoff_s`` (0.5 s doubling to 30 s, back
to 0.5 s after a worker ran a minute). A worker that exits before the first readiness fails the
start, with its reason: said once, however many workers failed alike.
``stop`` sends every worker SIGTERM (each stops as a single server does) and SIGKILLs one still
running after the grace period. Workers also ask the kernel for SIGTERM when the parent dies
(``die_with_parent``), so none outlives a killed parent.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubewire.listening import close_all, stream_sockets

log = logging.getLogger("kubewire.workers")

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
STABLE_AFTER_S = 60.0  # a worker up this long starts its backoff over
STOP_GRACE_S = 25.0  # within ``kubewire stop``'s default 30 s
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def backoff_s(failures: int) -> float:
    """How long to wait before restarting a worker that failed ``failures`` times in a row."""
    return min(BACKOFF_FIRST_S * 2.0 ** max(failures, 0), BACKOFF_MAX_S)


def exit_text(code: int) -> str:
    """``status 1`` or ``signal SIGKILL``, as a worker's exit reads in a log."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"status {code}"


def reserve_port(host: str, port: int) -> list[socket.socket]:
    """Bind ``host:port`` (every address ``host`` names, as the server's own listen does) for
    the workers to share; ``port`` 0 picks a free one, the same for every address.

    Raises ``OSError`` (``EADDRINUSE``) if another process holds the port.
    """
    made = stream_sockets(host, port)
    try:
        for i, (sock, address) in enumerate(made):
            chosen = int(made[0][0].getsockname()[1]) if i else port
            sock.bind((address[0], chosen, *address[2:]))  # alone: fails if the port is taken
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # now open to workers
    except BaseException:
        close_all(made)
        raise
    return [sock for sock, _ in made]


def die_with_parent(parent: int) -> bool:
    """In a worker: SIGTERM from the kernel when the parent ends (Linux ``PR_SET_PDEATHSIG``).
    False if the parent is already gone (or ``parent`` is not ours): the worker should exit."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    return os.getppid() == parent


@dataclass(slots=True)
class Worker:
    """One worker slot: its index, its current process, and whether that one is ready."""

    index: int
    process: asyncio.subprocess.Process | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    restarts: int = 0


class StartFailed(Exception):
    """A worker exited before every worker was ready: why, in the worker's words if it said."""


FAILURE_MARK = b"!"  # a ready pipe's line that starts with it says why the worker cannot start


def report_failure(fd: int, why: str) -> None:
    """In a worker that cannot start: tell the parent why on its ready pipe (the parent says
    it once, however many workers fail alike)."""
    os.write(fd, FAILURE_MARK + why.replace("\n", " ").encode() + b"\n")
    os.close(fd)


def send(process: asyncio.subprocess.Process, sig: int) -> None:
    """Signal a worker with ``os.kill``, not ``process.send_signal``: that polls the child
    first (``Popen.poll``, a ``waitpid``), and a worker that has exited but not yet been reaped
    by asyncio's child watcher thread is reaped there; the watcher's own ``waitpid`` then fails
    and asyncio logs "Unknown child process" and reports 255 for it (a second line on a failed
    start's stderr). Only that thread reaps workers, and a pid stays the worker's until it does."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, sig)


class Supervisor:
    """Runs ``count`` workers; ``command(index)`` is a worker's command line, to which
    ``--ready-fd N`` is added."""

    def __init__(self, command: Callable[[int], Sequence[str]], count: int) -> None:
        self.command = command
        self.workers = [Worker(index) for index in range(count)]
        self.all_ready = False
        self.stopping = False
        self._failed: asyncio.Future[str] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()  # set by stop(): ends backoff sleeps

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self.workers if w.process is not None]

    async def start(self) -> None:
        """Start every worker; return once all are ready. Raises ``StartFailed`` (with every
        worker stopped) if one exits first."""
        self._failed = asyncio.get_running_loop().create_future()
        self._tasks = [asyncio.create_task(self._keep(worker)) for worker in self.workers]
        every = asyncio.ensure_future(asyncio.gather(*(w.ready.wait() for w in self.workers)))
        waits: list[asyncio.Future[Any]] = [every, self._failed]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:  # failed, or cancelled (stopped while starting): nothing left waiting
            if not every.done():
                every.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await every
        if self._failed.done():
            why = self._failed.result()
            await self.stop()
            raise StartFailed(why)
        self.all_ready = True

    async def _keep(self, worker: Worker) -> None:
        """Run ``worker`` until ``stop``, restarting it when it exits."""
        loop = asyncio.get_running_loop()
        failures = 0
        while not self.stopping:
            started = loop.time()
            process, ready = await self._spawn(worker)
            said = await ready
            refused = said is not None and said.startswith(FAILURE_MARK)
            failure = said[1:].decode("utf-8", "replace").strip() if refused and said else ""
            if said and not refused and not self.stopping:
                worker.ready.set()
                log.info("worker %d (pid %d) ready", worker.index, process.pid)
            code = await process.wait()
            worker.ready.clear()
            if self.stopping:
                return
            if not self.all_ready:
                assert self._failed is not None
                if not self._failed.done():
                    self._failed.set_result(
                        failure or f"worker {worker.index} (pid {process.pid}) exited with "
                                   f"{exit_text(code)} before it was ready")
                return
            if loop.time() - started >= STABLE_AFTER_S:
                failures = 0
            delay = backoff_s(failures)
            failures += 1
            worker.restarts += 1
            because = f" ({failure})" if failure else ""
            log.warning("worker %d (pid %d) exited with %s%s; restarting it in %.1fs",
                        worker.index, process.pid, exit_text(code), because, delay)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    async def _spawn(self, worker: Worker) -> tuple[asyncio.subprocess.Process,
                                                   asyncio.Future[bytes | None]]:
        """Start ``worker``'s process; the future is the line it wrote on its ready pipe (its
        ready line, or ``FAILURE_MARK`` and why it cannot start), None if it closed the pipe,
        or exited, without."""
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                *self.command(worker.index), "--ready-fd", str(write_fd),
                stdin=asyncio.subprocess.DEVNULL, pass_fds=(write_fd,))
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        worker.process = process
        ready: asyncio.Future[bytes | None] = loop.create_future()
        os.set_blocking(read_fd, False)

        def readable() -> None:
            try:
                data = os.read(read_fd, 4096)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            loop.remove_reader(read_fd)
            os.close(read_fd)
            if not ready.done():
                ready.set_result(data.strip() or None)

        loop.add_reader(read_fd, readable)
        return process, ready

    async def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM every worker, SIGKILL what still runs after ``grace_s``; wait for all."""
        self.stopping = True
        self._wake.set()
        running = [w.process for w in self.workers
                   if w.process is not None and w.process.returncode is None]
        for process in running:
            send(process, signal.SIGTERM)
        waiting = [asyncio.ensure_future(process.wait()) for process in running]
        if waiting:
            _, late = await asyncio.wait(waiting, timeout=grace_s)
            for process in running:
                if process.returncode is None:
                    log.warning("worker (pid %d) did not stop in %.0fs: killed", process.pid,
                                grace_s)
                    send(process, signal.SIGKILL)
            if late:
                await asyncio.wait(late)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
