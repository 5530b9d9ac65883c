"""Run the real kubewire server on a random loopback port, in its own thread and event loop.

A thread (not the test's loop) so that blocking clients — kubectl in a subprocess, the official
``kubernetes`` package — and async clients can all talk to it while the test waits on them.

``KUBEWIRE_TEST_STORAGE=etcd`` (or ``etcd-3``) puts every server that would use SQLite on the
session's etcd cluster instead, under a prefix of its own (``tests/storage_choice``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kubewire.server.app import APIServer
from kubewire.server.context import ServerConfig
from tests.socket_leaks import register_server
from tests.storage_choice import storage_overrides


class ServerThread:
    """``start()`` blocks until the server listens; ``stop()`` until it has shut down."""

    def __init__(self, config: ServerConfig) -> None:
        if config.storage == "sqlite":
            config = replace(config, **storage_overrides(config.data_dir))
        self.config = config
        self.server: APIServer | None = None
        self.url = ""
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ServerThread:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._start())
            except BaseException as exc:  # surfaced to the starting thread
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="kubewire-server", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise TimeoutError("server did not start")
        if errors:
            raise errors[0]
        return self

    async def _start(self) -> None:
        self.server = APIServer(self.config)
        _, port = await self.server.start()  # also writes DIR/kubeconfig
        self.port = port
        register_server(port)
        self.url = self.server.url
        # Later starts on the same data dir reuse the port, as a restarted server would.
        self.config = replace(self.config, port=port)

    async def _stop(self) -> None:
        if self.server is not None:
            await self.server.stop()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        self._loop = None
        self._thread = None

    def restart(self) -> ServerThread:
        self.stop()
        return self.start()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the server's loop and return its result (for white-box checks)."""
        assert self._loop is not None
        result: list[Any] = []
        done = threading.Event()

        def invoke() -> None:
            result.append(fn())
            done.set()

        self._loop.call_soon_threadsafe(invoke)
        done.wait(10)
        return result[0]

    @property
    def kubeconfig(self) -> Path:
        return self.config.data_dir / "kubeconfig"
