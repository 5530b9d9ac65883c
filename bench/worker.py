"""Client-side processes (watch readers, load generators) driven from the benchmark process.

A worker is a spawned process with its own event loop (uvloop when installed, as kubewire
uses) holding one object; the parent calls that object's coroutine methods by name over a pipe.
Every call has a time bound, and ``close()`` always ends the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import multiprocessing
import signal
import traceback
from multiprocessing.connection import Connection
from typing import Any

CLOSE_TIMEOUT_S = 10.0


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when installed (kubewire's ``serve`` uses it), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


async def ready_until_signalled(port: int) -> None:
    """A reference server's life after it listens: print ``ready PORT`` for the benchmark that
    spawned it, then wait for SIGINT or SIGTERM."""
    print(f"ready {port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def _serve(conn: Connection, target: str, kwargs: dict[str, Any]) -> None:
    module_name, _, class_name = target.partition(":")
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    obj = getattr(importlib.import_module(module_name), class_name)(**kwargs)
    try:
        while True:
            message = conn.recv()
            if message is None:
                break
            method, call_kwargs = message
            try:
                result = loop.run_until_complete(getattr(obj, method)(**call_kwargs))
                conn.send(("ok", result))
            except Exception:
                conn.send(("error", traceback.format_exc()))
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(obj.aclose())
            loop.run_until_complete(loop.shutdown_asyncgens())  # generators a client left open
        loop.close()
        conn.close()


class WorkerError(RuntimeError):
    """A worker's method raised; the message carries its traceback."""


class Worker:
    """One spawned process holding ``target`` (``"module:Class"``) built with ``kwargs``."""

    def __init__(self, target: str, **kwargs: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, target, kwargs), daemon=True)
        self.process.start()
        child.close()
        self._busy = False

    def send(self, method: str, **kwargs: Any) -> None:
        """Start ``method`` in the worker; collect it with ``result``."""
        if self._busy:
            raise RuntimeError("worker is busy")
        self._busy = True
        self._conn.send((method, kwargs))

    def result(self, timeout_s: float) -> Any:
        if not self._conn.poll(timeout_s):
            raise TimeoutError(f"worker did not answer within {timeout_s} s")
        status, value = self._conn.recv()
        self._busy = False
        if status != "ok":
            raise WorkerError(value)
        return value

    def call(self, method: str, wait_s: float, **kwargs: Any) -> Any:
        """Run ``method`` in the worker and wait at most ``wait_s`` for its result."""
        self.send(method, **kwargs)
        return self.result(wait_s)

    def close(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(OSError):
                self._conn.send(None)
            self.process.join(CLOSE_TIMEOUT_S)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(CLOSE_TIMEOUT_S)
        self._conn.close()
        self.process.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def gather_results(workers: list[Worker], timeout_s: float) -> list[Any]:
    """Results of calls started on several workers with ``send``, in order."""
    return [w.result(timeout_s) for w in workers]


def open_watches(readers: list[Worker], port: int, path: str, watchers: int) -> list[Worker]:
    """Open ``watchers`` watch streams on ``path``, shared out among the reader workers; the
    readers that hold some (the ones to start and read from)."""
    shares = [watchers // len(readers) + (i < watchers % len(readers))
              for i in range(len(readers))]
    active = [(r, n) for r, n in zip(readers, shares, strict=True) if n]
    for reader, n in active:
        reader.send("open", port=port, path=path, count=n, timeout_s=60.0)
    gather_results([r for r, _ in active], 90.0)
    return [r for r, _ in active]
